"""Many chains in lockstep inside the T = 64 coexistence window: ChEES from cold and from hot starts.

At each P (softmax copy task, T = 64, d = 8, sigma_A2 = 1, sigma_V2 = 100, sigma2 = 400; the window is P in
[890, 1120], binodal ~929, docs/theory.md), one data set (key P, as scripts/coexistence_check.py), ChEES with K
chains started cold (uniform attention) and K started hot (copy pattern). Printed per start: <m>, the chain means'
range, the fraction of chains whose mean is on the copy branch (m > --threshold), split R-hat; and the nested
R-hat of the 2K chains with the cold and the hot chains as two superchains (bayesattn.bayes.samples.nested_r_hat).

Usage: python scripts/ensemble_window.py [--P 929 1000] [--chains 16] [--warmup 300] [--draws 250]
"""

from __future__ import annotations

import argparse

import jax
import numpy as np

import bayesattn as ba
from bayesattn.bayes.samples import nested_r_hat


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--T", type=int, default=64)
    ap.add_argument("--P", type=int, nargs="+", default=[929, 1000])
    ap.add_argument("--chains", type=int, default=16)
    ap.add_argument("--warmup", type=int, default=300)
    ap.add_argument("--draws", type=int, default=250)
    ap.add_argument("--threshold", type=float, default=0.1, help="chain mean of m above which it is on the copy branch")
    a = ap.parse_args(argv)
    print("| P | start | <m> | chain means (min..max) | on copy branch | split R-hat | wall (s) |")
    print("|---|---|---|---|---|---|---|")
    for P in a.P:
        data = ba.CopyTask(T=a.T, d=8).sample(jax.random.key(P), P)
        post = ba.Posterior(data, "softmax", ba.Prior(1.0, 100.0, 400.0))
        ms = {}
        for j, init in enumerate(("cold", "hot")):
            s = ba.sample(
                post,
                jax.random.key(10 + j),
                method="chees",
                num_chains=a.chains,
                num_warmup=a.warmup,
                num_samples=a.draws,
                init=init,
            )
            m = s.order_parameters["m"]
            cm = m.mean(axis=1)
            ms[init] = m
            print(
                f"| {P} | {init} | {m.mean():.4f} | {cm.min():.3f}..{cm.max():.3f} | "
                f"{(cm > a.threshold).sum()} of {a.chains} | {s.diagnostics['m']['r_hat']:.3f} | "
                f"{s.diagnostics['wall_time_s']:.0f} |",
                flush=True,
            )
        both = np.concatenate([ms["cold"], ms["hot"]])
        labels = np.repeat([0, 1], a.chains)
        print(
            f"| {P} | cold + hot as two superchains | {both.mean():.4f} | | | nested R-hat "
            f"{nested_r_hat(both, labels):.3f} | |",
            flush=True,
        )


if __name__ == "__main__":
    main()
