"""The staircase's summary, from the saved records alone: the MCMC curves of the config's data set
(:mod:`.curves`) and their statistics over data sets (:mod:`.seeds`), the H-head theory's stages, the training
stages and the ODE's; and the lines a run prints."""

from __future__ import annotations

import numpy as np

from ... import stats
from ..contract import number
from .bayes import LAG_OBSERVABLE, LAG_OBSERVABLE_TEXT
from .curves import mcmc_summary, ratio_table
from .seeds import MIN_SEEDS, mcmc_seed_statistics, theory_by_key


def nearest_teacher_steps(steps, kl) -> list:
    """The steps at which the nearest teacher (the k minimising KL(teacher_k || model), k = 1..K newest spans)
    first reaches k = 2, ..., K (None if never): the stage boundaries as the paper's shading marks them.
    kl: (R, K)."""
    kl = np.asarray(kl)
    nearest = np.argmin(kl, axis=1) + 1
    return [int(steps[np.argmax(nearest >= k)]) if (nearest >= k).any() else None for k in range(2, kl.shape[1] + 1)]


def leave_teacher_steps(steps, kl) -> list:
    """The steps at which the model leaves the teachers with k = 1, ..., K - 1 newest spans: where KL(teacher_k ||
    model) is lowest over the run (after it the model moves away from teacher_k, towards the older spans), None
    where that is the run's last record (it has not left yet). kl: (R, K). A reading of the paper's hand-placed
    stage boundaries (ours: the paper gives no formula); unlike the nearest teacher, it does not hang on
    differences between KL curves that are within noise of each other early on."""
    kl = np.asarray(kl)
    out = []
    for k in range(kl.shape[1] - 1):
        i = int(np.argmin(kl[:, k]))
        out.append(None if i == len(steps) - 1 else int(steps[i]))
    return out


def seed_statistics(variants: list, leave: list, stages: list, budgets: list) -> dict:
    """Per variant run with :data:`MIN_SEEDS` or more seeds: the median step at which the model leaves teacher
    k = 1, 2, ... and at which each span is held by mass, each with its bootstrap interval
    (:func:`bayesattn.stats.median_interval`; a seed that has not left a teacher, or not reached a span, within its
    run is censored at its budget)."""
    out = {}
    for v in dict.fromkeys(variants):
        idx = [i for i, w in enumerate(variants) if w == v]
        if len(idx) < MIN_SEEDS:
            continue
        budget = min(budgets[i] for i in idx)
        out[v] = {
            "seeds": len(idx),
            "budget": budget,
            "leave_teacher": [
                stats.median_interval([leave[i][k] for i in idx], budget) for k in range(len(leave[idx[0]]))
            ],
            "stages_by_mass": [
                stats.median_interval([stages[i][k] for i in idx], budget) for k in range(len(stages[idx[0]]))
            ],
            "statistics": f"median over seeds, {stats.BOOTSTRAP}; {stats.CENSOR_RULE}",
        }
    return out


# fields a run of the data-size sweep may change against the main run (everything else equal)
DATA_FIELDS = ("train", "batch_size", "data")


def at_best_validation(res: dict) -> dict:
    """One training record at its best validation loss (early stopping, as the paper's ``val_best``): the step,
    the excess over the teacher's entropy, the spans held by mass (stage times at or before that step), the
    nearest-teacher boundaries crossed by then (k - 1 of the nearest teacher; 0 also where nothing was learned)."""
    step, val = np.asarray(res["step"]), np.asarray(res["val_loss"])
    i = int(np.argmin(val))
    crossed = [t for t in nearest_teacher_steps(step, res["kl"]) if t is not None and t <= step[i]]
    return {
        "step": int(step[i]),
        "excess": float(val[i] - res["teacher_entropy"]),
        "spans_by_mass": int(sum(t is not None and t <= step[i] for t in res["stages"])),
        "boundaries": len(crossed),
    }


