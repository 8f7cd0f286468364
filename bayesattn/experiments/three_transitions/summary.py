"""The three-transitions table: per (attention, T), the transition P of the joint mode, the marginal mode and the
posterior from the theory, Adam's and NUTS's measured transitions, and the Occam and entropy shifts between them."""

from __future__ import annotations


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
    return {"table": table}
