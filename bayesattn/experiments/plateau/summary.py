"""The plateau experiment's summary, from the saved records alone: per case and method, the median plateau per P
over seeds with its bootstrap interval, the measured exponent of t against P - P_star with a bootstrap interval
over seeds, and the theory's prediction at the same P."""

from __future__ import annotations

import numpy as np

from ...stats import median_interval
from .config import FLOW_METHODS, METHODS

FIT_MAX = 2.0  # the exponent is fitted on P <= FIT_MAX x P_star (the near side of the transition)
ASYMPTOTE = {"P_s": -0.5, "P_c": -1.0}  # the laws as P -> P_star: saddle-node bottleneck, critical slowing down
BOOTSTRAP = 2000


def case_key(point: dict) -> str:
    c = point["case"]
    return f"{c['attention']} T={c['T']}"


def _slope(P, t, P_star):
    ok = np.isfinite(t) & (P > P_star) & (P <= FIT_MAX * P_star)
    if ok.sum() < 3:
        return None
    return float(np.polyfit(np.log(P[ok] - P_star), np.log(t[ok]), 1)[0])


def _fit(P: np.ndarray, T_seeds: np.ndarray, P_star: float) -> dict:
    """Slope of log(median t) on log(P - P_star) (points where every seed crossed), with a percentile bootstrap
    over seeds. T_seeds: (seeds, P) with NaN where a seed did not cross."""
    full = np.all(np.isfinite(T_seeds), axis=0)
    med = np.where(full, np.median(np.where(np.isfinite(T_seeds), T_seeds, 0.0), axis=0), np.nan)
    slope = _slope(P, med, P_star)
    out = {"exponent": slope, "ci": None, "fit_P": [int(p) for p in P[full & (P <= FIT_MAX * P_star)]]}
    n = T_seeds.shape[0]
    if slope is None or n < 2:
        return out
    rng = np.random.default_rng(0)
    boot = []
    for _ in range(BOOTSTRAP):
        s = T_seeds[rng.integers(0, n, n)]
        b = _slope(P, np.where(full, np.median(np.where(np.isfinite(s), s, 0.0), axis=0), np.nan), P_star)
        if b is not None:
            boot.append(b)
    if len(boot) > 10:
        out["ci"] = [float(np.percentile(boot, 2.5)), float(np.percentile(boot, 97.5))]
    return out


def summarize(records: dict) -> dict:
    theory = {case_key(r["point"]): r["result"] for r in records.get("theory", [])}
    runs: dict = {}
    for r in records.get("runs", []):
        runs.setdefault((case_key(r["point"]), r["point"]["method"]), []).append(r)
    cases = []
    for key, th in theory.items():
        curve = th["curve"]
        t_th = dict(zip(curve["P"], curve["t_plateau"], strict=True))
        P = np.asarray(th["P_runs"], float)
        row = {
            "case": key,
            "P_star": th["P_star"],
            "P_star_is": th["P_star_is"],
            "asymptotic_exponent": ASYMPTOTE.get(th["P_star_is"]),
            "theory": {"P": th["P_runs"], "t_plateau": [t_th.get(float(p)) for p in P]},
            "methods": {},
        }
        if th["P_star_is"] in ASYMPTOTE:
            row["theory"]["exponent"] = _slope(P, np.asarray(row["theory"]["t_plateau"], float), th["P_star"])
        for method in METHODS:
            recs = sorted(runs.get((key, method), []), key=lambda r: r["point"]["seed"])
            if not recs:
                continue
            t_max = recs[0]["result"]["t_max"]
            T_seeds = np.array(
                [[np.nan if x["t_plateau"] is None else x["t_plateau"] for x in r["result"]["rows"]] for r in recs]
            )
            per_P = []
            for j, p in enumerate(th["P_runs"]):
                ts = [r["result"]["rows"][j]["t_plateau"] for r in recs]
                mi = median_interval(ts, t_max)
                per_P.append(
                    {"P": p, "t_seeds": ts, "median": mi["median"], "ci": mi["ci"], "censored": mi["censored"]}
                )
            m = {
                "time_unit": recs[0]["result"]["time_unit"],
                "t_max": t_max,
                "seeds": len(recs),
                "per_P": per_P,
                "rule": recs[0]["result"]["rule"],
            }
            if th["P_star_is"] in ASYMPTOTE:
                m["fit"] = _fit(P, T_seeds, th["P_star"])
            if method in FLOW_METHODS:
                ratios = [
                    x["median"] / t_th[float(x["P"])]
                    for x in per_P
                    if x["median"] is not None and np.isfinite(t_th.get(float(x["P"]), np.inf))
                ]
                m["ratio_to_theory"] = [float(min(ratios)), float(max(ratios))] if ratios else None
            row["methods"][method] = m
        cases.append(row)
    return {"cases": cases}


def _fmt(x, unit=""):
    return "-" if x is None else f"{x:.3g}{unit}"


def describe(summary: dict) -> list[str]:
    lines = []
    for c in summary["cases"]:
        head = f"{c['case']}: {c['P_star_is']} = {c['P_star']:.0f}"
        parts = []
        if c["asymptotic_exponent"] is not None:
            parts.append(f"theory exponent {_fmt(c['theory'].get('exponent'))} (law {c['asymptotic_exponent']:g})")
        for method, m in c["methods"].items():
            s = method
            if m.get("fit"):
                ci = m["fit"]["ci"]
                s += f" exponent {_fmt(m['fit']['exponent'])}" + (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "")
            if m.get("ratio_to_theory"):
                lo, hi = m["ratio_to_theory"]
                s += f", measured / predicted {lo:.2f}-{hi:.2f}"
            parts.append(s)
        lines.append(head + "; " + "; ".join(parts))
    return lines