def run_losses(res: dict) -> dict:
    """A training run's losses (nats per token): the lowest validation loss and its step, the final validation and
    training losses and the teacher's entropy (the floor of both)."""
    val = np.asarray(res["val_loss"], np.float64)
    i = int(np.argmin(val))
    return {
        "best_val_step": int(res["step"][i]),
        "best_val_loss": float(val[i]),
        "val_loss_final": float(val[-1]),
        "train_loss_final": float(res["train_loss"][-1]),
        "teacher_entropy": float(res["teacher_entropy"]),
    }


def data_size_table(records: list) -> list:
    """The training runs that differ from the main run only in their data (:data:`DATA_FIELDS`), one row per run
    kind, by data size: "n" (training sequences; None: online, fresh sequences every step), and per seed the state
    at the best validation loss (:func:`at_best_validation`) and the final training and validation losses. []
    where fewer than two data sizes ran."""
    main = [r for r in records if r["point"].get("variant", "main") == "main"]
    if not main:
        return []

    def rest(tc):
        return {k: v for k, v in tc.items() if k not in DATA_FIELDS}

    ref = rest(main[0]["point"]["train"])
    kinds: dict = {}
    for r in records:
        if rest(r["point"]["train"]) == ref:
            kinds.setdefault(r["point"].get("variant", "main"), []).append(r)
    rows = []
    for name, rs in kinds.items():
        tc = rs[0]["point"]["train"]
        res = [r["result"] for r in sorted(rs, key=lambda r: r["point"]["seed"])]
        best = [at_best_validation(x) for x in res]
        losses = [run_losses(x) for x in res]
        rows.append(
            {
                "variant": name,
                "n": None if tc.get("data", "finite") == "online" else int(tc.get("train", 9000)),
                "batch_size": int(tc.get("batch_size", 3000)),
                "spans": len(res[0]["stages"]),
                "seeds": sorted(r["point"]["seed"] for r in rs),
                **{f"best_{k}": [b[k] for b in best] for k in best[0]},
                **{k: [x[k] for x in losses] for k in ("train_loss_final", "val_loss_final", "teacher_entropy")},
            }
        )
    rows.sort(key=lambda r: (r["n"] is None, r["n"] or 0))
    return rows if len({r["n"] for r in rows}) >= 2 else []


# The paper's stage boundaries (training steps: it leaves the 1-span, then the 2-span teacher), as its analysis
# notebooks shade them on the KL curves (divergence_steps, less the steps of the n-gram baselines trained first):
# the minimal model with AdamW (Figure 1), the full one-layer transformer with AdamW (Figures 2-3) and with SGD
# (Figures 18-19, spans [4, 4, 4], lr 0.2, momentum 0.9)
PAPER_BOUNDARIES = {
    ("minimal", "adamw"): (330, 575),
    ("transformer", "adamw"): (65, 450),
    ("transformer", "sgd"): (600, 4000),
}


def paper_boundaries(train: dict) -> tuple | None:
    """The paper's boundaries for a run of this training config (a point's "train"), None where it has none."""
    return PAPER_BOUNDARIES.get((train["model"], train["optimizer"]))


