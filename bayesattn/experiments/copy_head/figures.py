"""Figures of docs/model.md section 5, drawn from the saved results of a phase-diagram run only.

Nothing here computes anything expensive: every function reads the point files written by
:mod:`bayesattn.experiments` (``DIR/points/<method>/*.json``) and draws what is there, skipping a figure whose
inputs the run did not produce. Each figure is saved as PNG and PDF in ``DIR/figures/``.

1. order parameter vs P (theory branches, MCMC cold/hot, Adam small/hot), softmax and linear side by side
2. free-energy landscapes below, at and above the transition
3. phase diagrams in the (P, sigma_A2) or (P, T) plane
4. posterior-mean attention matrices below and above the transition
5. posterior histograms of the order parameter near the transition
6. Adam training curves: loss and order parameter over steps
7. finite-size scaling in T
8. test error vs P (figures_losses)
9. over seeds: every seed's order parameter vs P and their mean (figures_seeds; from 2 seeds)
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib
import numpy as np
from matplotlib.ticker import MaxNLocator

from ... import figstyle
from ...models.attention import ATTENTIONS, ORDER_PARAMETER, attention_kind
from .figures_common import (
    COLORS,
    SERIES,
    X_LABEL,
    add_handles,
    arr,
    attention_panels,
    first_seed,
    inits,
    load_seeds,
    log_P_axis,
    num,
    order_parameter_panel,
    save,
    title_params,
)
from .figures_losses import fig_losses
from .figures_planes import fig_planes
from .figures_seeds import fig_seeds

plt = figstyle.pyplot()


def _drawn(y: np.ndarray) -> bool:
    """Whether a dashed line through ``y`` (NaN breaks it) draws anything: two neighbouring finite points."""
    ok = np.isfinite(y)
    return bool(np.any(ok[1:] & ok[:-1]))


def _theory_overlay(ax, curve: dict, x: str) -> None:
    """Stable branch solid, metastable dashed, spinodals dotted, P_c (binodal or critical point) dash-dot. Only
    what is drawn is labelled: no metastable label unless a metastable stretch is drawn (two neighbouring grid
    points; none where the spinodals lie within one grid step of P_c), no spinodals where they fall on P_c. P_c's
    value is written in a note that :func:`bayesattn.figstyle.save` places clear of the data."""
    P = arr(curve["P"])
    stable = arr(curve["stable"][x])
    meta_drawn = False
    for br in curve.get("branches", []):
        bP, bx, bF = arr(br["P"]), arr(br[x]), arr(br["free_energy"])
        # a branch point is metastable where another branch has a lower free energy at that P
        sF = np.interp(bP, P, arr(curve["stable"]["free_energy"]))
        y = np.where(bF > sF + 1e-9, bx, np.nan)
        if _drawn(y):
            ax.plot(bP, y, "k--", lw=1, label=None if meta_drawn else "theory, metastable")
            meta_drawn = True
    ax.plot(P, stable, "k-", lw=1.6, label="theory, stable")
    if "mean" in curve and x in curve["mean"]:
        ax.plot(P, arr(curve["mean"][x]), color="0.5", lw=1, label="theory, posterior mean")
    tr = curve.get("transition", {})
    Pc = num(tr.get("P_c"))
    spin = [num(v) for v in tr.get("spinodals") or [] if abs(num(v) - Pc) > 1e-6 * Pc]
    for j, v in enumerate(spin):
        ax.axvline(v, color="0.4", ls=":", lw=1, label="theory, spinodals" if j == 0 else None)
    if math.isfinite(Pc):
        kind = "binodal" if tr.get("order") == "first" else "critical point"
        ax.axvline(Pc, color="tab:orange", ls="-.", lw=1.2, label="theory, P_c (binodal or critical point)")
        within = "\n(spinodals within one grid step)" if tr.get("spinodals") and not spin else ""
        figstyle.note(ax, f"{kind} P_c = {Pc:.0f}{within}", prop={"size": 8, "color": "tab:orange"})


def fig_order_parameter(runs: dict, out: Path) -> list[Path]:
    atts = sorted({a for m in runs.values() for a in m}, key=ATTENTIONS.index)  # the registry's order
    if not atts:
        return []
    fig, axes = figstyle.subplots(1, len(atts), panel=(6.2, 4.3))
    any_rec, handles, n_runs = None, {}, set()
    for ax, att in zip(axes[0], atts):
        x = ORDER_PARAMETER[att]
        th = runs.get("theory", {}).get(att)
        P_all = []
        if th:
            any_rec = th[0]
            _theory_overlay(ax, th[0]["result"]["curve"], x)
            P_all += arr(th[0]["result"]["curve"]["P"]).tolist()
        for method in ("mcmc", "adam"):
            rec_list = runs.get(method, {}).get(att)
            if not rec_list:
                continue
            any_rec = any_rec or rec_list[0]
            P = np.array([r["point"]["P"] for r in rec_list], dtype=float)
            P_all += P.tolist()
            for init in inits(rec_list[0]):
                marker, color, shift = SERIES.get((method, init), ("x", "0.3", 1.0))
                if method == "mcmc":
                    mean = np.array([num(inits(r)[init][x]["mean"]) for r in rec_list])
                    err = np.array([num(inits(r)[init][x]["std"]) for r in rec_list])
                    kw = dict(ms=4, zorder=3, label=f"MCMC, {init} start")
                else:
                    vals = [arr(inits(r)[init]["final_order_parameters"][x]).ravel() for r in rec_list]
                    n_runs |= {int(np.sum(np.isfinite(v))) for v in vals}
                    mean, err = np.array([np.nanmean(v) for v in vals]), np.array([np.nanstd(v) for v in vals])
                    kw = dict(mfc="none", ms=5, zorder=4, label=f"Adam, {init} init")
                ax.errorbar(P * shift, mean, yerr=err, fmt=marker, capsize=2, color=color, **kw)
        log_P_axis(ax, min(P_all), max(P_all))
        ax.set_xlabel("training sequences P")
        order_parameter_panel(ax, x, f"{att} attention")
        add_handles(ax, handles)
    over = f"over the {'/'.join(map(str, sorted(n_runs)))} runs" if n_runs else "over the runs"
    bars = [
        f"{name}: {what}" for name, what in (("MCMC", "of the posterior draws"), ("Adam", over)) if name.lower() in runs
    ]
    title = f"error bars: {figstyle.SD} ({'; '.join(bars)})" if bars else None
    # one legend for both panels, below them (constrained layout keeps it clear of the axis labels); two columns
    # per panel, so that one panel's legend fits under it
    fig.legend(
        list(handles.values()),
        list(handles),
        loc="outside lower center",
        ncol=min(2 * len(atts), len(handles)),
        title=title,
    )
    if any_rec:
        fig.suptitle("Copy-head order parameter vs number of training sequences\n" + title_params(any_rec))
    return save(fig, out, "fig1_order_parameter_vs_P")


def _landscape_label(P: float, curve: dict) -> str:
    tr = curve.get("transition", {})
    Pc = num(tr.get("P_c"))
    if not math.isfinite(Pc):
        return f"P = {P:.0f}"
    if abs(P - Pc) < 1e-6 * Pc:
        return f"P = {P:.0f} (" + ("binodal" if tr.get("order") == "first" else "critical point") + ")"
    return f"P = {P:.0f} (" + ("below" if P < Pc else "above") + ")"


def fig_landscapes(runs: dict, out: Path) -> list[Path]:
    th = runs.get("theory", {})
    if not (panels := attention_panels(runs, "theory", 4.4, need="landscapes")):
        return []
    atts, fig, axes = panels
    for ax, att in zip(axes, atts):
        res = th[att][0]["result"]
        lands = res["landscapes"]
        curves = []
        for land, ls in zip(lands, ("-", "--", ":")):
            lab = _landscape_label(num(land["P"]), res["curve"])
            curves.append((arr(land["x"]), arr(land["S"]), ls, lab))
            ax.plot(curves[-1][0], curves[-1][1], ls, lw=1.5, label=lab)
        ax.set_xlabel(X_LABEL[lands[0].get("x_name", ORDER_PARAMETER[att])])
        # zoom on the wells: the barrier between coexisting phases is a few nats, the walls hundreds
        S_all = np.concatenate([c[1] for c in curves])
        x_all = np.concatenate([c[0] for c in curves])
        near = x_all[S_all < 15.0]
        tr = res["curve"].get("transition", {})
        inset = tr.get("order") == "first" and len(curves) > 1
        # with an inset, leave the right 30% of the panel free of the wells for it and the legend
        right = min(1.0, (1.5 if inset else 1.15) * float(near.max())) if near.size else 1.0
        ax.set_xlim(0, right)
        ax.set_ylim(-0.5, 15.0)
        ax.set_ylabel("free energy S − min S  [nats]")
        ax.set_title(f"{att}: below, at and above the transition")
        ax.grid(alpha=0.3)
        figstyle.legend(ax)
        # inset on the binodal's double well: its barrier is a fraction of a nat at T = 32
        if inset:
            xb, Sb = curves[1][0], curves[1][1]
            low = np.flatnonzero(np.isfinite(Sb) & (Sb < 1.5))
            if low.size > 2:
                ins = ax.inset_axes([0.71, 0.45, 0.27, 0.42])
                ins.plot(xb, Sb, "--", color=ax.lines[1].get_color(), lw=1.5)
                top = max(0.05, float(np.nanmax(Sb[low[0] : low[-1] + 1])))
                ins.set_xlim(xb[low[0]], xb[low[-1]])
                ins.set_ylim(-0.1 * top, 1.4 * top)
                ins.set_title(f"zoom: binodal P = {num(tr['P_c']):.0f}", fontsize=8)
                ins.xaxis.set_major_locator(MaxNLocator(3))
                ins.yaxis.set_major_locator(MaxNLocator(3))
                ins.grid(alpha=0.3)
    fig.suptitle("Free-energy landscape of the order parameter\n" + title_params(th[atts[0]][0]))
    return save(fig, out, "fig2_free_energy_landscapes")


def _below_above(recs: list[dict], curve: dict | None) -> list[dict]:
    """The grid points just below and above the theory's transition (else the ends of the grid)."""
    P = np.array([r["point"]["P"] for r in recs], dtype=float)
    Pc = num((curve or {}).get("transition", {}).get("P_c")) if curve else math.nan
    if not math.isfinite(Pc) or len(recs) < 2:
        return [recs[0], recs[-1]] if len(recs) > 1 else recs
    below = [r for r, p in zip(recs, P) if p < Pc]
    above = [r for r, p in zip(recs, P) if p >= Pc]
    picks = ([below[-1]] if below else []) + ([above[min(1, len(above) - 1)]] if above else [])
    return picks or [recs[0], recs[-1]]


