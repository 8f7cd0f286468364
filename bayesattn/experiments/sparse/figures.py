"""Figures of the sparse-pattern run, drawn from its saved point files only (``points/*/*.json``;
docs/results/sparse.md): t* histograms and loss curves (the ln 2 plateau), the solve-rate heat map over (S, s), heads vs
head size, Mixer vs transformer, and the Bayesian threshold P_c(S, s) next to the trained models' difficulty."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ... import stats
from ...figstyle import empty_panel, integer_ticks, legend, log_x_axis, save, subplots
from ...files import load_results
from .summary import bayes_summary, difficulty, group_seeds

RATE_BARS = f"solve rate with its {stats.WILSON}"
T_BARS = f"median t* with its {stats.BOOTSTRAP}; unsolved seeds censored at the budget"


def _recs(run_dir, part):
    recs = load_results(Path(run_dir) / "points" / part)
    return group_seeds(recs) if part not in ("bayes", "theory") else recs


def _stats(res):
    ts = [t for t in res["t_star"] if t is not None]
    return len(ts) / len(res["t_star"]), (float(np.median(ts)) if ts else np.nan), ts


def _caption(fig, text: str) -> None:
    """A figure title wrapped to the figure's width (it says what the error bars are)."""
    import textwrap

    width = int(fig.get_figwidth() * 13)
    fig.suptitle("\n".join(textwrap.fill(line, width) for line in text.split("\n")), fontsize=8)


def _yerr(value, ci):
    return [[value - ci[0]], [ci[1] - value]]


def emergence_figure(run_dir, out: Path) -> Path | None:
    """Per (S, s): t* histogram over seeds (top) and every seed's loss against the step with ln 2 (bottom)."""
    recs = sorted(_recs(run_dir, "grid"), key=lambda r: (r["point"]["train"]["S"], r["point"]["train"]["s"]))
    if not recs:
        return None
    n = len(recs)
    fig, axes = subplots(2, n, panel=(2.8, 2.6))
    for j, r in enumerate(recs):
        tr, res = r["point"]["train"], r["result"]
        rate, med, ts = _stats(res)
        ax = axes[0, j]
        if ts:
            ax.hist(ts, bins=np.linspace(0, tr["steps"], 21), color="C0")
            integer_ticks(ax.yaxis)
        else:
            empty_panel(ax, f"no seed solved within {tr['steps']} steps")
        ax.set_title(f"S={tr['S']}, s={tr['s']}: {len(ts)}/{len(res['t_star'])} solved")
        ax.set_xlabel("t*")
        ax = axes[1, j]
        h = res["history"]
        for loss in h["loss"]:
            ax.plot(h["step"][: len(loss)], loss, lw=0.6, alpha=0.7)
        ax.axhline(np.log(2), color="k", ls="--", lw=0.8)
        ax.set_ylim(0, 0.8)
        ax.set_xlabel("step")
    axes[0, 0].set_ylabel("seeds")
    axes[1, 0].set_ylabel("loss (2nd half); -- ln 2")
    return save(fig, out)


