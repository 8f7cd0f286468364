"""Benchmark: a phase diagram from the reduced theory, 200 values of P x N values of sigma_A2 (target:
200 x 50 in <= 10 s on 2 cores), against a baseline run in the same process (one phase curve of one
value), reported as a ratio. Usage: python benchmarks/bench_theory.py [--n-vary 50] [--num-samples 4000]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import bayesattn as ba
from bayesattn import theory as th


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--n-vary", type=int, default=50, help="number of sigma_A2 values")
    ap.add_argument("--n-P", type=int, default=200, help="number of P values")
    ap.add_argument("--attention", default="softmax", choices=["softmax", "linear"], help="attention map")
    ap.add_argument("--num-samples", type=int, default=4000, help="prior draws of the non-source logits")
    ap.add_argument("--T", type=int, default=32, help="sequence length")
    a = ap.parse_args()
    task, prior = ba.CopyTask(T=a.T, d=8), ba.Prior(1.0, 100.0, 400.0)
    P = np.linspace(300, 2000, a.n_P)
    vary = np.linspace(0.5, 2.0, a.n_vary)
    # warm-up (compilation) outside the timing
    th.phase_curve(task, prior.replace(sigma_A2=0.77), a.attention, P, num_samples=a.num_samples)
    t0 = time.perf_counter()
    th.phase_curve(task, prior.replace(sigma_A2=0.91), a.attention, P, num_samples=a.num_samples)
    base = time.perf_counter() - t0
    t0 = time.perf_counter()
    pd = th.phase_diagram(task, prior, a.attention, P, {"sigma_A2": vary}, num_samples=a.num_samples)
    full = time.perf_counter() - t0
    print(f"phase diagram {a.n_P} x {a.n_vary} ({a.attention}, T={a.T}, num_samples={a.num_samples}): {full:.2f} s; "
          f"one phase curve: {base:.3f} s; ratio {full / base:.1f} (ideal {a.n_vary}); "
          f"first-order points: {sum(o == 'first' for o in pd.order)}/{a.n_vary}")


if __name__ == "__main__":
    main()
