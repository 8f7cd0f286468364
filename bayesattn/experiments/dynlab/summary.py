"""The training-dynamics laboratory's summaries, from the saved records alone: clustering heads (success with a
95% interval, loss spikes, the Hessian's top eigenvalue at a spike), focus-dilution (cycles, stage durations) and
the equilibrium entropy, and the posterior's Langevin dynamics."""

from __future__ import annotations

import numpy as np

from ... import stats
from ..contract import number
from .config import ClusterConfig
from .stages import cycles_vs_threshold


def label(cfg) -> str:
    if isinstance(cfg, ClusterConfig):
        ft = "" if cfg.finetune_p is None else f", then fine-tuned on p={cfg.finetune_p}"
        return f"p={cfg.p}, k={cfg.k}{ft}"
    return f"V={cfg.V}, pi=({', '.join(f'{x:.3g}' for x in cfg.pi)}), {cfg.optimizer}"


def group_runs(records: list[dict]) -> list[dict]:
    """Per-seed training records -> one record per setting (label), in first-seen order: ``point`` (label, config,
    ``seeds``) and ``result`` with ``runs`` (one per seed, in seed order); for a clustering head the ``sandbox`` of
    the first successful seed that has one (else of the first seed that has one) and its ``sandbox_seed``; for
    focus-dilution ``step``, ``pi`` and ``V``."""
    groups: dict[str, list[dict]] = {}
    for r in records:
        groups.setdefault(r["point"]["label"], []).append(r)
    out = []
    for recs in groups.values():
        recs = sorted(recs, key=lambda r: r["point"]["seed"])
        runs = [{k: v for k, v in r["result"].items() if k not in ("sandbox", "step", "pi", "V")} for r in recs]
        res: dict = {"runs": runs}
        boxes = [r for r in recs if r["result"].get("sandbox")]
        if recs[0]["point"]["experiment"] == "clustering_head":
            best = next((r for r in boxes if r["result"]["success"]), boxes[0] if boxes else None)
            res["sandbox"] = best["result"]["sandbox"] if best else None
            res["sandbox_seed"] = best["point"]["seed"] if best else None
        else:
            res.update({k: recs[0]["result"][k] for k in ("step", "pi", "V")})
        out.append(
            {
                "point": {
                    **{k: v for k, v in recs[0]["point"].items() if k != "seed"},
                    "seeds": [r["point"]["seed"] for r in recs],
                },
                "result": res,
                "wall_time_s": float(sum(r.get("wall_time_s", 0.0) for r in recs)),
            }
        )
    return out


def cluster_summary(records: list) -> dict:
    out: dict = {}
    for r in records:
        e = out.setdefault(
            r["point"]["label"],
            {"runs": 0, "success": 0, "spikes": [], "diverged": [], "final_test_acc": [], "lambda_ratio": []},
        )
        for run in r["result"]["runs"]:
            e["runs"] += 1
            e["success"] += int(run["success"])
            e["final_test_acc"].append(run["final_test_acc"])
            if run["diverged_at"] is not None:  # a failure, reported; its curve and spikes are not counted
                e["diverged"].append({"seed": run["seed"], "epoch": run["diverged_at"]})
                continue
            e["spikes"].append(len(run["spikes"]))
            for sp in run["spikes"]:
                if sp["lambda_max"] and sp["lambda_max_before"]:
                    e["lambda_ratio"].append(sp["lambda_max"] / sp["lambda_max_before"])
    for e in out.values():
        e["success_fraction"] = e["success"] / max(e["runs"], 1)
        e["success_ci"] = stats.solve_rate(e["success"], e["runs"])["ci"]  # 95% Wilson interval
        e["mean_spikes"] = float(np.mean(e["spikes"])) if e["spikes"] else 0.0
        e["median_lambda_ratio_at_spike"] = float(np.median(e["lambda_ratio"])) if e["lambda_ratio"] else None
    return out


def stage_durations(st: dict) -> dict:
    """Steps spent in the first rank-one condensation, the first focus and the first dilution after it, and the
    period from the first focus to the restart (the next focus after a dilution); None where absent."""
    ph = st["phases"]
    f = next((i for i, p in enumerate(ph) if p["stage"] == "focus"), None)
    d = None if f is None else next((i for i in range(f + 1, len(ph)) if ph[i]["stage"] == "dilution"), None)
    nxt = None if d is None else next((p for p in ph[d + 1 :] if p["stage"] == "focus"), None)
    c = st["condensation"]
    return {
        "condensation": None if c is None else c[1] - c[0],
        "focus": None if f is None else ph[f]["end"] - ph[f]["start"],
        "dilution": None if d is None else ph[d]["end"] - ph[d]["start"],
        "period": None if nxt is None else nxt["start"] - ph[f]["start"],
    }