def fig_attention_matrices(runs: dict, out: Path) -> list[Path]:
    mc = runs.get("mcmc", {})
    atts = [a for a in ("softmax", "linear") if a in mc]
    if not atts:
        return []
    # one row carries the two-line title alone: a taller row, or its square images push the labels off the figure
    fig, axes = figstyle.subplots(len(atts), 2, panel=(4.0, 3.9 if len(atts) > 1 else 4.3))
    for row, att in zip(axes, atts):
        curve = runs.get("theory", {}).get(att, [{}])[0].get("result", {}).get("curve")
        picks = _below_above(mc[att], curve)
        mats = [(rec, next(iter(inits(rec))), None) for rec in picks]
        mats = [(rec, init, arr(inits(rec)[init]["mean_attention"])) for rec, init, _ in mats]
        # one colour scale per attention, so that below and above compare at a glance
        lim = max(float(np.nanmax(np.abs(A))) for *_, A in mats) or 1.0
        im = None
        for ax, (rec, init, A) in zip(row, mats):
            kind = attention_kind(att)
            im = ax.imshow(A, cmap=kind.cmap, vmin=0 if kind.normalised else -lim, vmax=lim)
            side = "below" if curve and rec["point"]["P"] < num(curve["transition"].get("P_c")) else "above"
            ax.set_title(f"{att}, P = {rec['point']['P']} ({side} P_c; {init} start)")
            ax.set_xlabel("key position s")
            ax.set_ylabel("query position t")
        for ax in row[len(mats) :]:
            ax.set_axis_off()
        fig.colorbar(
            im,
            ax=list(row),
            fraction=0.046,
            label="E[sign(m) α_ts]" if attention_kind(att).sign_symmetric else "E[α_ts]",
        )
    fig.suptitle("Posterior-mean attention matrix below and above the transition\n" + title_params(mc[atts[0]][0]))
    return save(fig, out, "fig4_posterior_mean_attention")


