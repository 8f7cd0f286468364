"""Figures of the training-dynamics laboratory, drawn from saved point files only (docs/results/dynlab.md), through
:mod:`bayesattn.figstyle` (sizes, legends placed clear of the data, the figure check).

Clustering head: loss with the detected spikes and the pre-norm / curvature traces; attention mass on the
first k positions and class separation; the visual sandbox (frames and a GIF). Focus-dilution: entropy
curves with the detected stages shaded; PCA paths of the embeddings; cycle counts per setting; the training
entropy beside the posterior-mean entropy of the copy task against P. Diverged runs are never drawn as
curves: they are listed (seed and step) in the panel's title, or in the panel when nothing else is left to draw.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np

from ...figstyle import LABEL_GID, SEM, empty_panel, integer_ticks, legend, log_x_axis, pyplot, save, subplots
from ...files import load_results
from .figures_langevin import langevin_figure
from .figures_spikes import spike_windows_figure
from .figures_stages import STAGE_COLORS, threshold_figure, timelines_figure
from .summary import group_runs

WRAP = 44  # characters per title line in a 4.6-inch panel
MAX_COLS = 4  # settings side by side; more go on the next row (not a strip too wide to read)
MAX_LEGEND = 6  # entries a panel's own legend holds; more go into one legend below the panels


def _runs(run_dir, part="train"):
    recs = load_results(Path(run_dir) / "points" / part)
    return group_runs(recs) if part == "train" else recs


def _wrap(text: str, width: int = WRAP) -> str:
    return "\n".join(textwrap.fill(line, width) for line in text.split("\n"))


def _diverged(runs, key) -> str:
    """'diverged (not drawn): seed s at t, ...', or '' when no run diverged."""
    bad = [f"seed {r['seed']} at {r[key]}" for r in runs if r[key] is not None]
    return "diverged (not drawn): " + ", ".join(bad) if bad else ""


def _title(ax, text: str, runs, key) -> None:
    """``text`` as the panel's title, the diverged seeds (if any) on the lines below it."""
    div = _diverged(runs, key)
    ax.set_title(_wrap(text + ("\n" + div if div else "")))


def _all_diverged(col, title: str, runs, key) -> None:
    """A column of panels none of whose runs can be drawn: the first says which seeds diverged where."""
    col[0].set_title(_wrap(title))
    empty_panel(col[0], _diverged(runs, key) or "no run to draw")
    for ax in col[1:]:
        empty_panel(ax, "no run to draw")


# ------------------------------------------------------------------------------------------ clustering
def spikes_figure(recs, out: Path) -> Path:
    """Per setting a column: the loss of the seed with the most spikes (the other seeds in grey), its pre-norm
    norms and its curvature, spikes marked; one legend below the panels (their data fill every corner)."""
    groups = [(r["point"]["label"], r["result"]["runs"]) for r in recs]
    fig, axes = subplots(3, len(groups), panel=(4.6, 2.7), sharex="col")
    handles: dict = {}
    for j, (lab, runs) in enumerate(groups):
        ok = [r for r in runs if r["diverged_at"] is None]
        if not ok:
            _all_diverged(axes[:, j], f"{lab}: train loss", runs, "diverged_at")
            continue
        best = max(ok, key=lambda r: (len(r["spikes"]), r["final_test_acc"]))
        ep = np.arange(len(best["curves"]["loss"]))
        sp = [s["epoch"] for s in best["spikes"]]
        for r in ok:
            if r is not best:
                axes[0, j].semilogy(r["curves"]["loss"], color="0.85", lw=0.5, label="train loss, the other seeds")
        axes[0, j].semilogy(ep, best["curves"]["loss"], color="k", lw=0.8, label="train loss, the seed shown")
        axes[0, j].semilogy(sp, np.asarray(best["curves"]["loss"])[sp], "rv", ms=5, label="detected spikes")
        _title(axes[0, j], f"{lab}\nseed {best['seed']}: {len(sp)} spikes", runs, "diverged_at")
        axes[0, j].set_ylabel("cross-entropy")
        axes[1, j].semilogy(ep, best["curves"]["z_norm_min"], lw=0.8, label="min ||z|| (pooled, before norm)")
        axes[1, j].semilogy(ep, best["curves"]["z_norm_q05"], lw=0.8, label="5% quantile ||z||")
        axes[1, j].semilogy(sp, np.asarray(best["curves"]["z_norm_min"])[sp], "rv", ms=5)
        axes[1, j].set_ylabel("pre-norm vector norm")
        c = best["curvature"]
        lam = np.abs(np.asarray(c["lambda_max"], dtype=float))
        axes[2, j].semilogy(c["epoch"], lam, ".-", lw=0.6, ms=3, label="largest Hessian eigenvalue (Lanczos)")
        at = [(s["epoch"], s["lambda_max"]) for s in best["spikes"] if s["lambda_max"] is not None]
        if at:
            axes[2, j].semilogy(*zip(*at), "rv", ms=5)
        axes[2, j].set(xlabel="epoch", ylabel="|lambda_max|")
        for ax in axes[:, j]:
            for h, name in zip(*ax.get_legend_handles_labels()):
                handles.setdefault(name, h)
    _fig_legend(fig, handles, 3.0)
    return save(fig, out)


