"""The staircase's MCMC points over several data sets, from the saved records alone: the stages' medians and
intervals, P_2/P_1 against the square law, the H-head theory against the mean over the data sets, and the cold
start against the hot (hysteresis)."""

from __future__ import annotations

import numpy as np

from ... import stats
from ..contract import common_P, seed_matrix
from .bayes import LAG_OBSERVABLE
from .curves import mcmc_summary, ratio_table, series_key

MIN_SEEDS = 4  # fewer seeds get no interval: a bootstrap of two or three values is little more than their range


def seed_median(values: list) -> dict:
    """:func:`bayesattn.stats.found_median`, without an interval below :data:`MIN_SEEDS` values."""
    m = stats.found_median(values)
    return m if len(values) - m["not_found"] >= MIN_SEEDS else {**m, "ci": None}


def theory_comparison(per_seed: list[list[dict]], theories: list[dict], attention: str) -> dict:
    """One curve's MCMC points over the data sets against the H-head theory's (the results of its ``theory`` points,
    one per seed, the first the config seed's), per lag: the attention's lag order parameter
    (:data:`~bayesattn.experiments.staircase.bayes.LAG_OBSERVABLE`: ``mass_max:lagk`` for softmax, ``capture:lagk``
    for linear) at each P that every data set has, :func:`bayesattn.stats.against_curve` against the mean of the
    theory's seeds (from two, their spread counted; the points near the first seed's binodals not counted)."""
    common = common_P(per_seed)
    theory = theories[0]
    name = LAG_OBSERVABLE[attention]
    out = {}
    for lag in theory[name]:
        obs = f"{name}:{lag}"
        vals, ses = seed_matrix(
            per_seed,
            common,
            lambda r: (r["result"]["means"][obs], r["result"].get("observables", {}).get(obs, {}).get("se", np.nan)),
        )
        runs = np.array([stats.curve_at(t["P"], t[name][lag], common) for t in theories])
        out[lag] = stats.against_curve(
            common,
            vals,
            ses,
            runs.mean(axis=0),
            theory.get("binodals", []),
            theory_runs=runs if len(theories) > 1 else None,
        )
    return out


def theory_by_key(records: list) -> dict[str, list[dict]]:
    """{theory series key: the results of its theory points, in increasing seed}."""
    out: dict = {}
    for r in sorted(records, key=lambda r: r["point"]["seed"]):
        out.setdefault(series_key(r["point"]), []).append(r["result"])
    return out


def mcmc_seed_statistics(records: list, theory: dict | None = None) -> dict | None:
    """The MCMC points over their data sets (None with one): per curve, each transition P_k per seed with its
    median and 95% bootstrap interval (:func:`seed_median`: a P_k outside the P grid is not found; no interval below
    :data:`MIN_SEEDS` data sets), and where ``theory`` ({theory series key: its theory points' results, by seed})
    has the curve, its lag masses against the theory's (:func:`theory_comparison`); per weight ratio of a ratio sweep,
    P_2/P_1 per seed, its median and interval, and in how many seeds it lies above (w_1/w_2)^2 (a two-sided sign
    test against half)."""
    by_seed: dict = {}
    for r in records:
        by_seed.setdefault(r["point"]["seed"], []).append(r)
    if len(by_seed) < 2:
        return None
    seeds = sorted(by_seed)
    per = [mcmc_summary(by_seed[s]) for s in seeds]
    curves = {}
    for key in per[0]:
        P_k = {lag: [p[key]["P_k"][lag] if key in p else None for p in per] for lag in per[0][key]["P_k"]}
        curves[key] = {"P_k": P_k, "median": {lag: seed_median(v) for lag, v in P_k.items()}}
        th = (theory or {}).get(key.rsplit("/", 1)[0])  # the curve's key without its start
        if th is not None:
            curves[key]["against_theory"] = theory_comparison(
                [[r for r in by_seed[s] if series_key(r["point"]) == key] for s in seeds], th, per[0][key]["attention"]
            )
    ratios: dict = {}
    for s, summ in zip(seeds, per):
        for row in ratio_table(summ):
            e = ratios.setdefault((row["attention"], row["heads"], row["init"], row["ratio"]), {"P2/P1": {}})
            e["P2/P1"][s] = row["P2/P1"]
    rows = []
    for (att, H, init, ratio), e in sorted(ratios.items()):
        vals = [e["P2/P1"].get(s) for s in seeds]
        found = [v for v in vals if v is not None]
        above = sum(v > ratio**-2 for v in found)
        rows.append(
            {
                **{"attention": att, "heads": H, "init": init, "ratio": ratio, "P2/P1": vals},
                "median": seed_median(vals),
                "square_law": ratio**-2,
                "above": above,
                "sign_test_p": stats.sign_test(above, len(found)) if found else None,
            }
        )
    out = {"seeds": seeds, "curves": curves, "ratio_sweep": rows, "interval": stats.BOOTSTRAP}
    starts = start_differences(curves, records)
    return {**out, "starts": starts} if starts else out


