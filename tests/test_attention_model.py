"""The attention model and the hot start (bayesattn.models.attention), pinned against their documentation and
the numpy attention maps of conftest. Added after the mutation run (tests/README.md) found them untested."""

from __future__ import annotations

import dataclasses
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import np_attention

import bayesattn as ba
from bayesattn.models.attention import AttentionModel, attention_weights, hot_logits


@pytest.mark.parametrize("kind", ["softmax", "linear"])
def test_attention_kind_read_from_json_selects_the_same_map(kind, rng):
    """A kind string made at run time (a config file) is not the interned literal: the map must be chosen by
    value (kills `attention is "softmax"`)."""
    task = ba.CopyTask(T=4, d=2)
    L = rng.standard_normal((4, 4))
    runtime_kind = json.loads(json.dumps(kind))
    assert runtime_kind == kind and runtime_kind is not kind
    np.testing.assert_allclose(
        attention_weights(L, runtime_kind, task.key_mask), np_attention(L, kind, task.key_mask), rtol=1e-12, atol=1e-15
    )


@pytest.mark.parametrize("boundary", ["cyclic", "causal"])
def test_hot_logits_put_090_on_the_source_and_linear_copies_the_pattern(boundary):
    task = ba.CopyTask(T=5, d=2, boundary=boundary)
    pat, mask = np.asarray(task.target_pattern, float), np.asarray(task.key_mask, bool)
    alpha = np_attention(hot_logits(pat, mask, "softmax"), "softmax", mask)
    for t in np.flatnonzero(np.asarray(task.query_mask)):
        s = int(np.argmax(pat[t]))
        expected = 0.9 if mask[t].sum() > 1 else 1.0  # a row with one key puts everything on it
        assert alpha[t, s] == pytest.approx(expected, rel=1e-12), (t, alpha[t])
    # linear: alpha = pattern exactly (L = sqrt(T) pattern)
    np.testing.assert_allclose(
        np_attention(hot_logits(pat, mask, "linear"), "linear", mask), pat * mask, rtol=1e-12, atol=1e-15
    )
    np.testing.assert_allclose(hot_logits(pat, mask, "softmax", scale=2.5), 2.5 * pat, rtol=0, atol=0)


def test_attention_model_shapes_masks_and_coercion():
    one, two = AttentionModel("softmax"), AttentionModel("linear", heads=2)
    assert one.logit_shape(4) == (4, 4) and two.logit_shape(4) == (2, 4, 4)
    assert one.config() == {"kind": "softmax", "heads": 1, "mask": "task"}
    task_mask = np.ones((4, 4), bool)
    task_mask[0, 3] = False
    np.testing.assert_array_equal(AttentionModel(mask="causal").key_mask(task_mask), task_mask & np.tril(task_mask))
    np.testing.assert_array_equal(AttentionModel(mask="full").key_mask(task_mask), task_mask)
    np.testing.assert_array_equal(one.key_mask(task_mask), task_mask)
    assert AttentionModel.coerce("linear") == AttentionModel("linear", 1)
    assert AttentionModel.coerce("softmax", heads=3) == AttentionModel("softmax", 3)
    assert AttentionModel.coerce(two) is two and AttentionModel.coerce(two, heads=2) is two
    with pytest.raises(ValueError, match="heads=3"):
        AttentionModel.coerce(two, heads=3)
    with pytest.raises(ValueError, match="attention=3"):
        AttentionModel.coerce(3)
    with pytest.raises(dataclasses.FrozenInstanceError):
        one.heads = 2  # a static, hashable configuration
    assert hash(one) == hash(AttentionModel("softmax"))
    L = jax.random.normal(jax.random.key(0), (2, 4, 4))
    np.testing.assert_allclose(
        two.weights(L, task_mask), np.stack([np_attention(x, "linear", task_mask) for x in L]), rtol=1e-12, atol=1e-15
    )


def test_attention_model_refuses_logits_of_another_shape_and_a_length_that_is_not_an_integer():
    """Two heads took one head's (T, T) logits and returned one head's weights; logit_shape('3') gave ('3', '3')."""
    mask = np.ones((3, 3), bool)
    with pytest.raises(ValueError, match=r"L has shape \(3, 3\): expected \(\.\.\., 2, 3, 3\) for heads=2 and T=3"):
        AttentionModel(heads=2).weights(np.zeros((3, 3)), mask)
    with pytest.raises(ValueError, match=r"L has shape \(5, 4, 4\): expected \(\.\.\., 3, 3\) for heads=1"):
        AttentionModel().weights(np.zeros((5, 4, 4)), mask)
    with pytest.raises(ValueError, match="T='3': expected an integer"):
        AttentionModel().logit_shape("3")
    # a batch of logits, and the same under jit (the check is on the static shape)
    assert AttentionModel(heads=2).weights(np.zeros((5, 2, 3, 3)), mask).shape == (5, 2, 3, 3)
    assert jax.jit(lambda L: AttentionModel(heads=2).weights(L, mask))(jnp.zeros((2, 3, 3))).shape == (2, 3, 3)
    with pytest.raises(ValueError, match=r"L has shape \(3, 3\)"):
        jax.jit(lambda L: AttentionModel(heads=2).weights(L, mask))(jnp.zeros((3, 3)))


def test_attention_kinds_match_their_maps_and_definitions(rng):
    """The kind objects: each one's weights are its numpy map; normalised means rows sum to 1 on the allowed keys;
    sign_symmetric means a(-L) = -a(L) (so the posterior, with the readout absorbing the sign, is symmetric); the
    registry, ATTENTIONS and ORDER_PARAMETER agree; names and kinds are accepted alike and stored as names."""
    from bayesattn.models.attention import ATTENTION_KINDS, ATTENTIONS, ORDER_PARAMETER, AttentionKind, attention_kind

    assert ATTENTIONS == ("softmax", "linear") and ORDER_PARAMETER == {"softmax": "m", "linear": "u"}
    task = ba.CopyTask(T=5, d=2, boundary="causal")
    mask = np.asarray(task.key_mask, bool)
    L = rng.standard_normal((5, 5))
    for name, kind in ATTENTION_KINDS.items():
        assert isinstance(kind, AttentionKind) and kind.name == name and attention_kind(name) is kind
        assert attention_kind(kind) is kind and kind.order_parameter == ORDER_PARAMETER[name]
        alpha = np.asarray(kind.weights(L, mask))
        np.testing.assert_allclose(alpha, np_attention(L, name, mask), rtol=1e-12, atol=1e-15)
        rows = mask.any(axis=1)
        assert kind.normalised == bool(np.allclose(alpha[rows].sum(axis=1), 1.0, rtol=1e-12))
        assert kind.sign_symmetric == bool(np.allclose(np.asarray(kind.weights(-L, mask)), -alpha, atol=1e-15))
        assert kind.copy_threshold(16) == (3.0 / 16 if kind.normalised else 0.5)
        assert AttentionModel(kind).kind == name and AttentionModel(kind).attention_kind is kind
        assert AttentionModel.coerce(kind, heads=2) == AttentionModel(name, 2)
        np.testing.assert_array_equal(
            hot_logits(task.target_pattern, mask, kind), hot_logits(task.target_pattern, mask, name)
        )
        assert ba.models.SingleLayerConfig(T=5, d_in=2, attention=kind).attention == name
    with pytest.raises(ValueError, match="attention='relu'"):
        attention_kind("relu")
