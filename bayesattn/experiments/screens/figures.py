"""Figures of the circuit screens (docs/results/screens.md), drawn from saved files only through
:mod:`bayesattn.figstyle` (sizes, legends placed clear of the data, the figure check): head maps (layer x head, one
panel per class, log10 selectivity) from a screen's JSON records, and the trajectory figure from a trajectory
run's summary.json."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np

from ...diagnostics.screens import CIRCUIT_THRESHOLD, CLASSES, THRESHOLD
from ...figstyle import SD, legend, pyplot, save, subplots
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


def _index_ticks(*axes) -> None:
    """Integer ticks on each of ``axes`` (layer and head indices), at least one however few the cells."""
    from matplotlib.ticker import MaxNLocator, NullLocator

    for axis in axes:
        axis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))
        axis.set_minor_locator(NullLocator())


def _suptitle(fig, text: str) -> None:
    """A figure title wrapped to the figure's width."""
    if text:
        fig.suptitle(textwrap.fill(text, int(fig.get_figwidth() * 12)))


def head_maps(records: list, path, title: str = "") -> Path:
    """One panel per class: log10 selectivity of every head (layers down, heads across); circles mark heads at or
    above 30x, crosses induction-circuit heads (50x); a last panel shows the PR."""
    from matplotlib.lines import Line2D

    if records and "step" in records[0]:
        last = max(r["step"] for r in records)
        records = [r for r in records if r["step"] == last]
    fig, axes = subplots(1, len(CLASSES) + 1, panel=(2.3, 3.6), sharey=True)
    axes = axes[0]
    # one colour scale for every class, up to the strongest head (a fixed top would saturate a 49 435x head)
    top = max(4.0, float(np.ceil(max(np.log10(max(np.max(_grid(records, "selectivity", c)), 1.0)) for c in CLASSES))))
    for ax, c in zip(axes, CLASSES):
        g = np.log10(np.maximum(_grid(records, "selectivity", c), 1e-3))
        im = ax.imshow(g, aspect="auto", cmap="magma", vmin=-1, vmax=top, interpolation="nearest")
        yy, xx = np.nonzero(g >= np.log10(THRESHOLD))
        ax.plot(xx, yy, "o", ms=4, mfc="none", mec="cyan", mew=0.8)
        if c == "induction":
            yy, xx = np.nonzero(g >= np.log10(CIRCUIT_THRESHOLD))
            ax.plot(xx, yy, "x", ms=4, color="lime")
        ax.set_title(f"{c}\n{int(np.sum(g >= np.log10(THRESHOLD)))} heads >= {THRESHOLD:.0f}x")
        ax.set_xlabel("head")
        _index_ticks(ax.xaxis, ax.yaxis)
    axes[0].set_ylabel("layer")
    fig.colorbar(im, ax=axes[len(CLASSES) - 1], fraction=0.08, label="log10 selectivity")
    pr = _grid(records, "pr")
    im2 = axes[-1].imshow(pr, aspect="auto", cmap="viridis", interpolation="nearest")
    axes[-1].set_title("PR")
    axes[-1].set_xlabel("head")
    _index_ticks(axes[-1].xaxis)
    fig.colorbar(im2, ax=axes[-1], fraction=0.08, label="PR")
    marks = [
        Line2D([], [], ls="none", marker="o", ms=5, mfc="none", mec="cyan", label=f"head at or above {THRESHOLD:.0f}x"),
        Line2D(
            [], [], ls="none", marker="x", ms=5, color="lime", label=f"induction circuit (>= {CIRCUIT_THRESHOLD:.0f}x)"
        ),
    ]
    fig.legend(handles=marks, loc="outside lower center", ncol=2)
    _suptitle(fig, title)
    return save(fig, path)


