"""The phase diagram's summary, from the saved records alone: the transition per attention and method, the
sampler's diagnostics against fixed thresholds, and the printed lines (:func:`describe`)."""

from __future__ import annotations

import numpy as np

from ...models.attention import ORDER_PARAMETER
from .compute import ADAM, DATA, KEY_RULES, MCMC


def summarize(cfg, records: dict[str, list[dict]]) -> dict:
    """Transitions per attention and method of the config seed, from the saved records, and the key rules; the
    MCMC diagnostics over every seed's points."""
    trans: dict[str, dict] = {a: {} for a in cfg.attention}
    for rec in records.get("theory", []):
        a = rec["point"]["attention"]
        trans[a]["theory"] = rec["result"]["curve"]["transition"]
    for method in ("mcmc", "adam"):
        for a in cfg.attention:  # the config seed's points (a point without one: a run made before seeds)
            recs = sorted(
                (
                    r
                    for r in records.get(method, [])
                    if r["point"]["attention"] == a and r["point"].get("seed", cfg.seed) == cfg.seed
                ),
                key=lambda r: r["point"]["P"],
            )
            if recs:
                trans[a][method] = empirical_transition(recs, method, a)
    out = {
        "seed": cfg.seed,
        "key_streams": {"data": DATA, "mcmc": MCMC, "adam": ADAM, "rules": KEY_RULES},
        "transitions": trans,
    }
    if records.get("mcmc"):
        out["mcmc_diagnostics"] = mcmc_diagnostics(records["mcmc"])
    return out


# The thresholds every MCMC point of a phase diagram is held to, on its attention's order parameter: split R-hat at
# most R_HAT_MAX and bulk ESS at least ESS_MIN (Stan's classic rules, for the default's 2 chains per start), and no
# divergent transition after warm-up. A faster sampler or setting is compared with the default at these thresholds.
R_HAT_MAX = 1.05
ESS_MIN = 100.0


def mcmc_diagnostics(records: list[dict]) -> dict:
    """Per attention: the worst split R-hat and the smallest bulk ESS of its order parameter over every MCMC point
    and start, where they occur, the divergences after warm-up, whether the thresholds are met and by how many
    chain groups (point and start) they are missed. A chain group without both diagnostics (a result made by other
    code) is left out and counted; a non-finite value fails."""
    out: dict = {}
    for a in dict.fromkeys(r["point"]["attention"] for r in records):
        x = ORDER_PARAMETER[a]
        rows, missing, divergent, failing = [], 0, 0, 0
        for r in records:
            if r["point"]["attention"] != a:
                continue
            for init, res in r["result"]["inits"].items():
                entry = res.get(x, {})
                if entry.get("r_hat") is None or entry.get("ess_bulk") is None:
                    missing += 1
                    continue
                r_hat, ess = float(entry["r_hat"]), float(entry["ess_bulk"])
                # non-finite: the worst possible value, so that it is the one reported and it fails
                r_hat = r_hat if np.isfinite(r_hat) else np.inf
                ess = ess if np.isfinite(ess) else -np.inf
                div = int(res.get("diagnostics", {}).get("num_divergent", 0))
                rows.append((r_hat, ess, int(r["point"]["P"]), init))
                divergent += div
                failing += not (r_hat <= R_HAT_MAX and ess >= ESS_MIN and div == 0)
        if not rows:
            continue
        worst_r, worst_e = max(rows, key=lambda t: t[0]), min(rows, key=lambda t: t[1])
        out[a] = {
            "observable": x,
            "r_hat_max": float(worst_r[0]) if np.isfinite(worst_r[0]) else None,
            "r_hat_max_at": {"P": worst_r[2], "init": worst_r[3]},
            "ess_bulk_min": float(worst_e[1]) if np.isfinite(worst_e[1]) else None,
            "ess_bulk_min_at": {"P": worst_e[2], "init": worst_e[3]},
            "divergent": divergent,
            "chain_groups": len(rows),
            "chain_groups_failing": failing,
            "chain_groups_without_diagnostics": missing,
            "thresholds": {"r_hat_max": R_HAT_MAX, "ess_bulk_min": ESS_MIN, "divergent": 0},
            "met": failing == 0,
        }
    return out


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
        out[init] = {**largest_rise(P, vals), "below_grid": bool(vals[0] > 0.5), "P": P.tolist(), x: vals.tolist()}
    return out


def largest_rise(P, vals) -> dict:
    """The largest increase of ``vals`` between neighbouring grid values of P: ``rise_between`` (those two P),
    ``rise`` (the increase) and ``P_jump`` (their geometric midpoint); rise_between and P_jump None when no
    increase exceeds 0.05."""
    P, vals = np.asarray(P, dtype=float), np.asarray(vals, dtype=float)
    rise = np.diff(vals)
    k = int(np.nanargmax(rise)) if rise.size and np.any(np.isfinite(rise)) else None
    big = k is not None and rise[k] > 0.05
    return {
        "rise_between": [float(P[k]), float(P[k + 1])] if big else None,
        "rise": float(rise[k]) if k is not None else None,
        "P_jump": float(np.sqrt(P[k] * P[k + 1])) if big else None,
    }


def _num(v, digits: int) -> str:
    """``v`` with ``digits`` decimals; from 1e6 on in powers of ten (an R-hat of 8e16: chains that never mixed)."""
    return "not finite" if v is None else (f"{v:.{digits}f}" if abs(v) < 1e6 else f"{v:.2e}")


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
    diagnostics = summary.get("mcmc_diagnostics", {})
    for a in [a for a in summary["transitions"] if a in diagnostics]:
        dg = diagnostics[a]
        r_at, e_at = dg["r_hat_max_at"], dg["ess_bulk_min_at"]
        lines.append(
            f"{a}: mcmc diagnostics of {dg['observable']} over {dg['chain_groups']} chain groups: max R-hat "
            f"{_num(dg['r_hat_max'], 3)} (P = {r_at['P']}, {r_at['init']}), min bulk ESS {_num(dg['ess_bulk_min'], 0)} "
            f"(P = {e_at['P']}, {e_at['init']}), {dg['divergent']} divergent; thresholds R-hat <= "
            f"{dg['thresholds']['r_hat_max']}, ESS >= {dg['thresholds']['ess_bulk_min']:.0f}, no divergence: "
            + ("met" if dg["met"] else f"NOT met ({dg['chain_groups_failing']} of {dg['chain_groups']} groups)")
        )
    return lines
