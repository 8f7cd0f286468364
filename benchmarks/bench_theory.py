"""Benchmark: phase diagrams from the reduced theory, 200 values of P x 50 values of the second axis (target:
<= 10 s on 2 cores), for softmax over sigma_A2 and over T and for linear over sigma_A2.

Baseline, in the same process: the plain loop of ``phase_curve`` over the second axis (one table, one grid
scan and one set of Newton solves per value), timed on a few values and extrapolated to all of them. The CPU
time of the process is printed beside the wall time: on a shared machine the wall time depends on the load.
Both are timed after a warm-up run of the same shapes (compilation excluded). A few P_c of the diagram are checked
against the loop. Usage: python benchmarks/bench_theory.py [--n-vary 50] [--n-P 200] [--loop 3]
"""

from __future__ import annotations

import argparse
import os
import time
import warnings

import numpy as np

import bayesattn as ba
from bayesattn import theory as th


def bench(label, task, prior, attention, P, name, vary, n_loop, num_samples):
    def diagram(v):
        return th.phase_diagram(task, prior, attention, P, {name: v}, num_samples=num_samples)

    def one(v):
        t, p = (task.replace(T=int(v)), prior) if name == "T" else (task, prior.replace(sigma_A2=float(v)))
        return th.phase_curve(t, p, attention, P, num_samples=num_samples)

    shift = 0 if name == "T" else 1e-3  # warm-up on other values of the same shapes (tables are cached)
    diagram(vary + shift)
    t0, c0 = time.perf_counter(), time.process_time()
    pd = diagram(vary)
    full, cpu = time.perf_counter() - t0, time.process_time() - c0
    idx = np.linspace(0, len(vary) - 1, n_loop).round().astype(int)
    one(vary[idx[0]] + shift)
    t0 = time.perf_counter()
    loop = [one(vary[k]) for k in idx]
    per = (time.perf_counter() - t0) / n_loop
    dev = max(
        abs((pc.transition["P_c"] or np.nan) - pd.P_c[k]) if pc.transition["P_c"] is not None else 0.0
        for pc, k in zip(loop, idx)
    )
    print(
        f"{label:<28} {full:7.2f} s (cpu {cpu:5.1f} s, load {os.getloadavg()[0]:.1f})   loop of phase_curve: {per:.3f} s per value -> {per * len(vary):7.1f} s "
        f"(x{per * len(vary) / full:.1f})   orders: {pd.order.count('first')} first / "
        f"{pd.order.count('second')} second / {pd.order.count('crossover')} crossover   "
        f"max |P_c diagram - loop| = {dev:.2e}",
        flush=True,
    )


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n-vary", type=int, default=50, help="number of values of the second axis")
    ap.add_argument("--n-P", type=int, default=200, help="number of P values")
    ap.add_argument("--loop", type=int, default=3, help="values timed in the plain phase_curve loop (baseline)")
    ap.add_argument("--num-samples", type=int, default=20000, help="prior draws of the non-source logits (softmax)")
    ap.add_argument("--T", type=int, default=32, help="sequence length (sigma_A2 axis)")
    ap.add_argument(
        "--only",
        nargs="+",
        default=["softmax-sigma", "softmax-T", "linear-sigma"],
        help="which diagrams: softmax-sigma softmax-T linear-sigma",
    )
    a = ap.parse_args()
    warnings.simplefilter("ignore")  # grid-edge warnings at the smallest P are expected here
    task, prior = ba.CopyTask(T=a.T, d=8), ba.Prior(1.0, 100.0, 400.0)
    P = np.linspace(300, 2000, a.n_P)
    sig = np.linspace(0.5, 2.0, a.n_vary)
    Ts = np.unique(np.round(np.geomspace(8, 64, a.n_vary)).astype(int))
    print(f"{a.n_P} values of P; softmax num_samples = {a.num_samples}")
    if "softmax-sigma" in a.only:
        bench(f"softmax x sigma_A2 ({a.n_vary})", task, prior, "softmax", P, "sigma_A2", sig, a.loop, a.num_samples)
    if "softmax-T" in a.only:
        bench(f"softmax x T ({len(Ts)}: 8..64)", task, prior, "softmax", P, "T", Ts, a.loop, a.num_samples)
    if "linear-sigma" in a.only:
        bench(
            f"linear x sigma_A2 ({a.n_vary})",
            task,
            prior,
            "linear",
            np.linspace(300, 4000, a.n_P),
            "sigma_A2",
            sig,
            a.loop,
            a.num_samples,
        )


if __name__ == "__main__":
    main()