def trajectory_figure(out_dir, path=None) -> Path:
    """Four panels from summary.json and points/: (a) training loss and the copy losses of the probe, checkpoints
    marked; (b) selectivity over checkpoints of the layer-0 heads (previous token) and the last layer's heads
    (induction); (c) each head's PR; (d) the BOS-head fraction per layer."""
    from .trajectory import summarize

    out = Path(out_dir)
    res = first_run(out)["result"]
    pts = sorted(res["checkpoints"], key=lambda p: p["step"])
    s = {"history": res["history"], **summarize(pts, res["history"], res["record_every"])}
    steps = np.array([p["step"] for p in pts])
    x = steps  # on a symlog axis (linear below step 1): step 0 is drawn at 0, not moved to 0.5
    sel = {c: np.array([p["repeated_pair"]["selectivity"][c] for p in pts]) for c in CLASSES}
    pr = np.array([p["repeated_pair"]["pr"] for p in pts])
    K, L, H = pr.shape
    fig, ax = subplots(2, 2, panel=(4.8, 3.4))
    ax = ax.ravel()
    h = s["history"]
    ax[0].plot(h["step"], h["loss"], "k-", lw=1, label="training loss (induction rows)")
    ax[0].plot(x, [c["first_copy"] for c in s["copy_loss"]], "o--", ms=3, color="tab:gray", label="probe: 1st copy")
    ax[0].plot(x, [c["second_copy"] for c in s["copy_loss"]], "o-", ms=3, color="tab:red", label="probe: 2nd copy")
    ax[0].set(xlabel="step", ylabel="loss (nats)", title="(a) the induction bump")
    legend(ax[0])
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
    ax[1].axhline(THRESHOLD, color="k", lw=0.6, ls=":", label=f"{THRESHOLD:.0f}x")
    ax[1].set(
        yscale="log",
        xlabel="step",
        ylabel="selectivity",
        title=f"(b) prev-token (L0, solid),\ninduction (L{L - 1}, dashed); colour = head",
    )
    legend(ax[1])
    for layer in range(L):
        for hd in range(H):
            ax[2].plot(
                x,
                pr[:, layer, hd],
                "-" if layer == 0 else "--",
                color=cols[hd],
                lw=1,
                label=f"head {hd}" if layer == 0 else None,
            )
    ax[2].set(xlabel="step", ylabel="PR", title="(c) PR per head (L0 solid, later dashed)")
    legend(ax[2])
    bos = np.array(s["bos_fraction"])
    for layer in range(L):
        ax[3].plot(x, bos[:, layer], "o-", ms=3, label=f"layer {layer}")
    ax[3].set(
        xlabel="step",
        ylabel="fraction of heads",
        ylim=(-0.05, 1.05),
        title=f"(d) BOS heads (>= {THRESHOLD:.0f}x) per layer",
    )
    legend(ax[3])
    for a in ax:  # log-like in steps, linear below 1 so that the init (step 0) keeps its place
        a.set_xscale("symlog", linthresh=1.0, linscale=0.5)
        a.set_xlim(left=0)
    path = Path(path) if path else out / "figures" / "trajectory.png"
    return save(fig, path)


def first_run(out) -> dict | None:
    """The trajectory's point record of the lowest seed (the config's ``seed``: the run the summary's
    "trajectory" describes), or None when the folder holds no trajectory point."""
    folder = Path(out) / "points" / "trajectory"
    runs = load_results(folder) if folder.is_dir() else []
    return min(runs, key=lambda r: r["point"]["seed"]) if runs else None


def _trajectory_figures(out: Path, path: Path) -> Path | None:
    return trajectory_figure(out, path) if first_run(out) else None


def _final_maps(out: Path, path: Path) -> Path | None:
    """The final checkpoint's head maps (repeated-pair probe) of the first seed's run."""
    run = first_run(out)
    if run is None:
        return None
    res = run["result"]
    p = max(res["checkpoints"], key=lambda c: c["step"])["repeated_pair"]
    L, H = np.array(p["pr"]).shape
    recs = [
        {"layer": l, "head": h, "selectivity": {c: p["selectivity"][c][l][h] for c in CLASSES}, "pr": p["pr"][l][h]}
        for l in range(L)
        for h in range(H)
    ]
    return head_maps(recs, path, "final checkpoint, repeated-pair probe")


