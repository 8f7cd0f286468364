"""Inside a first-order coexistence window: theory landscape, NUTS from cold and hot starts, and tempered SMC.

At one (T, P) of the softmax copy task (sigma_A2 = 1, sigma_V2 = 100, sigma2 = 400, d = 8) this prints and saves
- the theory's free-energy landscape S(m): its minima, their free-energy difference (the predicted weight of
  the copy branch, 1 / (1 + exp(S_high - S_low))) and the barrier from each side, in nats;
- the chain means of m of NUTS chains started cold (uniform attention) and hot (copy pattern), on one data set;
- adaptive tempered SMC on the same data: the weight of each mode per run (classified by m), its spread over
  runs, <m> and the log evidence; once from the prior (``ba.sample(method="smc")``) and once from a
  reference q that covers both branches (``--reference``): an equal mixture of two diagonal Gaussians fitted
  to the cold-start and the hot-start NUTS draws, tempered from q to the posterior
  (``bayesattn.bayes.tempered_smc`` with prior q and likelihood p(L, D) / q(L)). The prior puts almost no
  mass on the copy branch, so SMC from the prior can only reach it through MCMC moves across the barrier.

Usage: python scripts/coexistence_check.py --T 64 --P 929 --out results/coexistence [--seed S]
       [--chains 4] [--warmup 400] [--draws 800] [--runs 4] [--particles 256] [--mcmc-steps 50] [--target-ess 0.9]
Writes <out>/coexistence_T<T>_P<P>.json. The data key is P (as in tests/test_sampling.py).
"""

from __future__ import annotations

import argparse
import json
import os
import time

import jax
import numpy as np

import bayesattn as ba
from bayesattn._json import to_plain
from bayesattn.bayes import theory as th
from bayesattn.provenance import package_versions


def result_path(out: str, T: int, P: int, seed: int) -> str:
    """<out>/coexistence_T<T>_P<P>[_seed<seed>].json (seed 0 keeps the name of the earlier runs)."""
    return os.path.join(out, f"coexistence_T{T}_P{P}" + (f"_seed{seed}" if seed else "") + ".json")


def landscape_summary(task, prior, P):
    r = th.landscape(task, prior, "softmax", P)
    x, S = np.asarray(r["x"]), np.asarray(r["S"])
    mins = [i for i in range(1, len(S) - 1) if S[i] <= S[i - 1] and S[i] <= S[i + 1]]
    out = {"minima_m": [float(x[i]) for i in mins], "minima_S": [float(S[i]) for i in mins]}
    if len(mins) >= 2:
        lo, hi = mins[0], mins[-1]
        top = float(S[lo : hi + 1].max())
        out.update(
            {
                "barrier_from_low": top - float(S[lo]),
                "barrier_from_high": top - float(S[hi]),
                "predicted_high_weight": float(1.0 / (1.0 + np.exp(S[hi] - S[lo]))),
            }
        )
    return out


def _diag_gaussian(draws):
    """Mean and standard deviation per entry of L over draws: (n, T, T) (the library's reference fit)."""
    from bayesattn.bayes.modes import MIN_STD

    return draws.mean(axis=0), np.maximum(draws.std(axis=0), MIN_STD)


