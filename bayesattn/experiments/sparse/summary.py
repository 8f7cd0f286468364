"""The sparse-pattern summaries, from the saved records alone: per training configuration the solved seeds (with a
95% Wilson interval), the median t* and its range, the plateau and the IoU; the Bayesian threshold P_c(S, s)."""

from __future__ import annotations

import numpy as np

from .compute import transitions


def group_seeds(records: list[dict]) -> list[dict]:
    """Per-seed training records -> one record per training config, in first-seen order: ``point`` (the config,
    ``seeds``) and ``result`` with per-seed lists (``t_star``, ``plateau``, ``iou_final``, ``entropy_final``, the
    histories' ``loss`` / ``acc10`` and records' ``iou`` / ``entropy``), seed order."""
    groups: dict[str, list[dict]] = {}
    for r in records:
        key = repr(sorted(r["point"]["train"].items()))
        groups.setdefault(key, []).append(r)
    out = []
    for recs in groups.values():
        recs = sorted(recs, key=lambda r: r["point"]["seed"])
        res = [r["result"] for r in recs]
        out.append(
            {
                "point": {
                    **{k: v for k, v in recs[0]["point"].items() if k != "seed"},
                    "seeds": [r["point"]["seed"] for r in recs],
                },
                "result": {
                    "seeds": [x["seed"] for x in res],
                    "t_star": [x["t_star"] for x in res],
                    "plateau": [x["plateau"] for x in res],
                    "steps_run": max(x["steps_run"] for x in res),
                    "iou_final": [x["iou_final"] for x in res],
                    "entropy_final": [x["entropy_final"] for x in res],
                    "history": {
                        "step": res[0]["history"]["step"],
                        "loss": [x["history"]["loss"] for x in res],
                        "acc10": [x["history"]["acc10"] for x in res],
                    },
                    "records": {
                        "step": res[0]["records"]["step"],
                        "iou": [x["records"]["iou"] for x in res],
                        "entropy": [x["records"]["entropy"] for x in res],
                    },
                    "attention_seed0": res[0]["attention"],
                    "support": res[0]["support"],
                },
                "wall_time_s": float(sum(r.get("wall_time_s", 0.0) for r in recs)),
            }
        )
    return out


def difficulty(result: dict) -> dict:
    """Solved seeds, median and range of t* over solved seeds, mean plateau, mean final IoU, and the median
    escape step from ln 2 (first stored step with loss < ln 2 - 0.05)."""
    ts = [t for t in result["t_star"] if t is not None]
    h = result.get("history", {})
    esc = [next((st for st, l in zip(h["step"], loss) if l < np.log(2) - 0.05), None) for loss in h.get("loss", [])]
    esc = [e for e in esc if e is not None]
    return {
        "solved": len(ts),
        "seeds": len(result["t_star"]),
        "escape_median": float(np.median(esc)) if esc else None,
        "t_median": float(np.median(ts)) if ts else None,
        "t_min": min(ts) if ts else None,
        "t_max": max(ts) if ts else None,
        "plateau": float(np.mean(result["plateau"])),
        "iou": float(np.mean(result["iou_final"])),
    }


def bayes_summary(records: list) -> dict:
    """{"S=8,s=2": {"P": [...], "mass": {init: [...]}, "excess": [...], "P_c": ...}}: excess = (M - s/S) / (1 - s/S)
    of the mass M averaged over inits (0 for uniform attention, 1 on the support); P_c: where it crosses 1/2
    (log-interpolated; None if it does not within the grid)."""
    out: dict = {}
    for r in records:
        pt = r["point"]
        e = out.setdefault(f"S={pt['S']},s={pt['s']}", {"S": pt["S"], "s": pt["s"], "by": {}})
        e["by"].setdefault(pt["init"], {})[pt["P"]] = r["result"]["mass"]
    for e in out.values():
        P = sorted(set().union(*[set(v) for v in e["by"].values()]))
        e["P"] = P
        e["mass"] = {init: [v.get(p) for p in P] for init, v in e["by"].items()}
        mean = np.array([np.mean([v[p] for v in e["by"].values() if p in v]) for p in P])
        e["mass_mean"] = mean.tolist()
        base = e["s"] / e["S"]
        excess = (mean - base) / (1 - base) if base < 1 else np.ones_like(mean)
        e["excess"] = excess.tolist()
        e["P_c"] = transitions(np.asarray(P, float), excess, 0.5)
        del e["by"]
    return out


def summarize(records: dict[str, list[dict]]) -> dict:
    summary: dict = {}
    for part, recs in records.items():
        if part == "bayes":
            summary["bayes"] = bayes_summary(recs)
        elif part == "theory":
            summary["theory"] = {f"S={r['point']['S']},s={r['point']['s']}": r["result"]["P_c"] for r in recs}
        else:
            summary[part] = [
                {
                    **{k: g["point"]["train"][k] for k in ("S", "s", "model", "heads", "head_dim", "width")},
                    **difficulty(g["result"]),
                    "wall_s": g["wall_time_s"],
                }
                for g in group_seeds(recs)
            ]
    return summary


def describe(summary: dict) -> list[str]:
    lines = []
    for part in ("grid", "heads", "head_dim", "mixer"):
        for e in summary.get(part, []):
            t = "-" if e["t_median"] is None else f"{e['t_median']:.0f} ({e['t_min']}-{e['t_max']})"
            lines.append(
                f"{part}: {e['model']} S={e['S']} s={e['s']} H={e['heads']} head_dim={e['head_dim']}: "
                f"solved {e['solved']}/{e['seeds']}, median t* {t}, plateau {e['plateau']:.3f}, "
                f"IoU {e['iou']:.2f}"
            )
    for key, e in summary.get("bayes", {}).items():
        lines.append(f"bayes {key}: P_c = {e['P_c']} (MCMC), {summary.get('theory', {}).get(key)} (theory)")
    return lines
