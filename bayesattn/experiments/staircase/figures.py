"""Figures of the staircase run, drawn from its saved files only (``points/*/*.json``; docs/results/staircase.md)
through :mod:`bayesattn.figstyle` (sizes, legends placed clear of the data, the figure check): the Bayesian staircase
(best head's lag mass vs P, per head and init), the training staircase (span mass of each head at the last query
and KL to the k-span teachers vs step) and the ODE (loss and attention vs time)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np

from ...figstyle import legend, log_x_axis, note, save, subplots
from ...files import load_results, read_json
from .bayes import LAG_OBSERVABLE, LAG_OBSERVABLE_TEXT
from .summary import paper_boundaries

COLS = 2  # panels a row in the Bayesian figure (a strip of four was too wide to read)


def _wrap(text: str, width: int) -> str:
    return "\n".join(textwrap.fill(line, width) for line in text.split("\n"))


# cold starts solid with filled circles on top; hot starts dashed, wider, with open squares beneath, so that where
# the two agree (no hysteresis) both stay visible
INIT_STYLE = {
    "cold": {"ls": "-", "marker": "o", "ms": 4, "lw": 1.2, "zorder": 3},
    "hot": {"ls": "--", "marker": "s", "ms": 7, "mfc": "none", "lw": 1.8, "zorder": 2},
}
THEORY_STYLE = {"lw": 5, "alpha": 0.3, "zorder": 1}


def _bayes_legend(fig, lags: list[str], inits: list[str], theory: bool) -> None:
    """One legend below the panels: the colour of each lag, then the line style of each start and the theory."""
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], color=f"C{j}", lw=2, label=lag) for j, lag in enumerate(lags)]
    handles += [Line2D([], [], color="0.3", **INIT_STYLE[i], label=f"NUTS, {i} start") for i in inits]
    if theory:
        handles.append(Line2D([], [], color="0.3", **THEORY_STYLE, label="theory (H heads)"))
    ncol = max(1, min(len(handles), int(fig.get_figwidth() // 1.6)))
    fig.legend(handles=handles, loc="outside lower center", ncol=ncol)


def bayes_figure(run_dir, out: Path) -> Path | None:
    """The posterior's lag masses against P, one panel per (attention, H, ratio), of the first data set (the
    config's seed: the summary's curves), with the H-head theory where it ran."""
    recs = load_results(Path(run_dir) / "points" / "mcmc")
    if not recs:
        return None
    first = min(r["point"]["seed"] for r in recs)
    recs = [r for r in recs if r["point"]["seed"] == first]
    theory = {
        (r["point"]["attention"], r["point"]["heads"], r["point"]["bayes"]["ratio"]): r["result"]
        for r in load_results(Path(run_dir) / "points" / "theory")
    }
    groups: dict = {}
    for r in recs:
        pt = r["point"]
        groups.setdefault((pt["attention"], pt["heads"], pt["bayes"]["ratio"]), []).append(r)
    ncol = min(len(groups), COLS)
    nrow = -(-len(groups) // ncol)
    fig, axes = subplots(nrow, ncol, panel=(4.8, 3.6))
    for ax in axes.flat[len(groups) :]:
        ax.set_visible(False)
    lag_of: dict = {}  # colour index -> lag
    inits_drawn: set = set()
    any_theory = False
    for ax, ((att, H, w), rs) in zip(axes.flat, sorted(groups.items())):
        obs = LAG_OBSERVABLE[att]
        lags = [k.split(":")[1] for k in rs[0]["result"]["means"] if k.startswith("mass_max:")]
        rs = [r for r in rs if all(f"{obs}:{lag}" in r["result"]["means"] for lag in lags)]
        Ps = []
        for j, lag in enumerate(lags):
            lag_of.setdefault(j, lag)
            for init in ("cold", "hot"):
                sel = sorted(
                    (r["point"]["P"], r["result"]["means"][f"{obs}:{lag}"]) for r in rs if r["point"]["init"] == init
                )
                if sel:
                    P, m = zip(*sel)
                    ax.plot(P, m, color=f"C{j}", **INIT_STYLE[init])
                    inits_drawn.add(init)
                    Ps += P
        th = theory.get((att, H, w))
        for j, lag in enumerate(lags if th else []):
            ax.plot(th["P"], th[obs][lag], color=f"C{j}", **THEORY_STYLE)
            any_theory = True
        log_x_axis(ax, Ps or [1, 10])
        ax.set_xlabel("P")
        ax.set_ylabel(f"{LAG_OBSERVABLE_TEXT[obs]} the lag")
        ws = ", ".join(f"{w**k:.2g}" for k in range(H))
        ax.set_title(_wrap(f"{att}, H = {H}, T = {rs[0]['point']['bayes']['T']}, w = ({ws})", 46))
    _bayes_legend(
        fig, [lag_of[j] for j in sorted(lag_of)], [i for i in ("cold", "hot") if i in inits_drawn], any_theory
    )
    return save(fig, out)


def ratio_figure(run_dir, out: Path) -> Path | None:
    """P_2/P_1 against w_1/w_2 (summary.json's ratio sweep), next to (w_1/w_2)^2; with several data sets, each
    one's P_2/P_1 (dots) and their median with its 95% bootstrap interval (squares); None without a ratio sweep."""
    path = Path(run_dir) / "summary.json"
    summary = read_json(path) if path.exists() else {}
    seeds = summary.get("mcmc_seeds")
    rows = seeds["ratio_sweep"] if seeds else summary.get("ratio_sweep", [])
    rows = [r for r in rows if _ratio(r, seeds) is not None]
    if not rows:
        return None
    fig, axes = subplots(1, 1)
    ax = axes[0, 0]
    groups: dict = {}
    for r in rows:
        groups.setdefault((r["attention"], r["heads"], r["init"]), []).append(r)
    for j, ((att, H, init), rs) in enumerate(sorted(groups.items())):
        x = np.array([1 / r["ratio"] for r in rs])
        label = f"MCMC, {att}, H = {H}, {init}"
        if seeds:
            for xi, r in zip(x, rs):
                vals = [v for v in r["P2/P1"] if v is not None]
                ax.plot(xi * (1 + np.linspace(-0.015, 0.015, len(vals))), vals, "o", color=f"C{j}", alpha=0.4, ms=3)
            med = [r["median"] for r in rs]
            err = [
                [m["median"] - m["ci"][0] if m["ci"] else 0 for m in med],
                [m["ci"][1] - m["median"] if m["ci"] else 0 for m in med],
            ]
            label += f": {len(seeds['seeds'])} data sets, median and 95% interval"
            ax.errorbar(x, [m["median"] for m in med], yerr=err, fmt="s-", color=f"C{j}", capsize=3, label=label)
        else:
            ax.plot(x, [r["P2/P1"] for r in rs], "o-", color=f"C{j}", label=label)
    x = np.linspace(1.0, max(1 / r["ratio"] for r in rows), 50)
    ax.plot(x, x**2, "k:", label="(w_1/w_2)^2")
    ax.set_xlabel("w_1 / w_2")
    ax.set_ylabel("P_2 / P_1")
    legend(ax)
    return save(fig, out)


def theory_seeds_figure(run_dir, out: Path) -> Path | None:
    """The H-head theory against the exact posterior over the data sets (summary.json's ``mcmc_seeds``, curves with
    ``against_theory``): per curve, the mean over the data sets of the lag order parameter on each lag (softmax:
    the best head's mass; linear: the lag's share in the heads' span) minus the theory's, with its 95% interval
    (the Welch interval where the theory ran with several seeds, else the mean's bootstrap interval), beside the
    data sets' spread (shaded, one standard deviation). None without such a curve."""
    path = Path(run_dir) / "summary.json"
    seeds = (read_json(path) if path.exists() else {}).get("mcmc_seeds") or {}
    curves = {k: c["against_theory"] for k, c in seeds.get("curves", {}).items() if "against_theory" in c}
    if not curves:
        return None
    rows = -(-len(curves) // COLS)
    fig, axes = subplots(rows, min(COLS, len(curves)), panel=(4.4, 3.2))
    for ax, (key, lags) in zip(axes.flat, curves.items()):
        for j, (lag, at) in enumerate(lags.items()):
            P, th, mean = np.asarray(at["P"]), np.asarray(at["theory"]), np.asarray(at["mean"], float)
            x = P * 1.03 ** (j - (len(lags) - 1) / 2)  # lags side by side at each P
            gap = mean - th
            # the gap's interval: the Welch interval of the two means where the theory ran with several seeds,
            # else the mean's bootstrap interval, shifted
            ci = at.get("gap_ci") or [None if c is None else [c[0] - t, c[1] - t] for c, t in zip(at["ci"], th)]
            lo = [g - c[0] if c else 0.0 for g, c in zip(gap, ci)]
            hi = [c[1] - g if c else 0.0 for g, c in zip(gap, ci)]
            ax.errorbar(x, gap, yerr=[lo, hi], fmt="o-", ms=3, lw=1, capsize=2, color=f"C{j}", label=lag)
            ax.fill_between(P, -np.asarray(at["sd_between"]), at["sd_between"], color=f"C{j}", alpha=0.12, lw=0)
        ax.axhline(0.0, color="k", lw=0.8, ls=":")
        log_x_axis(ax, [p for at in lags.values() for p in at["P"]])
        ax.set_xlabel("P")
        ax.set_ylabel("MCMC mean - theory")
        ax.set_title(f"{key}, {len(seeds['seeds'])} data sets", fontsize="medium")
        legend(ax)
    for ax in list(axes.flat)[len(curves) :]:
        ax.set_visible(False)
    runs = max(at.get("theory_runs", 1) for lags in curves.values() for at in lags.values())
    bars = f"Welch 95% interval, the theory over {runs} seeds" if runs > 1 else "95% bootstrap interval"
    fig.suptitle(
        f"the mean over the data sets minus the theory\nbars: {bars}; shade: ±1 sd between data sets",
        fontsize="medium",
    )
    return save(fig, out)


def _ratio(row: dict, seeds) -> float | None:
    """A ratio-sweep row's P_2/P_1: the seeds' median, or the one data set's."""
    return row["median"]["median"] if seeds else row["P2/P1"]


def training_figure(run_dir, out: Path, variants=None, dpi: int = 150) -> Path | None:
    """One row per training run kind ("main" and each variant; ``variants`` selects some): the span masses of
    every head at the last query vs step (one panel per span, the first seed; the stage steps of every seed in
    the first panel), KL to the k-span teachers and the training and validation losses (every seed), the paper's
    stage boundaries dotted."""
    from matplotlib.lines import Line2D

    recs = load_results(Path(run_dir) / "points" / "train")
    groups: dict = {}
    for r in sorted(recs, key=lambda r: r["point"]["seed"]):
        groups.setdefault(r["point"].get("variant", "main"), []).append(r)
    if variants is not None:
        groups = {k: v for k, v in groups.items() if k in variants}
    if not groups:
        return None
    names = sorted(groups, key=lambda n: (n != "main", n))
    K = np.asarray(groups[names[0]][0]["result"]["mass_last"]).shape[2]
    fig, axes = subplots(len(names), K + 2, panel=(3.8, 3.1))
    for row, name in zip(axes, names):
        rs = groups[name]
        tc = rs[0]["point"]["train"]
        res = rs[0]["result"]
        step, mass = np.asarray(res["step"]), np.asarray(res["mass_last"])  # (R, H, K)
        H = mass.shape[1]
        for k in range(K):
            for h in range(H):
                row[k].plot(step, mass[:, h, k], color=f"C{h}", lw=1.2, label=f"head {h + 1}")
            which = "newest" if k == K - 1 else "oldest" if k == 0 else "middle"
            seed = f", seed {rs[0]['point']['seed']}" if len(rs) > 1 else ""
            row[k].set_title(f"{name}: span {k + 1} ({which}){seed}")
            row[k].set_ylim(0, 1)
            row[k].set_ylabel("mass at the last query")
        legend(row[0])
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
        row[K].set_ylabel("KL(teacher_k || model)")
        row[K].set_title(
            _wrap(
                f"{tc['model']}, {tc['optimizer']} lr {tc['lr']}, batch {tc['batch_size']}, "
                f"spans {list(tc['span_lengths'])}, {len(rs)} seed(s)",
                40,
            )
        )
        _loss_panel(row[K + 1], rs)
        drawn = False
        for ax in row:
            ax.set_xlabel("step")
            for b in paper_boundaries(tc) or ():
                if b <= step[-1]:
                    ax.axvline(b, color="0.5", lw=0.8, ls=":")
                    drawn = True
        extra = [Line2D([], [], color="0.5", lw=0.8, ls=":", label="the paper's stage boundaries")] if drawn else []
        handles, labels = row[K].get_legend_handles_labels()
        legend(row[K], handles + extra, labels + [h.get_label() for h in extra])
        stages = "\n".join(f"seed {r['point']['seed']}: {r['result']['stages']}" for r in rs[:8])
        note(row[0], f"stage steps (newest first)\n{stages}")
    return save(fig, out)


def _loss_panel(ax, rs: list) -> None:
    """Training loss (on the run's fixed probe of training sequences) and validation loss of every seed, with the
    teacher's entropy, the validation loss's floor: a training loss below the validation loss that keeps falling
    while the validation loss rises is overfitting of the finite training set."""
    for r in rs:
        res, first = r["result"], r is rs[0]
        if "train_loss" in res:
            ax.plot(res["step"], res["train_loss"], color="C0", lw=1.0, alpha=0.8, label="training" if first else None)
        ax.plot(res["step"], res["val_loss"], color="C1", lw=1.0, alpha=0.8, label="validation" if first else None)
    ax.axhline(rs[0]["result"]["teacher_entropy"], color="k", ls="--", lw=0.8, label="teacher's entropy")
    ax.set_ylabel("cross-entropy (nats)")
    ax.set_title("loss, every seed")
    legend(ax)


def ode_figure(run_dir, out: Path) -> Path | None:
    recs = load_results(Path(run_dir) / "points" / "ode")
    if not recs:
        return None
    res = recs[0]["result"]
    t, loss, S = np.asarray(res["t"]), np.asarray(res["loss"]), np.asarray(res["S"])
    fig, axes = subplots(1, 2, panel=(4.6, 3.5))
    axes = axes[0]
    axes[0].plot(t[1:], loss[1:], "k", label="loss")
    for i, p in enumerate(res["plateaus"][1:-1]):
        axes[0].axhline(p, color="0.6", ls=":", lw=0.8, label="plateaus" if i == 0 else None)
    axes[0].set_xscale("log")
    axes[0].set_yscale("log")
    axes[0].set_xlabel("t")
    axes[0].set_ylabel("|Delta - D S^T|^2")
    legend(axes[0])
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
    legend(axes[1])
    return save(fig, out)


def datasize_figure(run_dir, out: Path) -> Path | None:
    """The training staircase against the number of training sequences (summary.json's ``data_sizes``), every
    seed a dot and the mean a line: (a) the best validation loss's excess over the teacher's entropy; (b) at that
    step (early stopping), the spans held by a head with mass >= 0.5 (not the nearest teacher: at the paper's
    temperature its argmin jumps on noise while the KL curves are close), with the exact posterior's P_k of the
    multi-lag copy task on the same axis where the run has them; (c) the final training and validation losses
    beside the teacher's entropy (below it: memorised). None without a data-size sweep."""
    from matplotlib.lines import Line2D

    path = Path(run_dir) / "summary.json"
    summ = read_json(path) if path.exists() else {}
    rows = summ.get("data_sizes", [])
    if not rows:
        return None
    finite = [r["n"] for r in rows if r["n"] is not None]
    online_x = 3.0 * max(finite)  # online data (no finite set) drawn right of the largest set
    xs = [online_x if r["n"] is None else r["n"] for r in rows]
    fig, axes = subplots(1, 3, panel=(4.2, 3.4))
    a, b, c = axes[0]

    def series(ax, key, color, marker, ls="-", jitter=1.0):
        for x, r in zip(xs, rows):
            k = len(r[key])
            ax.plot(x * jitter ** (np.arange(k) - (k - 1) / 2), r[key], marker, color=color, mfc="none", ms=5)
        ax.plot(xs, [np.mean(r[key]) for r in rows], ls, color=color, lw=1)

    series(a, "best_excess", "C0", "o")
    series(b, "best_spans_by_mass", "C1", "x", ls="--", jitter=1.06)
    series(c, "train_loss_final", "C2", "o")
    series(c, "val_loss_final", "C3", "o")
    c.axhline(np.mean([e for r in rows for e in r["teacher_entropy"]]), color="k", ls=":", lw=0.8)
    handles = [
        Line2D([], [], color="C0", marker="o", mfc="none", lw=1, label="(a) excess over the teacher's entropy"),
        Line2D([], [], color="C1", marker="x", ls="--", lw=1, label="(b) spans held at mass >= 0.5"),
        Line2D([], [], color="C2", marker="o", mfc="none", lw=1, label="(c) final training loss"),
        Line2D([], [], color="C3", marker="o", mfc="none", lw=1, label="(c) final validation loss"),
        Line2D([], [], color="k", ls=":", lw=0.8, label="(c) teacher's entropy"),
    ]
    pk = posterior_stages(summ)
    if pk:
        key, stages = pk
        for P in stages:
            b.axvline(P, color="0.5", lw=0.8, ls=(0, (1, 2)))
        handles.append(
            Line2D([], [], color="0.5", lw=0.8, ls=(0, (1, 2)), label=f"(b) posterior P_k ({key}, copy task)")
        )
    ticks = sorted(set(finite))
    for ax in (a, b, c):
        ax.set_xscale("log")
        ax.set_xticks(ticks + [online_x], [f"{t:g}" for t in ticks] + ["online"], rotation=90)
        ax.minorticks_off()
        ax.set_xlabel("training sequences")
    a.set_ylabel("best val loss - teacher's entropy (nats)")
    a.set_title("(a) the best validation loss")
    K = max(r["spans"] for r in rows)
    b.set_yticks(range(0, K + 1))
    b.set_ylabel("stages (seeds jittered)")
    b.set_title("(b) at the best validation loss")
    c.set_yscale("log")
    c.set_ylabel("cross-entropy at the end (nats)")
    counts = sorted({len(r["seeds"]) for r in rows})
    c.set_title(f"(c) the end; {counts[0] if len(counts) == 1 else f'{counts[0]}-{counts[-1]}'} seeds per size")
    fig.legend(handles=handles, loc="outside lower center", ncol=3)
    return save(fig, out)


def posterior_stages(summ: dict) -> tuple[str, list] | None:
    """The P_k of the run's Bayesian staircase to draw beside the training data sizes: the curve of the config's
    first attention with the most heads, cold start (None without an MCMC part)."""
    first = summ.get("config", {}).get("bayes", {}).get("attention", [None])[0]
    curves = [e for e in summ.get("mcmc", {}).values() if e["attention"] == first and e["init"] == "cold"]
    if not curves:
        return None
    e = max(curves, key=lambda c: c["heads"])
    stages = [P for P in e["P_k"].values() if P is not None]
    return (f"{first}, H = {e['heads']}", stages) if stages else None


# part -> [(figure file, drawer)]; the ratio figure reads the summary (no part of that name: drawn at the end)
PART_FIGURES = {
    "mcmc": [("staircase_bayes.png", bayes_figure)],
    "train": [("staircase_training.png", training_figure)],
    "ode": [("staircase_ode.png", ode_figure)],
    "summary": [
        ("staircase_ratio.png", ratio_figure),
        ("staircase_datasize.png", datasize_figure),
        ("staircase_theory_seeds.png", theory_seeds_figure),
    ],
}
