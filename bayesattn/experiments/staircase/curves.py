"""The staircase's MCMC curves of one data set, from the saved records alone: per (attention, H, weight ratio,
start) the label-free lag order parameter against P and its stages P_k, and the weight-ratio table."""

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
    return dict(sorted(out.items()))  # by curve, whatever order the records came in


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
