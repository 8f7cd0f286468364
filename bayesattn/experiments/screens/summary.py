"""The screens' summaries, from the saved records alone: the trajectory's induction bump and per-head classes,
the Bayesian copy head's selectivity and PR thresholds in P (NUTS and theory), and the pretrained models' heads."""

from __future__ import annotations

import numpy as np

from ...bayes.theory.common import first_crossing
from ...diagnostics.screens import CIRCUIT_THRESHOLD, CLASSES, THRESHOLD
from ...stats import BOOTSTRAP, WILSON, median_interval, solve_rate
from .bayes import half_rise
from .trajectory import summarize as trajectory_summary


def head_sets(result: dict, threshold: float = THRESHOLD) -> dict[str, list[list[int]]]:
    """A model screen's head sets, each a sorted list of [layer, head]: the heads of each class at the run's
    selectivity ``threshold`` ("induction (30x)", ...), the induction (50x) and previous-token (100x) circuits, the heads of each
    best class and the unclassified ones. Kept in the summary so that screens of one model can be compared set by
    set (scripts/screens_convergence.py) without their point files."""
    recs = result["records"]

    def pick(keep) -> list[list[int]]:
        return sorted([int(r["layer"]), int(r["head"])] for r in recs if keep(r))

    sets = {f"{c} ({threshold:g}x)": pick(lambda r, c=c: c in r["classes"]) for c in CLASSES}
    sets["induction circuit (50x)"] = pick(lambda r: r["induction_circuit"])
    sets["previous-token circuit (100x)"] = pick(lambda r: r["previous_token_circuit"])
    for c in CLASSES:
        sets[f"best class {c}"] = pick(lambda r, c=c: r["best_class"] == c)
    sets["unclassified"] = pick(lambda r: r["best_class"] is None)
    return sets


def seed_measures(seed: int, s: dict) -> dict:
    """One training seed's measures behind the paper's findings F4 and F5, from its trajectory summary ``s``:
    its final induction heads (30x) with their PR half-rise and threshold-crossing steps, ``pr_first`` (every one
    of them has its PR half-rise at or before its crossing; None without an induction head), the steps from which
    the screen holds its final induction heads (30x) and its final induction circuit (50x), the step from which
    the PR-integral ranking's top heads are the final induction heads, the loss's half-way step, the strongest
    induction selectivity at the last checkpoint and the largest fraction of BOS heads in any layer at any
    checkpoint."""
    ind = [h for h in s["heads"] if "induction" in h["classes"]]
    over = s["ranking"].get("over_training", {}).get("integral", {})
    return {
        "seed": int(seed),
        "induction_heads": [[h["layer"], h["head"]] for h in ind],
        "pr_rise_steps": [h["pr_rise_step"] for h in ind],
        "crossing_steps": [h["crossing_step"]["induction"] for h in ind],
        "pr_first": all(h["pr_at_or_before"]["induction"] for h in ind) if ind else None,
        "class_from_step": s["induction_class"]["from_step"],
        "circuit_heads": s["circuit"]["heads"],
        "circuit_from_step": s["circuit"]["from_step"],
        "ranking_from_step": over.get("from_step"),
        "loss_halfway_step": s["induction_bump"]["loss_halfway_step"],
        "induction_final_max": s["induction_final_max"],
        "bos_fraction_max": float(np.max(s["bos_fraction"])),
    }


def seed_statistics(runs: list[dict], summaries: list[dict]) -> dict:
    """The trajectory's statistics over its training seeds (``runs``: the point records, one per seed, and
    ``summaries``: their trajectory summaries, in the same order): each seed's :func:`seed_measures`, and over the
    seeds
    - ``pr_first``: in how many seeds with an induction head every such head's PR rises half-way at or before its
      selectivity crosses 30x (the paper's F5), with the 95% Wilson interval;
    - ``class_fraction``, ``circuit_fraction`` and ``ranking_fraction``: the steps from which the screen holds
      its final induction heads (30x) and its final induction circuit (50x; the paper's F4), and from which the
      PR-integral ranking picks the final induction heads, as fractions of the training steps: median and 95%
      bootstrap interval, a seed without such heads counted as 1 (not within the run);
    - ``circuits``: in how many seeds an induction circuit (50x) forms;
    - ``loss_halfway_step``: the loss's half-way step, median and interval."""
    per = sorted((seed_measures(r["point"]["seed"], s) for r, s in zip(runs, summaries)), key=lambda p: p["seed"])
    steps = runs[0]["point"]["trajectory"]["steps"]
    judged = [p["pr_first"] for p in per if p["pr_first"] is not None]

    def fraction(key):
        return median_interval([None if p[key] is None else p[key] / steps for p in per], 1.0)

    return {
        "seeds": per,
        "steps": steps,
        "pr_first": solve_rate(sum(judged), len(judged)),
        "class_fraction": fraction("class_from_step"),
        "circuit_fraction": fraction("circuit_from_step"),
        "circuits": sum(bool(p["circuit_heads"]) for p in per),
        "ranking_fraction": fraction("ranking_from_step"),
        "loss_halfway_step": median_interval([p["loss_halfway_step"] for p in per], steps),
        "intervals": {"rate": WILSON, "median": BOOTSTRAP},
        "circuit_threshold": CIRCUIT_THRESHOLD,
    }