def start_differences(curves: dict, records: list) -> list:
    """Hysteresis over the data sets: for every curve run from both starts, per lag, P_k (cold) - P_k (hot) in each
    data set (None where either start's P_k is outside the grid), their median with its interval, and in how many
    data sets the cold start's stage comes later or earlier than the hot start's, with the two-sided sign test
    of those counts against half (equal stages, as a single well gives, are not counted). A first-order stage with
    a coexistence window gives cold later in every data set; a single well, differences of either sign. Where the
    records hold each chain's mean, also the branches per P (:func:`branches`)."""
    rows = []
    for key, c in curves.items():
        base, init = key.rsplit("/", 1)
        if init != "cold" or f"{base}/hot" not in curves:
            continue
        hot = curves[f"{base}/hot"]["P_k"]
        own = [r for r in records if series_key(r["point"]).rsplit("/", 1)[0] == base]
        for lag, cold_k in c["P_k"].items():
            diff = [None if a is None or b is None else a - b for a, b in zip(cold_k, hot[lag])]
            found = [d for d in diff if d is not None]
            later, earlier = sum(d > 0 for d in found), sum(d < 0 for d in found)
            row = {
                "curve": base,
                "lag": lag,
                "cold_minus_hot": diff,
                "median": seed_median(diff),
                "cold_later": later,
                "cold_earlier": earlier,
                "sign_test_p": stats.sign_test(later, later + earlier) if later + earlier else None,
            }
            b = branches(own, lag)
            rows.append(row if b is None else {**row, "branches": b})
    return rows


def branches(records: list, lag: str) -> dict | None:
    """One curve's chains on each side of the lag's stage threshold, per P, over the data sets that ran both starts
    there: "split", the cold start's chains all below it and the hot start's all above (both branches stable at one
    P: the signature of a coexistence window); "reverse", the other way round; "mixed", one start's chains on
    both sides (a chain that crossed, or stayed, where the other did not). None where a record lacks its chains'
    means."""
    side: dict = {}
    for r in records:
        pt, res = r["point"], r["result"]
        obs = f"{LAG_OBSERVABLE[pt['attention']]}:{lag}"
        means = res.get("observables", {}).get(obs, {}).get("chain_means")
        if means is None:
            return None
        side[(pt["seed"], pt["P"], pt["init"])] = np.asarray(means) > res["threshold"][lag]
    P = sorted({k[1] for k in side})
    out: dict = {"P": P, "data_sets": [], "split": [], "reverse": [], "mixed": []}
    for p in P:
        pairs = [
            (c, side[(s, p, "hot")])
            for (s, q, i), c in side.items()
            if q == p and i == "cold" and (s, p, "hot") in side
        ]
        out["data_sets"].append(len(pairs))
        out["split"].append(sum(bool((~c).all() and h.all()) for c, h in pairs))
        out["reverse"].append(sum(bool(c.all() and (~h).all()) for c, h in pairs))
        out["mixed"].append(sum(bool(c.any() != c.all() or h.any() != h.all()) for c, h in pairs))
    return out
