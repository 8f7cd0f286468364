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
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only; never needs a display
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from ..models.attention import ORDER_PARAMETER  # noqa: E402
from ..sweep import load_results  # noqa: E402

X_LABEL = {"m": "copy weight m", "u": "alignment u = m²/q", "q": "self-overlap q"}
COLORS = {"theory": "k", "cold": "tab:blue", "hot": "tab:red", "prior": "tab:purple", "small": "tab:green"}


def _num(v) -> float:
    """JSON number or the strings 'nan' / 'inf' written for non-finite values -> float."""
    if v is None:
        return math.nan
    return float(v)


def _arr(v) -> np.ndarray:
    """Nested JSON lists (with 'nan' / 'inf' strings or None for non-finite values) -> float array."""
    return np.asarray(v if v is not None else [], dtype=float)


def load_run(out_dir: str | Path) -> dict:
    """{method: {attention: [records sorted by P]}} from a run folder."""
    out = Path(out_dir)
    runs: dict[str, dict[str, list]] = {}
    for method in ("theory", "mcmc", "adam"):
        recs = load_results(out / "points" / method) if (out / "points" / method).is_dir() else []
        for r in recs:
            runs.setdefault(method, {}).setdefault(r["point"]["attention"], []).append(r)
    for by_att in runs.values():
        for recs in by_att.values():
            recs.sort(key=lambda r: r["point"].get("P", 0))
    return runs


def _title_params(rec: dict) -> str:
    c = rec["point"]["config"]
    t, p = c["task"], c["prior"]
    return (f"T={t['T']}, d={t['d']}, {t['tokens']} tokens, {t['boundary']}; "
            f"σ_A²={p['sigma_A2']:g}, σ_V²={p['sigma_V2']:g}, σ²={p['sigma2']:g}")


def _save(fig, out: Path, name: str) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / f"{name}.png", out / f"{name}.pdf"]
    fig.savefig(paths[0], dpi=130, bbox_inches="tight")
    fig.savefig(paths[1], bbox_inches="tight")
    plt.close(fig)
    return paths


def _theory_overlay(ax, curve: dict, x: str, *, label=True) -> None:
    """Stable branch solid, metastable dashed, spinodals dotted, binodal / critical point dash-dot."""
    P = _arr(curve["P"])
    stable = _arr(curve["stable"][x])
    for i, br in enumerate(curve.get("branches", [])):
        bP, bx, bF = _arr(br["P"]), _arr(br[x]), _arr(br["free_energy"])
        # a branch point is stable where its free energy is the lowest at that P
        sF = np.interp(bP, P, _arr(curve["stable"]["free_energy"]))
        meta = bF > sF + 1e-9
        ax.plot(bP, np.where(meta, bx, np.nan), "k--", lw=1, label="theory, metastable" if (label and i == 0) else None)
    ax.plot(P, stable, "k-", lw=1.6, label="theory, stable" if label else None)
    if "mean" in curve and x in curve["mean"]:
        ax.plot(P, _arr(curve["mean"][x]), color="0.5", lw=1, label="theory, posterior mean" if label else None)
    tr = curve.get("transition", {})
    for j, s in enumerate(tr.get("spinodals") or []):
        ax.axvline(_num(s), color="0.4", ls=":", lw=1, label="spinodals" if (label and j == 0) else None)
    if tr.get("P_c"):
        kind = "binodal" if tr.get("order") == "first" else "critical point"
        ax.axvline(_num(tr["P_c"]), color="tab:orange", ls="-.", lw=1.2, label=f"{kind} P_c" if label else None)


def _panels(runs: dict, method: str, height: float, need: str | None = None):
    """(attentions, fig, axes) with one column per attention that has ``method`` results (and the result key
    ``need``), softmax first; None when there is nothing to draw."""
    by_att = runs.get(method, {})
    atts = [a for a in ("softmax", "linear") if a in by_att and (need is None or by_att[a][0]["result"].get(need))]
    if not atts:
        return None
    fig, axes = plt.subplots(1, len(atts), figsize=(6 * len(atts), height), squeeze=False, layout="constrained")
    return atts, fig, axes[0]