def heads_figure(recs, out: Path) -> Path:
    from matplotlib.lines import Line2D

    groups = [(r["point"]["label"], r["result"]["runs"], r["point"]["config"]) for r in recs]
    fig, axes = subplots(3, len(groups), panel=(4.6, 2.7), sharex="col")
    for j, (lab, runs, cfg) in enumerate(groups):
        n_ok = sum(r["success"] for r in runs)
        title = f"{lab}: {n_ok}/{len(runs)} succeed (green)"
        if all(r["diverged_at"] is not None for r in runs):
            _all_diverged(axes[:, j], title, runs, "diverged_at")
            continue
        for r in runs:
            if r["diverged_at"] is not None:
                continue
            col = "tab:green" if r["success"] else "tab:red"
            axes[0, j].plot(r["curves"]["mass_first_k"], color=col, lw=0.6, alpha=0.7)
            axes[1, j].semilogy(np.maximum(r["curves"]["separation_sum"], 1e-6), color=col, lw=0.6, alpha=0.7)
            axes[2, j].semilogy(np.maximum(r["curves"]["separation_out"], 1e-6), color=col, lw=0.6, alpha=0.7)
        axes[0, j].axhline(cfg["k"] / cfg["seq_len"], color="k", ls=":", lw=0.8)
        _title(axes[0, j], title, runs, "diverged_at")
        axes[0, j].set_ylabel(f"attention mass\non the first {cfg['k']}")
        axes[1, j].set_ylabel("separation of z\nby first-k sum")
        axes[2, j].set(xlabel="epoch", ylabel="separation of MLP\noutput by class")
        handles = [
            Line2D([], [], color="tab:green", lw=1, label="seed that succeeds"),
            Line2D([], [], color="tab:red", lw=1, label="seed that fails"),
            Line2D([], [], color="k", ls=":", lw=0.8, label=f"uniform: {cfg['k']}/{cfg['seq_len']}"),
        ]
        legend(axes[0, j], handles=handles)
    return save(fig, out)


def _sandbox_lim(sb, p: int) -> float:
    """One axis range for every frame (outputs, pre-norm vectors and the p class tokens' embeddings of all frames),
    so that the frames of the sandbox compare by eye."""
    vals = [np.abs(np.asarray(sb[k][i], float)).ravel() for k in ("z", "out") for i in range(len(sb["epochs"]))]
    vals += [np.abs(np.asarray(sb["tok"][i], float)[:p]).ravel() for i in range(len(sb["epochs"]))]
    return max(1.0, float(np.max(np.concatenate(vals)))) * 1.1