def summarize(records: dict[str, list[dict]]) -> dict:
    out: dict = {}
    if records.get("trajectory"):
        runs = sorted(records["trajectory"], key=lambda r: r["point"]["seed"])
        sums = [
            trajectory_summary(r["result"]["checkpoints"], r["result"]["history"], r["result"]["record_every"])
            for r in runs
        ]
        res = runs[0]["result"]  # the first seed's run in full, as with one seed
        out["trajectory"] = {
            "train_wall_s": res["train_wall_s"],
            "screen_wall_s": res["screen_wall_s"],
            "history": res["history"],
            "probes": res["probes"],
            **sums[0],
        }
        if len(runs) > 1:
            out["trajectory_seeds"] = seed_statistics(runs, sums)
    if records.get("bayes"):
        pts = sorted((r["result"] for r in records["bayes"]), key=lambda p: p["P"])
        P = [p["P"] for p in pts]
        out["bayes"] = {
            "points": pts,
            "P_selectivity_threshold": first_crossing(P, [p["selectivity_median"] for p in pts], THRESHOLD),
            "P_pr_half_rise": half_rise(P, [p["pr_mean"] for p in pts]),
            "P_pr_limit_half_rise": half_rise(P, [p["pr_limit_mean"] for p in pts]),
        }
    if records.get("theory"):
        out["theory"] = records["theory"][0]["result"]
    if records.get("model"):
        res = records["model"][0]["result"]
        out["model"] = {k: res[k] for k in ("models", "probe", "lines", "ranking")}
        out["model"]["head_sets"] = head_sets(res, records["model"][0]["point"]["model"]["threshold"])
    return out


def describe(summary: dict) -> list[str]:
    lines = []
    if "trajectory" in summary:
        s = summary["trajectory"]
        b = s["induction_bump"]
        lo, hi = b["steepest_drop_between"]
        lines.append(
            f"training {s['train_wall_s']:.0f} s, screening {s['screen_wall_s']:.0f} s; steepest loss drop between "
            f"steps {lo} and {hi} ({b['loss_before']:.2f} -> {b['loss_after']:.2f}); first previous-token head "
            f"({THRESHOLD:.0f}x): {_per_layer(b['first_previous_token_head'])}; first induction head "
            f"({CIRCUIT_THRESHOLD:.0f}x): {_per_layer(b['first_induction_head'])}"
        )
    if "trajectory_seeds" in summary:
        lines.append(seeds_line(summary["trajectory_seeds"]))
    if "bayes" in summary:
        s = summary["bayes"]
        for p in s["points"]:
            lines.append(
                f"P = {p['P']}: previous-token selectivity median {p['selectivity_median']:.1f}x, PR "
                f"{p['pr_mean']:.2f} +- {p['pr_sd']:.2f} (gaussian tokens {p['pr_gaussian_mean']:.2f}), m = {p['m']:.3f}"
            )
        lines.append(
            f"selectivity median reaches {THRESHOLD:.0f}x at P = {_p(s['P_selectivity_threshold'])}; PR "
            f"half-rise at P = {_p(s['P_pr_half_rise'])}"
        )
        th = summary.get("theory")
        if th and th.get("covered"):
            lines.append(
                f"theory ({len(th['points'])} P): selectivity median reaches {THRESHOLD:.0f}x at P = "
                f"{_p(th['P_selectivity_threshold'])}; many-sequence PR half-rise at P = "
                f"{_p(th['P_pr_half_rise'])} (NUTS: {_p(s['P_pr_limit_half_rise'])})"
            )
    if "model" in summary:
        m = summary["model"]
        for info in m["models"]:
            step = f" (step {info['step']})" if info["step"] is not None else ""
            lines.append(
                f"screened {info['heads']} heads of {info['name']}{step} on {m['probe']['N']} "
                f"{m['probe']['kind']} sequences of {m['probe']['T']} tokens in {info['wall_s']:.1f} s"
            )
        lines += m["lines"]
        if m["ranking"]:
            from .tools import ranking_line

            lines.append(ranking_line(m["ranking"]))

    return lines


def _per_layer(first: dict) -> str:
    """{"layer0": None, "layer1": 584} -> "none in layer 0, step 584 in layer 1"."""
    return ", ".join(
        f"{'none' if step is None else f'step {step}'} in layer {key.removeprefix('layer')}"
        for key, step in first.items()
    )


def _p(x) -> str:
    return "-" if x is None else f"{x:.0f}"


def _from(m: dict) -> str:
    """The text "from 31% [31, 35] of training" for a median fraction, or what a censored median says."""
    if m["median"] is None:
        return "not within the run in half the seeds or more"
    ci = "" if m["ci"] is None else f" [{m['ci'][0] * 100:.0f}, {m['ci'][1] * 100:.0f}]"
    return f"from {m['median'] * 100:.0f}%{ci} of training"


def seeds_line(st: dict) -> str:
    """The seeds' statistics in one line (intervals 95%: Wilson for the count, bootstrap for the medians)."""
    r = st["pr_first"]
    rate = (
        "no seed formed an induction head"
        if not r["seeds"]
        else (f"in {r['solved']} of {r['seeds']} seeds [{r['ci'][0]:.2f}, {r['ci'][1]:.2f}]")
    )
    n = len(st["seeds"])
    circuit = (
        f"an induction circuit ({CIRCUIT_THRESHOLD:.0f}x) forms in {st['circuits']} of {n} seeds, held "
        f"{_from(st['circuit_fraction'])}"
        if st["circuits"]
        else f"no induction circuit ({CIRCUIT_THRESHOLD:.0f}x) forms in any of the {n} seeds"
    )
    return (
        f"{n} seeds: every final induction head's PR rises half-way at or before its {THRESHOLD:.0f}x crossing "
        f"{rate}; the screen holds its final induction heads ({THRESHOLD:.0f}x) {_from(st['class_fraction'])}, and "
        f"{circuit}; the "
        f"PR-integral ranking picks the final induction heads {_from(st['ranking_fraction'])} (medians, 95% "
        "intervals)"
    )
