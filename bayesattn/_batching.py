"""How independent runs (sampler chains, training runs) share one compiled program: ``vmap``-ed together on
an accelerator, one after another (``lax.map``) on a CPU."""

from __future__ import annotations

import jax


def default_batch(n: int) -> int:
    """Runs advanced together by ``vmap`` by default: all ``n`` on an accelerator, one at a time on a CPU.

    XLA:CPU runs batched programs slower per run than one run at a time (2-core CPU VM): a gradient inside
    blackjax NUTS at T = 32, d = 8 cost 144 us per chain-gradient over 4 vmapped chains against 70 us one chain
    after another (``benchmarks/bench_sampling.py --only grad``; every carried array of NUTS's batched
    while-loops goes through a select at every step), and the batched small matmuls of Adam runs were ~3x
    slower per run (``benchmarks/bench_training.py``). On an accelerator the batch is what fills the device
    (not timed here: no GPU was available to this project yet).
    """
    return n if jax.default_backend() != "cpu" else 1


def map_batched(f, xs, batch: int):
    """``f`` over the leading axis of the pytree ``xs``, ``batch`` items at a time vmapped and the batches
    looped by ``lax.map`` inside the same program; ``batch = 1``: no vmap at all (a vmap of one run still
    pays for batched control flow); ``batch >= len``: one vmap."""
    n = jax.tree.leaves(xs)[0].shape[0]
    if 1 < batch >= n:
        return jax.vmap(f)(xs)
    return jax.lax.map(f, xs, batch_size=batch if batch > 1 else None)