def fd_summary(records: list) -> dict:
    out: dict = {}
    for r in records:
        e = out.setdefault(
            r["point"]["label"],
            {
                "cycles": [],
                "first_focus_step": [],
                "condensation_end": [],
                "diverged": [],
                "seeds": [],
                "pi": r["point"].get("config", {}).get("pi"),
                "optimizer": r["point"].get("config", {}).get("optimizer"),
                "durations": [],
                "train_wall_shares": [],
            },
        )
        for run in r["result"]["runs"]:
            e["train_wall_shares"].append(run.get("train_wall_s"))  # absent in records of older versions
            if run["diverged_at_step"] is not None:  # reported, never counted as a converged run
                e["diverged"].append({"seed": run["seed"], "step": run["diverged_at_step"]})
                continue
            e["seeds"].append(run["seed"])
            e["cycles"].append(run["cycles"])
            ph = [p for p in run["stage_steps"]["phases"] if p["stage"] == "focus"]
            e["first_focus_step"].append(ph[0]["start"] if ph else None)
            c = run["stage_steps"]["condensation"]
            e["condensation_end"].append(None if c is None else c[1])
            e["durations"].append(stage_durations(run["stage_steps"]))
    for e in out.values():
        e["mean_cycles"] = float(np.mean(e["cycles"])) if e["cycles"] else None
        # the setting's training time over every process that ran it; None when a block's earlier time is unknown
        shares = e.pop("train_wall_shares")
        e["train_wall_s"] = None if None in shares else float(sum(shares))
    for r in records:  # the cycle count against the detection threshold, from the saved curves
        cur = cycles_vs_threshold(r["result"]["runs"], r["point"].get("config", {}))
        out[r["point"]["label"]]["cycles_vs_min_drop"] = {k: cur[k] for k in ("min_drop", "mean", "ci", "seeds")}
    return out


LANGEVIN_RULE = (
    "per P: the seed-mean entropy curve and its minimum; the end level, each seed's mean over the last quarter of "
    "records (mean over seeds, bootstrap 95% interval); the undershoot, picked on one half of the seeds and "
    "measured on the other (no selection bias): the record where the mean of the even-numbered seeds (0, 2, ...) "
    "is lowest, and per odd-numbered seed its end level minus its entropy there (positive: the entropy fell below "
    "where it ends), mean with a bootstrap 95% interval; phases: entropy_phases of the seed-mean curve at each "
    "min_drop"
)


