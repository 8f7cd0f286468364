"""Benchmark: the staircase's two costly pieces, timed in one process.

    python benchmarks/bench_staircase.py [--mcmc] [--train]

--mcmc: one Bayesian staircase sweep (12 values of P, H = 2 softmax heads, T = 16, d = 8, 4 chains x (500 warmup
+ 1000 draws), one init), wall time in total and per point (the target: at most 10 minutes on 2 cores).
--train: seconds per value+grad of the minimal model on HighOrderMarkovTask at the paper's batch (3000), the
gather path training uses against the general MultiHeadAttention path, as a ratio (interleaved rounds, so load
from other processes hits both alike), and seconds per step of the training loop.
The H-head closed form's value+grad: ``benchmarks/bench_heads.py --heads 1 2 3 --T 16`` (and ``--T 32``).
"""

from __future__ import annotations

import argparse
import tempfile
import time

import numpy as np

from bayesattn.experiments.sections import ChainsSection
from bayesattn.experiments.staircase import Staircase, StaircaseConfig
from bayesattn.experiments.staircase.config import BayesConfig, TrainingConfig
from bayesattn.sweep import run_experiment


def bench_mcmc():
    b = BayesConfig(
        heads=[2],
        attention=["softmax"],
        inits=["cold"],
        mcmc=ChainsSection(num_chains=4, num_warmup=500, num_samples=1000),
    )
    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        s = run_experiment(Staircase(), StaircaseConfig(parts=["mcmc"], bayes=b), d, progress=False, figures=False)
        wall = time.perf_counter() - t0
    print(f"mcmc sweep: 12 P x 4 chains x 1500 steps, H = 2, T = 16: {wall:.0f} s ({wall / 12:.1f} s per point)")
    print(s["mcmc"]["softmax/H=2/w=0.6/cold"]["P_k"])


def bench_train(rounds=5, batch=3000):
    """Seconds per value+grad of the minimal model's minibatch loss at the paper's batch: the gather path
    (staircase.models.minimal_logits on integer tokens, the one training uses) against the general path
    (MultiHeadAttention vmapped over one-hot sequences), both float32, same parameters, interleaved rounds; and
    one AdamW step of the training loop (minibatch draw, clipping, divergence guard) on the gather path."""
    import equinox as eqx
    import jax
    import jax.numpy as jnp

    from bayesattn.experiments.staircase.training import forward_fn
    from bayesattn.training.core import Plan, run_loop

    cfg = TrainingConfig(batch_size=batch)
    task = cfg.task()
    q0 = task.burn_in - 1
    X = jax.random.randint(jax.random.key(0), (cfg.train, task.T), 0, task.d)
    Y = jax.random.randint(jax.random.key(1), (cfg.train, task.T - q0), 0, task.d)
    net = cfg.network().build(jax.random.key(2))
    params, static = eqx.partition(net, eqx.is_inexact_array)
    gather = forward_fn(cfg, static)

    def general(p, tok):
        y, _ = jax.vmap(eqx.combine(p, static))(jax.nn.one_hot(tok, task.d, dtype=jnp.float32))
        return y[:, q0:], None

    def loss(forward):
        def f(p, key):
            idx = jax.random.choice(key, cfg.train, (batch,), replace=False)
            lp = jax.nn.log_softmax(forward(p, X[idx])[0], -1)
            return -jnp.mean(jnp.take_along_axis(lp, Y[idx][..., None], -1))

        return f

    fns = {"general": jax.jit(jax.value_and_grad(loss(general))), "gather": jax.jit(jax.value_and_grad(loss(gather)))}
    key = jax.random.key(3)
    vals = {n: f(params, key) for n, f in fns.items()}
    diff = max(
        float(jnp.max(jnp.abs(a - b)))
        for a, b in zip(jax.tree.leaves(vals["gather"]), jax.tree.leaves(vals["general"]))
    )
    times = {n: [] for n in fns}
    for r in range(rounds):
        for n, f in fns.items():
            t0 = time.perf_counter()
            jax.block_until_ready(f(params, jax.random.fold_in(key, r)))
            times[n].append(time.perf_counter() - t0)
    med = {n: float(np.median(v)) for n, v in times.items()}
    print(
        f"minimal model value+grad, batch {batch}, float32 (median of {rounds}): general {med['general']:.3f} s, "
        f"gather {med['gather']:.3f} s, ratio {med['general'] / med['gather']:.2f} (max |difference| {diff:.1e})"
    )
    steps = 20
    f = jax.jit(
        lambda p, k: (
            run_loop(p, loss(gather), cfg.optimizer_transform(), Plan.make(steps, steps), lambda p: {}, k)[0].params
        )
    )
    jax.block_until_ready(f(params, key))
    t0 = time.perf_counter()
    jax.block_until_ready(f(params, key))
    per = (time.perf_counter() - t0) / steps
    print(
        f"training loop, gather path: {per:.3f} s per AdamW step at batch {batch} "
        f"(2000 steps: {2000 * per / 60:.1f} min per seed)"
    )


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mcmc", action="store_true", help="time one staircase sweep")
    ap.add_argument("--train", action="store_true", help="time the minimal model's steps")
    a = ap.parse_args()
    if a.mcmc:
        bench_mcmc()
    if a.train or not a.mcmc:
        bench_train()
