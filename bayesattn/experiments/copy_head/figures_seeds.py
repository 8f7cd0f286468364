"""Figure 9 of a phase-diagram run over seeds (``seeds`` >= 2): the order parameter against P in every seed (its
own data set, chains and Adam runs, those that ran) and its mean over the seeds, with the theory, from the saved
point files only."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ... import figstyle
from ...models.attention import ATTENTIONS, ORDER_PARAMETER
from ...stats import curve_at, mean_interval
from ..contract import common_P, seed_matrix
from .figures_common import SERIES, add_handles, arr, inits, log_P_axis, num, order_parameter_panel, save, title_params
from .summary import final_values

plt = figstyle.pyplot()

METHOD_NAMES = {"mcmc": "MCMC, posterior mean", "adam": "Adam, mean of the runs"}
NAMES = {"mcmc": "MCMC", "adam": "Adam"}


def _mean_with_interval(ax, grid, vals, marker, color, label) -> None:
    """Each seed as a thin line, the mean over the seeds as markers with its 95% bootstrap interval."""
    for row in vals:
        ax.plot(grid, row, "-", color=color, lw=0.6, alpha=0.35, label="each seed (thin lines)")
    ints = [mean_interval(vals[:, c][np.isfinite(vals[:, c])]) for c in range(len(grid))]
    mean = np.array([num(m["mean"]) for m in ints])
    lo = np.array([num(m["ci"][0]) if m["ci"] else np.nan for m in ints])
    hi = np.array([num(m["ci"][1]) if m["ci"] else np.nan for m in ints])
    ax.errorbar(
        grid,
        mean,
        yerr=np.vstack([mean - lo, hi - mean]),
        fmt=marker,
        ms=4,
        capsize=2,
        color=color,
        zorder=3,
        label=label,
    )


def fig_seeds(seeds: dict, out: Path) -> list[Path]:
    """Rows MCMC, MCMC minus the theory's posterior mean (where the run has the theory) and Adam; one column per
    attention. In each: every seed as a thin line per start, the mean over the seeds with its 95% bootstrap interval
    as markers; the theory's stable branch and posterior mean beside the values. Nothing is drawn from fewer than
    2 seeds."""
    methods = [m for m in ("mcmc", "adam") if any(len(s) >= 2 for s in seeds.get(m, {}).values())]
    if not methods:
        return []
    atts = sorted({a for m in methods for a in seeds[m]}, key=ATTENTIONS.index)
    theory = {a: next(iter(seeds["theory"][a].values()))[0]["result"]["curve"] for a in seeds.get("theory", {})}
    rows = [(m, False) for m in methods]
    if "mcmc" in methods and theory:
        rows.insert(1, ("mcmc", True))
    fig, axes = figstyle.subplots(len(rows), len(atts), panel=(6.2, 3.6))
    handles: dict = {}
    n_seeds, any_rec = set(), None
    for i, (method, gap) in enumerate(rows):
        for j, att in enumerate(atts):
            ax, x = axes[i][j], ORDER_PARAMETER[att]
            by_seed = seeds[method].get(att, {})
            curve = theory.get(att)
            P_all = []
            if curve is not None and not gap:
                ax.plot(arr(curve["P"]), arr(curve["stable"][x]), "k-", lw=1.4, label="theory, stable branch")
                if x in curve.get("mean", {}):
                    ax.plot(arr(curve["P"]), arr(curve["mean"][x]), color="0.5", lw=1, label="theory, posterior mean")
            if len(by_seed) >= 2 and (curve is not None or not gap):
                n_seeds.add(len(by_seed))
                any_rec = any_rec or next(iter(by_seed.values()))[0]
                groups = list(by_seed.values())
                grid = common_P(groups)
                P_all += grid
                shift = 0.0
                if gap:  # the theory's posterior mean at the grid
                    shift = curve_at(curve["P"], curve["mean"][x], grid)
                    ax.axhline(0.0, color="k", lw=1)
                # each start's final value per seed and P (Adam: the mean of its runs)
                final = lambda res: (float(np.nanmean(final_values(res, method, x))), np.nan)  # noqa: E731
                for init in inits(groups[0][0]):
                    marker, color, _ = SERIES.get((method, init), ("x", "0.3", 1.0))
                    vals = seed_matrix(groups, grid, lambda r: final(r["result"]["inits"][init]))[0] - shift
                    what = f"{NAMES[method]}, {init} {'start' if method == 'mcmc' else 'init'}: mean over seeds"
                    _mean_with_interval(ax, grid, vals, marker, color, what)
            if P_all:
                log_P_axis(ax, min(P_all), max(P_all))
            ax.set_xlabel("training sequences P")
            if gap:
                ax.set_ylabel(f"{x}: MCMC − theory's posterior mean")
                ax.set_title(f"{att} attention: MCMC minus the theory")
                ax.grid(alpha=0.3)
            else:
                order_parameter_panel(ax, x, f"{att} attention: {METHOD_NAMES[method]}")
            add_handles(ax, handles)
    fig.legend(
        list(handles.values()),
        list(handles),
        loc="outside lower center",
        ncol=3 if len(atts) > 1 else 1,
        title="markers: 95% bootstrap intervals",
    )
    counts = "/".join(map(str, sorted(n_seeds)))
    own = ["data set"] + [w for m, w in (("mcmc", "chains"), ("adam", "Adam runs")) if m in methods]
    head = f"The order parameter vs P over {counts} seeds (each its own {', '.join(own[:-1])} and {own[-1]})"
    fig.suptitle(head + ("\n" + title_params(any_rec) if any_rec else ""))
    return save(fig, out, "fig9_seeds")
