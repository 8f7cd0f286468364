"""Focus-dilution figures read from the stages (:mod:`.stages`): cycles per seed against the detection threshold,
and one timeline per seed of the condensation, focus, dilution and restart stages, with the rule behind each."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np

from ... import stats
from ...figstyle import integer_ticks, log_x_axis, save, subplots
from .stages import RULES, THRESHOLDS, cycles_vs_threshold, timeline

STAGE_COLORS = {"focus": "tab:blue", "dilution": "tab:orange", "condensation": "0.8"}


def threshold_figure(recs, out: Path) -> Path:
    """Mean cycles per seed against min_drop (log axis), one curve per setting, with the bootstrap interval of the
    mean as a band; the run's own threshold marked."""
    # the legend sits below the axes, one line per setting: the figure grows with it, so the axes keep their height
    fig, axes = subplots(1, 1, panel=(5.6, 3.6 + 0.22 * max(0, len(recs) - 3)))
    ax = axes[0, 0]
    marked, top = set(), 1.0
    for i, r in enumerate(recs):
        cfg = r["point"]["config"]
        cur = cycles_vs_threshold(r["result"]["runs"], cfg)
        if not cur["seeds"]:
            continue
        x = np.asarray(cur["min_drop"])
        mean = np.asarray(cur["mean"], float)
        lo = np.asarray([c[0] if c else m for c, m in zip(cur["ci"], mean)])
        hi = np.asarray([c[1] if c else m for c, m in zip(cur["ci"], mean)])
        label = textwrap.shorten(r["point"]["label"], 48, placeholder="...")
        ax.plot(x, mean, "o-", ms=3, color=f"C{i}", label=f"{label} ({len(cur['seeds'])} seeds)")
        ax.fill_between(x, lo, hi, color=f"C{i}", alpha=0.15, lw=0)
        marked.add(cur["config_min_drop"])
        top = max(top, float(np.max(hi)))
    for th in sorted(marked):
        ax.axvline(th, color="k", ls=":", lw=0.8, label="the runs' min_drop")
    log_x_axis(ax, list(THRESHOLDS))
    ax.set(
        xlabel="detection threshold min_drop (nats)",
        ylabel="focus-dilution cycles per seed",
        title=textwrap.fill(f"cycles against the threshold; bands: {stats.BOOTSTRAP} of the mean", 64),
    )
    ax.set_ylim(0, 1.1 * top)
    handles, names = ax.get_legend_handles_labels()
    first = dict(zip(names, handles))
    fig.legend(list(first.values()), list(first), loc="outside lower center", ncol=1)
    return save(fig, out)


def timelines_figure(recs, out: Path) -> Path:
    """Per setting a panel, per healthy seed a row: condensation, focus and dilution as bars over the steps,
    restarts as black ticks; the rules in the caption."""
    n = len(recs)
    rows = [max(1, sum(x["diverged_at_step"] is None for x in r["result"]["runs"])) for r in recs]
    fig, axes = subplots(n, 1, panel=(7.2, 0.9 + 0.28 * max(rows)))
    for ax, r in zip(axes[:, 0], recs):
        step = np.asarray(r["result"]["step"])
        ok = [x for x in r["result"]["runs"] if x["diverged_at_step"] is None]
        for j, run in enumerate(ok):
            for stage, a, b in timeline(run):
                if stage == "restart":
                    ax.plot([a, a], [j - 0.4, j + 0.4], color="k", lw=1.5, label="restart")
                else:
                    ax.broken_barh(
                        [(a, max(b - a, step[1] - step[0]))],
                        (j - 0.3, 0.6),
                        color=STAGE_COLORS[stage],
                        label=stage,
                    )
        ax.set_yticks(range(len(ok)), [f"seed {x['seed']}" for x in ok])
        ax.set_ylim(len(ok) - 0.5, -0.5)
        ax.set_xlim(step[0], step[-1])
        n_div = len(r["result"]["runs"]) - len(ok)
        ax.set_title(
            textwrap.shorten(r["point"]["label"], 80, placeholder="...")
            + (f"  ({n_div} diverged, not drawn)" if n_div else ""),
            fontsize=9,
        )
        if len(ok) <= 1:
            integer_ticks(ax.yaxis)
    axes[-1, 0].set_xlabel("step")
    rules = "; ".join(f"{k}: {v}" for k, v in RULES.items())
    cfg = recs[0]["point"]["config"]
    fig.suptitle(
        textwrap.fill(
            f"stages per seed (min_drop = {cfg.get('min_drop', 0.05):g} nats, rank_one = {cfg.get('rank_one', 1.3):g}, "
            f"signal: {cfg.get('stage_signal', 'value_entropy')}). {rules}",
            110,
        ),
        fontsize=8,
    )
    handles = {}
    for ax in axes[:, 0]:
        for h, name in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(name, h)
    if handles:
        fig.legend(list(handles.values()), list(handles), loc="outside lower center", ncol=len(handles))
    return save(fig, out)