def gaussian_reference_smc(post, key, comps, runs, particles, mcmc_steps, target_ess, thr):
    """SMC from q, an equal mixture of the diagonal Gaussians ``comps`` (each (mean, std) of shape (T, T)),
    to the posterior: ``tempered_smc`` with prior q and likelihood p(L, D) / q(L), particles assigned to the
    components in turn. Per run: weight of m > thr, log evidence, tempering steps, <m>; and the range of m.

    With one component fitted to one branch the particles stay on it (the barrier is not crossed), so the log
    evidence estimates that branch's log Z = log int_branch p(L, D) dL."""
    import jax.numpy as jnp
    from jax.scipy.special import logsumexp

    from bayesattn.bayes import tempered_smc

    mus = jnp.stack([jnp.asarray(c[0]) for c in comps])
    sds = jnp.stack([jnp.asarray(c[1]) for c in comps])

    def log_q(L):
        each = -0.5 * jnp.sum(((L[None] - mus) / sds) ** 2 + 2 * jnp.log(sds) + jnp.log(2 * jnp.pi), axis=(1, 2))
        return logsumexp(each) - jnp.log(len(comps))

    @jax.jit
    def one(k):
        k0, k1 = jax.random.split(k)
        idx = jnp.arange(particles) % len(comps)
        L0 = mus[idx] + sds[idx] * jax.random.normal(k0, (particles,) + mus.shape[1:])
        out = tempered_smc(
            log_q, lambda L: post.log_density(L) - log_q(L), k1, L0, target_ess=target_ess, num_mcmc_steps=mcmc_steps
        )
        m = post.order_parameters(out["particles"])["m"]
        return (
            jnp.sum(out["weights"] * (m > thr)),
            out["log_evidence"],
            out["tempering_steps"],
            jnp.sum(out["weights"] * m),
            jnp.min(m),
            jnp.max(m),
        )

    rows = [one(k) for k in jax.random.split(key, runs)]
    return {
        "high_weight_runs": [float(r[0]) for r in rows],
        "log_evidence_runs": [float(r[1]) for r in rows],
        "tempering_steps": [int(r[2]) for r in rows],
        "mean_m_runs": [float(r[3]) for r in rows],
        "min_m": min(float(r[4]) for r in rows),
        "max_m": max(float(r[5]) for r in rows),
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--T", type=int, default=64, help="sequence length")
    ap.add_argument("--P", type=int, default=929, help="training sequences (T = 64: the binodal is at ~929)")
    ap.add_argument("--out", default="results/coexistence", help="output folder")
    ap.add_argument("--seed", type=int, default=0, help="data and sampler seed (0: the data key is P alone, as before)")
    ap.add_argument("--chains", type=int, default=4, help="NUTS chains per start")
    ap.add_argument("--warmup", type=int, default=400, help="NUTS warm-up steps")
    ap.add_argument("--draws", type=int, default=800, help="NUTS draws per chain")
    ap.add_argument("--runs", type=int, default=4, help="independent SMC runs")
    ap.add_argument("--particles", type=int, default=256, help="particles per SMC run")
    ap.add_argument("--mcmc-steps", type=int, default=50, help="HMC moves per tempering stage")
    ap.add_argument("--target-ess", type=float, default=0.9, help="SMC's target ESS fraction per stage")
    ap.add_argument(
        "--threshold",
        type=float,
        default=None,
        help="m above which a state is on the copy branch (default 3 / T, as the SMC's mode weights)",
    )
    ap.add_argument("--reference", action="store_true", help="also run SMC from the two-Gaussian reference q")
    ap.add_argument(
        "--branch-runs",
        type=int,
        default=0,
        help="runs of SMC from a Gaussian fitted to each branch alone (the branch evidences, ba.mode_weights)",
    )
    ap.add_argument("--skip-prior-smc", action="store_true", help="do not run SMC from the prior")
    a = ap.parse_args(argv)
    if a.seed < 0:
        ap.error(f"--seed={a.seed}: expected an integer >= 0")

    def key(k):  # seed 0 keeps the keys of earlier runs; seed s > 0 folds s into each of them
        return jax.random.key(k) if a.seed == 0 else jax.random.fold_in(jax.random.key(k), a.seed)

    prior = ba.Prior(1.0, 100.0, 400.0)
    task = ba.CopyTask(T=a.T, d=8)
    post = ba.Posterior(task.sample(key(a.P), a.P), "softmax", prior)
    res = {"config": vars(a), "versions": package_versions(), "T": a.T, "P": a.P}
    t0 = time.perf_counter()
    res["theory"] = landscape_summary(task, prior, a.P)
    res["theory"]["mean_m"] = float(th.phase_curve(task, prior, "softmax", np.array([float(a.P)])).mean["m"][0])
    print("theory:", json.dumps(res["theory"]), flush=True)
    branch_draws = {}
    thr = 3.0 / a.T if a.threshold is None else a.threshold
    for j, init in enumerate(("cold", "hot")):
        s = ba.sample(post, key(10 + j), num_chains=a.chains, num_warmup=a.warmup, num_samples=a.draws, init=init)
        m = np.asarray(s.order_parameters["m"])
        stayed = (m.mean(axis=1) > thr) == (init == "hot")  # chains that stayed on their starting branch
        if stayed.any():
            branch_draws[init] = np.asarray(s.L)[stayed].reshape(-1, a.T, a.T)
        res["nuts_" + init] = {
            "chain_means": m.mean(axis=1).tolist(),
            "divergent": s.diagnostics["num_divergent"],
            "r_hat": s.diagnostics["m"]["r_hat"],
            "wall_s": s.diagnostics["wall_time_s"],
        }
        print(f"NUTS {init}: chain means of m", np.round(m.mean(axis=1), 4).tolist(), flush=True)
    s = (
        None
        if a.skip_prior_smc
        else ba.sample(
            post,
            key(20),
            method="smc",
            num_chains=a.runs,
            num_samples=a.particles,
            num_mcmc_steps=a.mcmc_steps,
            target_ess=a.target_ess,
            mode_threshold=thr,
        )
    )
    mw = s.extra["mode_weights"] if s is not None else None
    res["smc"] = (
        None
        if s is None
        else {
            "high_weight_runs": mw["high_runs"],
            "high_weight": mw["high"],
            "std_high": mw["std_high"],
            "threshold": mw["threshold"],
            "mean_m": float(np.mean(s.order_parameters["m"])),
            "log_evidence": s.extra["log_evidence"],
            "complete": s.extra["complete"],
            "tempering_steps": s.diagnostics["tempering_steps"],
            "wall_s": s.diagnostics["wall_time_s"],
        }
    )
    if s is not None:
        print(
            "SMC: weight of the copy branch per run",
            np.round(mw["high_runs"], 3).tolist(),
            f"mean {mw['high']:.3f} (sd {mw['std_high']:.3f}); <m> {res['smc']['mean_m']:.4f}",
            flush=True,
        )
    if a.reference and len(branch_draws) == 2:
        t1 = time.perf_counter()
        r = gaussian_reference_smc(
            post,
            key(30),
            [_diag_gaussian(branch_draws["cold"]), _diag_gaussian(branch_draws["hot"])],
            a.runs,
            a.particles,
            a.mcmc_steps,
            a.target_ess,
            thr,
        )
        w = np.asarray(r["high_weight_runs"])
        r.update(
            {
                "high_weight": float(w.mean()),
                "std_high": float(w.std(ddof=1)) if w.size > 1 else None,
                "wall_s": time.perf_counter() - t1,
            }
        )
        res["smc_reference"] = r
        print(
            "SMC from the two-branch reference: weight of the copy branch per run",
            np.round(w, 3).tolist(),
            f"mean {w.mean():.3f}; log evidence per run",
            np.round(r["log_evidence_runs"], 2).tolist(),
            flush=True,
        )
    if a.branch_runs > 0 and len(branch_draws) == 2:
        t1 = time.perf_counter()
        # the library's per-branch evidences (bayesattn.bayes.modes): SMC from a Gaussian fitted to each branch
        mw = ba.mode_weights(
            post,
            key(40),
            {"low": branch_draws["cold"], "high": branch_draws["hot"]},
            runs=a.branch_runs,
            num_particles=a.particles,
            num_mcmc_steps=a.mcmc_steps,
            target_ess=a.target_ess,
        )
        br = mw.to_dict()
        br["high_weight"] = mw.weights["high"]
        br["log_Z_high_minus_low"] = mw.log_odds["high"]
        br["wall_s"] = time.perf_counter() - t1
        res["smc_branches"] = br
        (lo_min, lo_max), (hi_min, hi_max) = mw.observable_range["low"], mw.observable_range["high"]
        print(
            "SMC per branch: log Z low runs",
            np.round(mw.log_evidence_runs["low"], 2).tolist(),
            "high runs",
            np.round(mw.log_evidence_runs["high"], 2).tolist(),
            f"-> log Z_high - log Z_low = {mw.log_odds['high']:.2f}, weight of the copy branch "
            f"{mw.weights['high']:.3f} +- {mw.weights_se['high']:.3f}; m ranges {lo_min:.3f}-{lo_max:.3f} / "
            f"{hi_min:.3f}-{hi_max:.3f}",
            flush=True,
        )
    res["wall_time_s"] = time.perf_counter() - t0
    os.makedirs(a.out, exist_ok=True)
    path = result_path(a.out, a.T, a.P, a.seed)
    with open(path, "w") as f:
        json.dump(to_plain(res, nonfinite="string"), f, indent=1)
    print("wrote", path)


if __name__ == "__main__":
    main()
