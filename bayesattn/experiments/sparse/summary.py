"""The sparse-pattern summaries, from the saved records alone: per training configuration the solved seeds with
their 95% Wilson interval, the median t* with its 95% bootstrap interval (unsolved seeds censored at the step
budget: :data:`bayesattn.stats.CENSOR_RULE`) and its range over solved seeds, the plateau and the IoU; one-sided
tests of "X helps" (heads, head size, Mixer vs transformer); the Bayesian threshold P_c(S, s)."""

from __future__ import annotations

import numpy as np

from ... import stats
from ...bayes.theory.common import first_crossing as transitions
from ..contract import number


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
                    "budget": res[0].get("budget", recs[0]["point"]["train"].get("steps")),
                    "iou_final": [x["iou_final"] for x in res],
                    "entropy_final": [x["entropy_final"] for x in res],
                    "history": {  # each seed's histories end at its own stop step: "step" is the longest
                        "step": max((x["history"]["step"] for x in res), key=len),
                        "loss": [x["history"]["loss"] for x in res],
                        "acc10": [x["history"]["acc10"] for x in res],
                    },
                    "records": {
                        "step": max((x["records"]["step"] for x in res), key=len),
                        "iou": [x["records"]["iou"] for x in res],
                        "entropy": [x["records"]["entropy"] for x in res],
                    },
                    **({"state_loss": [x["state_loss"] for x in res]} if all("state_loss" in x for x in res) else {}),
                    "attention_seed0": res[0]["attention"],
                    "support": res[0]["support"],
                },
                "wall_time_s": float(sum(r.get("wall_time_s", 0.0) for r in recs)),
            }
        )
    return out


def difficulty(result: dict, budget: float | None = None) -> dict:
    """Solved seeds with the 95% Wilson interval of the solve rate; the median t* over all seeds with unsolved seeds
    censored at ``budget`` (default: the result's "budget", else its "steps_run") and its 95% bootstrap interval;
    the median, its 95% bootstrap interval and the range of t* over solved seeds only (``t_median_solved``,
    ``t_ci_solved``: the convention of the replication's tables, which leave unsolved seeds out); mean plateau,
    mean final IoU and, where recorded, mean final attention entropy and each seed's final accuracy (the trailing
    10-step mean of the last state's, ``accuracy_final``), and the median escape step from ln 2 (first stored step
    with loss < ln 2 - 0.05)."""
    ts = [t for t in result["t_star"] if t is not None]
    if budget is None:
        budget = result.get("budget") or result.get("steps_run") or max(ts, default=1)
    h = result.get("history", {})
    esc = [next((st for st, l in zip(h["step"], loss) if l < np.log(2) - 0.05), None) for loss in h.get("loss", [])]
    esc = [e for e in esc if e is not None]
    rate = stats.solve_rate(len(ts), len(result["t_star"]))
    med = stats.median_interval(result["t_star"], budget)
    med_solved = stats.median_interval(ts, budget)  # no seed is censored among these
    return {
        "solved": len(ts),
        "seeds": len(result["t_star"]),
        "solve_rate": rate["rate"],
        "solve_ci": rate["ci"],
        "escape_median": float(np.median(esc)) if esc else None,
        "t_median": med["median"],
        "t_ci": med["ci"],
        "t_median_solved": med_solved["median"],
        "t_ci_solved": med_solved["ci"],
        "budget": budget,
        "t_min": min(ts) if ts else None,
        "t_max": max(ts) if ts else None,
        "t_star": list(result["t_star"]),
        "plateau": float(np.mean(result["plateau"])),
        "iou": float(np.mean(result["iou_final"])),
        **({"entropy": float(np.mean(result["entropy_final"]))} if "entropy_final" in result else {}),
        **({"accuracy_final": [a[-1] if a else None for a in h["acc10"]]} if "acc10" in h else {}),
        **_state_loss(result),
    }


def _state_loss(result: dict) -> dict:
    """The automaton's mean loss per predicted state over the seeds (at their stop steps) and its in-context gain,
    the fall from the first state to the last: 0 when nothing is inferred from the sequence (a pool of one table)."""
    if "state_loss" not in result:
        return {}
    sl = np.asarray(result["state_loss"], np.float64)  # (seeds, states)
    return {"state_loss": sl.mean(axis=0).tolist(), "in_context_gain": float(np.mean(sl[:, 0] - sl[:, -1]))}


def _label(row: dict, field: str) -> str:
    return {"heads": "H", "head_dim": "head size", "lr": "lr"}.get(field, field) + f"={row[field]:g}"