def _model_maps(out: Path, path: Path) -> Path | None:
    """The pretrained models' head maps (one file: the model point of a run)."""
    folder = Path(out) / "points" / "model"
    made = None
    for r in load_results(folder) if folder.is_dir() else []:
        res = r["result"]
        label = " ".join(m["name"] for m in res["models"])
        made = head_maps(res["records"], path, f"{label}: {res['probe']['kind']}, N={res['probe']['N']}")
    return made


def seeds_figure(out_dir, path=None) -> Path:
    """The trajectory's training seeds, from summary.json: (a) per seed, each final induction head's PR
    half-rise (open circle) joined to the step where its selectivity crosses 30x (filled), and the step from
    which the screen holds the final induction circuit (bar); (b) per seed, as fractions of training, the steps
    from which the screen holds its final induction heads (30x) and its circuit (50x), and from which the
    PR-integral ranking picks the heads, with their medians and 95% bootstrap intervals (a cross at 1: not
    within the run)."""
    from matplotlib.ticker import LogLocator, NullFormatter, ScalarFormatter

    out = Path(out_dir)
    st = read_json(out / "summary.json")["trajectory_seeds"]
    seeds = st["seeds"]
    fig, ax = subplots(1, 2, panel=(4.8, max(2.8, 0.6 + 0.28 * len(seeds))))
    ax = ax[0]
    for y, p in enumerate(seeds):
        for rise, cross in zip(p["pr_rise_steps"], p["crossing_steps"]):
            if rise is not None:
                ax[0].plot([rise, cross], [y, y], "-", color="tab:gray", lw=0.8)
                ax[0].plot(rise, y, "o", mfc="none", color="tab:blue", ms=5)
            ax[0].plot(cross, y, "o", color="tab:red", ms=4)
        if p["circuit_from_step"] is not None:
            ax[0].plot(p["circuit_from_step"], y, "|", color="k", ms=12, mew=1.5)
    ax[0].plot([], [], "o", mfc="none", color="tab:blue", label="PR half-rise")
    ax[0].plot([], [], "o", color="tab:red", label=f"selectivity {THRESHOLD:.0f}x")
    ax[0].plot([], [], "|", color="k", ms=10, mew=1.5, label=f"circuit ({CIRCUIT_THRESHOLD:.0f}x) held from")
    ax[0].set(xscale="log", xlabel="step", ylabel="seed", title="(a) each final induction head,\nper seed")
    ax[0].xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))  # 100, 200, 500: steps, not powers
    ax[0].xaxis.set_major_formatter(ScalarFormatter())
    ax[0].xaxis.set_minor_formatter(NullFormatter())
    ax[0].set_yticks(range(len(seeds)), [str(p["seed"]) for p in seeds])
    legend(ax[0], outside=True)
    columns = [
        ("class", f"heads at {THRESHOLD:.0f}x\nheld", "tab:red"),
        ("circuit", f"circuit ({CIRCUIT_THRESHOLD:.0f}x)\nheld", "k"),
        ("ranking", "PR ranking\npicks them", "tab:purple"),
    ]
    jitter = np.linspace(-0.15, 0.15, len(seeds))
    for x, (key, _, colour) in enumerate(columns):
        steps = np.array([np.nan if p[f"{key}_from_step"] is None else p[f"{key}_from_step"] for p in seeds], float)
        held = ~np.isnan(steps)
        ax[1].plot(x + jitter[held], steps[held] / st["steps"], "o", color=colour, alpha=0.6, ms=4)
        ax[1].plot(x + jitter[~held], np.ones((~held).sum()), "x", color=colour, alpha=0.6, ms=4)
        m = st[f"{key}_fraction"]
        if m["median"] is not None and m["ci"] is not None:
            lo, hi = m["ci"]
            ax[1].errorbar(
                [x + 0.3],
                [m["median"]],
                yerr=[[m["median"] - lo], [hi - m["median"]]],
                fmt="s",
                color=colour,
                capsize=3,
            )
    ax[1].set_xticks(range(len(columns)), [c[1] for c in columns])
    ax[1].set(
        xlim=(-0.5, len(columns) - 0.4),
        ylim=(0, 1.05),
        ylabel="fraction of training",
        title="(b) from which step, per seed (x: not in\nthe run; square: median, 95% interval)",
    )
    r = st["pr_first"]
    rate = f"in {r['solved']} of the {r['seeds']} seeds that form one" if r["seeds"] else "(no seed forms one)"
    _suptitle(fig, f"{len(seeds)} training seeds: PR rises first for every final induction head {rate}")
    path = Path(path) if path else out / "figures" / "trajectory_seeds.png"
    return save(fig, path)


