"""Figures of the sparse-pattern run, drawn from its saved point files only (``points/*/*.json``;
docs/sparse.md): t* histograms and loss curves (the ln 2 plateau), the solve-rate heat map over (S, s), heads vs
head size, Mixer vs transformer, and the Bayesian threshold P_c(S, s) next to the trained models' difficulty."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ...figstyle import pyplot, save
from ...files import load_results
from .summary import bayes_summary, group_seeds


def _recs(run_dir, part):
    recs = load_results(Path(run_dir) / "points" / part)
    return group_seeds(recs) if part not in ("bayes", "theory") else recs


def _stats(res):
    ts = [t for t in res["t_star"] if t is not None]
    return len(ts) / len(res["t_star"]), (float(np.median(ts)) if ts else np.nan), ts


def emergence_figure(run_dir, out: Path) -> Path | None:
    """Per (S, s): t* histogram over seeds (top) and every seed's loss against the step with ln 2 (bottom)."""
    recs = sorted(_recs(run_dir, "grid"), key=lambda r: (r["point"]["train"]["S"], r["point"]["train"]["s"]))
    if not recs:
        return None
    plt = pyplot()
    n = len(recs)
    fig, axes = plt.subplots(2, n, figsize=(2.6 * n, 5.0), squeeze=False)
    for j, r in enumerate(recs):
        tr, res = r["point"]["train"], r["result"]
        rate, med, ts = _stats(res)
        ax = axes[0, j]
        if ts:
            ax.hist(ts, bins=np.linspace(0, tr["steps"], 21), color="C0")
        ax.set_title(f"S={tr['S']}, s={tr['s']}: {len(ts)}/{len(res['t_star'])}", fontsize=9)
        ax.set_xlabel("t*", fontsize=8)
        ax = axes[1, j]
        h = res["history"]
        for loss in h["loss"]:
            ax.plot(h["step"], loss, lw=0.6, alpha=0.7)
        ax.axhline(np.log(2), color="k", ls="--", lw=0.8)
        ax.set_ylim(0, 0.8)
        ax.set_xlabel("step", fontsize=8)
    axes[0, 0].set_ylabel("seeds")
    axes[1, 0].set_ylabel("loss (2nd half); -- ln 2")
    return save(fig, out)


def heatmap_figure(run_dir, out: Path) -> Path | None:
    recs = _recs(run_dir, "grid")
    if not recs:
        return None
    plt = pyplot()
    Ss = sorted({r["point"]["train"]["S"] for r in recs})
    ss = sorted({r["point"]["train"]["s"] for r in recs})
    rate = np.full((len(Ss), len(ss)), np.nan)
    med = np.full_like(rate, np.nan)
    for r in recs:
        i, j = Ss.index(r["point"]["train"]["S"]), ss.index(r["point"]["train"]["s"])
        rate[i, j], med[i, j], _ = _stats(r["result"])
    fig, ax = plt.subplots(figsize=(1.2 * len(ss) + 2, 0.8 * len(Ss) + 1.5))
    im = ax.imshow(rate, vmin=0, vmax=1, cmap="viridis", origin="lower", aspect="auto")
    for i in range(len(Ss)):
        for j in range(len(ss)):
            if np.isfinite(rate[i, j]):
                txt = f"{rate[i, j]:.2f}" + ("" if np.isnan(med[i, j]) else f"\nt*~{med[i, j]:.0f}")
                ax.text(j, i, txt, ha="center", va="center", fontsize=8, color="w" if rate[i, j] < 0.6 else "k")
    ax.set_xticks(range(len(ss)), ss)
    ax.set_yticks(range(len(Ss)), Ss)
    ax.set_xlabel("s (ones per row)")
    ax.set_ylabel("S (context half)")
    ax.set_title("solve rate (median t*)")
    fig.colorbar(im, ax=ax)
    return save(fig, out)


def _curve(ax, recs, x_of, label):
    rows = sorted((x_of(r["point"]["train"]), *_stats(r["result"])[:2]) for r in recs)
    if not rows:
        return
    x, rate, med = map(np.asarray, zip(*rows))
    ax[0].plot(x, rate, "-o", label=label)
    ax[1].plot(x, med, "-o", label=label)


