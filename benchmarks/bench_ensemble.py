"""Benchmark: many chains in lockstep (ChEES-HMC) against the NUTS default, as ESS of m per second.

    python benchmarks/bench_ensemble.py [--T 32 64] [--chains 16 64 256]

For each T (softmax copy task, d = 8, P = 1000, sigma2 = 400, one data set): the NUTS default (4 chains x (500
warm-up + 1000 draws), chains one after another on a CPU) and ``method="chees"`` with K chains in one vmapped
program (K x (500 warm-up + 1000 / K * 64 draws, at least 100)). Reported per run: the mean of m and its standard
error, ESS of m (split chains), sampling wall time (compilation excluded, reported apart), ESS/s and its ratio
to NUTS, and the time per chain-gradient (wall / gradient evaluations, warm-up included) against the flop
count of one value-and-grad (``flops_per_grad``) at one core's measured peak of a float64 matmul.
"""

from __future__ import annotations

import argparse
import platform
import time

import jax
import jax.numpy as jnp
import numpy as np

import bayesattn as ba


def flops_per_grad(T: int, d: int) -> float:
    """Multiply-adds x 2 of one value of the closed form, x 3 for value-and-grad: the (T x T)^T (T x T)
    product, the two mat-vecs with the statistics (T^2 x d^2 and T^2 x d d_out) and the d x d Cholesky."""
    value = 2 * (T**3 + T * T * d * d + T * T * d * d + d**3 / 3)
    return 3 * value


def peak_flops(n: int = 256, reps: int = 20) -> float:
    """Measured float64 matmul rate of this process (one n x n x n product, best of ``reps``)."""
    a = jnp.ones((n, n))
    f = jax.jit(lambda x: x @ x)
    jax.block_until_ready(f(a))
    best = np.inf
    for _ in range(reps):
        t0 = time.perf_counter()
        jax.block_until_ready(f(a))
        best = min(best, time.perf_counter() - t0)
    return 2 * n**3 / best


def run(post, key, **kw):
    s = ba.sample(post, key, **kw)
    d = s.diagnostics
    m = s.summary()["m"]
    return {"mean": m["mean"], "se": m["se"], "ess": d["m"]["ess_bulk"], "wall": d["wall_time_s"],
            "compile": d["compile_time_s"], "grads": d["num_grad_evals"], "r_hat": d["m"]["r_hat"],
            "chains": s.num_chains}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--T", type=int, nargs="+", default=[32, 64], help="sequence lengths")
    ap.add_argument("--chains", type=int, nargs="+", default=[16, 64, 256], help="ChEES chain counts K")
    ap.add_argument("--P", type=int, default=1000, help="training sequences")
    ap.add_argument("--seed", type=int, default=0, help="PRNG seed (data: seed, samplers: seed + 1..)")
    args = ap.parse_args(argv)
    peak = peak_flops()
    print(f"{platform.processor() or platform.machine()}, jax {jax.__version__}, backend {jax.default_backend()}, "
          f"measured float64 matmul peak {peak / 1e9:.1f} GFLOP/s")
    for T in args.T:
        data = ba.CopyTask(T=T, d=8).sample(jax.random.key(args.seed), args.P)
        post = ba.Posterior(data, "softmax", ba.Prior(1.0, 100.0, 400.0))
        ideal = flops_per_grad(T, 8) / peak
        rows = {"nuts (4 x 1000)": run(post, jax.random.key(args.seed + 1), num_chains=4, num_warmup=500,
                                        num_samples=1000)}
        for K in args.chains:
            n = max(100, 64000 // K)
            rows[f"chees (K = {K} x {n})"] = run(post, jax.random.key(args.seed + 2), method="chees", num_chains=K,
                                                  num_warmup=500, num_samples=n)
        base = rows["nuts (4 x 1000)"]
        print(f"\nT = {T}, d = 8, P = {args.P}: ideal value-and-grad {ideal * 1e6:.2f} us")
        print("| sampler | <m> +- se | ESS(m) | wall (s) | compile (s) | ESS/s | x NUTS | us / chain-grad | x ideal |")
        print("|---|---|---|---|---|---|---|---|---|")
        for name, r in rows.items():
            rate = r["ess"] / r["wall"]
            per = r["wall"] / r["grads"]
            print(f"| {name} | {r['mean']:.4f} +- {r['se']:.4f} | {r['ess']:.0f} | {r['wall']:.1f} | "
                  f"{r['compile']:.1f} | {rate:.0f} | {rate / (base['ess'] / base['wall']):.1f} | {per * 1e6:.1f} | "
                  f"{per / ideal:.1f} |")


if __name__ == "__main__":
    main()
