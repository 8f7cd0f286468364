"""The H-head order-parameter theory against the exact posterior (docs/theory.md section 12).

Setup of experiments/staircase.py (BayesConfig defaults, phase_diagrams/staircase/staircase.toml): T = 16,
d = 8, lags 1..H with weights 0.6^k, orthogonal U_k, sigma_A2 = 1, sigma_V2 = 100, sigma2 = 400; NUTS with the
same data and keys as ``staircase.mcmc_point`` (2 chains x (300 + 500) by default), per draw the per-head lag
masses m_hk, the overlaps Q_hh' = <sum_s alpha_h alpha_h'>_t, and label-free summaries (the best head's mass per
lag; the heads relabelled per draw so that head k is the one taken greedily for lag k).

    python scripts/heads_theory_check.py --part mcmc     # cached: results/heads_theory/mcmc/*.json
    python scripts/heads_theory_check.py --part table    # theory next to every cached MCMC point, markdown
Rerunning skips points already on disk.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

OUT = Path("results/heads_theory")
GRID = {  # (attention, H): P values (T = 16, d = 8, ratio 0.6)
    ("softmax", 2): [200, 315, 497, 627, 784, 1237, 1806, 1951, 3076, 4851, 7650, 19024],
    ("linear", 2): [200, 315, 497, 784, 1237, 1951, 3076, 4851, 7650, 19024],
    ("softmax", 3): [497, 1237, 3076, 7650, 19024, 30000],
}


def draw_stats(alpha, task):
    """Per-draw m (n, H, K) and Q (n, H, H) of alpha: (n, H, T, T), and their label-free summaries
    (``heads.label_free``: sign-fixed for linear heads, relabelled greedily per lag, best head per lag)."""
    from bayesattn.bayes.theory.heads import label_free

    pats = np.stack(list(task.target_patterns.values()))  # (K, T, T)
    m = np.einsum("nhts,kts->nhk", alpha, pats) / task.T
    Q = np.einsum("nhts,ngts->nhg", alpha, alpha) / task.T
    return {"m": m, "Q": Q, **label_free(m, Q)}


def mcmc(attention, H, P, init="cold", seed=0, chains=2, warmup=300, samples=500):
    import jax

    import bayesattn as ba
    from bayesattn.experiments.staircase import BayesConfig, hot_init
    from bayesattn.sweep import package_versions

    b = BayesConfig(heads=[H], attention=[attention], num_chains=chains, num_warmup=warmup, num_samples=samples)
    task = b.task(H)
    prior = ba.Prior(b.sigma_A2, b.sigma_V2, b.sigma2)
    k_data, k_mcmc = jax.random.split(jax.random.fold_in(jax.random.key(seed), P))  # as staircase.mcmc_point
    post = ba.Posterior(task.sample(k_data, P), attention, prior, heads=H)
    start = "cold" if init == "cold" else hot_init(task, H, attention, prior)
    t0 = time.perf_counter()
    s = ba.sample(post, k_mcmc, num_chains=chains, num_warmup=warmup, num_samples=samples, init=start)
    wall = time.perf_counter() - t0
    L = np.asarray(s.L)  # (chains, draws, H, T, T)
    alpha = np.asarray(post.model.weights(jax.numpy.asarray(L.reshape(-1, H, task.T, task.T)), task.key_mask))
    st = draw_stats(alpha, task)
    per_chain = {k: np.asarray(v).reshape(chains, -1, *np.shape(v)[1:]).mean(axis=1) for k, v in st.items()}
    return {"attention": attention, "H": H, "P": P, "init": init, "seed": seed, "chains": chains,
            "warmup": warmup, "samples": samples, "wall_s": wall,
            "mean": {k: v.mean(axis=0).tolist() for k, v in per_chain.items()},
            "chain_means": {k: v.tolist() for k, v in per_chain.items()},
            "num_divergent": int(s.diagnostics.get("num_divergent", -1)),
            "versions": package_versions()}


def run_mcmc(args):
    from bayesattn.sweep import write_json_atomic

    for (att, H), Ps in GRID.items():
        if args.attention and att not in args.attention or args.heads and H not in args.heads:
            continue
        for P in Ps:
            for init in args.inits:
                path = OUT / "mcmc" / f"{att}_H{H}_P{P}_{init}.json"
                if path.exists():
                    continue
                r = mcmc(att, H, P, init, chains=args.chains, warmup=args.warmup, samples=args.samples)
                write_json_atomic(path, r)
                print(f"{att} H={H} P={P} {init}: mass_max {np.round(r['mean']['mass_max'], 3)} "
                      f"({r['wall_s']:.0f} s)", flush=True)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--part", choices=["mcmc", "table"], default="table")
    ap.add_argument("--attention", nargs="*", default=[])
    ap.add_argument("--heads", nargs="*", type=int, default=[])
    ap.add_argument("--inits", nargs="*", default=["cold"])
    ap.add_argument("--chains", type=int, default=2)
    ap.add_argument("--warmup", type=int, default=300)
    ap.add_argument("--samples", type=int, default=500)
    args = ap.parse_args()
    if args.part == "mcmc":
        run_mcmc(args)
