"""The three-transitions table: per (attention, T), the transition P of the joint mode, the marginal mode and the
posterior from the theory, Adam's and NUTS's measured transitions, and the Occam and entropy shifts between them."""

from __future__ import annotations

import numpy as np

from ...stats import BOOTSTRAP, WILSON, fmt_ci, found_median, solve_rate


def summarize(recs: list[dict], seed: int) -> dict:
    """The table (a list of rows) from the saved point records: the theory's and the measured transitions of
    ``seed`` (the config's first seed)."""
    rows = {}
    for r in recs:
        p, res = r["point"], r["result"]
        if p["config"].get("seed", seed) != seed:
            continue
        if p["kind"] == "theory":
            row = rows.setdefault((p["attention"], p["T"]), {})
            for k in ("posterior", "joint", "marginal"):
                row[f"theory_{k}"] = res[k]
        elif p["kind"] == "adam":
            row = rows.setdefault((p["attention"], p["T"]), {})
            row[f"adam_{p['objective']}_{p['init']}"] = {
                "P": res["P"],
                "theory": res["theory"],
                "note": res.get("note"),
            }
        elif p["kind"] == "mcmc":
            row = rows.setdefault((p["attention"], p["T"]), {})
            row["mcmc"] = {
                "P": res["P"],
                "bracket": res["bracket"],
                "theory": res["theory"],
                "per_start": {i: v["P"] for i, v in res["per_start"].items()},
            }
    table = []
    for (a, T), row in sorted(rows.items()):
        e = {"attention": a, "T": T, **row}
        pj, pm, pp = (row[f"theory_{k}"]["P_c"] for k in ("joint", "marginal", "posterior"))
        if None not in (pj, pm, pp):
            e["occam_shift"] = pm - pj
            e["entropy_shift"] = pp - pm
            e["occam_share"] = (pm - pj) / (pp - pj)
        table.append(e)
    out = {"table": table}
    st = seed_statistics(recs)
    if st is not None:
        out["seeds"] = st
    return out


# a measured transition counts as "within 5%" of its theory: Adam's of the zero-temperature mode's, NUTS's of the
# posterior's (docs/results/three_transitions.md)
WITHIN = 0.05


def sgld_jump(res: dict) -> tuple[float, float] | None:
    """The P bracket where an SGLD point's mean m first lies above the level half-way between the tempered
    theory's lowest and highest mean m on its grid (a hot init: where it stays on the copy branch; a small init:
    where it reaches it); None when no P or the first is above it."""
    Ps, m = np.asarray(res["P"], float), np.asarray(res["m_mean"], float)
    level = 0.5 * (np.nanmin(res["theory_mean_m"]) + np.nanmax(res["theory_mean_m"]))
    idx = np.flatnonzero(m > level)
    if idx.size == 0 or idx[0] == 0:
        return None
    return float(Ps[idx[0] - 1]), float(Ps[idx[0]])


def _measured(recs: list[dict]) -> dict[tuple, dict]:
    """Every measured transition, keyed (method, ...): its theory value and its P per seed (None: not found)."""
    out: dict[tuple, dict] = {}
    for r in recs:
        p, res = r["point"], r["result"]
        seed = p["config"].get("seed")
        if p["kind"] == "adam":
            if res["P"] is None and not res.get("rounds"):  # a crossover's hot init: not run
                continue
            key, P, theory = ("adam", p["attention"], p["T"], p["objective"], p["init"]), res["P"], res["theory"]
        elif p["kind"] == "mcmc":
            key, P, theory = ("mcmc", p["attention"], p["T"]), res["P"], res["theory"]
        elif p["kind"] == "sgld":
            br = sgld_jump(res)
            key, P, theory = ("sgld", p["tau"], p["init"]), None if br is None else 0.5 * sum(br), res["theory_P_c"]
        else:
            continue
        out.setdefault(key, {"theory": theory, "P": {}})["P"][seed] = P
    return out


FIELDS = {"adam": ("attention", "T", "objective", "init"), "mcmc": ("attention", "T"), "sgld": ("tau", "init")}


def seed_statistics(recs: list[dict]) -> dict | None:
    """Each measured transition over the run's seeds (None with one seed): its P per seed, the median of P over
    its theory value with a 95% bootstrap interval (over the seeds where it was found), in how many seeds it was
    not found and, for Adam and NUTS, in how many it lies within :data:`WITHIN` of the theory (Wilson interval);
    and per method the count over every (transition, seed) and each seed's count. SGLD's P is the midpoint of
    :func:`sgld_jump`'s bracket and its theory the tempered binodal (hysteresis, not the binodal, sets it: no
    within count)."""
    measured = _measured(recs)
    seeds = sorted({s for e in measured.values() for s in e["P"]})
    if len(seeds) < 2:
        return None
    out: dict = {"seeds": seeds, "within": WITHIN, "intervals": {"ratio": BOOTSTRAP, "within": WILSON}}
    for method, names in FIELDS.items():
        rows, hits = [], {s: [0, 0] for s in seeds}
        for key, e in sorted((k, e) for k, e in measured.items() if k[0] == method):  # by attention, then T
            ss = sorted(e["P"])
            ratios = {s: None if e["P"][s] is None else e["P"][s] / e["theory"] for s in ss}
            ratio = found_median(list(ratios.values()))
            row = {**dict(zip(names, key[1:])), "theory": e["theory"], "seeds": ss, "P": [e["P"][s] for s in ss]}
            row.update(ratio={"median": ratio["median"], "ci": ratio["ci"]}, not_found=ratio["not_found"])
            if method != "sgld":
                inside = {s: x is not None and abs(x - 1.0) <= WITHIN for s, x in ratios.items()}
                for s, ok in inside.items():
                    hits[s][0] += ok
                    hits[s][1] += 1
                row["within"] = solve_rate(sum(inside.values()), len(ss))
            rows.append(row)
        out[method] = {"transitions": rows}
        if method != "sgld" and rows:
            out[method]["within"] = solve_rate(sum(h[0] for h in hits.values()), sum(h[1] for h in hits.values()))
            out[method]["within_per_seed"] = [{"seed": s, "within": h[0], "of": h[1]} for s, h in hits.items()]
    return out


def seeds_line(st: dict) -> str:
    """One line of the seeds' statistics: Adam's and NUTS's counts within the theory's 5%."""
    parts = []
    for method, name in (("adam", "Adam"), ("mcmc", "NUTS")):
        w = st[method].get("within")
        if w:
            per = [p["within"] for p in st[method]["within_per_seed"]]
            span = f"{min(per)}" if min(per) == max(per) else f"{min(per)}-{max(per)}"
            of = max(p["of"] for p in st[method]["within_per_seed"])
            parts.append(f"{name} {w['solved']} of {w['seeds']} {fmt_ci(w['ci'])} (per seed {span} of {of})")
    return f"over {len(st['seeds'])} seeds, transitions within {st['within']:.0%} of the theory: " + "; ".join(parts)