def langevin_summary(records: list, equilibrium: list, min_drops=(0.05, 0.1)) -> dict:
    """The posterior's Langevin dynamics per P, over the seeds (:data:`LANGEVIN_RULE`), beside NUTS's posterior
    mean at the same (T, P) when the run has it. Records: the ``langevin`` part's."""
    from ...diagnostics.dynamics import entropy_phases

    ok = sorted((r for r in records if not r["result"]["failures"]), key=lambda r: r["point"]["seed"])
    if not ok:
        return {"seeds": 0, "failed_seeds": [r["point"]["seed"] for r in records]}
    pt, res = ok[0]["point"], ok[0]["result"]
    t = np.asarray(res["t"], float)
    H = np.asarray([r["result"]["entropy"] for r in ok], float)  # (seeds, P, records)
    m = np.asarray([r["result"]["m"] for r in ok], float)
    nuts = {e["point"]["P"]: e["result"] for e in equilibrium if e["point"].get("T", 8) == pt["T"]}
    tail = slice(len(t) - max(1, len(t) // 4), None)
    thin = np.unique(np.linspace(0, len(t) - 1, min(len(t), 150)).astype(int))
    per_P = []
    for j, P in enumerate(res["P"]):
        mean = H[:, j].mean(0)
        se = H[:, j].std(0, ddof=1) / np.sqrt(len(ok)) if len(ok) > 1 else np.zeros_like(mean)
        i = int(np.argmin(mean))
        end = H[:, j, tail].mean(1)
        k = int(np.argmin(H[0::2, j].mean(0)))  # picked on seeds 1, 3, ..., measured on 2, 4, ...
        row = {
            "P": P,
            "entropy_mean": mean[thin].tolist(),
            "entropy_se": np.asarray(se)[thin].tolist(),
            "m_mean": m[:, j].mean(0)[thin].tolist(),
            "minimum": {"t": float(t[i]), "entropy": float(mean[i]), "m": float(m[:, j, i].mean())},
            "end": stats.mean_interval(end),
            "end_m": stats.mean_interval(m[:, j, tail].mean(1)),
            "undershoot": {"t": float(t[k]), **stats.mean_interval((end - H[:, j, k])[1::2])},
            "phases": {
                str(md): [
                    {
                        "stage": ph["stage"],
                        "t_start": float(t[ph["start"]]),
                        "t_end": float(t[ph["end"]]),
                        "change": float(ph["change"]),
                    }
                    for ph in entropy_phases(mean, min_drop=md)
                ]
                for md in min_drops
            },
        }
        if P in nuts:
            row["nuts"] = {"entropy": nuts[P]["entropy"], "m": nuts[P]["m"]}
        per_P.append(row)
    return {
        "T": pt["T"],
        "d": pt["d"],
        "lr": pt["lr"],
        "steps": pt["steps"],
        "seeds": len(ok),
        "failed_seeds": [r["point"]["seed"] for r in records if r["result"]["failures"]],
        "t": t[thin].tolist(),
        "time_unit": "lr x steps",
        "rule": LANGEVIN_RULE,
        "per_P": per_P,
    }


def summarize(config, records: dict[str, list[dict]]) -> dict:
    summary: dict = {}
    train = group_runs(records.get("train", []))
    summary["point_wall_s"] = [g["wall_time_s"] for g in train]
    if config.experiment == "clustering_head":
        summary["clustering_head"] = cluster_summary(train)
    else:
        summary["focus_dilution"] = fd_summary(train)
    if "equilibrium" in records:
        eq = sorted(records["equilibrium"], key=lambda r: (r["point"].get("T", 8), r["point"]["P"]))
        summary["equilibrium"] = {
            "T": [r["point"].get("T", 8) for r in eq],
            "P": [r["point"]["P"] for r in eq],
            "entropy": [r["result"]["entropy"]["mean"] for r in eq],
            "entropy_se": [r["result"]["entropy"]["se"] for r in eq],
            "m": [r["result"]["m"]["mean"] for r in eq],
        }
    if "langevin" in records:
        summary["langevin"] = langevin_summary(records["langevin"], records.get("equilibrium", []))
    if "theory" in records:
        summary["equilibrium_theory"] = {str(r["point"]["T"]): r["result"] for r in records["theory"]}
    return summary


def describe(summary: dict) -> list[str]:
    lines = []
    for lab, e in summary.get("clustering_head", {}).items():
        ratio = e["median_lambda_ratio_at_spike"]
        lines.append(
            f"{lab}: success {e['success']}/{e['runs']} (test acc > 0.98; 95% interval {stats.fmt_ci(e['success_ci'])}), "
            f"spikes per run {e['spikes']} "
            f"(mean {e['mean_spikes']:.2f}), median lambda_max ratio at/before spike "
            f"{'-' if ratio is None else f'{ratio:.3g}'}"
        )
        lines += [f"  diverged: seed {d['seed']} at epoch {d['epoch']}" for d in e["diverged"]]
    for lab, e in summary.get("focus_dilution", {}).items():
        mean = "n/a" if e["mean_cycles"] is None else f"{e['mean_cycles']:.2f}"
        lines.append(
            f"{lab}: cycles per seed {e['cycles']} (seeds {e['seeds']}, mean {mean}), first focus at steps "
            f"{e['first_focus_step']}"
        )
        lines += [f"  diverged: seed {d['seed']} at step {d['step']}" for d in e["diverged"]]
    if "equilibrium" in summary:
        eq = summary["equilibrium"]
        lines.append(
            "posterior-mean attention entropy vs P (NUTS): "
            + ", ".join(f"T={T} P={P}: {h:.3f}" for T, P, h in zip(eq["T"], eq["P"], eq["entropy"]))
        )
    lg = summary.get("langevin")
    if lg and lg["seeds"]:
        for row in lg["per_P"]:
            u, e = row["undershoot"], row["end"]
            nuts = f", NUTS {row['nuts']['entropy']['mean']:.3f}" if "nuts" in row else ""
            lines.append(
                f"Langevin T={lg['T']} P={row['P']} ({lg['seeds']} seeds): entropy min {row['minimum']['entropy']:.3f} "
                f"at t={number(row['minimum']['t'])}, end {e['mean']:.3f}{nuts}; undershoot {u['mean']:.3f} "
                f"{stats.fmt_ci(u['ci'], 3)}"
            )
    for T, th in summary.get("equilibrium_theory", {}).items():
        lines.append(f"theory, T={T}: " + ", ".join(f"P={P:g}: {h:.3f}" for P, h in zip(th["P"], th["posterior"])))
    return lines
