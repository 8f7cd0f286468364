"""The model zoo against independent references: the transformer and the minimal multi-head attention with the
single layer's parameterisation give the single layer's outputs (numpy design matrix of tests/conftest.py);
softmax rows sum to 1; no network looks at the future; the Mixer's mixing is lower-triangular; bad configs."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import np_attention, np_design

import bayesattn as ba
from bayesattn.models import (
    MixerConfig,
    MultiHeadConfig,
    SingleLayer,
    SingleLayerConfig,
    TransformerConfig,
    network_config,
    network_from_config,
)
from bayesattn.training import sequence_loss

T, d = 5, 3
call = eqx.filter_jit(lambda net, x: net(x))  # one compiled program, not op-by-op dispatch (much faster here)
batched = eqx.filter_jit(lambda net, X: jax.vmap(net)(X))


def _single_layer_transformer(L, V, attention):
    """A 1-layer, 1-head transformer, no MLP or norm, whose attention scores are the positional logits L and
    whose value is the identity and output map V: residual [x (d), z (d), one-hot position (T)]."""
    dh = max(T, d)
    width = 2 * d + T
    cfg = TransformerConfig(
        T=T,
        width=width,
        layers=1,
        heads=1,
        head_dim=dh,
        mlp=None,
        norm="none",
        positions="onehot",
        d_in=d,
        d_out=V.shape[0],
        attention=attention,
    )
    net = network_from_config(cfg, jax.random.key(0))
    W_E = np.zeros((2 * d, d))
    W_E[:d] = np.eye(d)
    W_Q = np.zeros((dh, width))
    W_Q[np.arange(T), 2 * d + np.arange(T)] = 1.0
    W_K = np.zeros((dh, width))
    W_K[:T, 2 * d :] = np.sqrt(dh) * np.asarray(L)  # q_t . k_s / sqrt(dh) = L_ts
    W_V = np.zeros((dh, width))
    W_V[np.arange(d), np.arange(d)] = 1.0
    W_O = np.zeros((width, dh))
    W_O[d + np.arange(d), np.arange(d)] = 1.0
    W_U = np.zeros((V.shape[0], width))
    W_U[:, d : 2 * d] = V
    b = net.blocks[0]
    net = eqx.tree_at(
        lambda n: (
            n.embedding.W_E,
            n.embedding.W_U,
            n.blocks[0].W_Q,
            n.blocks[0].W_K,
            n.blocks[0].W_V,
            n.blocks[0].W_O,
        ),
        net,
        tuple(jnp.asarray(a) for a in (W_E, W_U, W_Q, W_K, W_V, W_O)),
    )
    assert b.W_in is None and net.final_norm.kind == "none"
    return net


@pytest.mark.parametrize("attention", ["softmax", "linear"])
def test_transformer_with_single_layer_parameters_gives_the_single_layer_loss(attention):
    task = ba.CopyTask(T=T, d=d, boundary="causal")  # a decoder-only transformer is causal
    data = task.sample(jax.random.key(0), 40)
    k1, k2 = jax.random.split(jax.random.key(1))
    L, V = jax.random.normal(k1, (T, T)), jax.random.normal(k2, (d, d))
    single = SingleLayer(SingleLayerConfig.for_task(task, attention), jax.random.key(2), L, V)
    trans = _single_layer_transformer(L, V, attention)
    # independent reference: the explicit n x d design matrix (numpy) and |Y - Z V^T|^2
    Z, Y = np_design(np.asarray(L), data, attention)
    ref = np.mean((Y - Z @ np.asarray(V).T) ** 2)
    for net in (single, trans):
        F = batched(net, data.X)[0]
        np.testing.assert_allclose(sequence_loss("mse", F, data.Y, task.query_mask), ref, rtol=1e-10)
    # and the same attention weights
    np.testing.assert_allclose(call(trans, data.X[0])[1][0, 0], np_attention(L, attention, task.key_mask), atol=1e-12)


def test_multihead_with_positional_queries_is_the_h_head_single_layer():
    H, task = 2, ba.CopyTask(T=T, d=d)
    X = np.asarray(task.sample(jax.random.key(0), 3).X)
    rng = np.random.default_rng(0)
    L, V = rng.normal(size=(H, T, T)), rng.normal(size=(d, H * d))
    cfg = MultiHeadConfig(T=T, d_in=d, heads=H, positions="onehot", decoder="identity", mask="full")
    net = network_from_config(cfg, jax.random.key(0))
    W_Q = np.zeros((H, d + T, d + T))
    W_Q[:, d:, d:] = L  # positional block = the logits
    W_V = np.zeros((H, d, d + T))
    for h in range(H):
        W_V[h, :, :d] = V[:, h * d : (h + 1) * d]
    net = eqx.tree_at(lambda n: (n.W_Q, n.W_V), net, (jnp.asarray(W_Q), jnp.asarray(W_V)))
    single = SingleLayer(SingleLayerConfig(T=T, d_in=d, heads=H), jax.random.key(0), L, V)
    km = np.ones((T, T), bool)
    ref = sum(
        np.einsum("ts,psi,ki->ptk", np_attention(L[h], "softmax", km), X, V[:, h * d : (h + 1) * d]) for h in range(H)
    )  # f = V [z^1, z^2] = sum_h V^h z^h
    for n in (net, single):
        y, attn = batched(n, jnp.asarray(X))
        np.testing.assert_allclose(y, ref, rtol=1e-10, atol=1e-12)
        assert attn.shape == (3, 1, H, T, T)


ZOO = [
    SingleLayerConfig(T=6, d_in=3, heads=2, mask="causal"),
    MultiHeadConfig(T=6, d_in=3, heads=3, decoder="learned", d_value=4, init_scale=0.5),
    TransformerConfig(T=6, width=12, layers=2, heads=3, mlp=16, d_in=3, positions="learned"),
    TransformerConfig(T=6, width=12, layers=2, heads=2, mlp=None, d_in=3, positions="rope", norm="rmsnorm"),
    TransformerConfig(
        T=6,
        width=12,
        layers=1,
        heads=2,
        head_dim=5,
        mlp=8,
        vocab=7,
        positions="onehot",
        norm_position="post",
        tied=True,
    ),
    TransformerConfig(T=6, width=8, layers=2, heads=1, vocab=7, positions="none", norm="none", attention="linear"),
    MixerConfig(T=6, width=8, layers=2, mlp=16, d_in=3),
    MixerConfig(T=6, width=8, layers=1, vocab=7, tied=True, norm="none"),
]


def _inputs(cfg, key):
    if getattr(cfg, "vocab", None):
        return jax.random.randint(key, (cfg.T,), 0, cfg.vocab)
    return jax.random.normal(key, (cfg.T, cfg.d_in))


@pytest.mark.parametrize("cfg", ZOO, ids=lambda c: c.name)
def test_rows_sum_to_one_and_no_network_sees_the_future(cfg):
    net = network_from_config(cfg.config(), jax.random.key(3))  # through the dict form as a config file would
    x = _inputs(cfg, jax.random.key(4))
    y, attn = call(net, x)
    layers = getattr(cfg, "layers", 1)
    heads = getattr(cfg, "heads", 1)
    assert attn.shape == (layers, heads, cfg.T, cfg.T) and y.shape == (cfg.T, cfg.d_out)
    assert np.all(np.triu(np.asarray(attn), 1) == 0)  # causal: nothing above the diagonal
    if cfg.name != "mixer" and getattr(cfg, "attention", "softmax") == "softmax":
        np.testing.assert_allclose(attn.sum(-1), 1.0, atol=1e-12)
    t0 = 2  # change every token after t0: outputs up to t0 must not move, later ones must
    x2 = x.at[t0 + 1 :].set((x[t0 + 1 :] + 1) % cfg.vocab if getattr(cfg, "vocab", None) else x[t0 + 1 :] + 1.0)
    y2, _ = call(net, x2)
    np.testing.assert_allclose(y2[: t0 + 1], y[: t0 + 1], atol=1e-12)
    assert not np.allclose(y2[t0 + 1 :], y[t0 + 1 :])


def test_mixer_mixing_is_lower_triangular_even_after_training_steps():
    cfg = MixerConfig(T=5, width=6, layers=2, d_in=2, mlp=None)
    net = network_from_config(cfg, jax.random.key(0))
    x = jax.random.normal(jax.random.key(1), (5, 2))
    g = eqx.filter_jit(jax.grad(lambda n: jnp.sum(n(x)[0] ** 2)))(net)
    net = jax.tree.map(lambda p, gp: p - 0.5 * gp, net, g)  # the raw W gets gradients everywhere...
    _, M = call(net, x)
    assert np.all(np.triu(np.asarray(M), 1) == 0) and np.any(np.tril(np.asarray(M)) != 0)  # ...M stays causal
    # the first layer's mixing is exactly tril(W): h1 = h0 + M (h0) without norm or MLP
    W = np.asarray(net.blocks[0].W)
    np.testing.assert_array_equal(np.asarray(M[0, 0]), np.tril(W))


def test_float32_inputs_run_in_float32():
    for cfg in (ZOO[0], ZOO[2], ZOO[6]):
        y, attn = call(network_from_config(cfg, jax.random.key(0)), jnp.ones((cfg.T, 3), jnp.float32))
        assert y.dtype == jnp.float32 and attn.dtype == jnp.float32


@pytest.mark.parametrize(
    "config,match",
    [
        ({"name": "transformer", "width": 10, "heads": 3, "d_in": 2}, "heads=3"),
        ({"name": "resnet"}, "network name='resnet'"),
        ({"name": "mixer", "d_in": 2, "depth": 3}, "unknown field"),
        ({"width": 8}, "name"),
        ({"name": "transformer", "T": 16, "width": 16, "positions": "onehot", "d_in": 2}, "width=16"),
        ({"name": "transformer", "vocab": 5, "d_in": 2}, "exactly one"),
        ({"name": "transformer", "d_in": 2, "d_out": 3, "tied": True}, "tied"),
        ({"name": "transformer", "d_in": 2, "positions": "rope", "width": 6, "heads": 2}, "head_dim=3"),
        ({"name": "transformer", "d_in": 2, "norm": "batchnorm"}, "norm"),
        ({"name": "single_layer", "heads": 0}, "heads"),
        ({"name": "transformer", "vocab": 2, "embed_std": 0.0}, "embed_std=0.0"),
        ({"name": "multihead", "value_init_scale": -1.0}, "value_init_scale=-1.0"),
        ({"name": "mixer", "vocab": 2, "embed_std": -1}, "embed_std=-1"),
        ({"name": "multihead", "decoder": "identity", "d_value": 5, "d_out": 3}, "d_value"),
    ],
)
def test_bad_configs_name_parameter_value_and_allowed(config, match):
    with pytest.raises(ValueError, match=match):
        network_config(config)


@pytest.mark.parametrize("cls", [TransformerConfig, MixerConfig])
def test_embedding_scale_and_mlp_biases_leave_the_rest_of_the_initialisation_alone(cls):
    """embed_std scales the token embedding and nothing else; zero-initialised MLP biases leave the network's
    function at init unchanged (same key): the same model, with two more trainable arrays."""
    base = dict(T=6, width=8, layers=1, mlp=12, vocab=3)
    a = network_from_config(cls(**base), jax.random.key(4))
    b = network_from_config(cls(**base, embed_std=0.02, mlp_bias=True), jax.random.key(4))
    np.testing.assert_array_equal(np.asarray(b.embedding.W_E), 0.02 * np.asarray(a.embedding.W_E))
    same = lambda n: eqx.tree_at(lambda n: n.embedding.W_E, n, jnp.zeros_like(n.embedding.W_E))  # noqa: E731
    assert jax.tree.structure(same(a)) != jax.tree.structure(same(b))  # b has the biases
    assert all(np.all(np.asarray(blk.b_in) == 0) and np.all(np.asarray(blk.b_out) == 0) for blk in b.blocks)
    b_unit = eqx.tree_at(lambda n: n.embedding.W_E, b, a.embedding.W_E)
    x = jnp.array([0, 2, 1, 1, 0, 2])
    np.testing.assert_allclose(call(b_unit, x)[0], call(a, x)[0], rtol=1e-12, atol=1e-12)


def test_value_init_scale_scales_w_v_alone():
    """value_init_scale: W_V from the same draw at its own scale (0: zero), W_Q as before."""
    base = MultiHeadConfig(T=4, d_in=3, heads=2, init="xavier", init_scale=1e-3)
    a = network_from_config(base, jax.random.key(1))
    b = network_from_config(MultiHeadConfig(**{**base.__dict__, "value_init_scale": 0.5}), jax.random.key(1))
    z = network_from_config(MultiHeadConfig(**{**base.__dict__, "value_init_scale": 0}), jax.random.key(1))
    np.testing.assert_array_equal(np.asarray(b.W_Q), np.asarray(a.W_Q))
    np.testing.assert_allclose(np.asarray(b.W_V), 0.5 / 1e-3 * np.asarray(a.W_V), rtol=1e-12)
    assert not np.any(np.asarray(z.W_V)) and np.array_equal(np.asarray(z.W_Q), np.asarray(a.W_Q))