def summarize(records: dict[str, list[dict]], seed: int = 0) -> dict:
    """The summary of every part that ran; of the MCMC points, the curves and ratio table of the data set ``seed``
    (the config's), and from two data sets their statistics (:func:`mcmc_seed_statistics`)."""
    summary: dict = {}
    theory = theory_by_key(records.get("theory", []))
    if "mcmc" in records:
        summary["mcmc"] = mcmc_summary([r for r in records["mcmc"] if r["point"]["seed"] == seed])
        summary["ratio_sweep"] = ratio_table(summary["mcmc"])
        seeds = mcmc_seed_statistics(records["mcmc"], theory)
        if seeds is not None:
            summary["mcmc_seeds"] = seeds
    if "train" in records:
        recs = records["train"]
        summary["train"] = {
            "stages": [r["result"]["stages"] for r in recs],
            "variants": [r["point"].get("variant", "main") for r in recs],
            "seeds": [r["point"]["seed"] for r in recs],
            "nearest_teacher_steps": [
                nearest_teacher_steps(np.asarray(r["result"]["step"]), r["result"]["kl"]) for r in recs
            ],
            "leave_teacher_steps": [
                leave_teacher_steps(np.asarray(r["result"]["step"]), r["result"]["kl"]) for r in recs
            ],
            # the run's time over every process that ran a part of it (records written before train_wall_s
            # existed: the time of the process that finished it)
            "wall_s": [r["result"].get("train_wall_s", r["wall_time_s"]) for r in recs],
            "paper_boundaries": [paper_boundaries(r["point"]["train"]) for r in recs],
        }
        t = summary["train"]
        t["seed_statistics"] = seed_statistics(
            t["variants"], t["leave_teacher_steps"], t["stages"], [r["point"]["train"]["steps"] for r in recs]
        )
        if all("train_loss" in r["result"] for r in recs):
            t["losses"] = [run_losses(r["result"]) for r in recs]
            summary["data_sizes"] = data_size_table(recs)
    if "theory" in records:
        summary["theory"] = {}
        for key, results in theory.items():
            e = summary["theory"][key] = {k: results[0][k] for k in ("P_k", "coexistence_P", "binodals")}
            if len(results) > 1:  # the first seed's, and per lag every seed's P_k
                e["P_k_seeds"] = {lag: [r["P_k"][lag] for r in results] for lag in results[0]["P_k"]}
    if "ode" in records:
        res = records["ode"][0]["result"]
        summary["ode"] = {"stages": res["stages"], "plateaus": res["plateaus"]}
    return summary


def _median_text(m: dict, fmt=number, digits: int = 0, missing: str = "not within the run") -> str:
    """A median over the data sets (:func:`~.seeds.seed_median`) with its interval, if any: "628.3 [627, 631]"."""
    med = missing if m["median"] is None else fmt(m["median"])
    return med + ("" if m["ci"] is None else f" {stats.fmt_ci(m['ci'], digits)}")