def heads_figure(run_dir, out: Path) -> Path | None:
    h, hd = _recs(run_dir, "heads"), _recs(run_dir, "head_dim")
    if not (h or hd):
        return None
    plt = pyplot()
    fig, axes = plt.subplots(2, 2, figsize=(8, 5.5), squeeze=False)
    _curve(axes[:, 0], h, lambda t: t["heads"], "H at fixed width")
    _curve(axes[:, 1], hd, lambda t: t["head_dim"], "head size at fixed H")
    axes[0, 0].set_title("heads H (width fixed)")
    axes[0, 1].set_title("head size (H fixed)")
    for ax in axes[1]:
        ax.set_xscale("log", base=2)
        ax.set_ylabel("median t*")
    for ax in axes[0]:
        ax.set_xscale("log", base=2)
        ax.set_ylabel("solve rate")
        ax.set_ylim(-0.05, 1.05)
    return save(fig, out)


def mixer_figure(run_dir, out: Path) -> Path | None:
    recs = _recs(run_dir, "mixer")
    if not recs:
        return None
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(8, 3.2))
    for model in ("transformer", "mixer"):
        _curve(axes, [r for r in recs if r["point"]["train"]["model"] == model], lambda t: t["s"], model)
    axes[0].set_ylabel("solve rate")
    axes[0].set_ylim(-0.05, 1.05)
    axes[1].set_ylabel("median t* (solved seeds)")
    for ax in axes:
        ax.set_xlabel("s")
        ax.legend(fontsize=8)
    S = recs[0]["point"]["train"]["S"]
    fig.suptitle(f"transformer vs causal MLP-Mixer, S = {S}")
    return save(fig, out)


def bayes_figure(run_dir, out: Path) -> Path | None:
    """Left: the posterior mass on the support against P per (S, s) (cold and hot starts). Right: P_c(S, s)
    (where the mean mass crosses 1/2) against s, next to the trained models' median t* on the same (S, s)."""
    recs = _recs(run_dir, "bayes")
    if not recs:
        return None
    summ = bayes_summary(recs)
    theory = {(r["point"]["S"], r["point"]["s"]): r["result"] for r in _recs(run_dir, "theory")}
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.6))
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
    axes[0].set_xscale("log")
    axes[0].set_xlabel("P")
    axes[0].set_ylabel("excess mass on the support\n(M - s/S) / (1 - s/S)")
    axes[0].set_title("NUTS (o cold, open s hot), theory (lines)", fontsize=8)
    axes[0].axhline(0.5, color="k", lw=0.5)
    axes[0].legend(fontsize=6, ncol=2)
    train = {
        (r["point"]["train"]["S"], r["point"]["train"]["s"]): _stats(r["result"])[1] for r in _recs(run_dir, "grid")
    }
    ax2 = axes[1].twinx()
    for j, S in enumerate(sorted({e["S"] for e in summ.values()})):
        es = sorted((e["s"], e["P_c"]) for e in summ.values() if e["S"] == S)
        axes[1].plot(
            [s for s, _ in es], [np.nan if p is None else p for _, p in es], "-o", color=f"C{j}", label=f"P_c, S={S}"
        )
        tp = sorted((s, th["P_c"]) for (S2, s), th in theory.items() if S2 == S and th["P_c"])
        if tp:
            axes[1].plot(*zip(*tp), "--", color=f"C{j}", lw=1)
        tr = sorted((s, t) for (S2, s), t in train.items() if S2 == S)
        if tr:
            ax2.plot(*zip(*tr), ":x", color=f"C{j}", label=f"median t*, S={S}")
    axes[1].set_xlabel("s")
    axes[1].set_ylabel("Bayesian P_c (excess = 1/2)\nNUTS o-, theory --")
    axes[1].set_yscale("log")
    ax2.set_ylabel("trained median t* (dotted)")
    axes[1].legend(fontsize=7, loc="upper left")
    if ax2.get_lines():
        ax2.legend(fontsize=7, loc="lower right")
    return save(fig, out)


def draw_all(run_dir) -> list:
    """Every figure whose points exist, under run_dir/figures."""
    figs = Path(run_dir) / "figures"
    figs.mkdir(parents=True, exist_ok=True)
    made = [
        emergence_figure(run_dir, figs / "sparse_emergence.png"),
        heatmap_figure(run_dir, figs / "sparse_heatmap.png"),
        heads_figure(run_dir, figs / "sparse_heads.png"),
        mixer_figure(run_dir, figs / "sparse_mixer.png"),
        bayes_figure(run_dir, figs / "sparse_bayes.png"),
    ]
    return [str(p) for p in made if p is not None]
