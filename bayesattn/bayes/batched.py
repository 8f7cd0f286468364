"""Several posteriors of the same shapes in one compiled sampler program: ``sample_many``.

The closed form's sufficient statistics have shapes fixed by (T, d), whatever P is (:class:`SufficientStats`),
and the sampler program takes them and the prior's variances as arguments (``bayes/program.py``). Posteriors
that differ only in P (or in the prior's values) therefore stack along a new leading axis and run as one
program: ``vmap``-ed over the posteriors on a GPU / TPU, where one launch then fills the device, and one after
another (``lax.map``) in the same program on a CPU (``bayesattn._batching.default_batch``).

Each posterior's draws depend only on its own key, as in :func:`bayesattn.bayes.sampling.sample` with the same
arguments: the keys and starting points are derived the same way, and the same per-chain program runs. With
``points_per_batch = 1`` and the default ``chains_per_batch`` on a CPU the arithmetic is the same as one
``sample`` call per posterior (``tests/test_scaleout.py`` checks the draws are equal); a vmapped batch rounds
differently (as ``chains_per_batch`` does), so its draws are equal in distribution, not bit for bit.
Every registered sampler whose program allows it (``Sampler.batched``: the blackjax NUTS / HMC / MALA programs
and the many-chain programs, chees and meads, each point's K chains in lockstep,
:mod:`bayesattn.bayes.samplers.ensemble`) is batched here, through the same registry entry as ``sample``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np

from .._batching import default_batch, map_batched
from .._validate import check_int, check_key
from .posterior import Posterior
from .program import compiled_program, split_posterior
from .samplers import SAMPLERS, get_sampler
from .samplers.base import prepare_job, program_diagnostics
from .samples import Samples, check_counts

BATCHED_METHODS = tuple(m for (m, backend), s in SAMPLERS.items() if backend == "blackjax" and s.batched)


def many_program(points_per_batch, program, *static_key):
    """The program builder of ``sample_many``: ``program(*static_key)`` (a sampler's builder) mapped over a
    leading axis of posteriors, ``points_per_batch`` of them at a time."""
    one = program(*static_key)
    return lambda dynamic, keys, positions: map_batched(lambda a: one(*a), (dynamic, keys, positions), points_per_batch)


def sample_many(
    posteriors: Sequence[Posterior],
    keys: Sequence[jax.Array],
    *,
    method: str = "nuts",
    num_chains: int = 4,
    num_warmup: int = 500,
    num_samples: int = 1000,
    init: Any = None,
    thin: int = 1,
    chains_per_batch: int | None = None,
    points_per_batch: int | None = None,
    **method_options,
) -> list[Samples]:
    """``[sample(p, k, method=..., ...) for p, k in zip(posteriors, keys)]`` as one compiled program.

    All posteriors must share the task, the attention model and the statistics' shapes (same T, d, heads; P
    and the prior's values may differ). ``points_per_batch``: posteriors advanced together by ``vmap``
    (default: all on an accelerator, one at a time on a CPU). Each ``Samples``' ``wall_time_s`` is the
    program's run time divided by the number of posteriors, ``compile_time_s`` the whole compile time (0 when
    cached); everything else is what ``sample`` returns."""
    posteriors, keys = list(posteriors), list(keys)
    for i, k in enumerate(keys):
        check_key(f"keys[{i}]", k)
    if not posteriors or len(posteriors) != len(keys):
        raise ValueError(f"posteriors ({len(posteriors)}) and keys ({len(keys)}): expected equally many, >= 1")
    if method not in BATCHED_METHODS:
        raise ValueError(f"method={method!r}: sample_many batches {', '.join(map(repr, BATCHED_METHODS))}")
    for p in posteriors:
        if not isinstance(p, Posterior):
            raise ValueError(f"posteriors: {type(p).__name__} is not a bayesattn Posterior")
    sampler = get_sampler(method, "blackjax")
    num_chains, num_warmup, num_samples, thin = check_counts(num_chains, num_warmup, num_samples, thin)
    if chains_per_batch is None:
        chains_per_batch = default_batch(num_chains)
    chains_per_batch = min(check_int("chains_per_batch", chains_per_batch, minimum=1), num_chains)
    n = len(posteriors)
    if points_per_batch is None:
        points_per_batch = default_batch(n)
    points_per_batch = min(check_int("points_per_batch", points_per_batch, minimum=1), n)
    opts = sampler.check_options(method_options)

    jobs, dynamics, statics = [], [], set()
    for post, key in zip(posteriors, keys):
        job = prepare_job(
            sampler,
            post,
            key,
            init=init,
            num_chains=num_chains,
            num_warmup=num_warmup,
            num_samples=num_samples,
            thin=thin,
            chains_per_batch=chains_per_batch,
            options=opts,
        )
        jobs.append(job)
        dynamic, static = split_posterior(post)
        dynamics.append(dynamic)
        statics.add((static, tuple(np.shape(x) for x in jax.tree.leaves(dynamic))))
    if len(statics) != 1:
        raise ValueError(
            "posteriors: expected the same task, attention model and statistics shapes (T, d, heads) "
            "for all; group posteriors by shape first"
        )
    static = posteriors[0].tree_flatten()[1]
    stack = lambda xs: jax.tree.map(lambda *a: jax.numpy.stack(a), *xs)  # noqa: E731
    chain_keys = [sampler.chain_keys(job.run_key, num_chains) for job in jobs]
    args = (stack(dynamics), stack(chain_keys), stack([job.positions for job in jobs]))
    static_key = (points_per_batch, sampler.program, *sampler.program_key(jobs[0]), *static)
    compiled, compile_s = compiled_program(many_program, static_key, *args)
    t0 = time.perf_counter()
    out = jax.tree.map(np.asarray, jax.block_until_ready(compiled(*args)))
    wall = (time.perf_counter() - t0) / n

    results = []
    for i, job in enumerate(jobs):
        o = jax.tree.map(lambda a: a[i], out)
        diag = program_diagnostics(o, wall, compile_s)
        results.append(sampler.assemble(job.posterior, o, diag, opts, job.config, job.superchains))
    return results
