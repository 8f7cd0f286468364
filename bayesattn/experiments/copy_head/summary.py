"""The phase diagram's summary, from the saved records alone: the transition per attention and method, and the
printed lines (:func:`describe`)."""

from __future__ import annotations

import numpy as np

from ...models.attention import ORDER_PARAMETER
from .compute import ADAM, DATA, KEY_RULES, MCMC


def summarize(cfg, records: dict[str, list[dict]]) -> dict:
    """Transitions per attention and method, from the saved records, and the key rules."""
    trans: dict[str, dict] = {a: {} for a in cfg.attention}
    for rec in records.get("theory", []):
        a = rec["point"]["attention"]
        trans[a]["theory"] = rec["result"]["curve"]["transition"]
    for method in ("mcmc", "adam"):
        for a in cfg.attention:
            recs = sorted(
                (r for r in records.get(method, []) if r["point"]["attention"] == a), key=lambda r: r["point"]["P"]
            )
            if recs:
                trans[a][method] = empirical_transition(recs, method, a)
    return {
        "seed": cfg.seed,
        "key_streams": {"data": DATA, "mcmc": MCMC, "adam": ADAM, "rules": KEY_RULES},
        "transitions": trans,
    }


def final_values(result: dict, method: str, x: str) -> np.ndarray:
    """Per-init final values of ``x`` in one point's result: MCMC posterior means (1 value), Adam runs (runs,)."""
    if method == "mcmc":
        return np.array([result[x]["mean"]], dtype=float)
    return np.asarray(result["final_order_parameters"][x], dtype=float).ravel()


def empirical_transition(recs: list[dict], method: str, attention: str) -> dict:
    """Where a sampled / trained order parameter rises over the P grid (per init).

    ``rise_between``: the two neighbouring grid values of P with the largest increase of the order parameter,
    and ``rise``, that increase; ``P_jump``: their geometric midpoint (None when no increase exceeds 0.05);
    ``below_grid``: already above 0.5 at the smallest P (the rise lies below the grid).
    """
    x = ORDER_PARAMETER[attention]
    P = np.array([r["point"]["P"] for r in recs], dtype=float)
    out = {}
    for init in recs[0]["result"]["inits"]:
        vals = np.array([np.nanmean(final_values(r["result"]["inits"][init], method, x)) for r in recs])
        rise = np.diff(vals)
        k = int(np.nanargmax(rise)) if rise.size and np.any(np.isfinite(rise)) else None
        big = k is not None and rise[k] > 0.05
        out[init] = {
            "rise_between": [float(P[k]), float(P[k + 1])] if big else None,
            "rise": float(rise[k]) if k is not None else None,
            "P_jump": float(np.sqrt(P[k] * P[k + 1])) if big else None,
            "below_grid": bool(vals[0] > 0.5),
            "P": P.tolist(),
            x: vals.tolist(),
        }
    return out


def describe(summary: dict) -> list[str]:
    """The printed summary: one line per attention and method."""
    lines = []
    for a, tr in summary["transitions"].items():
        if "theory" in tr:
            t = tr["theory"]
            sp = ", spinodals at P = " + ", ".join(f"{s:.0f}" for s in t["spinodals"]) if t.get("spinodals") else ""
            kind = "smooth crossover" if t["order"] == "crossover" else f"{t['order']}-order transition"
            pc = f"P_c = {t['P_c']:.0f}" if t.get("P_c") else "not within the P range"
            lines.append(f"{a}: theory: {kind}, {pc}{sp}")
        for method in ("mcmc", "adam"):
            x = ORDER_PARAMETER[a]
            for init, v in tr.get(method, {}).items():
                P, vals = v["P"], v[x]
                span = f"{x} = {vals[0]:.2f} at P = {P[0]:.0f}, {vals[-1]:.2f} at P = {P[-1]:.0f}"
                if v["below_grid"]:
                    where = "already above 0.5 at the smallest P"
                elif v["rise_between"] is None:
                    where = "no rise above 0.05 between neighbouring grid points"
                else:
                    lo, hi = v["rise_between"]
                    where = f"largest rise {v['rise']:+.2f} between P = {lo:.0f} and {hi:.0f}"
                lines.append(f"{a}: {method} ({init} start): {span}; {where}")
    return lines
