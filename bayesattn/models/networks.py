"""Trainable networks (Equinox modules), their typed configs and the registry a config names them by.

Every network is an ``eqx.Module`` (a pytree of arrays plus static fields) acting on ONE sequence; batch it
with ``jax.vmap(net)``. The call convention is the same for all of them:

    y, attn = net(x)
    x:    (T, d_in) float vectors, or (T,) int tokens for a network with a vocabulary;
    y:    (T, d_out) outputs (logits over the vocabulary for token outputs);
    attn: (layers, heads, T, T) the attention weights of every layer and head for this sequence (for the
          MLP-Mixer: the causal token-mixing matrix of each layer, heads = 1).

So the diagnostics can read any network's attention the same way, and ``net.attention_model`` (kind and heads)
tells them which observables apply (``diagnostics.observables.declared``).

Networks here: :class:`SingleLayer` (the model of the posterior, docs/model.md section 1),
:class:`MultiHeadAttention` (minimal: keys = inputs); :mod:`.transformer` adds :class:`~.transformer.Transformer`
and :class:`~.transformer.CausalMixer`. A config dataclass per network; ``network_from_config(config, key)``
builds any of them from the config object or its ``config()`` dict (``{"name": ..., **fields}``).

Parameters are created in float64 (switched on package-wide); a network computes in the dtype of its vector
inputs, so float32 inputs run a float32 forward pass.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar, Literal

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .._validate import brief, check_choice, check_int, check_nonnegative, check_positive
from .attention import AttentionModel, AttentionName, attention_kind, attention_weights

MaskKind = Literal["full", "causal"]
MASK_KINDS = ("full", "causal")


def key_mask_of(mask: str, T: int) -> np.ndarray:
    """(T, T) bool key mask: "full" (every key) or "causal" (keys s <= t)."""
    full = np.ones((T, T), dtype=bool)
    return full if mask == "full" else np.tril(full)


def mask_for_task(task) -> str:
    """The mask name ("full" or "causal") of a task's key mask; ValueError if it is neither."""
    km = np.asarray(task.key_mask, bool)
    for name in MASK_KINDS:
        if np.array_equal(km, key_mask_of(name, km.shape[0])):
            return name
    raise ValueError(f"task={brief(task)}: its key_mask is neither full nor causal; expected one of {MASK_KINDS}")


def compute_dtype(net: eqx.Module, x: jax.Array) -> eqx.Module:
    """``net`` with its float leaves cast to the dtype of float inputs ``x`` (unchanged for int tokens)."""
    if not jnp.issubdtype(x.dtype, jnp.floating):
        return net
    return jax.tree.map(lambda p: p.astype(x.dtype) if eqx.is_inexact_array(p) else p, net)


# ----------------------------------------------------------------------------------------------------------
# configs and the registry
# ----------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NetworkConfig:
    """Base of the typed network configs: frozen, hashable (a static jit argument), JSON-able by ``config()``."""

    name: ClassVar[str] = ""

    def config(self) -> dict:
        return {"name": self.name, **dataclasses.asdict(self)}

    def replace(self, **changes) -> NetworkConfig:
        return dataclasses.replace(self, **changes)

    def build(self, key: jax.Array) -> eqx.Module:
        return NETWORKS[self.name][1](self, key)


NETWORKS: dict[str, tuple[type[NetworkConfig], type[eqx.Module]]] = {}


def register_network(config_cls: type[NetworkConfig], network_cls: type[eqx.Module]) -> None:
    """Make ``network_cls`` (built as ``network_cls(config, key)``) known to :func:`network_from_config` by
    ``config_cls.name``."""
    if not (isinstance(config_cls, type) and issubclass(config_cls, NetworkConfig) and config_cls.name):
        raise ValueError(f"config_cls={config_cls!r}: expected a NetworkConfig subclass with a name")
    NETWORKS[config_cls.name] = (config_cls, network_cls)


def network_config(config: dict | NetworkConfig) -> NetworkConfig:
    """The typed config of a ``config()`` dict ({"name": ..., **fields}); a typed config is returned as is."""
    if isinstance(config, NetworkConfig):
        return config
    if not isinstance(config, dict) or "name" not in config:
        raise ValueError(
            f"network config={config!r}: expected a dict with a 'name' key "
            f"(one of {', '.join(map(repr, sorted(NETWORKS)))}) or a NetworkConfig"
        )
    fields = dict(config)
    name = fields.pop("name")
    if name not in NETWORKS:
        raise ValueError(f"network name={name!r}: expected one of {', '.join(map(repr, sorted(NETWORKS)))}")
    cls = NETWORKS[name][0]
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(fields) - known)
    if unknown:
        raise ValueError(f"network {name}: unknown field(s) {unknown}: expected some of {sorted(known)}")
    return cls(**fields)