def heatmap_figure(run_dir, out: Path) -> Path | None:
    """Solve rate over (S, s) with its Wilson interval and the median t* in each cell; a cell whose t* rests on
    fewer than 2 solved seeds is hatched and its t* not shown as a median."""
    recs = _recs(run_dir, "grid")
    if not recs:
        return None
    Ss = sorted({r["point"]["train"]["S"] for r in recs})
    ss = sorted({r["point"]["train"]["s"] for r in recs})
    rate = np.full((len(Ss), len(ss)), np.nan)
    cells: dict = {}
    for r in recs:
        i, j = Ss.index(r["point"]["train"]["S"]), ss.index(r["point"]["train"]["s"])
        d = difficulty(r["result"])
        rate[i, j] = d["solve_rate"]
        cells[i, j] = d
    from matplotlib.patches import Rectangle

    fig, axes = subplots(1, 1, panel=(max(1.6 * len(ss) + 2.4, 4.6), max(1.1 * len(Ss) + 1.6, 3.4)))
    ax = axes[0, 0]
    im = ax.imshow(rate, vmin=0, vmax=1, cmap="viridis", origin="lower", aspect="auto")
    few = False
    for (i, j), d in cells.items():
        lo, hi = d["solve_ci"]
        txt = f"{d['solved']}/{d['seeds']}\n[{lo:.2f}, {hi:.2f}]"
        if d["solved"] < 2:  # a "median" of one solved seed is that seed: not shown, the cell hatched
            few = True
            ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, hatch="//", edgecolor="0.75", lw=0))
        elif d["t_median"] is None:
            txt += f"\nt* >= {d['budget']}"
        else:
            txt += f"\nt* {d['t_median']:.0f}"
        t = ax.text(j, i, txt, ha="center", va="center", color="w" if d["solve_rate"] < 0.6 else "k")
        t.set_gid("data-label")
    ax.set_xticks(range(len(ss)), ss)
    ax.set_yticks(range(len(Ss)), Ss)
    ax.set_xlabel("s (ones per row)" + ("\nhatched: fewer than 2 solved seeds (no median t* shown)" if few else ""))
    ax.set_ylabel("S (context half)")
    ax.set_title("solved seeds, their 95% Wilson interval,\nmedian t* (unsolved censored at the budget)")
    fig.colorbar(im, ax=ax, label="solve rate")
    return save(fig, out)


def _curve(axes, recs, x_of, label, color, marker="o", offset=0.0):
    """Solve rate (Wilson bars) on axes[0] and median t* (bootstrap bars) on axes[1] against x_of(train), shifted
    by ``offset`` (in units of x) so that the bars of several arms do not hide each other."""
    rows = sorted((x_of(r["point"]["train"]), difficulty(r["result"])) for r in recs)
    if not rows:
        return False
    for x, d in rows:
        xx = x + offset
        axes[0].errorbar(
            xx, d["solve_rate"], yerr=_yerr(d["solve_rate"], d["solve_ci"]), fmt=marker, color=color, capsize=3, ms=5
        )
        if d["t_median"] is not None and d["t_ci"] is not None:
            axes[1].errorbar(
                xx, d["t_median"], yerr=_yerr(d["t_median"], d["t_ci"]), fmt=marker, color=color, capsize=3, ms=5
            )
    x = [x + offset for x, _ in rows]
    axes[0].plot(x, [d["solve_rate"] for _, d in rows], "-", color=color, lw=1, label=label)
    med = [(xx, d["t_median"]) for xx, (_, d) in zip(x, rows) if d["t_median"] is not None]
    if med:
        axes[1].plot(*zip(*med), "-", color=color, lw=1, label=label)
    return bool(med)


