"""The posterior as arguments of one compiled program: statistics and the prior's variances are traced,
the task and the attention static, so posteriors that differ only in P or in the prior share one compilation."""

from __future__ import annotations

import threading
import time

import jax
import jax.numpy as jnp
import numpy as np

from .posterior import Posterior, Prior


def _split(posterior: Posterior):
    """(dynamic, static): the statistics and the prior (pytrees of arrays, traced) and (task, attention model)."""
    children, static = posterior.tree_flatten()
    prior = children[1]
    values = Prior.tree_unflatten(None, [jnp.asarray(v, jnp.float64) for v in prior.tree_flatten()[0]])
    return (children[0], values), static


def _rebuild(static, dynamic) -> Posterior:
    return Posterior.tree_unflatten(static, dynamic)


_COMPILED: dict = {}  # compiled programs, keyed by everything static; a cache only (no numbers depend on it)
_COMPILING: dict = {}  # signature -> lock held while that program compiles
_LOCK = threading.Lock()


def _compiled(builder, static_key, *args):
    """Lower and compile ``builder(*static_key)`` once per static key and argument shapes; return
    (compiled, compile seconds).

    Thread-safe: points computed at once in threads (``sweep_executor("thread")``) that need the same program
    wait for one compilation instead of each compiling it (two concurrent compilations of the ChEES program
    took 8.4 s against 3.5 s for one, 2-core CPU); the waiting time counts as their compile time."""
    signature = (static_key, tuple((np.shape(x), str(x.dtype)) for x in jax.tree.leaves(args)))
    if signature in _COMPILED:
        return _COMPILED[signature], 0.0
    t0 = time.perf_counter()
    with _LOCK:
        lock = _COMPILING.setdefault(signature, threading.Lock())
    with lock:
        if signature not in _COMPILED:
            fn = jax.jit(builder(*static_key))
            _COMPILED[signature] = fn.lower(*args).compile()
    with _LOCK:
        _COMPILING.pop(signature, None)
    return _COMPILED[signature], time.perf_counter() - t0
