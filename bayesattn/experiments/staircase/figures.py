"""Figures of the staircase run, drawn from its saved files only (``points/*/*.json``; docs/results/staircase.md):
the Bayesian staircase (best head's lag mass vs P, per head and init), the training staircase (span mass of each
head at the last query and KL to the k-span teachers vs step) and the ODE (loss and attention vs time)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ...figstyle import pyplot, save
from ...files import load_results, read_json
from .bayes import LAG_OBSERVABLE


def bayes_figure(run_dir, out: Path) -> Path | None:
    recs = load_results(Path(run_dir) / "points" / "mcmc")
    if not recs:
        return None
    theory = {
        (r["point"]["attention"], r["point"]["heads"], r["point"]["bayes"]["ratio"]): r["result"]
        for r in load_results(Path(run_dir) / "points" / "theory")
    }
    plt = pyplot()
    groups: dict = {}
    for r in recs:
        pt = r["point"]
        groups.setdefault((pt["attention"], pt["heads"], pt["bayes"]["ratio"]), []).append(r)
    ncol = min(len(groups), 4)
    nrow = -(-len(groups) // ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(5 * ncol, 3.8 * nrow), squeeze=False)
    for ax in axes.flat[len(groups) :]:
        ax.set_visible(False)
    for ax, ((att, H, w), rs) in zip(axes.flat, sorted(groups.items())):
        obs = LAG_OBSERVABLE[att]
        lags = [k.split(":")[1] for k in rs[0]["result"]["means"] if k.startswith("mass_max:")]
        rs = [r for r in rs if all(f"{obs}:{lag}" in r["result"]["means"] for lag in lags)]
        for j, lag in enumerate(lags):
            for init, style in (("cold", "-o"), ("hot", "--s")):
                sel = sorted(
                    (r["point"]["P"], r["result"]["means"][f"{obs}:{lag}"]) for r in rs if r["point"]["init"] == init
                )
                if sel:
                    P, m = zip(*sel)
                    ax.plot(P, m, style, color=f"C{j}", ms=4, label=f"{lag} ({init})")
        th = theory.get((att, H, w)) if obs == "mass_max" else None
        for j, lag in enumerate(lags if th else []):
            ax.plot(th["P"], th["mass_max"][lag], color=f"C{j}", lw=4, alpha=0.3, zorder=0, label=f"{lag} (theory)")
        ax.set_xscale("log")
        ax.set_xlabel("P")
        ax.set_ylabel("best head's mass on the lag" if obs == "mass_max" else "lag's share in the heads' span")
        ws = ", ".join(f"{w**k:.2g}" for k in range(H))
        ax.set_title(f"{att}, H = {H}, T = {rs[0]['point']['bayes']['T']}, w = ({ws})")
        ax.legend(fontsize=7)
    fig.tight_layout()
    return save(fig, out)


def ratio_figure(run_dir, out: Path) -> Path | None:
    """P_2/P_1 against w_1/w_2 (summary.json's ratio sweep), next to (w_1/w_2)^2; None without a ratio sweep."""
    path = Path(run_dir) / "summary.json"
    rows = read_json(path).get("ratio_sweep", []) if path.exists() else []
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
    return save(fig, out)


# the paper's stage boundaries (steps after the start of training, read off its figure shading): the minimal
# model (Figure 1) and the full one-layer transformer (Figures 2-3)
PAPER_BOUNDARIES = {"minimal": (330, 575), "transformer": (65, 450)}


def training_figure(run_dir, out: Path, variants=None, dpi: int = 150) -> Path | None:
    """One row per training run kind ("main" and each variant; ``variants`` selects some): the span masses of
    every head at the last query vs step (one panel per span, the first seed; the stage steps of every seed in
    the first panel) and KL to the k-span teachers (every seed), the paper's stage boundaries dotted."""
    recs = load_results(Path(run_dir) / "points" / "train")
    groups: dict = {}
    for r in sorted(recs, key=lambda r: r["point"]["seed"]):
        groups.setdefault(r["point"].get("variant", "main"), []).append(r)
    if variants is not None:
        groups = {k: v for k, v in groups.items() if k in variants}
    if not groups:
        return None
    plt = pyplot()
    names = sorted(groups, key=lambda n: (n != "main", n))
    K = np.asarray(groups[names[0]][0]["result"]["mass_last"]).shape[2]
    fig, axes = plt.subplots(len(names), K + 1, figsize=(3.6 * (K + 1), 3.0 * len(names)), squeeze=False)
    for row, name in zip(axes, names):
        rs = groups[name]
        tc = rs[0]["point"]["train"]
        res = rs[0]["result"]
        step, mass = np.asarray(res["step"]), np.asarray(res["mass_last"])  # (R, H, K)
        H = mass.shape[1]
        for k in range(K):
            for h in range(H):
                row[k].plot(step, mass[:, h, k], color=f"C{h}", lw=1.2, label=f"head {h + 1}")
            row[k].set_title(
                f"{name}: span {k + 1} ({'newest' if k == K - 1 else 'oldest' if k == 0 else 'middle'})", fontsize=9
            )
            row[k].set_ylim(0, 1)
            row[k].set_ylabel("mass at the last query", fontsize=8)
        row[0].legend(fontsize=7)
        for r in rs:
            kl = np.asarray(r["result"]["kl"])
            for k in range(K):
                row[K].plot(
                    r["result"]["step"],
                    kl[:, k],
                    color=f"C{k + 3}",
                    lw=0.8 if len(rs) > 1 else 1.2,
                    alpha=0.7,
                    label=f"{k + 1} newest span(s)" if r is rs[0] else None,
                )
        row[K].set_yscale("log")
        row[K].set_ylabel("KL(teacher_k || model)", fontsize=8)
        row[K].set_title(
            f"{tc['model']}, {tc['optimizer']} lr {tc['lr']}, batch {tc['batch_size']}, "
            f"spans {list(tc['span_lengths'])}, {len(rs)} seed(s)",
            fontsize=7,
        )
        row[K].legend(fontsize=7)
        stages = "\n".join(f"seed {r['point']['seed']}: {r['result']['stages']}" for r in rs[:8])
        row[0].text(
            0.98,
            0.97,
            f"stage steps (newest first)\n{stages}",
            transform=row[0].transAxes,
            fontsize=6,
            ha="right",
            va="top",
        )
        for ax in row:
            ax.set_xlabel("step", fontsize=8)
            ax.tick_params(labelsize=7)
            for b in PAPER_BOUNDARIES.get(tc["model"], ()) if tc["optimizer"] == "adamw" else ():
                if b <= step[-1]:
                    ax.axvline(b, color="0.5", lw=0.8, ls=":")
    return save(fig, out)


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
            axes[1].plot(
                t[1:],
                S[1:, j, h],
                color=f"C{j}",
                ls=["-", "--", ":"][h % 3],
                label=f"head {h + 1}, position {j + 1}" if h == 0 or j == 0 else None,
            )
    axes[1].set_xscale("log")
    axes[1].set_xlabel("t")
    axes[1].set_ylabel("S (attention weight)")
    axes[1].legend(fontsize=6)
    return save(fig, out)


def draw_all(run_dir) -> list:
    """Every figure whose points exist, under run_dir/figures."""
    figs = Path(run_dir) / "figures"
    figs.mkdir(parents=True, exist_ok=True)
    made = [
        bayes_figure(run_dir, figs / "staircase_bayes.png"),
        ratio_figure(run_dir, figs / "staircase_ratio.png"),
        training_figure(run_dir, figs / "staircase_training.png"),
        ode_figure(run_dir, figs / "staircase_ode.png"),
    ]
    return [str(p) for p in made if p is not None]