def heads_figure(run_dir, out: Path) -> Path | None:
    """Solve rate and median t* against the number of heads H (width fixed) and against the head size (H fixed),
    with their intervals; a panel without data says why."""
    h, hd = _recs(run_dir, "heads"), _recs(run_dir, "head_dim")
    if not (h or hd):
        return None
    fig, axes = subplots(2, 2)
    for col, (recs, field, title, part) in enumerate(
        [(h, "heads", "heads H (width fixed)", "heads"), (hd, "head_dim", "head size (H fixed)", "head_dim")]
    ):
        top, bottom = axes[0, col], axes[1, col]
        top.set_title(title)
        if not recs:
            empty_panel(top, f"the '{part}' part was not run")
            empty_panel(bottom, f"the '{part}' part was not run")
            continue
        tr = recs[0]["point"]["train"]
        has_t = _curve(
            [top, bottom],
            recs,
            lambda t, f=field: t[f] if t[f] is not None else t["width"] // t["heads"],
            f"S={tr['S']}, s={tr['s']}",
            "C0",
        )
        top.set_ylabel("solve rate")
        top.set_ylim(-0.05, 1.05)
        bottom.set_ylabel("median t*")
        xs = sorted({r["point"]["train"][field] or tr["width"] // r["point"]["train"]["heads"] for r in recs})
        for ax in (top, bottom):
            ax.set_xscale("log", base=2)
            ax.set_xticks(xs, [str(x) for x in xs])  # the values run, as integers
            ax.minorticks_off()
            ax.set_xlabel(title.split(" (")[0])
        if not has_t:
            empty_panel(bottom, "no median t*: half or more of the seeds unsolved at every point")
        else:
            legend(bottom)
    _caption(fig, f"bars: {RATE_BARS} (top); {T_BARS} (bottom)")
    return save(fig, out)


def mixer_figure(run_dir, out: Path) -> Path | None:
    """Solve rate and median t* against s, transformer and Mixer (every learning rate of each arm), with their
    intervals."""
    recs = _recs(run_dir, "mixer")
    if not recs:
        return None
    fig, axes = subplots(1, 2)
    axes = axes[0]
    lrs = {
        m: sorted({r["point"]["train"]["lr"] for r in recs if r["point"]["train"]["model"] == m})
        for m in ("transformer", "mixer")
    }
    k, n_arms = 0, len(lrs["transformer"]) + len(lrs["mixer"])
    any_t = False
    for m, marker in (("transformer", "o"), ("mixer", "s")):
        for lr in lrs[m]:
            sel = [r for r in recs if r["point"]["train"]["model"] == m and r["point"]["train"]["lr"] == lr]
            label = m if len(lrs[m]) == 1 else f"{m}, lr {lr:g}"
            off = 0.08 * (k - (n_arms - 1) / 2)
            any_t |= _curve(axes, sel, lambda t: t["s"], label, f"C{k}", marker, offset=off)
            k += 1
    axes[0].set_ylabel("solve rate")
    axes[0].set_ylim(-0.05, 1.05)
    axes[1].set_ylabel("median t*")
    s_values = sorted({r["point"]["train"]["s"] for r in recs})
    for ax in axes:
        ax.set_xlabel("s (ones per row)")
        ax.set_xticks(s_values)  # s is an integer: ticks at the values run only
        ax.set_xlim(s_values[0] - 0.5, s_values[-1] + 0.5)
    legend(axes[0])
    if any_t:
        legend(axes[1])
    else:
        empty_panel(axes[1], "no median t*: half or more of the seeds unsolved at every s")
    S = recs[0]["point"]["train"]["S"]
    _caption(fig, f"transformer vs causal MLP-Mixer, S = {S}\nbars: {RATE_BARS} (left); {T_BARS} (right)")
    return save(fig, out)


def bayes_figure(run_dir, out: Path) -> Path | None:
    """Left: the posterior mass on the support against P per (S, s) (cold and hot starts). Right: P_c(S, s)
    (where the mean mass crosses 1/2) against s, next to the trained models' median t* on the same (S, s)."""
    recs = _recs(run_dir, "bayes")
    if not recs:
        return None
    summ = bayes_summary(recs)
    theory = {(r["point"]["S"], r["point"]["s"]): r["result"] for r in _recs(run_dir, "theory")}
    fig, axes = subplots(1, 2, panel=(4.8, 3.6))
    axes = axes[0]
    for i, (key, e) in enumerate(sorted(summ.items(), key=lambda kv: (kv[1]["S"], kv[1]["s"]))):
        base = e["s"] / e["S"]
        for init, m in e["mass"].items():
            P = [p for p, v in zip(e["P"], m) if v is not None]
            ex = [(v - base) / (1 - base) for v in m if v is not None]
            axes[0].plot(
                P,
                ex,
                "o" if init == "cold" else "s",
                mfc="none" if init == "hot" else None,
                color=f"C{i % 10}",
                ms=4,
                label=f"{key}" if init == "cold" else None,
            )
        th = theory.get((e["S"], e["s"]))
        if th:
            axes[0].plot(th["P"], th["excess"], "-", color=f"C{i % 10}", lw=1)
    log_x_axis(axes[0], [p for e in summ.values() for p in e["P"]])  # ticks at the sampled P, not the theory's grid
    axes[0].set_xlabel("P")
    axes[0].set_ylabel("excess mass on the support\n(M - s/S) / (1 - s/S)")
    axes[0].set_title("NUTS (filled: cold, open: hot), theory (lines)")
    axes[0].axhline(0.5, color="k", lw=0.5)
    legend(axes[0], ncol=2, outside=True)
    # the trained models' median t* with unsolved seeds censored at the budget; None when half or more are unsolved
    train = {
        (r["point"]["train"]["S"], r["point"]["train"]["s"]): difficulty(r["result"]) for r in _recs(run_dir, "grid")
    }
    ax2 = axes[1].twinx() if train else None
    for j, S in enumerate(sorted({e["S"] for e in summ.values()})):
        es = sorted((e["s"], e["P_c"]) for e in summ.values() if e["S"] == S)
        axes[1].plot(
            [s for s, _ in es], [np.nan if p is None else p for _, p in es], "-o", color=f"C{j}", label=f"P_c, S={S}"
        )
        tp = sorted((s, th["P_c"]) for (S2, s), th in theory.items() if S2 == S and th["P_c"])
        if tp:
            axes[1].plot(*zip(*tp), "--", color=f"C{j}", lw=1)
        tr = sorted((s, d["t_median"]) for (S2, s), d in train.items() if S2 == S and d["t_median"] is not None)
        if tr and ax2 is not None:
            ax2.plot(*zip(*tr), ":x", color=f"C{j}", label=f"median t*, S={S}")
        over = sorted((s, d["budget"]) for (S2, s), d in train.items() if S2 == S and d["t_median"] is None)
        if over and ax2 is not None:
            ax2.plot(*zip(*over), "^", color=f"C{j}", mfc="none", label=f"median t* > budget, S={S}")
    s_values = sorted({e["s"] for e in summ.values()} | {s for _, s in train})
    axes[1].set_xlabel("s (ones per row)")
    axes[1].set_xticks(s_values)  # s is an integer: ticks at the values run only
    axes[1].set_xlim(s_values[0] - 0.5, s_values[-1] + 0.5)
    axes[1].set_ylabel("Bayesian P_c (excess = 1/2)\nNUTS o-, theory --")
    if any(e["P_c"] for e in summ.values()) or any(th.get("P_c") for th in theory.values()):
        axes[1].set_yscale("log")
    else:
        axes[1].text(0.5, 0.5, "no P_c inside the P grid", transform=axes[1].transAxes, ha="center", color="0.3")
    handles, labels = axes[1].get_legend_handles_labels()
    if ax2 is not None:
        ax2.set_ylabel("trained median t* (dotted)\n^: half or more unsolved")
        h2, l2 = ax2.get_legend_handles_labels()
        handles, labels = handles + h2, labels + l2
    # below the panels: on the right the twin axis' labels would be covered
    fig.legend(handles, labels, loc="outside lower right", ncol=min(len(labels), 3))
    return save(fig, out)


# part -> [(figure file, drawer)]: each drawer reads the points that exist, so a part's figure is drawn as soon
# as it finishes and again, with every part, at the end
PART_FIGURES = {
    "grid": [("sparse_emergence.png", emergence_figure), ("sparse_heatmap.png", heatmap_figure)],
    "heads": [("sparse_heads.png", heads_figure)],
    "head_dim": [("sparse_heads.png", heads_figure)],
    "mixer": [("sparse_mixer.png", mixer_figure)],
    "bayes": [("sparse_bayes.png", bayes_figure)],
    "theory": [("sparse_bayes.png", bayes_figure)],
}
