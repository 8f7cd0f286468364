"""Benchmark: the staircase's two costly pieces, timed in one process.

    python benchmarks/bench_staircase.py [--mcmc] [--train]

--mcmc: one Bayesian staircase sweep (12 values of P, H = 2 softmax heads, T = 16, d = 8, 4 chains x (500 warmup
+ 1000 draws), one init), wall time in total and per point (the target: at most 10 minutes on 2 cores).
--train: seconds per AdamW step of the minimal model on HighOrderMarkovTask at the paper's batch (3000) and at
the 2-core default (600), as a ratio, so load from other processes hits both alike (interleaved rounds).
The H-head closed form's value+grad: ``benchmarks/bench_heads.py --heads 1 2 3 --T 16`` (and ``--T 32``).
"""

from __future__ import annotations

import argparse
import tempfile
import time

import numpy as np

from bayesattn.experiments.staircase import BayesConfig, StaircaseConfig, run
from bayesattn.experiments.staircase_training import TrainingConfig, train_minimal


def bench_mcmc():
    b = BayesConfig(heads=[2], attention=["softmax"], inits=["cold"], num_chains=4, num_warmup=500, num_samples=1000)
    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        s = run(StaircaseConfig(parts=["mcmc"], bayes=b), d, progress=False)
        wall = time.perf_counter() - t0
    print(f"mcmc sweep: 12 P x 4 chains x 1500 steps, H = 2, T = 16: {wall:.0f} s ({wall / 12:.1f} s per point)")
    print(s["mcmc"]["softmax/H=2/w=0.6/cold"]["P_k"])


def bench_train(rounds=3, steps=20):
    times = {3000: [], 600: []}
    for _ in range(rounds):
        for B in times:
            cfg = TrainingConfig(batch_size=B, steps=steps, record_every=steps, probe=50)
            t0 = time.perf_counter()
            train_minimal(cfg, 0)
            times[B].append((time.perf_counter() - t0) / steps)
    med = {B: float(np.median(v)) for B, v in times.items()}
    print(f"minimal model, s per step (incl. data and compile / {steps}): batch 3000 {med[3000]:.3f}, "
          f"batch 600 {med[600]:.3f}, ratio {med[3000] / med[600]:.2f}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mcmc", action="store_true", help="time one staircase sweep")
    ap.add_argument("--train", action="store_true", help="time the minimal model's steps")
    a = ap.parse_args()
    if a.mcmc:
        bench_mcmc()
    if a.train or not a.mcmc:
        bench_train()
