"""Throughput of vectorised NUTS chains: draws per second and ESS of m per second against the chain count.

    python benchmarks/bench_chains.py [--T 32] [--chains 4,64,512]

Ratios are against the first run in the same process. The chains are vmapped (``chains_per_batch`` = the
chain count) unless ``--sequential``. On the 2-core CPU VM vmapped chains get slower per chain-gradient as
their number grows (T = 32: 144 us at 4 chains, 204 us at 16, 273 us at 64; one chain at a time: 70 us), so
``ba.sample`` runs them one after another there. On a GPU a batch of chains is what fills the device; that is
what this script is for (``benchmarks/device_check.sh``), and it has not been run on one yet.
"""

from __future__ import annotations

import argparse

import jax
import numpy as np

import bayesattn as ba


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--T", type=int, default=32, help="sequence length")
    ap.add_argument("--P", type=int, default=1000, help="training sequences")
    ap.add_argument("--beta", type=float, default=5.0, help="beta = P d / (2 sigma2)")
    ap.add_argument("--chains", default="4,64,512", help="comma-separated chain counts")
    ap.add_argument("--num-warmup", type=int, default=200, help="warm-up steps")
    ap.add_argument("--num-samples", type=int, default=500, help="draws per chain")
    ap.add_argument("--sequential", action="store_true", help="run the chains one after another (the CPU default)")
    args = ap.parse_args(argv)
    d = 8
    data = ba.CopyTask(T=args.T, d=d).sample(jax.random.key(0), args.P)
    post = ba.Posterior(data, "softmax", ba.Prior(1.0, 100.0, args.P * d / (2 * args.beta)))
    print(
        f"device: {jax.devices()[0]}; T={args.T}, P={args.P}, beta={args.beta}, "
        f"{args.num_warmup}+{args.num_samples} NUTS steps per chain"
    )
    print(
        f"{'chains':>7} {'run s':>8} {'compile s':>9} {'draws/s':>10} {'ESS(m)/s':>10} {'<m>':>7} {'x draws/s vs first':>19}"
    )
    base = None
    for nc in [int(c) for c in args.chains.split(",")]:
        s = ba.sample(
            post,
            jax.random.key(1),
            num_chains=nc,
            num_warmup=args.num_warmup,
            num_samples=args.num_samples,
            chains_per_batch=1 if args.sequential else nc,
        )
        dg = s.diagnostics
        run = float(dg["wall_time_s"])
        rate = nc * (args.num_warmup + args.num_samples) / run
        base = base or rate
        ess = float(dg["m"]["ess_bulk"])
        print(
            f"{nc:>7} {run:>8.2f} {float(dg.get('compile_time_s', np.nan)):>9.2f} {rate:>10.0f} "
            f"{ess / run:>10.1f} {float(np.mean(s.order_parameters['m'])):>7.4f} {rate / base:>19.2f}"
        )


if __name__ == "__main__":
    main()