def _sandbox_axes(ax, sb, i):
    z, o, tok = np.asarray(sb["z"][i]), np.asarray(sb["out"][i]), np.asarray(sb["tok"][i])
    y = np.asarray(sb["labels"])
    ax.cla()
    ax.scatter(o[:, 0], o[:, 1], c=y, cmap="coolwarm", s=6, alpha=0.6, marker="o")
    ax.scatter(z[:, 0], z[:, 1], c=y, cmap="coolwarm", s=4, alpha=0.3, marker="x")
    p = int(y.max()) + 1 if y.size else tok.shape[0]
    lim = _sandbox_lim(sb, p)
    for v, t in enumerate(tok):
        name = str(v)
        if v >= p:  # an embedding with no class (the paper's grid has one): its direction, scaled into view
            t, name = t / max(np.linalg.norm(t), 1e-12) * 0.9 * lim, f"{v} (dir.)"
        ax.annotate("", t, (0, 0), arrowprops={"arrowstyle": "->", "color": "k"})
        # the token's name at its arrow's tip, on the side away from the origin, turned inwards near an edge
        ha = ("left" if t[0] >= 0 else "right") if abs(t[0]) < 0.5 * lim else ("right" if t[0] > 0 else "left")
        va = ("bottom" if t[1] >= 0 else "top") if abs(t[1]) < 0.5 * lim else ("top" if t[1] > 0 else "bottom")
        ax.text(*t, name, fontsize=8, ha=ha, va=va, gid=LABEL_GID)
    ax.set(xlim=(-lim, lim), ylim=(-lim, lim), title=f"epoch {sb['epochs'][i]}")
    ax.set_aspect("equal")


