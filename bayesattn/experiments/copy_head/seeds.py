"""The phase diagram over seeds (``seeds`` >= 2 in the config), from the saved records alone. Each seed is its own
data set, MCMC chains and Adam runs. Per attention, method and start: where the largest rise of the order parameter
falls in each seed, how often the theory's P_c lies inside it and how often it is the theory's own largest rise on
the grid, and, for MCMC, the mean over the data sets at each P of the order parameter and of the held-out error
against the theory's."""

from __future__ import annotations

from collections import Counter

import numpy as np

from ...models.attention import ORDER_PARAMETER
from ...stats import AWAY, BOOTSTRAP, WILSON, against_curve, curve_at, fmt_ci, found_median, solve_rate
from ..contract import common_P, seed_matrix
from .summary import empirical_transition, final_values, largest_rise


def by_seed(records: list[dict]) -> dict[int, list[dict]]:
    """{seed: its records sorted by P}, seeds in increasing order."""
    out: dict[int, list[dict]] = {}
    for r in records:
        out.setdefault(int(r["point"]["seed"]), []).append(r)
    return {s: sorted(out[s], key=lambda r: r["point"]["P"]) for s in sorted(out)}


def seed_statistics(records: dict[str, list[dict]], theory: dict[str, dict]) -> dict | None:
    """The statistics over the run's seeds (None with fewer than 2). ``theory``: {attention: the theory point's
    result (its ``curve`` and ``losses``)}, where the run has one.

    Per attention, method and start: each seed's ``rise_between`` (:func:`empirical_transition`), the brackets
    with their seed counts (most common first), the median over the seeds of ``P_jump`` with a bootstrap interval,
    and for MCMC how many seeds' brackets hold the theory's P_c (Wilson interval), the bracket of the largest rise
    of the theory's posterior mean read on the grid (``theory_rise_between``) and how many seeds share it
    (``theory_same_bracket``, Wilson interval), ``against_theory`` (the
    posterior mean of the order parameter against the theory's) and ``test_error_against_theory`` (the held-out
    error against the theory's prediction for the posterior; :func:`against_theory`)."""
    seeds = sorted({int(r["point"]["seed"]) for m in ("mcmc", "adam") for r in records.get(m, [])})
    if len(seeds) < 2:
        return None
    out: dict = {
        "seeds": seeds,
        "intervals": {"theory_inside": WILSON, "theory_same_bracket": WILSON, "P_jump": BOOTSTRAP, "mean": BOOTSTRAP},
        "attention": {},
    }
    for method in ("mcmc", "adam"):
        attentions = dict.fromkeys(r["point"]["attention"] for r in records.get(method, []))
        for a in attentions:
            per = {
                s: (recs, empirical_transition(recs, method, a))
                for s, recs in by_seed([r for r in records[method] if r["point"]["attention"] == a]).items()
            }
            curve = theory.get(a, {}).get("curve")
            P_c = (curve or {}).get("transition", {}).get("P_c")
            for init in next(iter(per.values()))[1]:
                rows = [tr[init] for _, tr in per.values()]
                between = [tuple(r["rise_between"]) if r["rise_between"] else None for r in rows]
                entry: dict = {
                    "seeds": list(per),
                    "rise_between": [list(b) if b else None for b in between],
                    "brackets": [
                        {"between": list(b) if b else None, "seeds": n} for b, n in Counter(between).most_common()
                    ],
                    "P_jump": found_median([r["P_jump"] for r in rows]),
                }
                if method == "mcmc" and P_c is not None:  # the posterior's transition: MCMC's, not Adam's
                    entry["theory_P_c"] = P_c
                    entry["theory_inside"] = solve_rate(
                        sum(b is not None and b[0] <= P_c <= b[1] for b in between), len(rows)
                    )
                if method == "mcmc" and curve is not None:
                    groups = [recs for recs, _ in per.values()]
                    x = ORDER_PARAMETER[a]
                    # the theory's posterior mean read on the grid, its largest rise by the same rule: the bracket
                    # to expect of a transition of any order (a second-order P_c lies below the largest rise)
                    grid = common_P(groups)
                    tb = largest_rise(grid, curve_at(curve["P"], curve["mean"][x], grid))["rise_between"]
                    entry["theory_rise_between"] = tb
                    entry["theory_same_bracket"] = solve_rate(
                        sum(b is not None and list(b) == tb for b in between), len(rows)
                    )
                    entry["against_theory"] = {
                        "observable": x,
                        **against_theory(groups, init, _order_parameter(x), curve["P"], curve["mean"][x], P_c),
                    }
                    losses = theory[a].get("losses")
                    if losses and all("test_error" in r["result"]["inits"][init] for g in groups for r in g):
                        entry["test_error_against_theory"] = against_theory(
                            groups, init, _test_error, losses["P"], losses["posterior"], P_c, relative=True
                        )
                out["attention"].setdefault(a, {}).setdefault(method, {})[init] = entry
    return out


