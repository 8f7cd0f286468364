"""Attention maps and order parameters (docs/model.md sections 1 and 3) against numpy and exact values."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import np_attention

import bayesattn as ba


def task(boundary="cyclic", offset=1, T=6):
    return ba.CopyTask(T=T, d=2, offset=offset, boundary=boundary)


@pytest.mark.parametrize("attention", ("softmax", "linear"))
@pytest.mark.parametrize("boundary", ("cyclic", "causal"))
def test_attention_maps_match_numpy(attention, boundary, rng):
    tk = task(boundary)
    L = 3.0 * rng.standard_normal((6, 6))
    alpha = np.asarray(ba.attention_weights(jnp.asarray(L), attention, tk.key_mask))
    np.testing.assert_allclose(alpha, np_attention(L, attention, tk.key_mask), rtol=1e-13, atol=1e-15)
    assert np.all(alpha[~tk.key_mask] == 0.0)
    if attention == "softmax":
        np.testing.assert_allclose(alpha.sum(-1), 1.0, rtol=1e-14)
        assert np.all(alpha[tk.key_mask] > 0)
        # invariant under a per-row shift of the logits
        shifted = ba.softmax_attention(jnp.asarray(L + rng.standard_normal((6, 1)) * 5), tk.key_mask)
        np.testing.assert_allclose(shifted, alpha, rtol=1e-12, atol=1e-15)
    else:
        np.testing.assert_allclose(alpha[tk.key_mask], L[tk.key_mask] / np.sqrt(6), rtol=1e-15)


def test_softmax_is_stable_for_huge_logits():
    tk = task("causal")
    L = 800.0 * tk.target_pattern - 800.0 * (1 - tk.target_pattern)
    alpha = np.asarray(ba.softmax_attention(jnp.asarray(L), tk.key_mask))
    assert np.all(np.isfinite(alpha))
    np.testing.assert_allclose(alpha[tk.query_mask], tk.target_pattern[tk.query_mask], atol=1e-15)


def test_attention_maps_batch_over_leading_axes(rng):
    tk = task("causal", offset=2)
    L = rng.standard_normal((2, 3, 6, 6))
    for attention in ("softmax", "linear"):
        batched = ba.attention_weights(jnp.asarray(L), attention, tk.key_mask)
        for i, j in np.ndindex(2, 3):
            np.testing.assert_allclose(batched[i, j], np_attention(L[i, j], attention, tk.key_mask), rtol=1e-13)


@pytest.mark.parametrize("offset", (1, 2, 5))
def test_uniform_softmax_has_m_equal_q_equal_one_over_T(offset):
    tk = task("cyclic", offset)
    post = ba.Posterior(tk.sample(jax.random.key(0), 2), "softmax")
    op = post.order_parameters(np.zeros((6, 6)))
    np.testing.assert_allclose(op["m"], 1 / 6, rtol=1e-14)
    np.testing.assert_allclose(op["q"], 1 / 6, rtol=1e-14)
    np.testing.assert_allclose(op["u"], 1 / 6, rtol=1e-14)


@pytest.mark.parametrize("boundary", ("cyclic", "causal"))
@pytest.mark.parametrize("offset", (1, 3))
def test_perfect_copy_pattern_has_m_q_u_equal_one(boundary, offset):
    tk = task(boundary, offset)
    post = ba.Posterior(tk.sample(jax.random.key(0), 2), "softmax")
    op = post.order_parameters(60.0 * tk.target_pattern)
    for name in ("m", "q", "u"):
        np.testing.assert_allclose(op[name], 1.0, atol=1e-12)
    # the linear map on the (normalised) shift pattern is also a perfect cosine
    lin = ba.Posterior(tk.sample(jax.random.key(0), 2), "linear")
    np.testing.assert_allclose(lin.order_parameters(-2.5 * tk.target_pattern)["u"], 1.0, rtol=1e-13)


def np_order_parameters(alpha, tk):
    rows = tk.query_mask
    a = alpha[rows]
    m = np.mean(np.sum(a * tk.target_pattern[rows], -1))
    q = np.mean(np.sum(a**2, -1))
    return m, q


@pytest.mark.parametrize("attention", ("softmax", "linear"))
@pytest.mark.parametrize("boundary", ("cyclic", "causal"))
def test_order_parameters_batched_match_loop_and_numpy(attention, boundary, rng):
    tk = task(boundary, offset=2)
    post = ba.Posterior(tk.sample(jax.random.key(0), 2), attention)
    L = 2.0 * rng.standard_normal((3, 2, 6, 6))
    op = post.order_parameters(L)
    assert all(op[k].shape == (3, 2) for k in ("m", "q", "u"))
    for i, j in np.ndindex(3, 2):
        single = post.order_parameters(L[i, j])
        m, q = np_order_parameters(np_attention(L[i, j], attention, tk.key_mask), tk)
        for k, ref in (("m", m), ("q", q), ("u", m**2 / q)):
            np.testing.assert_allclose(op[k][i, j], single[k], rtol=1e-13)
            np.testing.assert_allclose(op[k][i, j], ref, rtol=1e-12)


@pytest.mark.parametrize("boundary", ("cyclic", "causal"))
def test_linear_u_is_squared_cosine_with_target_pattern(boundary, rng):
    tk = task(boundary, offset=2)
    post = ba.Posterior(tk.sample(jax.random.key(0), 2), "linear")
    rows = tk.query_mask
    for _ in range(4):
        L = rng.standard_normal((6, 6)) + rng.uniform(0, 3) * tk.target_pattern
        a = (np.where(tk.key_mask, L, 0.0) / np.sqrt(6))[rows].ravel()
        p = tk.target_pattern[rows].ravel()
        cos2 = (a @ p) ** 2 / ((a @ a) * (p @ p))
        np.testing.assert_allclose(post.order_parameters(L)["u"], cos2, rtol=1e-12)
        # u is scale- and sign-invariant for linear attention
        np.testing.assert_allclose(post.order_parameters(-7.0 * L)["u"], cos2, rtol=1e-12)


def test_u_is_zero_for_zero_linear_attention():
    tk = task()
    post = ba.Posterior(tk.sample(jax.random.key(0), 2), "linear")
    op = post.order_parameters(np.zeros((6, 6)))
    assert float(op["q"]) == 0.0 and float(op["u"]) == 0.0 and np.isfinite(op["u"])
    g = jax.grad(lambda L: post.order_parameters(L)["u"])(jnp.eye(6))
    assert np.all(np.isfinite(g))


def test_order_parameters_are_differentiable_and_jittable(rng):
    tk = task("causal")
    post = ba.Posterior(tk.sample(jax.random.key(0), 2), "softmax")
    L = jnp.asarray(rng.standard_normal((6, 6)))
    f = jax.jit(lambda p, L: p.order_parameters(L)["m"])
    np.testing.assert_allclose(f(post, L), post.order_parameters(L)["m"], rtol=1e-14)
    g = np.asarray(jax.grad(f, argnums=1)(post, L))
    h = 1e-6
    E = np.zeros((6, 6))
    E[3, 2] = h  # a source logit: raising it raises m
    fd = (float(f(post, L + E)) - float(f(post, L - E))) / (2 * h)
    np.testing.assert_allclose(g[3, 2], fd, rtol=1e-6)
    assert g[3, 2] > 0
