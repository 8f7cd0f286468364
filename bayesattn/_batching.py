"""How independent runs (sampler chains, training runs, seeds) share one compiled program: ``vmap``-ed together
on an accelerator, one after another (``lax.map``) on a CPU; and how a sweep hands a group of points to one call
(:class:`Batch`), with seeds in fixed aligned blocks so that a seed's result never depends on the other seeds
that share its program (:func:`seed_blocks`)."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass


@dataclass(frozen=True)
class Batch:
    """How a sweep computes several points in one call (``run_sweep(..., batch=...)``).

    ``key(point)``: points with equal keys (not None) can be computed together (same shapes); ``many(points)``
    returns their results in order, the same as ``[compute(p) for p in points]`` would (a picklable module-level
    function or bound method); ``size``: at most this many points per call (1: no batching)."""

    key: Callable[[dict], Hashable]
    many: Callable[[list[dict]], list[dict]]
    size: int = 8


def seed_blocks(seeds, size: int) -> list[tuple[list[int], list[int]]]:
    """The aligned blocks of ``size`` seeds that hold ``seeds``: [(block, wanted)], block = the ``size`` seeds
    b*size .. (b+1)*size - 1, wanted = the positions in it of the requested seeds.

    Programs that vmap seeds compile per batch shape, and XLA rounds a differently shaped program differently,
    so a chaotic run (1000 epochs of Adam) drifts apart by 1e-2 when the same seed is trained beside 1 or 5
    others. Computing every seed at the same position of a block of the same size gives it the same program
    and the same inputs, whatever else was asked for: its result is a function of its seed and its config.

    >>> seed_blocks([0, 1, 9], 4)
    [([0, 1, 2, 3], [0, 1]), ([8, 9, 10, 11], [1])]
    """
    if size < 1:
        raise ValueError(f"size={size}: expected a positive block size")
    out: dict[int, list[int]] = {}
    for s in sorted({int(s) for s in seeds}):
        if s < 0:
            raise ValueError(f"seed={s}: expected a non-negative integer")
        out.setdefault(s // size, []).append(s % size)
    return [(list(range(b * size, (b + 1) * size)), pos) for b, pos in out.items()]


def default_batch(n: int) -> int:
    """Runs advanced together by ``vmap`` by default: all ``n`` on an accelerator, one at a time on a CPU.

    XLA:CPU runs batched programs slower per run than one run at a time (2-core CPU VM): a gradient inside
    blackjax NUTS at T = 32, d = 8 cost 144 us per chain-gradient over 4 vmapped chains against 70 us one chain
    after another (``benchmarks/bench_sampling.py --only grad``; every carried array of NUTS's batched
    while-loops goes through a select at every step), and the batched small matmuls of Adam runs were ~3x
    slower per run (``benchmarks/bench_training.py``). On an accelerator the batch is what fills the device
    (not timed here: no GPU was available to this project yet).
    """
    import jax  # here, not at the top: the sweep imports Batch from this module without JAX

    return n if jax.default_backend() != "cpu" else 1


def map_batched(f, xs, batch: int):
    """``f`` over the leading axis of the pytree ``xs``, ``batch`` items at a time vmapped and the batches
    looped by ``lax.map`` inside the same program; ``batch = 1``: no vmap at all (a vmap of one run still
    pays for batched control flow); ``batch >= len``: one vmap."""
    import jax

    n = jax.tree.leaves(xs)[0].shape[0]
    if 1 < batch >= n:
        return jax.vmap(f)(xs)
    return jax.lax.map(f, xs, batch_size=batch if batch > 1 else None)