def _theory_density(land: dict, x_name: str) -> tuple[np.ndarray, np.ndarray]:
    """Normalised density of the order parameter from a landscape S: exp(-S) for m; for u the landscape is a
    density of the cosine sqrt(u), so p(u) = exp(-S) / (2 sqrt(u))."""
    x, S = arr(land["x"]), arr(land["S"])
    w = np.exp(-np.where(np.isfinite(S), S, np.inf))
    mass = np.sum(0.5 * (w[1:] + w[:-1]) * np.diff(x))
    if x_name == "u":
        w = w / (2 * np.sqrt(x))
        # the mass below the first grid point, where p(u) ~ 1/sqrt(u): 2 x0 p(x0)
        mass = np.sum(0.5 * (w[1:] + w[:-1]) * np.diff(x)) + 2 * x[0] * w[0]
    return x, w / mass


def fig_histograms(runs: dict, out: Path) -> list[Path]:
    mc = runs.get("mcmc", {})
    if not (panels := attention_panels(runs, "mcmc", 4.2)):
        return []
    atts, fig, axes = panels
    for ax, att in zip(axes, atts):
        x = ORDER_PARAMETER[att]
        th = runs.get("theory", {}).get(att, [{}])[0].get("result", {})
        curve = th.get("curve")
        Pc = num(curve["transition"].get("P_c")) if curve else math.nan
        P = np.array([r["point"]["P"] for r in mc[att]], dtype=float)
        i = int(np.argmin(np.abs(np.log(P / Pc)))) if math.isfinite(Pc) else len(P) // 2
        rec = mc[att][i]
        hi = 0.05
        for init, res in inits(rec).items():
            draws = arr(res.get("draws", {}).get(x, [])).ravel()
            draws = draws[np.isfinite(draws)]
            if draws.size:
                hi = max(hi, 1.1 * float(draws.max()))
                ax.hist(
                    draws,
                    bins=40,
                    range=(0, hi),
                    density=True,
                    alpha=0.5,
                    color=COLORS.get(init),
                    label=f"MCMC, {init} start (R-hat {num(res[x].get('r_hat')):.2f})",
                )
        land = [g for g in th.get("grid_landscapes", []) if abs(num(g["P"]) - P[i]) < 1e-6 * P[i]]
        if land:
            xs, dens = _theory_density(land[0], x)
            keep = xs <= hi
            ax.plot(xs[keep], dens[keep], "k-", lw=1.5, label="theory density ∝ exp(−S)")
        where = "at" if math.isfinite(Pc) and abs(P[i] - Pc) < 0.01 * Pc else "nearest"
        ax.set_xlabel(X_LABEL[x])
        ax.set_ylabel("posterior density")
        ax.set_title(f"{att}, P = {rec['point']['P']} ({where} the theory's P_c = {Pc:.0f})")
        figstyle.legend(ax)
        ax.grid(alpha=0.3)
    fig.suptitle("Posterior of the order parameter near the transition\n" + title_params(mc[atts[0]][0]))
    return save(fig, out, "fig5_posterior_histograms")


