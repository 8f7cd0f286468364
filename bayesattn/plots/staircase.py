"""Figures of the staircase run, drawn from its saved files only (``points/*/*.json``; docs/staircase.md):
the Bayesian staircase (best head's lag mass vs P, per head and init), the training staircase (span mass of each
head at the last query and KL to the k-span teachers vs step) and the ODE (loss and attention vs time)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..experiments.staircase import LAG_OBSERVABLE
from ..sweep import load_results
from ._figure import pyplot, save


def bayes_figure(run_dir, out: Path) -> Path | None:
    recs = load_results(Path(run_dir) / "points" / "mcmc")
    if not recs:
        return None
    plt = pyplot()
    groups: dict = {}
    for r in recs:
        pt = r["point"]
        groups.setdefault((pt["attention"], pt["heads"], pt["bayes"]["ratio"]), []).append(r)
    ncol = min(len(groups), 4)
    nrow = -(-len(groups) // ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(5 * ncol, 3.8 * nrow), squeeze=False)
    for ax in axes.flat[len(groups):]:
        ax.set_visible(False)
    for ax, ((att, H, w), rs) in zip(axes.flat, sorted(groups.items())):
        obs = LAG_OBSERVABLE[att]
        lags = [k.split(":")[1] for k in rs[0]["result"]["means"] if k.startswith("mass_max:")]
        rs = [r for r in rs if all(f"{obs}:{lag}" in r["result"]["means"] for lag in lags)]
        for j, lag in enumerate(lags):
            for init, style in (("cold", "-o"), ("hot", "--s")):
                sel = sorted((r["point"]["P"], r["result"]["means"][f"{obs}:{lag}"]) for r in rs
                             if r["point"]["init"] == init)
                if sel:
                    P, m = zip(*sel)
                    ax.plot(P, m, style, color=f"C{j}", ms=4, label=f"{lag} ({init})")
        ax.set_xscale("log")
        ax.set_xlabel("P")
        ax.set_ylabel("best head's mass on the lag" if obs == "mass_max" else "lag's share in the heads' span")
        ax.set_title(f"{att}, H = {H}, w = ({', '.join(f'{w**k:.2g}' for k in range(H))})")
        ax.legend(fontsize=7)
    fig.tight_layout()
    return save(fig, out, dpi=150)


def ratio_figure(run_dir, out: Path) -> Path | None:
    """P_2/P_1 against w_1/w_2 (summary.json's ratio sweep), next to (w_1/w_2)^2; None without a ratio sweep."""
    import json

    path = Path(run_dir) / "summary.json"
    rows = json.loads(path.read_text()).get("ratio_sweep", []) if path.exists() else []
    rows = [r for r in rows if r["P2/P1"] is not None]
    if not rows:
        return None
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(4.5, 3.8))
    groups: dict = {}
    for r in rows:
        groups.setdefault((r["attention"], r["heads"], r["init"]), []).append(r)
    for j, ((att, H, init), rs) in enumerate(sorted(groups.items())):
        x = [1 / r["ratio"] for r in rs]
        ax.plot(x, [r["P2/P1"] for r in rs], "o-", color=f"C{j}", label=f"MCMC, {att}, H = {H}, {init}")
    x = np.linspace(1.0, max(1 / r["ratio"] for r in rows), 50)
    ax.plot(x, x**2, "k:", label="(w_1/w_2)^2")
    ax.set_xlabel("w_1 / w_2")
    ax.set_ylabel("P_2 / P_1")
    ax.legend(fontsize=7)
    return save(fig, out, dpi=150)


def training_figure(run_dir, out: Path) -> Path | None:
    recs = load_results(Path(run_dir) / "points" / "train")
    if not recs:
        return None
    plt = pyplot()
    res = recs[0]["result"]
    step = np.asarray(res["step"])
    mass = np.asarray(res["mass_last"])  # (R, H, K)
    kl = np.asarray(res["kl"])  # (R, K)
    H, K = mass.shape[1:]
    fig, axes = plt.subplots(1, K + 1, figsize=(4 * (K + 1), 3.5))
    for k in range(K):
        for h in range(H):
            axes[k].plot(step[1:], mass[1:, h, k], color=f"C{h}", label=f"head {h + 1}")
        axes[k].set_title(f"span {k + 1} ({'newest' if k == K - 1 else 'oldest' if k == 0 else 'middle'})")
        axes[k].set_xscale("log")
        axes[k].set_xlabel("step")
        axes[k].set_ylabel("mass at the last query")
    axes[0].legend(fontsize=7)
    for k in range(K):
        axes[K].plot(step[1:], kl[1:, k], color=f"C{k + 3}", label=f"teacher, {k + 1} newest span(s)")
    axes[K].set_xscale("log")
    axes[K].set_yscale("log")
    axes[K].set_xlabel("step")
    axes[K].set_ylabel("KL(teacher_k || model)")
    axes[K].legend(fontsize=7)
    for ax in axes:
        for s in (330, 575):
            ax.axvline(s, color="0.7", lw=0.8, ls=":")
    fig.suptitle(f"minimal model, seed {recs[0]['point']['seed']} (dotted: the paper's stage boundaries)")
    return save(fig, out, dpi=150)


def ode_figure(run_dir, out: Path) -> Path | None:
    recs = load_results(Path(run_dir) / "points" / "ode")
    if not recs:
        return None
    plt = pyplot()
    res = recs[0]["result"]
    t, loss, S = np.asarray(res["t"]), np.asarray(res["loss"]), np.asarray(res["S"])
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.5))
    axes[0].plot(t[1:], loss[1:], "k")
    for p in res["plateaus"][1:-1]:
        axes[0].axhline(p, color="0.6", ls=":", lw=0.8)
    axes[0].set_xscale("log")
    axes[0].set_yscale("log")
    axes[0].set_xlabel("t")
    axes[0].set_ylabel("|Delta - D S^T|^2")
    for h in range(S.shape[2]):
        for j in range(min(3, S.shape[1])):
            axes[1].plot(t[1:], S[1:, j, h], color=f"C{j}", ls=["-", "--", ":"][h % 3],
                         label=f"head {h + 1}, position {j + 1}" if h == 0 or j == 0 else None)
    axes[1].set_xscale("log")
    axes[1].set_xlabel("t")
    axes[1].set_ylabel("S (attention weight)")
    axes[1].legend(fontsize=6)
    return save(fig, out, dpi=150)


def draw_all(run_dir) -> list:
    """Every figure whose points exist, under run_dir/figures."""
    figs = Path(run_dir) / "figures"
    figs.mkdir(parents=True, exist_ok=True)
    made = [bayes_figure(run_dir, figs / "staircase_bayes.png"),
            ratio_figure(run_dir, figs / "staircase_ratio.png"),
            training_figure(run_dir, figs / "staircase_training.png"),
            ode_figure(run_dir, figs / "staircase_ode.png")]
    return [str(p) for p in made if p is not None]
