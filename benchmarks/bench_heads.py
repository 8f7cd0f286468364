"""Benchmark: value-and-gradient of the H-head closed form at T = 32, d = 8, as ratios to one head.

    python benchmarks/bench_heads.py [--heads 1 2 4]

Jitted ``value_and_grad(Posterior.log_density)`` with the posterior passed as a jit argument, for H heads
(L: (H, T, T), the readout on the concatenated H d features integrated out). Median over interleaved rounds of
back-to-back calls after warm-up (``bench_posterior.interleaved_medians``), so load from other processes hits
every H alike. Work per call: the head-pair contraction alpha^T alpha is O(H^2 T^3), G is (H d)^2 and its
Cholesky O(H^3 d^3); P does not enter.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys

import jax

import bayesattn as ba
from bayesattn.models import ATTENTIONS

sys.path.insert(0, os.path.dirname(__file__))
from bench_posterior import fmt, interleaved_medians  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--heads", type=int, nargs="+", default=[1, 2, 4], help="head counts to time (first = baseline)")
    ap.add_argument("--T", type=int, default=32, help="sequence length")
    ap.add_argument("--d", type=int, default=8, help="token dimension")
    ap.add_argument("--P", type=int, default=1000, help="training sequences (does not change the cost)")
    ap.add_argument("--attention", default="softmax", choices=ATTENTIONS, help="attention map")
    ap.add_argument("--calls", type=int, default=50, help="calls per timing round")
    ap.add_argument("--rounds", type=int, default=15, help="timing rounds (the median is reported)")
    ap.add_argument("--seed", type=int, default=0, help="PRNG seed for data and L")
    args = ap.parse_args(argv)

    kd, kL = jax.random.split(jax.random.key(args.seed))
    data = ba.CopyTask(T=args.T, d=args.d).sample(kd, args.P)
    vg = jax.jit(jax.value_and_grad(lambda post, L: post.log_density(L), argnums=1))
    runs = {}
    for H in args.heads:
        post = ba.Posterior(data, args.attention, ba.Prior(1.0, 100.0, 400.0), heads=H)
        runs[H] = (vg, (post, jax.random.normal(kL, post.L_shape)))
    t = interleaved_medians(runs, args.calls, args.rounds)
    base = t[args.heads[0]]
    print(
        f"value_and_grad of the closed form, {args.attention}, T = {args.T}, d = {args.d}, P = {args.P}; "
        f"{platform.processor() or platform.machine()}, jax {jax.__version__}, backend {jax.default_backend()}"
    )
    print(f"| heads | time / call | ratio to H = {args.heads[0]} |")
    print("|---|---|---|")
    for H in args.heads:
        print(f"| {H} | {fmt(t[H])} | {t[H] / base:.2f} |")


if __name__ == "__main__":
    main()