def fig_training_curves(runs: dict, out: Path) -> list[Path]:
    ad = runs.get("adam", {})
    atts = [a for a in ("softmax", "linear") if a in ad]
    if not atts:
        return []
    fig, axes = figstyle.subplots(2, len(atts), panel=(5.6, 3.3))
    recs_all = [r for a in atts for r in ad[a]]
    Ps = np.array(sorted({r["point"]["P"] for r in recs_all}), dtype=float)
    norm = matplotlib.colors.LogNorm(Ps.min(), Ps.max()) if Ps.size > 1 else matplotlib.colors.Normalize(0, 2 * Ps[0])
    cmap = plt.get_cmap("viridis")
    handles: dict = {}
    for j, att in enumerate(atts):
        x = "m"  # the copy weight for both: u aligns within a few steps for linear, m then grows gradually
        drops = []  # per P: the first recorded step where the mean loss is a tenth of its start (None: never)
        for rec in ad[att]:
            res = inits(rec).get("small") or next(iter(inits(rec).values()))
            h = res["history"]
            step = arr(h["step"])[0]
            col = cmap(norm(rec["point"]["P"]))
            loss = np.nanmean(arr(h["loss"]), axis=0)
            axes[0, j].plot(step, loss, color=col, lw=1.3)
            below = np.flatnonzero(loss <= 0.1 * loss[0])
            drops.append(float(step[below[0]]) if below.size else None)
            xs = arr(h[x])
            # linear attention is symmetric under (L, V) -> (-L, -V): runs land on either sign, average |m|
            axes[1, j].plot(
                step, np.nanmean(np.abs(xs) if attention_kind(att).sign_symmetric else xs, axis=0), color=col, lw=1.3
            )
        lc = runs.get("theory", {}).get(att, [{}])[0].get("result", {}).get("losses")
        if lc:  # the theory's levels: the plateau (uniform attention / L = 0) and, per P, the joint mode's error
            Pl = arr(lc["P"])
            for rec in ad[att]:
                p = float(rec["point"]["P"])
                if lc.get("joint_mode") is not None and Pl[0] <= p <= Pl[-1]:
                    axes[0, j].axhline(np.interp(p, Pl, arr(lc["joint_mode"])), color=cmap(norm(p)), ls=":", lw=1)
            axes[0, j].axhline(
                float(np.median(arr(lc["plateau"]))), color="0.4", ls="--", lw=1, label="theory: plateau"
            )
            axes[0, j].plot([], [], ":", color="0.4", label="theory: final level (joint mode), per P (its colour)")
            for h, lab in zip(*axes[0, j].get_legend_handles_labels()):
                handles.setdefault(lab, h)
        init = "small" if "small" in inits(ad[att][0]) else next(iter(inits(ad[att][0])))
        axes[0, j].set_yscale("log")
        axes[0, j].set_ylabel("training loss (mean over runs)")
        axes[0, j].set_title(f"{att} attention, Adam from {init} init\n" + _drop_text(drops))
        axes[1, j].set_ylabel(
            ("|m|, " if attention_kind(att).sign_symmetric else "") + X_LABEL[x] + " (mean over runs)"
        )
        for ax in axes[:, j]:
            ax.set_xlabel("Adam step")
            ax.grid(alpha=0.3)
    # P as a colour bar beside the panels, not a legend over the curves
    sm = matplotlib.cm.ScalarMappable(norm=norm, cmap=cmap)
    cb = fig.colorbar(sm, ax=axes, location="right", shrink=0.6, label="training sequences P")
    cb.set_ticks(Ps)
    cb.set_ticklabels([f"{p:.0f}" for p in Ps])
    cb.minorticks_off()
    if handles:  # the theory's levels span the panels: their legend goes below them, not over the curves
        fig.legend(list(handles.values()), list(handles), loc="outside lower center", ncol=len(handles))
    fig.suptitle(
        "Training dynamics: the mean training loss and copy weight over Adam steps\n" + title_params(ad[atts[0]][0])
    )
    return save(fig, out, "fig6_training_curves")


