"""Figures of the circuit screens (docs/results/screens.md), drawn from saved files only: head maps (layer x head, one
panel per class, log10 selectivity) from a screen's JSON records, and the trajectory figure from a trajectory
run's summary.json."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ...diagnostics.screens import CIRCUIT_THRESHOLD, CLASSES, THRESHOLD
from ...figstyle import pyplot
from ...files import load_results, read_json

plt = pyplot()


def _grid(records, key, sub=None):
    L = 1 + max(r["layer"] for r in records)
    H = 1 + max(r["head"] for r in records)
    g = np.full((L, H), np.nan)
    for r in records:
        v = r[key] if sub is None else r[key][sub]
        g[r["layer"], r["head"]] = np.nan if v is None else v
    return g


def head_maps(records: list, path, title: str = "") -> Path:
    """One panel per class: log10 selectivity of every head (layers down, heads across); dots mark heads at or
    above 30x, crosses induction-circuit heads (50x); a last panel shows the PR."""
    if records and "step" in records[0]:
        last = max(r["step"] for r in records)
        records = [r for r in records if r["step"] == last]
    fig, axes = plt.subplots(1, len(CLASSES) + 1, figsize=(2.1 * (len(CLASSES) + 1), 4.2), sharey=True)
    for ax, c in zip(axes, CLASSES):
        g = np.log10(np.maximum(_grid(records, "selectivity", c), 1e-3))
        im = ax.imshow(g, aspect="auto", cmap="magma", vmin=-1, vmax=4, interpolation="nearest")
        yy, xx = np.nonzero(g >= np.log10(THRESHOLD))
        ax.plot(xx, yy, "o", ms=3, mfc="none", mec="cyan", mew=0.8)
        if c == "induction":
            yy, xx = np.nonzero(g >= np.log10(CIRCUIT_THRESHOLD))
            ax.plot(xx, yy, "x", ms=3, color="lime")
        ax.set_title(f"{c}\n({int(np.sum(g >= np.log10(THRESHOLD)))} heads >= {THRESHOLD:.0f}x)", fontsize=8)
        ax.set_xlabel("head", fontsize=8)
        ax.tick_params(labelsize=7)
    axes[0].set_ylabel("layer", fontsize=8)
    fig.colorbar(im, ax=axes[len(CLASSES) - 1], fraction=0.08, label="log10 selectivity")
    pr = _grid(records, "pr")
    im2 = axes[-1].imshow(pr, aspect="auto", cmap="viridis", interpolation="nearest")
    axes[-1].set_title("PR", fontsize=8)
    axes[-1].set_xlabel("head", fontsize=8)
    fig.colorbar(im2, ax=axes[-1], fraction=0.08)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def trajectory_figure(out_dir, path=None) -> Path:
    """Four panels from summary.json and points/: (a) training loss and the copy losses of the probe, checkpoints
    marked; (b) selectivity over checkpoints of the layer-0 heads (previous token) and the last layer's heads
    (induction); (c) each head's PR; (d) the BOS-head fraction per layer."""
    from .trajectory import summarize

    out = Path(out_dir)
    res = load_results(out / "points" / "trajectory")[0]["result"]
    pts = sorted(res["checkpoints"], key=lambda p: p["step"])
    s = {"history": res["history"], **summarize(pts, res["history"], res["record_every"])}
    steps = np.array([p["step"] for p in pts])
    x = np.maximum(steps, 0.5)
    sel = {c: np.array([p["repeated_pair"]["selectivity"][c] for p in pts]) for c in CLASSES}
    pr = np.array([p["repeated_pair"]["pr"] for p in pts])
    K, L, H = pr.shape
    fig, ax = plt.subplots(1, 4, figsize=(17, 3.8))
    h = s["history"]
    ax[0].plot(np.maximum(h["step"], 0.5), h["loss"], "k-", lw=1, label="training loss (induction rows)")
    ax[0].plot(x, [c["first_copy"] for c in s["copy_loss"]], "o--", ms=3, color="tab:gray", label="probe: 1st copy")
    ax[0].plot(x, [c["second_copy"] for c in s["copy_loss"]], "o-", ms=3, color="tab:red", label="probe: 2nd copy")
    ax[0].set(xscale="log", xlabel="step", ylabel="loss (nats)", title="(a) the induction bump")
    ax[0].legend(fontsize=7)
    cols = plt.cm.tab10(np.arange(H))
    for hd in range(H):
        ax[1].plot(
            x,
            np.maximum(sel["previous_token"][:, 0, hd], 1e-2),
            "-",
            color=cols[hd],
            lw=1,
            label=f"L0H{hd} prev" if hd == 0 else None,
        )
        ax[1].plot(
            x,
            np.maximum(sel["induction"][:, L - 1, hd], 1e-2),
            "--",
            color=cols[hd],
            lw=1.5,
            label=f"L{L - 1}H{hd} induction" if hd == 0 else None,
        )
    ax[1].axhline(THRESHOLD, color="k", lw=0.6, ls=":")
    ax[1].set(
        xscale="log",
        yscale="log",
        xlabel="step",
        ylabel="selectivity",
        title=f"(b) prev-token (L0, solid), induction (L{L - 1}, dashed)",
    )
    ax[1].legend(fontsize=7)
    for layer in range(L):
        for hd in range(H):
            ax[2].plot(x, pr[:, layer, hd], "-" if layer == 0 else "--", color=cols[hd], lw=1)
    ax[2].set(xscale="log", xlabel="step", ylabel="PR", title="(c) PR per head (L0 solid, later dashed)")
    bos = np.array(s["bos_fraction"])
    for layer in range(L):
        ax[3].plot(x, bos[:, layer], "o-", ms=3, label=f"layer {layer}")
    ax[3].set(
        xscale="log",
        xlabel="step",
        ylabel="fraction of heads",
        ylim=(-0.05, 1.05),
        title=f"(d) BOS heads (>= {THRESHOLD:.0f}x) per layer",
    )
    ax[3].legend(fontsize=7)
    fig.tight_layout()
    path = Path(path) if path else out / "figures" / "trajectory.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return path


