"""Figures of the training-dynamics laboratory, drawn from saved point files only (docs/results/dynlab.md).

Clustering head: loss with the detected spikes and the pre-norm / curvature traces; attention mass on the
first k positions and class separation; the visual sandbox (frames and a GIF). Focus-dilution: entropy
curves with the detected stages shaded; PCA paths of the embeddings; cycle counts per setting; the training
entropy beside the posterior-mean entropy of the copy task against P. Diverged runs are never drawn as
curves: they are listed (seed and step) in the figure.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ...figstyle import pyplot, save
from ...files import load_results
from .summary import group_runs

STAGE_COLORS = {"focus": "tab:blue", "dilution": "tab:orange", "condensation": "0.8"}


def _runs(run_dir, part="train"):
    recs = load_results(Path(run_dir) / "points" / part)
    return group_runs(recs) if part == "train" else recs


def _diverged_note(ax, runs, key):
    bad = [f"seed {r['seed']} at {r[key]}" for r in runs if r[key] is not None]
    if bad:
        ax.text(0.01, 0.01, "diverged (not drawn): " + ", ".join(bad), transform=ax.transAxes, fontsize=7, color="red")


# ------------------------------------------------------------------------------------------ clustering
def spikes_figure(recs, out: Path) -> Path:
    plt = pyplot()
    groups = [(r["point"]["label"], r["result"]["runs"]) for r in recs]
    fig, axes = plt.subplots(3, len(groups), figsize=(5.5 * len(groups), 8), squeeze=False, sharex="col")
    for j, (lab, runs) in enumerate(groups):
        ok = [r for r in runs if r["diverged_at"] is None]
        if not ok:
            _diverged_note(axes[0, j], runs, "diverged_at")
            continue
        best = max(ok, key=lambda r: (len(r["spikes"]), r["final_test_acc"]))
        ep = np.arange(len(best["curves"]["loss"]))
        sp = [s["epoch"] for s in best["spikes"]]
        for r in ok:
            if r is not best:
                axes[0, j].semilogy(r["curves"]["loss"], color="0.85", lw=0.5)
        axes[0, j].semilogy(ep, best["curves"]["loss"], color="k", lw=0.8, label=f"seed {best['seed']}")
        axes[0, j].semilogy(sp, np.asarray(best["curves"]["loss"])[sp], "rv", ms=5, label=f"{len(sp)} spikes")
        axes[0, j].set(title=f"{lab}: train loss", ylabel="cross-entropy")
        axes[0, j].legend(fontsize=7)
        axes[1, j].semilogy(ep, best["curves"]["z_norm_min"], lw=0.8, label="min ||z|| (pooled, before norm)")
        axes[1, j].semilogy(ep, best["curves"]["z_norm_q05"], lw=0.8, label="5% quantile ||z||")
        axes[1, j].semilogy(sp, np.asarray(best["curves"]["z_norm_min"])[sp], "rv", ms=5)
        axes[1, j].legend(fontsize=7)
        axes[1, j].set(ylabel="pre-norm vector norm")
        c = best["curvature"]
        lam = np.abs(np.asarray(c["lambda_max"], dtype=float))
        axes[2, j].semilogy(c["epoch"], lam, ".-", lw=0.6, ms=3, label="largest Hessian eigenvalue (Lanczos)")
        at = [(s["epoch"], s["lambda_max"]) for s in best["spikes"] if s["lambda_max"] is not None]
        if at:
            axes[2, j].semilogy(*zip(*at), "rv", ms=5, label="at spikes")
        axes[2, j].set(xlabel="epoch", ylabel="|lambda_max|")
        axes[2, j].legend(fontsize=7)
        _diverged_note(axes[0, j], runs, "diverged_at")
    return save(fig, out)


def heads_figure(recs, out: Path) -> Path:
    plt = pyplot()
    groups = [(r["point"]["label"], r["result"]["runs"], r["point"]["config"]) for r in recs]
    fig, axes = plt.subplots(3, len(groups), figsize=(5.5 * len(groups), 7.5), squeeze=False, sharex="col")
    for j, (lab, runs, cfg) in enumerate(groups):
        for r in runs:
            if r["diverged_at"] is not None:
                continue
            col = "tab:green" if r["success"] else "tab:red"
            axes[0, j].plot(r["curves"]["mass_first_k"], color=col, lw=0.6, alpha=0.7)
            axes[1, j].semilogy(np.maximum(r["curves"]["separation_sum"], 1e-6), color=col, lw=0.6, alpha=0.7)
            axes[2, j].semilogy(np.maximum(r["curves"]["separation_out"], 1e-6), color=col, lw=0.6, alpha=0.7)
        axes[0, j].axhline(cfg["k"] / cfg["seq_len"], color="k", ls=":", lw=0.8)
        n_ok = sum(r["success"] for r in runs)
        axes[0, j].set(title=f"{lab}: {n_ok}/{len(runs)} succeed (green)", ylabel=f"attention mass on first {cfg['k']}")
        axes[1, j].set(ylabel="separation of z by first-k sum")
        axes[2, j].set(xlabel="epoch", ylabel="separation of MLP output by class")
        _diverged_note(axes[0, j], runs, "diverged_at")
    return save(fig, out)


def _sandbox_axes(ax, sb, i):
    z, o, tok = np.asarray(sb["z"][i]), np.asarray(sb["out"][i]), np.asarray(sb["tok"][i])
    y = np.asarray(sb["labels"])
    ax.cla()
    ax.scatter(o[:, 0], o[:, 1], c=y, cmap="coolwarm", s=6, alpha=0.6, marker="o")
    ax.scatter(z[:, 0], z[:, 1], c=y, cmap="coolwarm", s=4, alpha=0.3, marker="x")
    p = int(y.max()) + 1 if y.size else tok.shape[0]
    lim = max(1.0, np.abs(np.r_[o.ravel(), z.ravel(), tok[:p].ravel()]).max()) * 1.1
    for v, t in enumerate(tok):
        name = str(v)
        if v >= p:  # an embedding with no class (the paper's grid has one): its direction, scaled into view
            t, name = t / max(np.linalg.norm(t), 1e-12) * 0.9 * lim, f"{v} (dir.)"
        ax.annotate("", t, (0, 0), arrowprops={"arrowstyle": "->", "color": "k"})
        ax.text(*t, name, fontsize=8)
    ax.set(xlim=(-lim, lim), ylim=(-lim, lim), title=f"epoch {sb['epochs'][i]}")
    ax.set_aspect("equal")


def sandbox_figures(rec, out_png: Path, out_gif: Path) -> list[Path]:
    sb = rec["result"]["sandbox"]
    if sb is None:
        return []
    plt = pyplot()
    n = len(sb["epochs"])
    pick = np.unique(np.linspace(0, n - 1, 6).astype(int))
    fig, axes = plt.subplots(1, len(pick), figsize=(3 * len(pick), 3.2))
    for ax, i in zip(np.atleast_1d(axes), pick):
        _sandbox_axes(ax, sb, i)
    fig.suptitle(
        f"{rec['point']['label']}, seed {rec['result']['sandbox_seed']}: token embeddings (arrows), "
        "pooled z (x) and MLP output (o), colour = class",
        fontsize=9,
    )
    save(fig, out_png)
    from matplotlib.animation import FuncAnimation, PillowWriter

    fig, ax = plt.subplots(figsize=(4, 4))
    anim = FuncAnimation(fig, lambda i: _sandbox_axes(ax, sb, i), frames=n)
    anim.save(out_gif, writer=PillowWriter(fps=6), dpi=60)
    plt.close(fig)
    return [out_png, out_gif]


# ------------------------------------------------------------------------------------------ focus-dilution
def _shade(ax, run, step):
    st = run["stage_steps"]
    if st["condensation"]:
        ax.axvspan(*st["condensation"], color=STAGE_COLORS["condensation"], alpha=0.5, lw=0)
    for p in st["phases"]:
        ax.axvspan(p["start"], p["end"], color=STAGE_COLORS[p["stage"]], alpha=0.25, lw=0)
    for r in st["restarts"]:
        ax.axvline(r, color="k", ls="--", lw=0.7)


def cycles_figure(recs, out: Path) -> Path:
    plt = pyplot()
    fig, axes = plt.subplots(2, len(recs), figsize=(4.5 * len(recs), 6), squeeze=False, sharex="col")
    for j, r in enumerate(recs):
        step = np.asarray(r["result"]["step"])
        runs = r["result"]["runs"]
        ok = [x for x in runs if x["diverged_at_step"] is None]
        _diverged_note(axes[0, j], runs, "diverged_at_step")
        if not ok:
            continue
        run = ok[0]
        c = run["curves"]
        _shade(axes[0, j], run, step)
        axes[0, j].plot(step, c["value_entropy"], "k", lw=1, label="entropy of mass over token values")
        ax2 = axes[0, j].twinx()
        ax2.plot(step, c["rank_E"], color="tab:purple", lw=0.8, label="eff. rank E")
        ax2.set_ylabel("effective rank of E", color="tab:purple")
        lab = r["point"]["label"].replace(", pi=", "\npi=")
        axes[0, j].set(title=f"{lab}\nseed {run['seed']}: {run['cycles']} cycles", ylabel="nats")
        axes[0, j].legend(fontsize=7, loc="upper right")
        _shade(axes[1, j], run, step)
        axes[1, j].plot(step, c["entropy"], "k", lw=1, label="positional, all queries")
        axes[1, j].plot(step, c["entropy_frequent"], lw=0.8, label="frequent queries")
        axes[1, j].plot(step, c["entropy_rare"], lw=0.8, label="rare queries")
        mass = np.asarray(c["mass"])
        ax3 = axes[1, j].twinx()
        ax3.plot(step, mass[:, 0], color="tab:red", lw=0.8, ls=":", label="mass on token 0")
        ax3.set_ylabel("attention mass on the frequent token", color="tab:red")
        axes[1, j].set(xlabel="step", ylabel="attention entropy (nats)")
        axes[1, j].legend(fontsize=7, loc="lower left")
    fig.suptitle("stages: grey = rank-one condensation, blue = focus, orange = dilution, dashed = restart", fontsize=9)
    return save(fig, out)


def pca_figure(recs, out: Path) -> Path:
    plt = pyplot()
    fig, axes = plt.subplots(1, len(recs), figsize=(4 * len(recs), 3.8), squeeze=False)
    for j, r in enumerate(recs):
        ok = [x for x in r["result"]["runs"] if x["diverged_at_step"] is None]
        ax = axes[0, j]
        _diverged_note(ax, r["result"]["runs"], "diverged_at_step")
        if not ok:
            continue
        co = np.asarray(ok[0]["pca"]["coords"])  # (R, V, 2)
        for v in range(co.shape[1]):
            ax.plot(co[:, v, 0], co[:, v, 1], lw=0.8, label=f"token {v} (pi={r['result']['pi'][v]:.2f})")
            ax.plot(co[-1, v, 0], co[-1, v, 1], "o", ms=4, color=ax.lines[-1].get_color())
        ev = ok[0]["pca"]["explained"]
        ax.set(
            title=r["point"]["label"].replace(", pi=", "\npi="),
            xlabel=f"PC1 ({ev[0]:.0%})",
            ylabel=f"PC2 ({ev[1]:.0%})",
        )
        ax.legend(fontsize=6)
    return save(fig, out)


def equilibrium_figure(recs, eq, out: Path, theory=()) -> Path | None:
    if not eq:
        return None
    plt = pyplot()
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.8))
    for r in recs:
        ok = [x for x in r["result"]["runs"] if x["diverged_at_step"] is None]
        for x in ok[:1]:
            a.plot(r["result"]["step"], x["curves"]["entropy"], lw=0.9, label=r["point"]["label"][:30])
    a.set(xlabel="GD step", ylabel="attention entropy over positions (nats)", title="training (focus-dilution)")
    if a.lines:
        a.legend(fontsize=6)
    th = {r["point"]["T"]: r["result"] for r in theory}
    for k, T in enumerate(sorted({e["point"].get("T", 8) for e in eq})):
        col = f"C{k}"
        pts = sorted((e for e in eq if e["point"].get("T", 8) == T), key=lambda e: e["point"]["P"])
        P = [e["point"]["P"] for e in pts]
        b.errorbar(
            P,
            [e["result"]["entropy"]["mean"] for e in pts],
            yerr=[e["result"]["entropy"]["se"] for e in pts],
            fmt="o",
            color=col,
            ms=4,
            label=f"T={T}: NUTS posterior mean",
        )
        if T in th:
            b.plot(th[T]["P"], th[T]["posterior"], "-", color=col, lw=1, label=f"T={T}: theory (order parameters)")
        b.axhline(pts[0]["result"]["uniform_entropy"], color=col, ls=":", lw=0.8)
    b.set(
        xscale="log",
        xlabel="P (training sequences)",
        ylabel="posterior-mean attention entropy (nats)",
        title="equilibrium: copy-task posterior (dotted: log T)",
    )
    b.legend(fontsize=7)
    return save(fig, out)


def _geometric_ratio(pi):
    r = np.asarray(pi[1:]) / np.asarray(pi[:-1])
    return float(r[0]) if np.allclose(r, r[0], rtol=1e-6) else None


def pi_vocab_figure(recs, out: Path) -> Path | None:
    """Cycles per seed, first-focus step and first-cycle stage durations against pi_0 at the most common V, and
    against V at the most common geometric ratio (GD settings only); None unless one of the two has >= 2 settings."""
    from .summary import stage_durations

    gd = [r for r in recs if r["point"]["config"]["optimizer"] == "gd"]
    Vs = [len(r["point"]["config"]["pi"]) for r in gd]
    ratios = [_geometric_ratio(r["point"]["config"]["pi"]) for r in gd]
    cols = []
    if Vs:
        V0 = max(set(Vs), key=Vs.count)
        cols.append(
            (
                f"pi varied at V = {V0}",
                "largest stationary probability pi_0",
                [(r["point"]["config"]["pi"][0], r) for r, v in zip(gd, Vs) if v == V0],
            )
        )
    known = [x for x in ratios if x is not None]
    if known:
        r0 = max(set(known), key=known.count)
        cols.append(
            (
                f"V varied at pi_i ~ {r0:g}^i",
                "vocabulary size V",
                [(v, r) for r, v, x in zip(gd, Vs, ratios) if x == r0],
            )
        )
    cols = [c for c in cols if len({x for x, _ in c[2]}) >= 2]
    if not cols:
        return None
    plt = pyplot()
    fig, axes = plt.subplots(3, len(cols), figsize=(5 * len(cols), 8), squeeze=False)
    for j, (title, xlabel, items) in enumerate(cols):
        by: dict = {}
        for x, r in items:
            by.setdefault(x, []).extend(run for run in r["result"]["runs"] if run["diverged_at_step"] is None)
        xs = sorted(by)
        span = (max(xs) - min(xs)) * 0.015
        for x in xs:
            runs = by[x]
            c = [run["cycles"] for run in runs]
            jit = np.linspace(-span, span, len(c)) if len(c) > 1 else np.zeros(len(c))
            axes[0, j].scatter(x + jit, c, s=10, color="0.4")
            ff = [
                next((p["start"] for p in run["stage_steps"]["phases"] if p["stage"] == "focus"), np.nan)
                for run in runs
            ]
            axes[1, j].scatter(x + jit, ff, s=10, color="0.4")
            for k, key in enumerate(("condensation", "focus", "dilution")):
                v = [stage_durations(run["stage_steps"])[key] for run in runs]
                v = [np.nan if y is None else y for y in v]
                axes[2, j].scatter(x + jit, v, s=8, color=f"C{k}", label=key if x == xs[0] else None)
        axes[0, j].plot(xs, [np.mean([run["cycles"] for run in by[x]]) for x in xs], "k-", lw=1, label="mean")
        axes[0, j].set(title=title, ylabel="cycles per seed")
        axes[0, j].legend(fontsize=7)
        axes[1, j].set(ylabel="first focus starts (step)")
        axes[2, j].set(xlabel=xlabel, ylabel="first-cycle stage length (steps)")
        axes[2, j].legend(fontsize=7)
    return save(fig, out)


def cycle_counts_figure(recs, out: Path) -> Path:
    plt = pyplot()
    labels = [r["point"]["label"] for r in recs]
    counts = [[x["cycles"] for x in r["result"]["runs"] if x["diverged_at_step"] is None] for r in recs]
    fig, ax = plt.subplots(figsize=(max(5, 1.6 * len(recs)), 3.5))
    for i, c in enumerate(counts):
        ax.scatter(np.full(len(c), i) + np.linspace(-0.15, 0.15, len(c)), c, s=12)
        if c:
            ax.plot([i - 0.25, i + 0.25], [np.mean(c)] * 2, "k")
    ax.set_xticks(range(len(labels)), [lab.replace(", pi=", "\npi=") for lab in labels], fontsize=6)
    ax.set(ylabel="focus-dilution cycles per seed")
    return save(fig, out)


def draw_all(run_dir) -> list[Path]:
    run_dir = Path(run_dir)
    figs = run_dir / "figures"
    figs.mkdir(parents=True, exist_ok=True)
    recs = _runs(run_dir)
    if not recs:
        return []
    # one panel per setting, in a stable order (clustering: p; focus-dilution: V, then GD before Adam)
    recs.sort(
        key=lambda r: (
            r["point"]["config"].get("p", 0),
            len(r["point"]["config"].get("pi", [])),
            r["point"]["config"].get("optimizer", ""),
            r["point"]["seeds"][0],
        )
    )
    if recs[0]["point"]["experiment"] == "clustering_head":
        paths = [spikes_figure(recs, figs / "spikes.png"), heads_figure(recs, figs / "clustering_heads.png")]
        boxed = next((r for r in recs if r["result"].get("sandbox")), None)
        if boxed is not None:
            paths += sandbox_figures(boxed, figs / "sandbox_frames.png", figs / "sandbox.gif")
        return paths
    paths = [
        cycles_figure(recs, figs / "cycles.png"),
        pca_figure(recs, figs / "pca_paths.png"),
        cycle_counts_figure(recs, figs / "cycle_counts.png"),
    ]
    pv = pi_vocab_figure(recs, figs / "pi_vocab.png")
    eq = _runs(run_dir, "equilibrium")
    p = equilibrium_figure(recs, eq, figs / "equilibrium.png", _runs(run_dir, "theory"))
    return paths + [x for x in (pv, p) if x]