def _seeds(out: Path, path: Path) -> Path | None:
    summary = Path(out) / "summary.json"
    return seeds_figure(out, path) if summary.exists() and "trajectory_seeds" in read_json(summary) else None


def _bayes_lens(out: Path, path: Path) -> Path | None:
    summary = Path(out) / "summary.json"
    return bayes_lens_figure(out, path) if summary.exists() and "bayes" in read_json(summary) else None


# part -> [(figure file, drawer)]; the Bayesian lens reads the summary (no part of that name: drawn at the end)
PART_FIGURES = {
    "trajectory": [("trajectory.png", _trajectory_figures), ("head_maps_final.png", _final_maps)],
    "model": [("head_maps_model.png", _model_maps)],
    "summary": [("bayes_lens.png", _bayes_lens), ("trajectory_seeds.png", _seeds)],
}


def bayes_lens_figure(out_dir, path=None) -> Path:
    """The Bayesian copy head through the screens: (a) selectivity against P, (b) PR against P; NUTS and theory."""
    out = Path(out_dir)
    summary = read_json(out / "summary.json")
    s = {**summary["bayes"], "theory": summary.get("theory"), "config": summary["config"]["bayes"]}
    pts = s["points"]
    P = [p["P"] for p in pts]
    fig, ax = subplots(1, 2, panel=(4.8, 4.4))
    ax = ax[0]
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
    c = s["config"]
    ax[1].errorbar(
        P,
        [p["pr_mean"] for p in pts],
        yerr=[p["pr_sd"] for p in pts],
        fmt="o-",
        capsize=2,
        label=f"NUTS, {c['tokens']}, {c['probe_N']} probe sequences",
    )
    if "pr_limit_mean" in pts[0]:
        ax[1].plot(P, [p["pr_limit_mean"] for p in pts], "kx", ms=5, label="NUTS, many-sequence limit")
    if th:
        ax[1].plot(
            [p["P"] for p in th], [p["pr_limit_mean"] for p in th], "k-", lw=1, label="theory: mean over the row law"
        )
    ax[1].plot(P, [p["pr_gaussian_mean"] for p in pts], "s--", ms=3, label="gaussian tokens")
    for x, st, what in (
        (s["P_selectivity_threshold"], "k:", f"P where selectivity = {THRESHOLD:.0f}x"),
        (s["P_pr_half_rise"], "r:", "P of PR's half rise"),
    ):
        if x:
            for a in ax:
                a.axvline(x, color=st[0], ls=":", lw=0.8, label=what if a is ax[1] else None)
    ax[1].set(xscale="log", xlabel="P", ylabel="PR", title="(b) PR of the outputs at the last query")
    # one legend below both panels (inside, or beside each, it would cover the points or squeeze the panels)
    handles = {}
    for a, tag in zip(ax, ("(a)", "(b)")):
        for h, lab in zip(*a.get_legend_handles_labels()):
            handles.setdefault(f"{tag} {lab}", h)
    fig.legend(
        list(handles.values()),
        list(handles),
        loc="outside lower center",
        ncol=2,
        title=f"error bars: {SD} (over the posterior draws)",
    )
    _suptitle(
        fig,
        f"Bayesian copy head, T={c['T']}, d={c['d']}, sigma2={c['prior']['sigma2']} (NUTS, "
        f"{c['mcmc']['num_chains']}x{c['mcmc']['num_samples']} draws per P)",
    )
    path = Path(path) if path else out / "figures" / "bayes_lens.png"
    return save(fig, path)