def comparisons(rows: dict[str, list[dict]]) -> list[dict]:
    """The "X helps" tests between summary rows (:func:`bayesattn.stats.compare`, both directions, one-sided):

    - heads: the fewest against the most heads (H = 1 vs H = 8 in the shipped configs); head_dim: the smallest
      against the largest head size;
    - mixer: at every s, the Mixer against the transformer, each at its best learning rate (highest solve rate,
      then lowest median t*; ``lr_selected`` says the best was chosen on these same seeds, which makes the
      p-values optimistic), and at every learning rate pair when both arms share one."""
    out = []
    for part, field in (("heads", "heads"), ("head_dim", "head_dim")):
        rs = sorted((r for r in rows.get(part, []) if r.get(field) is not None), key=lambda r: r[field])
        if len(rs) >= 2:
            lo, hi = rs[0], rs[-1]
            c = stats.compare(
                _label(hi, field), hi["t_star"], hi["budget"], _label(lo, field), lo["t_star"], lo["budget"]
            )
            out.append({"part": part, "S": lo["S"], "s": lo["s"], **c})
    mix = rows.get("mixer", [])
    for s_ in sorted({r["s"] for r in mix}):
        arms = {m: [r for r in mix if r["s"] == s_ and r["model"] == m] for m in ("mixer", "transformer")}
        if not all(arms.values()):
            continue

        def best(rs):
            return min(rs, key=lambda r: (-r["solved"], r["t_median"] if r["t_median"] is not None else np.inf))

        a, b = best(arms["mixer"]), best(arms["transformer"])
        c = stats.compare(
            f"mixer lr={a['lr']:g}", a["t_star"], a["budget"], f"transformer lr={b['lr']:g}", b["t_star"], b["budget"]
        )
        sel = len(arms["mixer"]) > 1 or len(arms["transformer"]) > 1
        out.append({"part": "mixer", "S": a["S"], "s": s_, "lr_selected": sel, **c})
    return out


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
    summary: dict = {
        "statistics": {
            "solve_rate": stats.WILSON,
            "t_median": f"median t*, {stats.CENSOR_RULE}; t_ci: {stats.BOOTSTRAP}",
            "t_median_solved": "median t* over the solved seeds only (unsolved seeds left out, as in the "
            "replication's tables); None when no seed is solved; t_ci_solved: its bootstrap interval, as t_ci",
            "comparisons": "one-sided: Fisher exact (solve rate, p_solve), Mann-Whitney U (censored t*, p_faster);"
            " no correction for the number of comparisons",
        }
    }
    rows: dict[str, list[dict]] = {}
    for part, recs in records.items():
        if part == "bayes":
            summary["bayes"] = bayes_summary(recs)
        elif part == "theory":
            summary["theory"] = {f"S={r['point']['S']},s={r['point']['s']}": r["result"]["P_c"] for r in recs}
        else:
            rows[part] = summary[part] = [
                {
                    **{k: g["point"]["train"].get(k) for k in ("S", "s", "model", "heads", "head_dim", "width", "lr")},
                    "task": g["point"]["train"].get("task", "linear_map"),
                    "A": g["point"]["train"].get("A", "fixed"),  # points written before the field: one fixed map
                    **difficulty(g["result"], g["result"].get("budget")),
                    "wall_s": g["wall_time_s"],
                }
                for g in group_seeds(recs)
            ]
    comp = comparisons(rows)
    if comp:
        summary["comparisons"] = comp
    return summary


def _t(e: dict) -> str:
    if e["t_median"] is None:
        return f">= {e['budget']} (half or more unsolved)" if e["solved"] < e["seeds"] else "-"
    rng = f", solved range {e['t_min']}-{e['t_max']}" if e["t_min"] is not None else ""
    return f"{e['t_median']:.0f} {stats.fmt_ci(e['t_ci'], 0)}{rng}"


def describe(summary: dict) -> list[str]:
    lines = []
    for part in ("grid", "heads", "head_dim", "mixer"):
        for e in summary.get(part, []):
            lr = f" lr={e['lr']:g}" if e.get("lr") is not None else ""
            lines.append(
                f"{part}: {e['model']} S={e['S']} s={e['s']} H={e['heads']} head_dim={e['head_dim']}{lr} A={e['A']}: "
                f"solved {e['solved']}/{e['seeds']} {stats.fmt_ci(e['solve_ci'])}, median t* {_t(e)}, "
                f"plateau {e['plateau']:.3f}, IoU {e['iou']:.2f}"
                + (
                    f", loss x_1 -> x_k {e['state_loss'][0]:.3f} -> {e['state_loss'][-1]:.3f}"
                    if "state_loss" in e
                    else ""
                )
            )
    for c in summary.get("comparisons", []):
        ah, bh = c["a_helps"], c["b_helps"]
        pf = lambda p: "-" if p is None else f"{p:.3g}"  # noqa: E731
        lines.append(
            f"{c['part']} S={c['S']} s={c['s']}: {c['a']} vs {c['b']}: solved {ah['solved'][0]}/{ah['seeds'][0]} vs "
            f"{ah['solved'][1]}/{ah['seeds'][1]}; p({c['a']} helps) = {pf(ah['p_solve'])} (solve), "
            f"{pf(ah['p_faster'])} (t*); p({c['b']} helps) = {pf(bh['p_solve'])}, {pf(bh['p_faster'])}"
        )
    for key, e in summary.get("bayes", {}).items():
        lines.append(
            f"bayes {key}: P_c = {number(e['P_c'])} (MCMC), {number(summary.get('theory', {}).get(key))} (theory)"
        )
    if any(summary.get(p) for p in ("grid", "heads", "head_dim", "mixer")):
        lines.append(f"intervals: solve rate {stats.WILSON}; median t* {stats.BOOTSTRAP}, {stats.CENSOR_RULE}")
    return lines