def network_from_config(config: dict | NetworkConfig, key: jax.Array) -> eqx.Module:
    """Build the network a config names, its parameters drawn from ``key``.

    >>> import jax
    >>> net = network_from_config({"name": "single_layer", "T": 4, "d_in": 2}, jax.random.key(0))
    >>> y, attn = net(jax.numpy.ones((4, 2)))
    >>> y.shape, attn.shape
    ((4, 2), (1, 1, 4, 4))
    """
    return network_config(config).build(key)


def optional_int(name: str, value, minimum: int = 1) -> int | None:
    """None stays None (an optional size left to its default); anything else must be an int >= ``minimum``
    (ValueError naming ``name`` otherwise). Shared by the network configs' checks."""
    return None if value is None else check_int(name, value, minimum=minimum)


# ----------------------------------------------------------------------------------------------------------
# the single attention layer (the model of the posterior)
# ----------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SingleLayerConfig(NetworkConfig):
    """f_t = V [z^1_t, ..., z^H_t], z^h_t = sum_s a(L^h)_ts x_s: positional logits L ((T, T) for one head,
    (H, T, T) for H) and a readout V: (d_out, H d_in). init_scale: L, V ~ init_scale N(0, 1)."""

    name: ClassVar[str] = "single_layer"
    T: int = 8
    d_in: int = 8
    d_out: int | None = None  # None: d_in
    attention: AttentionName = "softmax"
    heads: int = 1
    mask: MaskKind = "full"
    init_scale: float = 1e-2

    def __post_init__(self):
        object.__setattr__(self, "T", check_int("T", self.T, minimum=1))
        object.__setattr__(self, "d_in", check_int("d_in", self.d_in, minimum=1))
        object.__setattr__(self, "d_out", optional_int("d_out", self.d_out) or self.d_in)
        object.__setattr__(self, "attention", attention_kind(self.attention).name)
        object.__setattr__(self, "heads", check_int("heads", self.heads, minimum=1))
        check_choice("mask", self.mask, MASK_KINDS)
        object.__setattr__(self, "init_scale", float(check_positive("init_scale", self.init_scale)))

    @classmethod
    def for_task(cls, task, attention: AttentionName = "softmax", heads: int = 1, **kw) -> SingleLayerConfig:
        """The single layer for ``task``'s shapes and key mask."""
        return cls(
            T=task.T, d_in=task.d, d_out=task.d_out, attention=attention, heads=heads, mask=mask_for_task(task), **kw
        )


class SingleLayer(eqx.Module):
    """The single attention layer of docs/model.md section 1 (see :class:`SingleLayerConfig`).

    L: (T, T) or (H, T, T); V: (d_out, H d_in). ``net(x)`` with x: (T, d_in) -> (y (T, d_out), attn (1, H, T, T)).
    """

    L: jax.Array
    V: jax.Array
    config: SingleLayerConfig = eqx.field(static=True)

    def __init__(
        self, config: SingleLayerConfig, key: jax.Array, L: jax.Array | None = None, V: jax.Array | None = None
    ):
        c = config
        kL, kV = jax.random.split(key)
        shape = AttentionModel(c.attention, c.heads).logit_shape(c.T)
        self.L = c.init_scale * jax.random.normal(kL, shape) if L is None else jnp.asarray(L)
        self.V = c.init_scale * jax.random.normal(kV, (c.d_out, c.heads * c.d_in)) if V is None else jnp.asarray(V)
        self.config = c

    @property
    def attention_model(self) -> AttentionModel:
        return AttentionModel(self.config.attention, self.config.heads)

    def weights(self) -> jax.Array:
        """alpha = a(L), the same for every sequence: the shape of L."""
        return attention_weights(self.L, self.config.attention, key_mask_of(self.config.mask, self.config.T))

    def __call__(self, x: jax.Array) -> tuple[jax.Array, jax.Array]:
        net = compute_dtype(self, x)
        alpha = net.weights()
        heads = alpha.reshape(-1, *alpha.shape[-2:])  # (H, T, T)
        z = jnp.einsum("hts,si->thi", heads, x).reshape(x.shape[0], -1)  # [z^1, ..., z^H] per position
        return z @ net.V.T, heads[None]