def sandbox_figures(rec, out_png: Path, out_gif: Path) -> list[Path]:
    sb = rec["result"]["sandbox"]
    if sb is None:
        return []
    plt = pyplot()
    n = len(sb["epochs"])
    pick = np.unique(np.linspace(0, n - 1, 6).astype(int))
    # square panels narrower than their slot: the equal aspect then shrinks them in height only, which the
    # constrained layout's first pass already leaves room for (a 3.0 x 3.2 slot cut the tick labels off)
    fig, axes = subplots(1, len(pick), panel=(3.0, 3.6))
    for ax, i in zip(axes[0], pick):
        _sandbox_axes(ax, sb, i)
    fig.suptitle(
        _wrap(
            f"{rec['point']['label']}, seed {rec['result']['sandbox_seed']}: token embeddings (arrows), "
            "pooled z (x) and MLP output (o), colour = class",
            int(fig.get_figwidth() * 13),
        )
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


def _stage_handles() -> list:
    """Legend entries of the shading :func:`_shade` draws."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    return [
        Patch(color=STAGE_COLORS["condensation"], alpha=0.5, lw=0, label="stage: rank-one condensation"),
        Patch(color=STAGE_COLORS["focus"], alpha=0.25, lw=0, label="stage: focus"),
        Patch(color=STAGE_COLORS["dilution"], alpha=0.25, lw=0, label="stage: dilution"),
        Line2D([], [], color="k", ls="--", lw=0.7, label="restart"),
    ]


def _fig_legend(fig, handles: dict, entry_in: float = 2.6) -> None:
    """One legend below the panels (every panel draws the same kinds of line, and their data fill the corners)."""
    if handles:
        ncol = max(1, min(len(handles), int(fig.get_figwidth() // entry_in)))
        fig.legend(list(handles.values()), list(handles), loc="outside lower center", ncol=ncol)


def _settings_grid(n: int, rows: int, panel):
    """(fig, blocks): one block of ``rows`` panels stacked per setting, at most :data:`MAX_COLS` blocks a row;
    the panels of a block share their x axis (tick labels on the lowest only); unused slots hidden."""
    ncol = min(n, MAX_COLS)
    nblk = -(-n // ncol)
    fig, axes = subplots(rows * nblk, ncol, panel=panel)
    blocks = []
    for i in range(nblk * ncol):
        b, c = divmod(i, ncol)
        col = list(axes[rows * b : rows * (b + 1), c])
        if i >= n:
            for ax in col:
                ax.set_visible(False)
            continue
        for ax in col[:-1]:
            ax.sharex(col[-1])
            ax.tick_params(labelbottom=False)
        blocks.append(col)
    return fig, blocks


def cycles_figure(recs, out: Path) -> Path:
    fig, blocks = _settings_grid(len(recs), 2, (4.6, 3.2))
    handles: dict = {}
    for col, r in zip(blocks, recs):
        step = np.asarray(r["result"]["step"])
        runs = r["result"]["runs"]
        ok = [x for x in runs if x["diverged_at_step"] is None]
        lab = r["point"]["label"]
        if not ok:
            _all_diverged(col, lab, runs, "diverged_at_step")
            continue
        run = ok[0]
        c = run["curves"]
        top, bottom = col
        _shade(top, run, step)
        top.plot(step, c["value_entropy"], "k", lw=1, label="entropy of mass over token values")
        ax2 = top.twinx()
        ax2.plot(step, c["rank_E"], color="tab:purple", lw=0.8, label="effective rank of E (right axis)")
        ax2.set_ylabel("effective rank of E", color="tab:purple")
        _title(top, f"{lab}\nseed {run['seed']}: {run['cycles']} cycles", runs, "diverged_at_step")
        top.set_ylabel("value entropy (nats)")
        _shade(bottom, run, step)
        bottom.plot(step, c["entropy"], "k", lw=1, ls="-.", label="positional entropy, all queries")
        bottom.plot(step, c["entropy_frequent"], lw=0.8, label="positional entropy, frequent queries")
        bottom.plot(step, c["entropy_rare"], lw=0.8, label="positional entropy, rare queries")
        mass = np.asarray(c["mass"])
        ax3 = bottom.twinx()
        ax3.plot(step, mass[:, 0], color="tab:red", lw=0.8, ls=":", label="mass on token 0 (right axis)")
        ax3.set_ylabel("mass on the frequent token", color="tab:red")
        bottom.set(xlabel="step", ylabel="attention entropy (nats)")
        for ax in (top, ax2, bottom, ax3):
            for h, name in zip(*ax.get_legend_handles_labels()):
                handles.setdefault(name, h)
    if handles:
        handles.update({h.get_label(): h for h in _stage_handles()})
    _fig_legend(fig, handles, 2.9)
    return save(fig, out)


def pca_figure(recs, out: Path) -> Path:
    fig, blocks = _settings_grid(len(recs), 1, (4.2, 3.8))
    for (ax,), r in zip(blocks, recs):
        runs = r["result"]["runs"]
        ok = [x for x in runs if x["diverged_at_step"] is None]
        lab = r["point"]["label"]
        if not ok:
            _all_diverged([ax], lab, runs, "diverged_at_step")
            continue
        co = np.asarray(ok[0]["pca"]["coords"])  # (R, V, 2)
        for v in range(co.shape[1]):
            ax.plot(co[:, v, 0], co[:, v, 1], lw=0.8, label=f"token {v} (pi={r['result']['pi'][v]:.2f})")
            ax.plot(co[-1, v, 0], co[-1, v, 1], "o", ms=4, color=ax.lines[-1].get_color())
        ev = ok[0]["pca"]["explained"]
        _title(ax, f"{lab}\nseed {ok[0]['seed']}, o: the last step", runs, "diverged_at_step")
        ax.set(xlabel=f"PC1 ({ev[0]:.0%})", ylabel=f"PC2 ({ev[1]:.0%})")
        ax.locator_params(axis="x", nbins=4)  # room for long labels of small coordinates ('-0.0015')
        legend(ax)
    return save(fig, out)


def equilibrium_figure(recs, eq, out: Path, theory=()) -> Path | None:
    if not eq:
        return None
    fig, axes = subplots(1, 2, panel=(5.0, 3.8))
    a, b = axes[0]
    for i, r in enumerate(recs):
        ok = [x for x in r["result"]["runs"] if x["diverged_at_step"] is None]
        pi, opt = r["result"]["pi"], r["point"]["config"].get("optimizer", "gd")
        label = f"V={len(pi)}, pi_0={pi[0]:.3g}, {opt}"  # short (V, the frequent token's pi): a dozen settings fit
        for x in ok[:1]:  # past the colour cycle's 10 colours, dashed
            a.plot(r["result"]["step"], x["curves"]["entropy"], lw=0.9, ls="-" if i < 10 else "--", label=label)
    a.set_title("training (focus-dilution), the first seed drawn")
    if a.lines:
        a.set(xlabel="training step (GD or Adam)", ylabel="attention entropy over positions (nats)")
        ends = [r["result"]["step"][-1] for r in recs]
        if max(ends) >= 5 * min(ends):  # runs of very different lengths (Adam's 5000 steps beside GD's 50000)
            a.set_xscale("symlog", linthresh=max(min(ends) / 50, 1))
            a.set_xlim(left=0)
        if len(a.lines) > MAX_LEGEND:
            _fig_legend(fig, dict(zip(*reversed(a.get_legend_handles_labels()))))
        else:
            legend(a)
    else:
        empty_panel(a, "no training run in this folder")
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
            capsize=2,
            label=f"T={T}: NUTS posterior mean",
        )
        if T in th:
            b.plot(th[T]["P"], th[T]["posterior"], "-", color=col, lw=1, label=f"T={T}: theory (order parameters)")
        b.axhline(pts[0]["result"]["uniform_entropy"], color=col, ls=":", lw=0.8, label=f"T={T}: log T (uniform)")
    log_x_axis(b, [e["point"]["P"] for e in eq])
    b.set(
        xlabel="P (training sequences)",
        ylabel="posterior-mean attention entropy (nats)",
        title="equilibrium: copy-task posterior",
    )
    legend(b, title=_wrap(f"error bars: {SEM} (Monte Carlo: sd / sqrt(ESS))", 34))
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
    fig, axes = subplots(3, len(cols), panel=(4.6, 2.8))
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
            axes[0, j].scatter(x + jit, c, s=10, color="0.4", label="one seed" if x == xs[0] else None)
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
        integer_ticks(axes[0, j].yaxis)
        legend(axes[0, j])
        axes[1, j].set(ylabel="first focus starts (step)")
        axes[2, j].set(xlabel=xlabel, ylabel="first-cycle stage\nlength (steps)")
        legend(axes[2, j])
        for ax in axes[:, j]:
            if all(float(x).is_integer() for x in xs):  # V: an integer axis
                integer_ticks(ax.xaxis)
    return save(fig, out)


def cycle_counts_figure(recs, out: Path) -> Path:
    """Cycles of every seed per setting (one row each, the setting's label on the left) and their mean."""
    labels = []
    for r in recs:
        lab = textwrap.fill(r["point"]["label"], 36)
        n_div = sum(x["diverged_at_step"] is not None for x in r["result"]["runs"])
        labels.append(lab + (f"\n({n_div} diverged, not drawn)" if n_div else ""))
    counts = [[x["cycles"] for x in r["result"]["runs"] if x["diverged_at_step"] is None] for r in recs]
    rows = sum(max(0.4, 0.16 * (lab.count("\n") + 1) + 0.12) for lab in labels)
    fig, axes = subplots(1, 1, panel=(4.6, rows + 1.2))
    ax = axes[0, 0]
    for i, c in enumerate(counts):
        ax.scatter(c, np.full(len(c), i) + np.linspace(-0.15, 0.15, len(c)), s=14, color="C0", label="one seed")
        if c:
            ax.plot([np.mean(c)] * 2, [i - 0.3, i + 0.3], "k", lw=1.5, label="mean over the seeds")
    lo, hi = min((min(c) for c in counts if c), default=0), max((max(c) for c in counts if c), default=0)
    ax.set_xlim(lo - 0.6, max(hi, lo + 1) + 0.6)  # whole cycles, at least two ticks
    ax.set_yticks(range(len(labels)), labels)
    ax.set_ylim(len(labels) - 0.5, -0.5)  # the first setting on top
    ax.set_xlabel("focus-dilution cycles per seed")
    integer_ticks(ax.xaxis)
    h, names = ax.get_legend_handles_labels()
    first = {n: x for x, n in zip(h, names)}
    legend(ax, list(first.values()), list(first))
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
        windows = spike_windows_figure(recs, figs / "spike_windows.png")
        paths += [windows] if windows else []
        boxed = next((r for r in recs if r["result"].get("sandbox")), None)
        if boxed is not None:
            paths += sandbox_figures(boxed, figs / "sandbox_frames.png", figs / "sandbox.gif")
        return paths
    paths = [
        cycles_figure(recs, figs / "cycles.png"),
        pca_figure(recs, figs / "pca_paths.png"),
        cycle_counts_figure(recs, figs / "cycle_counts.png"),
        threshold_figure(recs, figs / "cycle_threshold.png"),
        timelines_figure(recs, figs / "stage_timelines.png"),
    ]
    pv = pi_vocab_figure(recs, figs / "pi_vocab.png")
    eq = _runs(run_dir, "equilibrium")
    p = equilibrium_figure(recs, eq, figs / "equilibrium.png", _runs(run_dir, "theory"))
    lg = langevin_figure(_runs(run_dir, "langevin"), eq, figs / "langevin.png")
    return paths + [x for x in (pv, p, lg) if x]