def describe(summary: dict) -> list[str]:
    """The printed lines: P_k per curve, the ratio sweep, the training and ODE stage times."""
    lines = []
    for key, e in summary.get("mcmc", {}).items():
        comp = "" if e["max_competitive"] is None else f", max competitive fraction = {e['max_competitive']:.2f}"
        lines.append(f"{key}: P_k = {', '.join(f'{k} {number(v)}' for k, v in e['P_k'].items())}{comp}")
    for r in summary.get("ratio_sweep", []):
        ratio = (
            "not in the P grid" if r["P2/P1"] is None else f"{r['P2/P1']:.2f} ((w_1/w_2)^2 = {r['ratio'] ** -2:.2f})"
        )
        lines.append(f"{r['attention']}/H={r['heads']}/{r['init']}: w_2/w_1 = {r['ratio']:g}: P_2/P_1 = {ratio}")
    st = summary.get("mcmc_seeds")
    if st:
        n = len(st["seeds"])
        for key, c in st["curves"].items():
            lines.append(
                f"{key}, {n} data sets, median [95% bootstrap]: "
                + ", ".join(f"{lag} {_median_text(m)}" for lag, m in c["median"].items())
            )
            for lag, at in c.get("against_theory", {}).items():
                ins, g = at["theory_inside_away"], at["largest_gap_away"]
                if g is None:
                    continue
                agrees = (
                    f"the difference's Welch 95% interval (the theory over {at['theory_runs']} seeds) holds 0"
                    if "theory_runs" in at
                    else "the theory (one seed: its own Monte Carlo error not counted) inside the 95% interval"
                )
                text = LAG_OBSERVABLE_TEXT[LAG_OBSERVABLE[key.split("/", 1)[0]]]
                lines.append(
                    f"{key}, {text} {lag} over {n} data sets against the theory: {agrees} at "
                    f"{ins['solved']} of {ins['seeds']} P; largest gap {g['gap']:+.4f} (P = {g['P']:.0f})"
                )
        for r in st.get("starts", []):
            p = "" if r["sign_test_p"] is None else f" (sign test p = {r['sign_test_p']:.2g})"
            med = _median_text(r["median"], lambda x: f"{x:+.1f}", missing="-")
            lines.append(
                f"{r['curve']}, {r['lag']}: P_k cold - hot over {n} data sets {med}; cold later in {r['cold_later']}, "
                f"earlier in {r['cold_earlier']}{p}"
            )
            b = r.get("branches")
            if b is not None:
                at = {
                    k: [f"{P:g} ({v} of {m})" for P, v, m in zip(b["P"], b[k], b["data_sets"]) if v]
                    for k in ("split", "mixed")
                }
                lines.append(
                    f"{r['curve']}, {r['lag']}: cold chains below the threshold and hot above at P = "
                    + (", ".join(at["split"]) or "none")
                    + "; one start's chains on both sides at P = "
                    + (", ".join(at["mixed"]) or "none")
                )
        for r in st["ratio_sweep"]:
            m = r["median"]
            med = _median_text(m, lambda x: f"{x:.2f}", digits=2, missing="-")
            lines.append(
                f"{r['attention']}/H={r['heads']}/{r['init']}: w_2/w_1 = {r['ratio']:g}: P_2/P_1 {med} over {n} data "
                f"sets; above (w_1/w_2)^2 = {r['square_law']:.2f} in {r['above']} of {n - m['not_found']}"
                + ("" if r["sign_test_p"] is None else f" (sign test p = {r['sign_test_p']:.2g})")
            )
    if "train" in summary:
        t = summary["train"]
        nearest = t.get("nearest_teacher_steps", [None] * len(t["stages"]))
        leave = t.get("leave_teacher_steps", [None] * len(t["stages"]))
        paper = t.get("paper_boundaries", [None] * len(t["stages"]))
        for v, seed, st, nt, lt, pb in zip(t["variants"], t["seeds"], t["stages"], nearest, leave, paper):
            line = f"training {v}, seed {seed}: stages by mass at steps {', '.join(number(x) for x in st)}"
            if nt is not None:
                line += f"; nearest teacher reaches k = 2, 3 at {', '.join(number(x) for x in nt)}"
            if lt is not None:
                line += f"; leaves teacher k = 1, 2 at {', '.join(number(x) for x in lt)}"
            if pb is not None:
                line += f" (the paper: ~{pb[0]} and ~{pb[1]})"
            lines.append(line)
        for v, st in t.get("seed_statistics", {}).items():
            med = (
                "; ".join(f"leaves teacher {k + 1} at {_median_text(m)}" for k, m in enumerate(st["leave_teacher"]))
                + "; spans held by mass at "
                + ", ".join(_median_text(m) for m in st["stages_by_mass"])
            )
            lines.append(f"training {v}, {st['seeds']} seeds, median [95% bootstrap]: {med}")
    for r in summary.get("data_sizes", []):
        n = "online" if r["n"] is None else f"n = {r['n']}"
        lines.append(
            f"{n}: at the best validation loss (steps {', '.join(map(str, r['best_step']))}): excess "
            f"{', '.join(f'{e:.3f}' for e in r['best_excess'])} nats, spans held {r['best_spans_by_mass']}, "
            f"nearest-teacher boundaries crossed {r['best_boundaries']}; final train / val loss "
            + ", ".join(f"{a:.3f} / {b:.3f}" for a, b in zip(r["train_loss_final"], r["val_loss_final"]))
        )
    if "ode" in summary:
        lines.append(f"ODE stage times: {', '.join(number(t) for t in summary['ode']['stages'])}")
    return lines