def fig_order_parameter(runs: dict, out: Path) -> list[Path]:
    atts = sorted({a for m in runs.values() for a in m}, key=lambda a: a != "softmax")
    if not atts:
        return []
    fig, axes = plt.subplots(1, len(atts), figsize=(6.2 * len(atts), 4.4), squeeze=False, layout="constrained")
    any_rec = None
    for ax, att in zip(axes[0], atts):
        x = ORDER_PARAMETER[att]
        th = runs.get("theory", {}).get(att)
        if th:
            any_rec = th[0]
            _theory_overlay(ax, th[0]["result"]["curve"], x)
        for rec_list, method in ((runs.get("mcmc", {}).get(att), "mcmc"), (runs.get("adam", {}).get(att), "adam")):
            if not rec_list:
                continue
            any_rec = any_rec or rec_list[0]
            P = np.array([r["point"]["P"] for r in rec_list], dtype=float)
            for k, init in enumerate(rec_list[0]["result"]):
                if method == "mcmc":
                    mean = np.array([_num(r["result"][init][x]["mean"]) for r in rec_list])
                    err = np.array([_num(r["result"][init][x]["std"]) for r in rec_list])
                    shift = 1.0 + 0.015 * (k - 0.5)
                    ax.errorbar(P * shift, mean, yerr=err, fmt="o", ms=4, capsize=2, color=COLORS.get(init),
                                label=f"MCMC, {init} start (±1 sd)")
                else:
                    vals = [_arr(r["result"][init]["final_order_parameters"][x])[0] for r in rec_list]
                    ax.errorbar(P, [np.nanmean(v) for v in vals], yerr=[np.nanstd(v) for v in vals], fmt="s",
                                mfc="none", ms=5, capsize=2, color=COLORS.get(init, "tab:green") if init != "hot" else "tab:brown",
                                label=f"Adam, {init} init (mean ± sd over seeds)")
        ax.set_xscale("log")
        ax.set_xlabel("training sequences P")
        ax.set_ylabel(X_LABEL[x])
        ax.set_title(f"{att} attention")
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2)
    if any_rec:
        fig.suptitle("Copy-head order parameter vs number of training sequences\n" + _title_params(any_rec), fontsize=10)
    return _save(fig, out, "fig1_order_parameter_vs_P")


def fig_landscapes(runs: dict, out: Path) -> list[Path]:
    th = runs.get("theory", {})
    if not (panels := _panels(runs, "theory", 4.2, need="landscapes")):
        return []
    atts, fig, axes = panels
    for ax, att in zip(axes, atts):
        lands = th[att][0]["result"]["landscapes"]
        for land, ls in zip(lands, ("-", "--", ":")):
            ax.plot(_arr(land["x"]), _arr(land["S"]), ls, lw=1.5, label=f"P = {_num(land['P']):.0f}")
        ax.set_xlabel(X_LABEL[lands[0].get("x_name", ORDER_PARAMETER[att])])
        # zoom on the wells: the barrier between coexisting phases is a few nats, the walls hundreds
        S_all = np.concatenate([_arr(land["S"]) for land in lands])
        x_all = np.concatenate([_arr(land["x"]) for land in lands])
        near = x_all[S_all < 15.0]
        ax.set_xlim(0, min(1.0, 1.15 * float(near.max())) if near.size else 1.0)
        ax.set_ylim(-0.5, 15.0)
        ax.set_ylabel("free energy S − min S  [nats]")
        ax.set_title(f"{att}: below, at and above the transition")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("Free-energy landscape of the order parameter\n" + _title_params(th[atts[0]][0]), fontsize=10)
    return _save(fig, out, "fig2_free_energy_landscapes")