def draw_all(out_dir) -> list[Path]:
    """Every figure whose points exist: the trajectory figure and the final checkpoint's head maps, the Bayesian
    copy head through the screens, the pretrained models' head maps."""
    out = Path(out_dir)
    (out / "figures").mkdir(parents=True, exist_ok=True)
    paths = []
    if load_results(out / "points" / "trajectory") if (out / "points" / "trajectory").is_dir() else []:
        paths.append(trajectory_figure(out))
        res = load_results(out / "points" / "trajectory")[0]["result"]
        p = max(res["checkpoints"], key=lambda c: c["step"])["repeated_pair"]
        L, H = np.array(p["pr"]).shape
        recs = [
            {"layer": l, "head": h, "selectivity": {c: p["selectivity"][c][l][h] for c in CLASSES}, "pr": p["pr"][l][h]}
            for l in range(L)
            for h in range(H)
        ]
        paths.append(head_maps(recs, out / "figures" / "head_maps_final.png", "final checkpoint, repeated-pair probe"))
    if (out / "summary.json").exists() and "bayes" in read_json(out / "summary.json"):
        paths.append(bayes_lens_figure(out))
    if (out / "points" / "model").is_dir():
        for r in load_results(out / "points" / "model"):
            res = r["result"]
            label = " ".join(m["name"] for m in res["models"])
            paths.append(
                head_maps(
                    res["records"],
                    out / "figures" / "head_maps_model.png",
                    f"{label}: {res['probe']['kind']}, N={res['probe']['N']}",
                )
            )
    return paths


def bayes_lens_figure(out_dir, path=None) -> Path:
    """The Bayesian copy head through the screens: (a) selectivity against P, (b) PR against P; NUTS and theory."""
    out = Path(out_dir)
    summary = read_json(out / "summary.json")
    s = {**summary["bayes"], "theory": summary.get("theory"), "config": summary["config"]["bayes"]}
    pts = s["points"]
    P = [p["P"] for p in pts]
    fig, ax = plt.subplots(1, 2, figsize=(9, 3.5))
    ax[0].plot(P, [p["selectivity_median"] for p in pts], "o-", label="posterior median")
    ax[0].plot(P, [10 ** p["log10_selectivity_mean"] for p in pts], "s--", ms=3, label="geometric mean")
    th = (s.get("theory") or {}).get("points")
    if th:
        ax[0].plot(
            [p["P"] for p in th],
            [p["selectivity_median"] for p in th],
            "k-",
            lw=1,
            label="theory: median over the row law",
        )
    ax[0].axhline(THRESHOLD, color="k", ls=":", lw=0.8, label=f"{THRESHOLD:.0f}x")
    ax[0].set(xscale="log", yscale="log", xlabel="P", ylabel="previous-token selectivity", title="(a) selectivity")
    ax[0].legend(fontsize=7)
    ax[1].errorbar(
        P,
        [p["pr_mean"] for p in pts],
        yerr=[p["pr_sd"] for p in pts],
        fmt="o-",
        label=f"NUTS, {s['config']['tokens']}, {s['config']['probe_N']} probe sequences",
    )
    if "pr_limit_mean" in pts[0]:
        ax[1].plot(P, [p["pr_limit_mean"] for p in pts], "kx", ms=5, label="NUTS, many-sequence limit")
    if th:
        ax[1].plot(
            [p["P"] for p in th], [p["pr_limit_mean"] for p in th], "k-", lw=1, label="theory: mean over the row law"
        )
    ax[1].plot(P, [p["pr_gaussian_mean"] for p in pts], "s--", ms=3, label="gaussian tokens")
    for x, st in ((s["P_selectivity_threshold"], "k:"), (s["P_pr_half_rise"], "r:")):
        if x:
            for a in ax:
                a.axvline(x, color=st[0], ls=":", lw=0.8)
    ax[1].set(xscale="log", xlabel="P", ylabel="PR", title="(b) PR of the outputs at the last query")
    ax[1].legend(fontsize=7)
    c = s["config"]
    fig.suptitle(
        f"Bayesian copy head, T={c['T']}, d={c['d']}, sigma2={c['prior']['sigma2']} (NUTS, "
        f"{c['mcmc']['num_chains']}x{c['mcmc']['num_samples']} draws per P)",
        fontsize=9,
    )
    fig.tight_layout()
    path = Path(path) if path else out / "figures" / "bayes_lens.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return path
