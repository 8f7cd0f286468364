"""The minimal model and optimiser of the training staircase: AdamW with decoupled weight decay, clipping and
a plateau decay against a hand-written reference; the multi-head network's Xavier init and score scale."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import bayesattn as ba
from bayesattn.models import MultiHeadConfig
from bayesattn.training.core import OptimizerConfig


def _adamw_reference(p, grads, lr, wd, clip, b1=0.9, b2=0.999, eps=1e-8):
    m = np.zeros_like(p)
    v = np.zeros_like(p)
    for t, g in enumerate(grads, start=1):
        n = np.linalg.norm(g)
        g = g * min(1.0, clip / n)
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g**2
        mh, vh = m / (1 - b1**t), v / (1 - b2**t)
        p = p - lr * (mh / (np.sqrt(vh) + eps) + wd * p)
    return p


def test_adamw_weight_decay_and_clipping_match_reference():
    rng = np.random.default_rng(0)
    p0 = rng.normal(size=5)
    grads = [3.0 * rng.normal(size=5) for _ in range(4)]
    opt = OptimizerConfig("adamw", 0.08, weight_decay=0.01, clip=1.0).build(4)
    p, st = jnp.asarray(p0), None
    st = opt.init(p)
    for g in grads:
        u, st = opt.update(jnp.asarray(g), st, p)
        p = optax.apply_updates(p, u)
    np.testing.assert_allclose(np.asarray(p), _adamw_reference(p0, grads, 0.08, 0.01, 1.0), rtol=1e-10)


def test_plateau_halves_the_step_after_patience_bad_steps():
    # optax reduces after `plateau_patience` steps without improvement; the staircase passes torch's patience + 1
    opt = optax.with_extra_args_support(OptimizerConfig("sgd", 1.0, decay="plateau", plateau_patience=3,
                                                        plateau_factor=0.5).build(10))
    p = jnp.zeros(1)
    st = opt.init(p)
    steps = []
    for value in [1.0, 1.0, 1.0, 1.0, 1.0]:
        u, st = opt.update(jnp.ones(1), st, p, value=value)
        steps.append(float(-u[0]))
    assert steps == [1.0, 1.0, 1.0, 0.5, 0.5]


@pytest.mark.parametrize("bad", [dict(name="adam", weight_decay=0.1), dict(name="adamw", weight_decay=-1.0)])
def test_weight_decay_bad_input(bad):
    with pytest.raises(ValueError, match="weight_decay"):
        OptimizerConfig(lr=0.1, **bad)


def test_multihead_xavier_init_and_score_scale():
    cfg = MultiHeadConfig(T=5, d_in=4, heads=2, init="xavier", init_scale=1.0, score_scale=1 / 3.0)
    net = cfg.build(jax.random.key(0))
    b = np.sqrt(3.0 / 9)
    assert float(jnp.max(jnp.abs(net.W_Q))) <= b and float(jnp.max(jnp.abs(net.W_V))) <= b
    assert float(jnp.max(jnp.abs(net.W_Q))) > 0.8 * b
    x = jax.nn.one_hot(jnp.array([0, 3, 1, 2, 2]), 4)
    y, attn = net(x)
    xp = np.concatenate([np.asarray(x), np.eye(5)], axis=1)
    for h in range(2):
        s = xp @ np.asarray(net.W_Q[h]) @ xp.T / 3.0
        s = np.where(np.tril(np.ones((5, 5))) > 0, s, -np.inf)
        a = np.exp(s - s.max(1, keepdims=True))
        a /= a.sum(1, keepdims=True)
        np.testing.assert_allclose(np.asarray(attn[0, h]), a, atol=1e-12)
    ref = sum(np.asarray(attn[0, h]) @ xp @ np.asarray(net.W_V[h]).T for h in range(2))
    np.testing.assert_allclose(np.asarray(y), ref, atol=1e-12)
