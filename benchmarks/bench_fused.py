"""Benchmark: eager calls of the package's small array functions, one compiled program each against one per operation.

    python benchmarks/bench_fused.py [--shapes 12]

Outside a compiled program, JAX compiles every operation at every new argument shape. The functions a user (or a
test, or a results script) calls on concrete arrays are compiled as one program each (``bayesattn._fused``); here
the data's statistics (``Posterior``), the attention maps and the observables of a batch of logits. Here the same sequence of calls runs at ``--shapes`` shapes never seen before in this
process, once with the programs (``ENABLED = True``) and once operation by operation (``ENABLED = False``), the two
alternating shape by shape so that load from other processes hits both alike. Each shape's first call is timed
(compilation included), then a second call at that shape (the cost of running); the data are drawn before. No persistent compilation cache
is used. The values of the two agree (the statistics bit for bit: ``tests/test_fused.py``).

Times are wall-clock on whatever machine runs this; only the ratios are meant to be compared across machines.
"""

from __future__ import annotations

import argparse
import platform
import time

import jax
import numpy as np

import bayesattn as ba
from bayesattn import _fused
from bayesattn.diagnostics.observables import attention_entropy


def inputs(T: int, batch: int, P: int, seed: int):
    """One shape's inputs, drawn before the timing (the draw is compiled per shape either way)."""
    task = ba.CopyTask(T=T, d=4, boundary="causal")
    data = task.sample(jax.random.key(seed), P)
    L = jax.random.normal(jax.random.key(seed + 1), (batch, T, T))
    return jax.block_until_ready((task, data, L))


def calls(task, data, L):
    """One shape's calls: a data set's posterior, the attention maps and the observables of a batch of logits."""
    post = ba.Posterior(data, "softmax", ba.Prior(1.0, 10.0, 10.0))
    alpha = ba.softmax_attention(L, task.key_mask)
    out = (
        post.Sxx,
        ba.linear_attention(L, task.key_mask),
        ba.order_parameters(alpha, task.target_pattern, task.query_mask),
        attention_entropy(alpha, task.query_mask),
    )
    return jax.block_until_ready(out)


def timed(fn, *args) -> float:
    t0 = time.perf_counter()
    fn(*args)
    return time.perf_counter() - t0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shapes", type=int, default=12, help="new shapes per variant")
    args = ap.parse_args(argv)
    jax.config.update("jax_enable_compilation_cache", False)
    print(f"{platform.processor() or platform.machine()}, jax {jax.__version__}, {args.shapes} shapes per variant")
    calls(*inputs(4, 2, 10, 0))  # the first call of anything in a process pays for more than its own compilation
    first = {True: [], False: []}
    second = {True: [], False: []}
    for i in range(args.shapes):
        for enabled in (i % 2 == 0, i % 2 == 1):  # which variant goes first alternates
            _fused.ENABLED = enabled
            # T, the batch and P differ between the variants and between shapes: every call compiles anew
            T, batch, P = 5 + i, 3 + 2 * i + int(enabled), 40 + 7 * i + int(enabled)
            args = inputs(T, batch, P, i)
            first[enabled].append(timed(calls, *args))
            second[enabled].append(timed(calls, *args))
    _fused.ENABLED = True
    for name, got in (("first call at a new shape (compilation included)", first), ("second call", second)):
        one, ops = np.sum(got[True]), np.sum(got[False])
        print(f"{name}: one program {one:.2f} s, operation by operation {ops:.2f} s, ratio {ops / one:.2f}x")


if __name__ == "__main__":
    main()
