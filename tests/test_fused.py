"""bayesattn._fused.fused: an eager call compiles one program, not one per operation; a traced call is the function
as written; and the statistics every posterior starts from come out bit for bit as the eager operations give them."""

from __future__ import annotations

import contextlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import bayesattn as ba
from bayesattn._fused import fused
from bayesattn.bayes.statistics import SufficientStats, sufficient_statistics
from bayesattn.diagnostics.observables import attention_entropy, order_parameters, pattern_mass
from bayesattn.models.attention import linear_attention, softmax_attention

COMPILE = "/jax/core/compile/backend_compile_duration"


@contextlib.contextmanager
def counted_compilations():
    """The XLA compilations inside the block (the persistent cache off, so that none is loaded instead)."""
    seen = []

    def listen(event, duration, **kwargs):
        if event == COMPILE:
            seen.append(duration)

    before = jax.config.jax_enable_compilation_cache
    jax.config.update("jax_enable_compilation_cache", False)
    jax.monitoring.register_event_duration_secs_listener(listen)
    try:
        yield seen
    finally:
        jax.monitoring.unregister_event_duration_listener(listen)
        jax.config.update("jax_enable_compilation_cache", before)


def test_an_eager_call_compiles_one_program_where_the_operations_compile_several():
    def f(x, y):
        return jnp.sum(jnp.exp(x) * y + jnp.sin(y)) / x.shape[0]

    g = fused(f)
    x, y = np.linspace(0.0, 1.0, 37), np.linspace(1.0, 2.0, 37)  # a shape no other test uses
    with counted_compilations() as plain:
        want = f(jnp.asarray(x), jnp.asarray(y))
    with counted_compilations() as one:
        got = g(x, y)
    with counted_compilations() as again:
        g(x + 1, y)  # the same shapes: no new program
    assert len(plain) >= 4 and len(one) == 1 and len(again) == 0
    np.testing.assert_allclose(got, want, rtol=1e-14)


def test_inside_a_trace_the_function_is_called_as_written():
    calls = []

    def f(x):
        calls.append(type(x))
        return 2 * x

    g = fused(f)
    jaxpr = jax.make_jaxpr(lambda x: g(x) + 1)(jnp.ones(3))
    # no nested program of its own: the operations appear in the caller's program
    assert [e.primitive.name for e in jaxpr.eqns] == ["mul", "add"]
    assert issubclass(calls[-1], jax.core.Tracer)
    assert jax.grad(lambda x: g(x).sum())(jnp.ones(3)).tolist() == [2.0, 2.0, 2.0]
    assert jax.vmap(g)(jnp.ones((2, 3))).shape == (2, 3)


@pytest.mark.parametrize("boundary", ("cyclic", "causal"))
def test_the_statistics_equal_the_eager_operations_bit_for_bit(boundary):
    """Sxx, Syx and Y^T Y: one compiled program, the same bits as JAX's operation-by-operation evaluation
    (jax.disable_jit), which sampled every committed result; a rounding difference here would move the chains."""
    task = ba.CopyTask(T=16, d=4, boundary=boundary)
    data = task.sample(jax.random.key(3), 300)
    got = SufficientStats.from_data(data.X, data.Y, task.query_mask)
    got_plain = sufficient_statistics(data.X, data.Y)
    with jax.disable_jit():
        want = SufficientStats.from_data(data.X, data.Y, task.query_mask)
        want_plain = sufficient_statistics(data.X, data.Y)
    for a, b in zip((*got, *got_plain), (*want, *want_plain)):
        assert np.asarray(a).dtype == np.asarray(b).dtype and np.array_equal(a, b)


def test_the_fused_observables_equal_the_eager_operations():
    """The attention maps and the observables, one program each: equal to the operation-by-operation values to
    rounding (XLA may fuse their element-wise steps), float32 staying float32."""
    task = ba.CopyTask(T=8, d=2, boundary="causal")
    rng = np.random.default_rng(0)
    for dtype, rtol in ((jnp.float64, 1e-14), (jnp.float32, 1e-6)):
        L = jnp.asarray(3 * rng.normal(size=(5, 8, 8)), dtype)
        outs = lambda: (  # noqa: E731
            softmax_attention(L, task.key_mask),
            linear_attention(L, task.key_mask),
            order_parameters(softmax_attention(L, task.key_mask), task.target_pattern, task.query_mask),
            pattern_mass(softmax_attention(L, task.key_mask), task.target_pattern, task.query_mask),
            attention_entropy(softmax_attention(L, task.key_mask), task.query_mask),
        )
        got = jax.tree.leaves(outs())
        with jax.disable_jit():
            want = jax.tree.leaves(outs())
        for a, b in zip(got, want):
            assert a.dtype == b.dtype == dtype
            np.testing.assert_allclose(a, b, rtol=rtol, atol=rtol)