def _drop_text(drops: list) -> str:
    """What the loss curves of one panel do, in words: at which step they reach a tenth of their start."""
    fell = [d for d in drops if d is not None]
    if not fell:
        return f"the loss stays above a tenth of its start at all {len(drops)} P"
    lo, hi = min(fell), max(fell)
    when = f"by step {hi:.0f}" if lo == hi else f"between steps {lo:.0f} and {hi:.0f}"
    return f"loss falls 10× {when} at {len(fell)} of {len(drops)} P" + (
        "" if len(fell) == len(drops) else " (not at the others)"
    )


def fig_finite_size(runs: dict, out: Path) -> list[Path]:
    th = runs.get("theory", {})
    if not (panels := attention_panels(runs, "theory", 4.2, need="curves_T")):
        return []
    atts, fig, axes = panels
    for ax, att in zip(axes, atts):
        x = ORDER_PARAMETER[att]
        rec = th[att][0]
        c = rec["point"]
        curves = rec["result"]["curves_T"]
        cmap = plt.get_cmap("plasma")
        for k, (T, curve) in enumerate(sorted(curves.items(), key=lambda kv: int(kv[0]))):
            # P in units of the linear critical point sigma2 T / d (docs/model.md section 4)
            scale = c["prior"]["sigma2"] * int(T) / c["task"]["d"]
            ax.plot(
                arr(curve["P"]) / scale, arr(curve["mean"][x]), color=cmap(k / max(1, len(curves))), label=f"T = {T}"
            )
        ax.set_xscale("log")
        ax.set_xlabel("P / (σ² T / d)")
        ax.set_ylabel(f"posterior mean of {X_LABEL[x]}")
        ax.set_title(f"{att} attention")
        ax.grid(alpha=0.3)
        figstyle.legend(ax)
    fig.suptitle("Finite-size scaling in T (theory)\n" + title_params(th[atts[0]][0], skip="T"))
    return save(fig, out, "fig7_finite_size_scaling")


FIGURES = (
    fig_order_parameter,
    fig_landscapes,
    fig_planes,
    fig_attention_matrices,
    fig_histograms,
    fig_training_curves,
    fig_finite_size,
)


def draw_all(out_dir: str | Path) -> list[Path]:
    """Draw every figure the saved results of ``out_dir`` allow; return the written paths."""

    out_dir = Path(out_dir)
    seeds = load_seeds(out_dir)
    runs = first_seed(seeds)
    paths: list[Path] = []
    for fig in (*FIGURES, fig_losses):
        paths += fig(runs, out_dir / "figures")
    return paths + fig_seeds(seeds, out_dir / "figures")