def fig_planes(runs: dict, out: Path) -> list[Path]:
    th = runs.get("theory", {})
    if not (panels := _panels(runs, "theory", 4.4, need="plane")):
        return []
    atts, fig, axes = panels
    for ax, att in zip(axes, atts):
        pl = th[att][0]["result"]["plane"]
        v = _arr(pl["vary_values"])
        ax.plot(_arr(pl["P_c"]), v, "o-", color="tab:orange",
                label="first-order line (binodal)" if att == "softmax" else "critical line")
        if np.any(np.isfinite(_arr(pl.get("spinodal_low")))):
            ax.plot(_arr(pl["spinodal_low"]), v, "v--", color="tab:blue", label="lower spinodal")
            ax.plot(_arr(pl["spinodal_high"]), v, "^--", color="tab:red", label="upper spinodal")
        if pl.get("crossover") is not None and np.any(np.isfinite(_arr(pl["crossover"]))):
            ax.plot(_arr(pl["crossover"]), v, "s:", color="tab:green", label="crossover")
        ax.set_xscale("log")
        ax.set_xlabel("training sequences P")
        name = pl["vary_name"]
        ax.set_ylabel({"sigma_A2": "prior variance σ_A²", "T": "sequence length T"}.get(name, name))
        ax.set_title(f"{att} attention")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    name = th[atts[0]][0]["result"]["plane"]["vary_name"]
    fig.suptitle(f"Phase diagram in the (P, {name}) plane (theory)\n" + _title_params(th[atts[0]][0]), fontsize=10)
    return _save(fig, out, f"fig3_phase_diagram_P_{name}")


def _below_above(recs: list[dict], curve: dict | None) -> list[dict]:
    """The grid points just below and above the theory's transition (else the ends of the grid)."""
    P = np.array([r["point"]["P"] for r in recs], dtype=float)
    Pc = _num((curve or {}).get("transition", {}).get("P_c")) if curve else math.nan
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
    fig, axes = plt.subplots(len(atts), 2, figsize=(8, 4 * len(atts)), squeeze=False, layout="constrained")
    for row, att in zip(axes, atts):
        curve = runs.get("theory", {}).get(att, [{}])[0].get("result", {}).get("curve")
        for ax, rec in zip(row, _below_above(mc[att], curve)):
            init = next(iter(rec["result"]))
            A = _arr(rec["result"][init]["mean_attention"])
            lim = np.nanmax(np.abs(A)) or 1.0
            im = ax.imshow(A, cmap="viridis" if att == "softmax" else "RdBu_r",
                           vmin=0 if att == "softmax" else -lim, vmax=lim)
            ax.set_title(f"{att}, P = {rec['point']['P']} ({init} start)", fontsize=9)
            ax.set_xlabel("key position s")
            ax.set_ylabel("query position t")
            fig.colorbar(im, ax=ax, fraction=0.046, label="E[α_ts]" if att == "softmax" else "E[sign(m) α_ts]")
    fig.suptitle("Posterior-mean attention matrix below and above the transition\n" + _title_params(mc[atts[0]][0]),
                 fontsize=10)
    return _save(fig, out, "fig4_posterior_mean_attention")


def fig_histograms(runs: dict, out: Path) -> list[Path]:
    mc = runs.get("mcmc", {})
    if not (panels := _panels(runs, "mcmc", 4.2)):
        return []
    atts, fig, axes = panels
    for ax, att in zip(axes, atts):
        x = ORDER_PARAMETER[att]
        curve = runs.get("theory", {}).get(att, [{}])[0].get("result", {}).get("curve")
        Pc = _num(curve["transition"].get("P_c")) if curve else math.nan
        P = np.array([r["point"]["P"] for r in mc[att]], dtype=float)
        i = int(np.argmin(np.abs(np.log(P / Pc)))) if math.isfinite(Pc) else len(P) // 2
        rec = mc[att][i]
        for init, res in rec["result"].items():
            draws = _arr(res.get("draws", {}).get(x, [])).ravel()
            draws = draws[np.isfinite(draws)]
            if draws.size:
                ax.hist(draws, bins=40, range=(0, max(0.05, 1.1 * float(draws.max()))), density=True, alpha=0.5, color=COLORS.get(init),
                        label=f"{init} start (R-hat {_num(res[x].get('r_hat')):.2f})")
        ax.set_xlabel(X_LABEL[x])
        ax.set_ylabel("posterior density")
        ax.set_title(f"{att}, P = {rec['point']['P']} (nearest the theory's P_c)")
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    fig.suptitle("Posterior of the order parameter near the transition\n" + _title_params(mc[atts[0]][0]), fontsize=10)
    return _save(fig, out, "fig5_posterior_histograms")


