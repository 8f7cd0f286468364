"""Benchmark: the closed-form posterior's cost does not grow with P, and it beats the n x n GP evidence.

    python benchmarks/bench_posterior.py

1. jitted ``log_density`` and jitted ``value_and_grad(log_density)`` at P = 1e3 and P = 1e5 (T = 32, d = 8,
   softmax). The posterior is passed as a jit *argument*, so both P share one compilation. Time per call is
   the median over rounds of many calls after warm-up (``block_until_ready``); the two P are measured in
   interleaved rounds so that load from other processes hits both alike. The bound: ratio <= 1.3.
2. The closed form against jitted ``ba.gp_log_evidence`` (dense n x n Cholesky) at n = 2048 rows
   (T = 16, P = 128, d = 8), same process, same L; the two values are printed to show they agree.

Times are wall-clock on whatever machine runs this; only the ratios are meant to be compared across machines.
"""

from __future__ import annotations

import argparse
import platform
import time

import jax
import numpy as np

import bayesattn as ba


def per_call(fn, args, calls: int) -> float:
    """Seconds per call of fn(*args) over ``calls`` back-to-back calls (result blocked on at the end)."""
    t0 = time.perf_counter()
    for _ in range(calls):
        out = fn(*args)
    jax.block_until_ready(out)
    return (time.perf_counter() - t0) / calls


def interleaved_medians(fns_args: dict, calls: int, rounds: int) -> dict:
    """Median seconds per call for each entry, measured in interleaved rounds after one warm-up call each."""
    for fn, args in fns_args.values():
        jax.block_until_ready(fn(*args))  # compile and warm up
    times = {k: [] for k in fns_args}
    for _ in range(rounds):
        for k, (fn, args) in fns_args.items():
            times[k].append(per_call(fn, args, calls))
    return {k: float(np.median(v)) for k, v in times.items()}


def fmt(seconds: float) -> str:
    return f"{seconds * 1e6:10.1f} us" if seconds < 1e-2 else f"{seconds * 1e3:10.2f} ms"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calls", type=int, default=50, help="calls per timing round for the closed form")
    ap.add_argument("--rounds", type=int, default=15, help="timing rounds (the median is reported)")
    ap.add_argument("--gp-rounds", type=int, default=5, help="timing rounds for the n x n GP baseline (1 call each)")
    ap.add_argument("--seed", type=int, default=0, help="PRNG seed for data and L")
    args = ap.parse_args(argv)

    key_data, key_L = jax.random.split(jax.random.key(args.seed))
    prior = ba.Prior(sigma_A2=1.0, sigma_V2=100.0, sigma2=400.0)
    print(
        f"bayesattn benchmark on {platform.node()} ({jax.devices()[0].platform}, {jax.local_device_count()} device,"
        f" {__import__('os').cpu_count()} CPUs), jax {jax.__version__}, float64"
    )

    # --- 1. cost independent of P -------------------------------------------------------------------------
    T, d = 32, 8
    task = ba.CopyTask(T=T, d=d)
    L = 0.5 * jax.random.normal(key_L, (T, T))
    posts, setup = {}, {}
    for P in (1_000, 100_000):
        t0 = time.perf_counter()
        post = ba.Posterior(task.sample(key_data, P), attention="softmax", prior=prior)
        jax.block_until_ready(post.Sxx)
        setup[P] = time.perf_counter() - t0
        posts[P] = post
    f = jax.jit(lambda post, L: post.log_density(L))
    fg = jax.jit(jax.value_and_grad(lambda L, post: post.log_density(L)))
    med = interleaved_medians(
        {
            ("log_density", 1_000): (f, (posts[1_000], L)),
            ("log_density", 100_000): (f, (posts[100_000], L)),
            ("value_and_grad", 1_000): (fg, (L, posts[1_000])),
            ("value_and_grad", 100_000): (fg, (L, posts[100_000])),
        },
        args.calls,
        args.rounds,
    )
    print(
        f"\n1. closed form, softmax, T = {T}, d = {d}: median time per jitted call "
        f"({args.rounds} rounds x {args.calls} calls)"
    )
    print(f"{'function':<16}{'P = 1e3':>14}{'P = 1e5':>14}{'ratio':>9}  bound 1.3")
    worst = 0.0
    for name in ("log_density", "value_and_grad"):
        a, b = med[(name, 1_000)], med[(name, 100_000)]
        worst = max(worst, b / a)
        print(f"{name:<16}{fmt(a):>14}{fmt(b):>14}{b / a:>9.3f}  {'ok' if b / a <= 1.3 else 'EXCEEDED'}")
    print(
        f"{'(one-off setup)':<16}{fmt(setup[1_000]):>14}{fmt(setup[100_000]):>14}   sufficient statistics, O(P), eager, incl. op compilation"
    )

    # --- 2. closed form vs the n x n GP evidence at n = 2048 -----------------------------------------------
    T2, P2 = 16, 128
    task2 = ba.CopyTask(T=T2, d=d)
    data2 = task2.sample(key_data, P2)
    post2 = ba.Posterior(data2, attention="softmax", prior=prior)
    L2 = 0.5 * jax.random.normal(key_L, (T2, T2))
    gp = jax.jit(lambda L: ba.gp_log_evidence(L, data2, "softmax", prior))
    ll = jax.jit(lambda post, L: post.log_likelihood(L))
    t_gp = interleaved_medians({"gp": (gp, (L2,))}, 1, args.gp_rounds)["gp"]
    t_cf = interleaved_medians({"cf": (ll, (post2, L2))}, args.calls, args.rounds)["cf"]
    v_gp, v_cf = float(gp(L2)), float(ll(post2, L2))
    print(f"\n2. log evidence at n = {data2.n} rows (T = {T2}, P = {P2}, d = {d}), jitted, same process")
    print(f"{'method':<34}{'time/call':>14}{'value':>22}")
    print(f"{'n x n GP evidence (gp_log_evidence)':<34}{fmt(t_gp):>14}{v_gp:>22.10f}")
    print(f"{'closed form (log_likelihood)':<34}{fmt(t_cf):>14}{v_cf:>22.10f}")
    print(f"speed-up of the closed form: {t_gp / t_cf:.0f}x   |difference| = {abs(v_gp - v_cf):.2e}")
    return worst


if __name__ == "__main__":
    main()
