"""The screens' summaries, from the saved records alone: the trajectory's induction bump and per-head classes,
the Bayesian copy head's selectivity and PR thresholds in P (NUTS and theory), and the pretrained models' heads."""

from __future__ import annotations

from ...bayes.theory.common import first_crossing
from ...diagnostics.screens import CLASSES, THRESHOLD
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


def summarize(records: dict[str, list[dict]]) -> dict:
    out: dict = {}
    if records.get("trajectory"):
        res = records["trajectory"][0]["result"]
        out["trajectory"] = {
            "train_wall_s": res["train_wall_s"],
            "screen_wall_s": res["screen_wall_s"],
            "history": res["history"],
            "probes": res["probes"],
            **trajectory_summary(res["checkpoints"], res["history"], res["record_every"]),
        }
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
        lines.append(
            f"training {s['train_wall_s']:.0f} s, screening {s['screen_wall_s']:.0f} s; steepest loss drop between "
            f"steps {b['steepest_drop_between']} ({b['loss_before']:.2f} -> {b['loss_after']:.2f}); first "
            f"previous-token head per layer {b['first_previous_token_head']}, first induction head (50x) "
            f"{b['first_induction_head']}"
        )
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


def _p(x) -> str:
    return "-" if x is None else f"{x:.0f}"
