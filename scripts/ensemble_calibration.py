"""Are the many-chain mode's standard errors honest, and is its mean the NUTS mean? Repeated independent runs.

On one data set (softmax copy task, T = 32 by default, d = 8, sigma_A2 = 1, sigma_V2 = 100), ``--runs`` runs of
ChEES (K x (warm-up + draws)) and as many of the NUTS default (4 x (500 + 1000)), each with its own sampler key
and the same start. Printed per sampler: the mean over runs of <m>, the standard deviation of the runs' <m>
against the mean standard error the runs report (their ratio is ~1 when the ESS behind the standard error is
honest: below ~0.6 or above ~1.5 is suspect at 8 runs), and the difference of the two samplers' means over runs
in combined standard errors of those means (sd / sqrt(runs)): a systematic difference between the samplers
shows here, where a single pair of runs hides it in its noise.

Usage: python scripts/ensemble_calibration.py [--P 1000] [--sigma2 400] [--runs 8] [--chains 16] [--warmup 500]
       [--draws 1000] [--warmup-chains W] [--spread-steps 20] [--init cold]

``--init branch`` starts both samplers' chains on the theory's stable branch (``bayesattn.branch_starts`` with
``phase_curve``'s m at this P), new starting points for every run.
"""

from __future__ import annotations

import argparse
import time

import jax
import numpy as np

import bayesattn as ba


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--T", type=int, default=32, help="sequence length")
    ap.add_argument("--P", type=int, default=1000, help="training sequences (data key 0)")
    ap.add_argument("--sigma2", type=float, default=400.0, help="likelihood variance")
    ap.add_argument("--runs", type=int, default=8, help="independent runs per sampler (>= 2)")
    ap.add_argument("--chains", type=int, default=16, help="ChEES chains K")
    ap.add_argument("--warmup", type=int, default=500, help="ChEES warm-up steps")
    ap.add_argument("--draws", type=int, default=1000, help="ChEES draws per chain")
    ap.add_argument(
        "--warmup-chains", type=int, default=None, help="ChEES chains that adapt (default all; then copied to K)"
    )
    ap.add_argument("--spread-steps", type=int, default=20, help="discarded steps after copying (--warmup-chains)")
    ap.add_argument("--init", default="cold", choices=("cold", "hot", "prior", "branch"), help="start of both samplers")
    a = ap.parse_args(argv)
    if a.runs < 2:
        ap.error(f"--runs={a.runs}: expected an integer >= 2 (a spread needs two runs)")
    data = ba.CopyTask(T=a.T, d=8).sample(jax.random.key(0), a.P)
    post = ba.Posterior(data, "softmax", ba.Prior(1.0, 100.0, a.sigma2))
    few = {} if a.warmup_chains is None else dict(warmup_chains=a.warmup_chains, spread_steps=a.spread_steps)
    label = "" if a.warmup_chains is None else f", {a.warmup_chains} adapt + {a.spread_steps} spread"
    samplers = {
        f"chees {a.chains} x ({a.warmup} + {a.draws}){label}": dict(
            method="chees", num_chains=a.chains, num_warmup=a.warmup, num_samples=a.draws, **few
        ),
        "nuts 4 x (500 + 1000)": dict(num_chains=4, num_warmup=500, num_samples=1000),
    }
    print(f"T = {a.T}, P = {a.P}, sigma2 = {a.sigma2}, init {a.init}, {a.runs} runs per sampler", flush=True)
    init = lambda key, kw: a.init  # noqa: E731
    if a.init == "branch":
        pc = ba.theory.phase_curve(post.task, post.prior, "softmax", [float(a.P)])
        m0 = float(pc.stable["m"][0])
        print(f"theory's stable branch: m = {m0:.5f}", flush=True)
        init = lambda key, kw: ba.branch_starts(post, jax.random.fold_in(key, 1), kw["num_chains"], m0)  # noqa: E731
    stats = {}
    for name, kw in samplers.items():
        t0 = time.perf_counter()
        keys = [jax.random.key(1000 + s) for s in range(a.runs)]
        rows = [ba.sample(post, key, init=init(key, kw), **kw).summary()["m"] for key in keys]
        mu, se = np.array([r["mean"] for r in rows]), np.array([r["se"] for r in rows])
        stats[name] = (mu.mean(), mu.std(ddof=1) / np.sqrt(a.runs))
        print(
            f"{name}: mean of <m> {mu.mean():.5f} +- {stats[name][1]:.5f}; sd of the runs' <m> "
            f"{mu.std(ddof=1):.6f} vs mean reported se {se.mean():.6f} (ratio {mu.std(ddof=1) / se.mean():.2f}); "
            f"{time.perf_counter() - t0:.0f} s",
            flush=True,
        )
    (m1, s1), (m2, s2) = stats.values()
    print(f"difference of the means over runs: {m1 - m2:+.5f} = {(m1 - m2) / np.hypot(s1, s2):+.1f} combined se")


if __name__ == "__main__":
    main()
