"""Theory vs exact-posterior MCMC: order parameter against P (softmax m, linear u), theory branches (stable
solid, metastable dashed, spinodals dotted), the theory's posterior mean, and NUTS means of cold and hot chains.
Writes <out>/theory_vs_mcmc.json (numbers) and <out>/theory_vs_mcmc.png.

Usage: python scripts/theory_vs_mcmc.py --out results/theory_vs_mcmc [--T 8 32] [--n-P 12] [--draws 500]
"""

from __future__ import annotations

import argparse
import json
import os

import jax
import numpy as np

import bayesattn as ba
from bayesattn import theory as th

BETAS = {  # beta = P d / (2 sigma2) ranges that span each transition (sigma2 = 400, d = 8)
    ("softmax", 8): (1.0, 14.0), ("softmax", 32): (3.0, 16.0), ("softmax", 64): (5.0, 14.0),
    ("linear", 8): (1.0, 10.0), ("linear", 16): (3.0, 16.0), ("linear", 32): (8.0, 30.0),
}


def run(attention, T, n_P, warmup, draws, chains, seed):
    prior, d = ba.Prior(1.0, 100.0, 400.0), 8
    task = ba.CopyTask(T=T, d=d)
    lo, hi = BETAS[(attention, T)]
    P = np.round(np.linspace(lo, hi, n_P) * 2 * prior.sigma2 / d)
    fine = np.linspace(P[0], P[-1], 120)
    pc = th.phase_curve(task, prior, attention, fine)
    pc_at = th.phase_curve(task, prior, attention, P)
    name = "m" if attention == "softmax" else "u"
    rows = []
    for i, p in enumerate(P):
        data = task.sample(jax.random.key(seed + i), int(p))
        post = ba.Posterior(data, attention, prior)
        res = {"P": float(p), "theory_mean": float(pc_at.mean[name][i]), "theory_stable": float(pc_at.stable[name][i])}
        for init in ("cold", "hot"):
            s = ba.sample(post, jax.random.key(seed + 1000 + i), num_chains=chains, num_warmup=warmup,
                          num_samples=draws, init=init)
            x = np.asarray(s.order_parameters[name])
            res[init] = float(x.mean())
            res[init + "_chain_means"] = x.mean(axis=1).tolist()
            res[init + "_sem"] = float(x.mean(axis=1).std(ddof=1) / np.sqrt(chains)) if chains > 1 else float("nan")
        rows.append(res)
        print(f"{attention} T={T} P={p:.0f}: theory mean {res['theory_mean']:.3f} stable {res['theory_stable']:.3f} "
              f"| MCMC cold {res['cold']:.3f} hot {res['hot']:.3f}", flush=True)
    return {"attention": attention, "T": T, "curve": pc.to_dict(), "points": rows}


def plot(results, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(results), figsize=(4.2 * len(results), 3.4), squeeze=False)
    for ax, r in zip(axes[0], results):
        name = "m" if r["attention"] == "softmax" else "u"
        pc = th.PhaseCurve.from_dict(r["curve"])
        for b in pc.branches:
            ax.plot(b["P"], b[name], "--", color="0.5", lw=1)
        ax.plot(pc.P, pc.stable[name], "-", color="k", lw=1.5, label="theory stable")
        ax.plot(pc.P, pc.mean[name], ":", color="C2", label="theory mean")
        for sp in pc.transition.get("spinodals", []):
            ax.axvline(sp, color="0.7", ls=":")
        Ps = [p["P"] for p in r["points"]]
        ax.errorbar(Ps, [p["cold"] for p in r["points"]], yerr=[p["cold_sem"] for p in r["points"]], fmt="o", ms=3,
                    color="C0", label="NUTS cold")
        ax.errorbar(Ps, [p["hot"] for p in r["points"]], yerr=[p["hot_sem"] for p in r["points"]], fmt="s", ms=3,
                    mfc="none", color="C3", label="NUTS hot")
        ax.set_title(f"{r['attention']}, T = {r['T']} ({pc.transition['order']})")
        ax.set_xlabel("P")
        ax.set_ylabel(f"<{name}>")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=130)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", default="results/theory_vs_mcmc", help="output folder")
    ap.add_argument("--T", type=int, nargs="+", default=[8, 32], help="sequence lengths")
    ap.add_argument("--attention", nargs="+", default=["softmax", "linear"], help="attention maps")
    ap.add_argument("--n-P", type=int, default=12, help="number of P values per curve")
    ap.add_argument("--warmup", type=int, default=500, help="NUTS warmup steps")
    ap.add_argument("--draws", type=int, default=500, help="NUTS draws per chain")
    ap.add_argument("--chains", type=int, default=2, help="chains per start (cold and hot)")
    ap.add_argument("--seed", type=int, default=0, help="data / sampler seed")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    results = [run(att, T, a.n_P, a.warmup, a.draws, a.chains, a.seed) for att in a.attention for T in a.T]
    with open(os.path.join(a.out, "theory_vs_mcmc.json"), "w") as f:
        json.dump({"config": vars(a), "results": results}, f)
    plot(results, os.path.join(a.out, "theory_vs_mcmc.png"))


if __name__ == "__main__":
    main()
