"""Mode weights at a first-order binodal over several data sets: their spread against the theory's weight.

Runs ``scripts/coexistence_check.py`` once per seed (each seed draws its own data set and sampler keys; seed 0
is the data set of the earlier runs) with NUTS references from cold and hot starts and ``ba.mode_weights``
(per-branch SMC), skipping seeds whose result file is already in ``--out`` (an interrupted run resumes), then
prints per seed the log-odds log Z_copy - log Z_uniform with its standard error and the copy branch's weight,
and over seeds their mean, standard deviation and the gap to the theory's log-odds (S_low - S_high of the
reduced free energy, docs/theory.md section 5). Writes <out>/coexistence_seeds_T<T>_P<P>.json.

Usage: python scripts/coexistence_seeds.py [--T 64] [--P 929] [--seeds 0 1 2 3 4 5 6 7] [--out DIR]
       [--chains 4] [--warmup 300] [--draws 300] [--branch-runs 2] [--particles 64] [--mcmc-steps 25]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import coexistence_check  # noqa: E402  (the per-seed run, next to this file)


def summarize(results: dict) -> dict:
    """Per seed and over seeds, from the result dicts of coexistence_check keyed by seed."""
    per_seed, theory = {}, None
    for seed, r in sorted(results.items()):
        th = r["theory"]
        theory = theory or th
        br = r.get("smc_branches")
        if not br:  # a cold or hot NUTS start left no chain on its branch: no reference, no weight
            per_seed[seed] = None
            continue
        se = math.hypot(br["log_evidence_se"]["low"], br["log_evidence_se"]["high"])
        per_seed[seed] = {"log_odds": br["log_odds"]["high"], "log_odds_se": se, "weight": br["weights"]["high"]}
    ok = [v for v in per_seed.values() if v is not None]
    w_th = theory["predicted_high_weight"]
    out = {
        "per_seed": per_seed,
        "theory_weight": w_th,
        "theory_log_odds": math.log(w_th / (1 - w_th)),
        "seeds_used": len(ok),
    }
    if ok:
        lo = np.array([v["log_odds"] for v in ok])
        w = np.array([v["weight"] for v in ok])
        out.update(
            {
                "mean_log_odds": float(lo.mean()),
                "sd_log_odds": float(lo.std(ddof=1)) if lo.size > 1 else None,
                "mean_weight": float(w.mean()),
                "sd_weight": float(w.std(ddof=1)) if w.size > 1 else None,
                "mean_se_within_seed": float(np.mean([v["log_odds_se"] for v in ok])),
                "gap_to_theory_log_odds": float(lo.mean() - out["theory_log_odds"]),
            }
        )
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--T", type=int, default=64)
    ap.add_argument("--P", type=int, default=929)
    ap.add_argument("--seeds", type=int, nargs="+", default=list(range(8)))
    ap.add_argument("--out", default="results/coexistence_seeds")
    ap.add_argument("--chains", type=int, default=4)
    ap.add_argument("--warmup", type=int, default=300)
    ap.add_argument("--draws", type=int, default=300)
    ap.add_argument("--branch-runs", type=int, default=2)
    ap.add_argument("--particles", type=int, default=64)
    ap.add_argument("--mcmc-steps", type=int, default=25)
    a = ap.parse_args(argv)
    if any(s < 0 for s in a.seeds):
        ap.error(f"--seeds={a.seeds}: expected integers >= 0")
    if a.branch_runs < 2:
        ap.error(f"--branch-runs={a.branch_runs}: expected >= 2 (a standard error per seed needs two runs)")
    results = {}
    for seed in a.seeds:
        path = coexistence_check.result_path(a.out, a.T, a.P, seed)
        if not os.path.exists(path):
            coexistence_check.main(
                [
                    "--T",
                    str(a.T),
                    "--P",
                    str(a.P),
                    "--seed",
                    str(seed),
                    "--out",
                    a.out,
                    "--skip-prior-smc",
                    "--chains",
                    str(a.chains),
                    "--warmup",
                    str(a.warmup),
                    "--draws",
                    str(a.draws),
                    "--branch-runs",
                    str(a.branch_runs),
                    "--particles",
                    str(a.particles),
                    "--mcmc-steps",
                    str(a.mcmc_steps),
                ]
            )
        with open(path) as f:
            results[seed] = json.load(f)
    s = summarize(results)
    print("| seed | log Z_copy - log Z_uniform | weight of the copy branch |")
    print("|---|---|---|")
    for seed, v in s["per_seed"].items():
        print(
            f"| {seed} | "
            + (
                "no reference on one branch | |"
                if v is None
                else f"{v['log_odds']:.2f} +- {v['log_odds_se']:.2f} | {v['weight']:.3f} |"
            )
        )
    if s["seeds_used"]:
        sd = s["sd_log_odds"]
        print(
            f"over {s['seeds_used']} seeds: log-odds {s['mean_log_odds']:.2f} (sd {sd if sd is None else round(sd, 2)}), "
            f"weight {s['mean_weight']:.3f} (sd {s['sd_weight'] if s['sd_weight'] is None else round(s['sd_weight'], 3)}); "
            f"theory: log-odds {s['theory_log_odds']:.3f}, weight {s['theory_weight']:.3f}; "
            f"gap {s['gap_to_theory_log_odds']:.2f} nats"
        )
    path = os.path.join(a.out, f"coexistence_seeds_T{a.T}_P{a.P}.json")
    with open(path, "w") as f:
        json.dump({"config": vars(a), "summary": s}, f, indent=1)
    print("wrote", path)


if __name__ == "__main__":
    main()