def _order_parameter(x: str):
    return lambda res: (final_values(res, "mcmc", x)[0], float(res[x].get("se", np.nan)))


def _test_error(res: dict) -> tuple[float, float]:
    te = res.get("test_error") or {}
    return float(te.get("mean", np.nan)), float(te.get("sem", np.nan))


def against_theory(
    per_seed: list[list[dict]], init: str, value, P_theory, theory_values, P_c: float | None, relative: bool = False
) -> dict:
    """One MCMC start over the data sets at each P that every seed has, against the theory there (``theory_values``
    on ``P_theory``, linear in log P between them): :func:`bayesattn.stats.against_curve`, the points more than
    AWAY from ``P_c`` (all where None) counted. ``value(result) -> (value, its standard error)`` reads a chain
    group's result."""
    common = common_P(per_seed)
    vals, ses = seed_matrix(per_seed, common, lambda r: value(r["result"]["inits"][init]))
    theory = curve_at(P_theory, theory_values, common)
    return against_curve(common, vals, ses, theory, [] if P_c is None else [P_c], relative=relative)


def describe_seeds(st: dict) -> list[str]:
    """The printed lines of the seed statistics: per attention, method and start, the brackets and the theory's
    P_c inside them; for MCMC, the theory's mean order parameter and held-out error against the data sets'."""
    lines = []
    n = len(st["seeds"])
    for a, methods in st["attention"].items():
        for method, by_init in methods.items():
            for init, e in by_init.items():
                where = ", ".join(
                    (
                        f"between P = {b['between'][0]:.0f} and {b['between'][1]:.0f}"
                        if b["between"]
                        else "none above 0.05"
                    )
                    + f" in {b['seeds']}"
                    for b in e["brackets"]
                )
                line = f"{a}: {method} ({init} start) over {n} seeds: largest rise: {where}"
                if "theory_inside" in e:
                    ti = e["theory_inside"]
                    line += (
                        f"; the theory's P_c = {e['theory_P_c']:.0f} inside in {ti['solved']} of {n} {fmt_ci(ti['ci'])}"
                    )
                if "theory_same_bracket" in e:
                    tb, sb = e["theory_rise_between"], e["theory_same_bracket"]
                    line += (
                        f"; the theory's own largest rise on this grid between P = {tb[0]:.0f} and {tb[1]:.0f}, the "
                        f"same in {sb['solved']} of {n} {fmt_ci(sb['ci'])}"
                        if tb
                        else "; the theory's mean rises by no more than 0.05 between grid points"
                    )
                lines.append(line)
                for key, what, rel in (
                    ("against_theory", f"mean {e.get('against_theory', {}).get('observable')}", False),
                    ("test_error_against_theory", "held-out error", True),
                ):
                    at = e.get(key)
                    if not (at and at["largest_gap_away"]):
                        continue
                    ins, g = at["theory_inside_away"], at["largest_gap_away"]
                    gap = f"{g['relative']:+.1%}" if rel else f"{g['gap']:+.4f}"
                    lines.append(
                        f"{a}: {method} ({init} start), {what} over {n} data sets against the theory, at the "
                        f"{ins['seeds']} P more than {AWAY:.0%} from P_c: the theory inside the 95% interval at "
                        f"{ins['solved']} of {ins['seeds']}; largest gap {gap} (P = {g['P']:.0f})"
                    )
    return lines