# ----------------------------------------------------------------------------------------------------------
# minimal multi-head attention: keys are the inputs
# ----------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MultiHeadConfig(NetworkConfig):
    """Minimal multi-head attention. With x'_t = [x_t, e_t] (one-hot position e_t appended when
    ``positions="onehot"``; width d' = d_in (+ T)):

        score^h_ts = x'_t^T W_Q^h x'_s  (keys are the inputs themselves),  a^h = a(score^h) (masked),
        o_t = sum_h sum_s a^h_ts W_V^h x'_s,  y_t = o_t (``decoder="identity"``, frozen) or W_O o_t.

    W_Q: (H, d', d'), W_V: (H, d_value, d'), W_O: (d_out, d_value). The identity decoder needs
    d_value = d_out (d_value None: d_out). Positional W_Q blocks are the single layer's logits L^h.

    score_scale: the scores are multiplied by it (None: 1; the paper of Yueksel et al. uses 1 / sqrt(d')).
    init: "normal" (W ~ init_scale N(0, 1)) or "xavier" (W_Q, W_V ~ init_scale U(-b, b), b = sqrt(3 / d'):
    Xavier-uniform of a d' x d' projection, the paper's value projection being d' x d' of which the identity
    decoder keeps the first d_out rows). value_init_scale: W_V's own scale in place of init_scale (0: W_V starts
    at zero); None: init_scale.
    """

    name: ClassVar[str] = "multihead"
    T: int = 8
    d_in: int = 8
    d_out: int | None = None
    heads: int = 1
    attention: AttentionName = "softmax"
    positions: Literal["onehot", "none"] = "onehot"
    decoder: Literal["identity", "learned"] = "identity"
    d_value: int | None = None
    mask: MaskKind = "causal"
    init_scale: float = 1e-2
    score_scale: float | None = None
    init: Literal["normal", "xavier"] = "normal"
    value_init_scale: float | None = None

    def __post_init__(self):
        for f in ("T", "d_in", "heads"):
            object.__setattr__(self, f, check_int(f, getattr(self, f), minimum=1))
        object.__setattr__(self, "d_out", optional_int("d_out", self.d_out) or self.d_in)
        object.__setattr__(self, "d_value", optional_int("d_value", self.d_value) or self.d_out)
        object.__setattr__(self, "attention", attention_kind(self.attention).name)
        check_choice("positions", self.positions, ("onehot", "none"))
        check_choice("decoder", self.decoder, ("identity", "learned"))
        check_choice("mask", self.mask, MASK_KINDS)
        if self.decoder == "identity" and self.d_value != self.d_out:
            raise ValueError(f"d_value={self.d_value}: the identity decoder needs d_value = d_out = {self.d_out}")
        object.__setattr__(self, "init_scale", float(check_positive("init_scale", self.init_scale)))
        if self.score_scale is not None:
            object.__setattr__(self, "score_scale", float(check_positive("score_scale", self.score_scale)))
        check_choice("init", self.init, ("normal", "xavier"))
        if self.value_init_scale is not None:
            v = self.value_init_scale
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise ValueError(f"value_init_scale={v!r}: expected a finite number >= 0 (or None: init_scale)")
            object.__setattr__(self, "value_init_scale", check_nonnegative("value_init_scale", v))

    @property
    def width(self) -> int:
        return self.d_in + (self.T if self.positions == "onehot" else 0)


class MultiHeadAttention(eqx.Module):
    """See :class:`MultiHeadConfig`. ``net(x)``, x: (T, d_in) -> (y (T, d_out), attn (1, H, T, T))."""

    W_Q: jax.Array
    W_V: jax.Array
    W_O: jax.Array | None
    config: MultiHeadConfig = eqx.field(static=True)

    def __init__(self, config: MultiHeadConfig, key: jax.Array):
        c = config
        kq, kv, ko = jax.random.split(key, 3)
        D = c.width
        v_scale = c.init_scale if c.value_init_scale is None else c.value_init_scale
        if c.init == "xavier":
            b = np.sqrt(3.0 / D)
            self.W_Q = c.init_scale * jax.random.uniform(kq, (c.heads, D, D), minval=-b, maxval=b)
            self.W_V = v_scale * jax.random.uniform(kv, (c.heads, c.d_value, D), minval=-b, maxval=b)
        else:
            self.W_Q = c.init_scale * jax.random.normal(kq, (c.heads, D, D))
            self.W_V = v_scale * jax.random.normal(kv, (c.heads, c.d_value, D))
        self.W_O = None if c.decoder == "identity" else jax.random.normal(ko, (c.d_out, c.d_value)) / np.sqrt(c.d_value)
        self.config = c

    @property
    def attention_model(self) -> AttentionModel:
        return AttentionModel(self.config.attention, self.config.heads)

    def __call__(self, x: jax.Array) -> tuple[jax.Array, jax.Array]:
        c = self.config
        net = compute_dtype(self, x)
        if c.positions == "onehot":
            x = jnp.concatenate([x, jnp.eye(c.T, dtype=x.dtype)[: x.shape[0]]], axis=-1)
        scores = jnp.einsum("ti,hij,sj->hts", x, net.W_Q, x)
        if c.score_scale is not None:
            scores = c.score_scale * scores
        alpha = attention_weights(scores, c.attention, key_mask_of(c.mask, x.shape[0]))
        o = jnp.einsum("hts,hvj,sj->tv", alpha, net.W_V, x)
        y = o if net.W_O is None else o @ net.W_O.T
        return y, alpha[None]


register_network(SingleLayerConfig, SingleLayer)
register_network(MultiHeadConfig, MultiHeadAttention)