def fig_training_curves(runs: dict, out: Path) -> list[Path]:
    ad = runs.get("adam", {})
    atts = [a for a in ("softmax", "linear") if a in ad]
    if not atts:
        return []
    fig, axes = plt.subplots(2, len(atts), figsize=(6 * len(atts), 7), squeeze=False, layout="constrained")
    for j, att in enumerate(atts):
        x = "m"  # the copy weight for both: u aligns within a few steps for linear, m then grows gradually
        recs = ad[att]
        cmap = plt.get_cmap("viridis")
        for k, rec in enumerate(recs):
            res = rec["result"].get("small") or next(iter(rec["result"].values()))
            h = res["history"]
            step = _arr(h["step"])[0, 0]
            col = cmap(k / max(1, len(recs) - 1))
            axes[0, j].plot(step, np.nanmean(_arr(h["loss"])[0], axis=0), color=col, label=f"P = {rec['point']['P']}")
            xs = _arr(h[x])[0]
            # linear attention is symmetric under (L, V) -> (-L, -V): seeds land on either sign, average |m|
            axes[1, j].plot(step, np.nanmean(np.abs(xs) if att == "linear" else xs, axis=0), color=col)
        axes[0, j].set_yscale("log")
        axes[0, j].set_ylabel("training loss (mean over seeds)")
        axes[0, j].set_title(f"{att} attention, Adam from small init")
        axes[0, j].legend(fontsize=7, ncol=2)
        axes[1, j].set_ylabel(("|m|, " if att == "linear" else "") + X_LABEL[x] + " (mean over seeds)")
        for ax in axes[:, j]:
            ax.set_xlabel("Adam step")
            ax.grid(alpha=0.3)
    fig.suptitle("Training dynamics: abrupt for softmax, gradual for linear\n" + _title_params(ad[atts[0]][0]), fontsize=10)
    return _save(fig, out, "fig6_training_curves")


def fig_finite_size(runs: dict, out: Path) -> list[Path]:
    th = runs.get("theory", {})
    if not (panels := _panels(runs, "theory", 4.2, need="curves_T")):
        return []
    atts, fig, axes = panels
    for ax, att in zip(axes, atts):
        x = ORDER_PARAMETER[att]
        rec = th[att][0]
        c = rec["point"]["config"]
        curves = rec["result"]["curves_T"]
        cmap = plt.get_cmap("plasma")
        for k, (T, curve) in enumerate(sorted(curves.items(), key=lambda kv: int(kv[0]))):
            # P in units of the linear critical point sigma2 T / d (docs/model.md section 4)
            scale = c["prior"]["sigma2"] * int(T) / c["task"]["d"]
            ax.plot(_arr(curve["P"]) / scale, _arr(curve["mean"][x]), color=cmap(k / max(1, len(curves))),
                    label=f"T = {T}")
        ax.set_xscale("log")
        ax.set_xlabel("P / (σ² T / d)")
        ax.set_ylabel(f"posterior mean of {X_LABEL[x]}")
        ax.set_title(f"{att} attention")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("Finite-size scaling in T (theory)\n" + _title_params(th[atts[0]][0]), fontsize=10)
    return _save(fig, out, "fig7_finite_size_scaling")


FIGURES = (fig_order_parameter, fig_landscapes, fig_planes, fig_attention_matrices, fig_histograms,
           fig_training_curves, fig_finite_size)


def draw_all(out_dir: str | Path) -> list[Path]:
    """Draw every figure the saved results of ``out_dir`` allow; return the written paths."""
    out_dir = Path(out_dir)
    runs = load_run(out_dir)
    paths: list[Path] = []
    for fig in FIGURES:
        paths += fig(runs, out_dir / "figures")
    return paths
