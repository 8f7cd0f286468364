"""The posterior as arguments of one compiled program, and the cache of compiled programs.

The statistics and the prior's variances are traced, the task and the attention static, so posteriors that differ
only in P or in the prior share one compilation. The cache keeps the :data:`MAX_COMPILED` programs used most
recently: every compiled XLA:CPU program keeps its code mapped in the process, so an unbounded cache grows with
every distinct sampler configuration of a long sweep or test run.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from .posterior import Posterior, Prior

MAX_COMPILED = (
    64  # compiled programs kept; the least recently used one is dropped first (a cache: no number depends on it)
)


def split_posterior(posterior: Posterior):
    """(dynamic, static) of a posterior: dynamic = (statistics, prior), pytrees of float64 arrays that a compiled
    program takes as arguments; static = (task, attention model), hashable, fixed in the program."""
    children, static = posterior.tree_flatten()
    prior = children[1]
    values = Prior.tree_unflatten(None, [jnp.asarray(v, jnp.float64) for v in prior.tree_flatten()[0]])
    return (children[0], values), static


def rebuild_posterior(static, dynamic) -> Posterior:
    """The posterior of :func:`split_posterior`'s (static, dynamic) parts (inside a program: dynamic traced)."""
    return Posterior.tree_unflatten(static, dynamic)


_COMPILED: OrderedDict = OrderedDict()  # signature -> compiled program, least recently used first
_COMPILING: dict = {}  # signature -> lock held while that program compiles
_LOCK = threading.Lock()  # guards both maps


def compiled_program(builder: Callable, static_key: tuple, *args):
    """Lower and compile ``jax.jit(builder(*static_key))`` for ``args`` once per (builder, static key, argument
    shapes and dtypes); return (compiled, compile seconds), 0.0 when it was cached.

    ``builder`` must be a module-level function (it is part of the cache key). Thread-safe: points computed at once
    in threads (``sweep_executor("thread")``) that need the same program wait for one compilation instead of each
    compiling it (two concurrent compilations of the ChEES program took 8.4 s against 3.5 s for one, 2-core CPU);
    the waiting time counts as their compile time. A program dropped from the cache (:data:`MAX_COMPILED`) is
    compiled again when next needed."""
    signature = (builder, static_key, tuple((np.shape(x), str(x.dtype)) for x in jax.tree.leaves(args)))
    with _LOCK:
        fn = _COMPILED.get(signature)
        if fn is not None:
            _COMPILED.move_to_end(signature)
            return fn, 0.0
        lock = _COMPILING.setdefault(signature, threading.Lock())
    t0 = time.perf_counter()
    with lock:
        with _LOCK:
            fn = _COMPILED.get(signature)
        if fn is None:
            fn = jax.jit(builder(*static_key)).lower(*args).compile()
        with _LOCK:
            _COMPILED[signature] = fn
            _COMPILED.move_to_end(signature)
            while len(_COMPILED) > MAX_COMPILED:
                _COMPILED.popitem(last=False)
    with _LOCK:
        _COMPILING.pop(signature, None)
    return fn, time.perf_counter() - t0
