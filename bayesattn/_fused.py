"""Eager calls compiled as one program.

Outside a trace, JAX runs every ``jax.numpy`` operation as a program of its own, compiled once per operation and
argument shape: a function of ten operations called eagerly at a new shape compiles ten small programs.
:func:`fused` compiles the whole function instead (one program per argument shapes and dtypes) when it is called
with concrete arrays, and calls it as written when any argument is traced, so the programs that call it from
inside a ``jit``, ``grad`` or ``vmap`` are left as they were.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import jax

ENABLED = True  # False: every fused function runs as written, one program per operation (benchmarks/bench_fused.py)


def fused(fn: Callable, program: Callable | None = None) -> Callable:
    """``fn`` as one compiled program when called eagerly, ``fn`` itself inside a trace. Every argument is a
    pytree of arrays (numpy arrays become traced arguments of the program, so ``fn`` must use ``jax.numpy`` on
    them); no keyword arguments.

    ``program``, when given, is what the eager calls compile instead of ``fn``: the same operations, written so
    that XLA rounds them as the eager operations did where that matters (a product whose transpose XLA would fold
    into it, kept apart by ``jax.lax.optimization_barrier``)."""
    program = jax.jit(fn if program is None else program)

    @functools.wraps(fn)
    def call(*args):
        if not ENABLED or any(isinstance(x, jax.core.Tracer) for x in jax.tree.leaves(args)):
            return fn(*args)
        return program(*args)

    return call
