"""The staircase's summaries, from the saved records alone: the stage transitions P_k per curve, the weight-ratio
table, the training stages and the ODE's."""

from __future__ import annotations

import numpy as np

from ...bayes.theory.common import first_crossing
from .bayes import LAG_OBSERVABLE

# P where a label-free lag mass (increasing P) first crosses its threshold, log-interpolated; None if never
transitions = first_crossing


def series_key(point: dict) -> str:
    """One curve of the sweep: "softmax/H=2/w=0.6/cold" (attention, heads, weight ratio w_2/w_1, init; a theory
    point has no init: "softmax/H=2/w=0.6")."""
    init = f"/{point['init']}" if "init" in point else ""
    return f"{point['attention']}/H={point['heads']}/w={point['bayes']['ratio']:g}{init}"


def mcmc_summary(records: list) -> dict:
    """{series_key: {"P": [...], "mass_max:lagk": [...], "P_k": {lagk: P or None}, "competitive": ...}}."""
    out: dict = {}
    for r in records:
        pt, res = r["point"], r["result"]
        key = series_key(pt)
        e = out.setdefault(
            key,
            {
                "P": [],
                "means": [],
                "competitive": [],
                "threshold": res["threshold"],
                "attention": pt["attention"],
                "heads": pt["heads"],
                "ratio": pt["bayes"]["ratio"],
                "init": pt["init"],
            },
        )
        e["P"].append(pt["P"])
        e["means"].append(res["means"])
        e["competitive"].append(res["competitive"])
    for e in out.values():
        order = np.argsort(e["P"])
        P = np.asarray(e["P"])[order]
        e["P"] = P.tolist()
        means = [e["means"][i] for i in order]
        e["means"] = {k: [m[k] for m in means] for k in means[0]}
        e["competitive"] = {k: [e["competitive"][i][k] for i in order] for k in e["competitive"][0]}
        obs = LAG_OBSERVABLE[e["attention"]]
        e["P_k"] = {
            lag: transitions(P, np.asarray(e["means"][f"{obs}:{lag}"]), thr) for lag, thr in e["threshold"].items()
        }
        comp = [x for v in e["competitive"].values() for x in v if x is not None]
        e["max_competitive"] = max(comp) if comp else None
    return out


def ratio_table(mcmc: dict) -> list:
    """The weight-ratio dependence of the stages: for every (attention, H, init) measured at two or more ratios
    w_2/w_1, rows {"ratio", "P_1", "P_2", "P2/P1"} (None where a transition is not inside the P grid), sorted by
    ratio; compare P2/P1 with (w_1/w_2)^2 = ratio^-2."""
    groups: dict = {}
    for e in mcmc.values():
        groups.setdefault((e["attention"], e["heads"], e["init"]), []).append(e)
    rows = []
    for (att, H, init), es in sorted(groups.items()):
        if len(es) < 2:
            continue
        for e in sorted(es, key=lambda e: e["ratio"]):
            p1, p2 = e["P_k"].get("lag1"), e["P_k"].get("lag2")
            rows.append(
                {
                    "attention": att,
                    "heads": H,
                    "init": init,
                    "ratio": e["ratio"],
                    "P_1": p1,
                    "P_2": p2,
                    "P2/P1": p2 / p1 if p1 and p2 else None,
                }
            )
    return rows


def summarize(records: dict[str, list[dict]]) -> dict:
    """The summary of every part that ran."""
    summary: dict = {}
    if "mcmc" in records:
        summary["mcmc"] = mcmc_summary(records["mcmc"])
        summary["ratio_sweep"] = ratio_table(summary["mcmc"])
    if "train" in records:
        recs = records["train"]
        summary["train"] = {
            "stages": [r["result"]["stages"] for r in recs],
            "variants": [r["point"].get("variant", "main") for r in recs],
            "seeds": [r["point"]["seed"] for r in recs],
            "wall_s": [r["wall_time_s"] for r in recs],
            "paper_stages": [330, 575],
        }
    if "theory" in records:
        summary["theory"] = {
            series_key(r["point"]): {k: r["result"][k] for k in ("P_k", "coexistence_P", "binodals")}
            for r in records["theory"]
        }
    if "ode" in records:
        res = records["ode"][0]["result"]
        summary["ode"] = {"stages": res["stages"], "plateaus": res["plateaus"]}
    return summary


def _fmt(x) -> str:
    return "-" if x is None else f"{x:.4g}"


def describe(summary: dict) -> list[str]:
    """The printed lines: P_k per curve, the ratio sweep, the training and ODE stage times."""
    lines = []
    for key, e in summary.get("mcmc", {}).items():
        comp = "" if e["max_competitive"] is None else f", max competitive fraction = {e['max_competitive']:.2f}"
        lines.append(f"{key}: P_k = {', '.join(f'{k} {_fmt(v)}' for k, v in e['P_k'].items())}{comp}")
    for r in summary.get("ratio_sweep", []):
        ratio = (
            "not in the P grid" if r["P2/P1"] is None else f"{r['P2/P1']:.2f} ((w_1/w_2)^2 = {r['ratio'] ** -2:.2f})"
        )
        lines.append(f"{r['attention']}/H={r['heads']}/{r['init']}: w_2/w_1 = {r['ratio']:g}: P_2/P_1 = {ratio}")
    if "train" in summary:
        lines.append(f"training stages (steps, per seed): {summary['train']['stages']} (paper: ~330, ~575)")
    if "ode" in summary:
        lines.append(f"ODE stage times: {', '.join(_fmt(t) for t in summary['ode']['stages'])}")
    return lines
