"""The posterior as arguments of one compiled program: statistics and the prior's variances are traced,
the task and the attention static, so posteriors that differ only in P or in the prior share one compilation."""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np

from .posterior import Posterior, Prior


def _split(posterior: Posterior):
    leaves, (task, attention, prior) = posterior.tree_flatten()
    prior_values = jnp.asarray([prior.sigma_A2, prior.sigma_V2, prior.sigma2], jnp.float64)
    return (tuple(leaves), prior_values), (task, attention)


def _rebuild(static, dynamic) -> Posterior:
    task, attention = static
    leaves, prior_values = dynamic
    prior = object.__new__(Prior)  # the values were validated when the caller's Prior was built
    for name, v in zip(("sigma_A2", "sigma_V2", "sigma2"), prior_values):
        object.__setattr__(prior, name, v)
    return Posterior.tree_unflatten((task, attention, prior), leaves)


_COMPILED: dict = {}  # compiled programs, keyed by everything static; a cache only (no numbers depend on it)


def _compiled(builder, static_key, *args):
    """Lower and compile ``builder(*static_key)`` once per static key and argument shapes; return
    (compiled, compile seconds)."""
    signature = (static_key, tuple((np.shape(x), str(x.dtype)) for x in jax.tree.leaves(args)))
    if signature in _COMPILED:
        return _COMPILED[signature], 0.0
    t0 = time.perf_counter()
    fn = jax.jit(builder(*static_key))
    compiled = fn.lower(*args).compile()
    _COMPILED[signature] = compiled
    return compiled, time.perf_counter() - t0
