"""A configurable decoder-only transformer and a causal MLP-Mixer (the call convention of :mod:`.networks`:
``y, attn = net(x)`` for one sequence, attn: (layers, heads, T, T))."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .._validate import check_choice, check_int, check_positive
from .attention import AttentionModel, AttentionName, attention_kind, attention_weights
from .networks import NetworkConfig, compute_dtype, key_mask_of, optional_int, register_network

NormKind = Literal["layernorm", "rmsnorm", "none"]
NORMS = ("layernorm", "rmsnorm", "none")
POSITIONS = ("learned", "onehot", "rope", "none")


def _dense(key, n_out: int, n_in: int, init: str = "normal") -> jax.Array:
    """(n_out, n_in) weights ~ N(0, 1 / n_in) ("normal") or Xavier-uniform U(-b, b), b = sqrt(6 / (n_in + n_out))
    ("xavier"), or with orthonormal rows or columns, whichever are fewer ("orthogonal", torch's orthogonal_)."""
    if init == "xavier":
        b = np.sqrt(6.0 / (n_in + n_out))
        return jax.random.uniform(key, (n_out, n_in), minval=-b, maxval=b)
    if init == "orthogonal":
        return jax.nn.initializers.orthogonal()(key, (n_out, n_in))
    return jax.random.normal(key, (n_out, n_in)) / np.sqrt(n_in)


class Norm(eqx.Module):
    """LayerNorm, RMSNorm or the identity over the last axis, with a learned gain (and bias for LayerNorm)."""

    weight: jax.Array | None
    bias: jax.Array | None
    kind: str = eqx.field(static=True)
    eps: float = eqx.field(static=True, default=1e-5)

    def __init__(self, kind: str, width: int, eps: float = 1e-5):
        self.kind, self.eps = kind, eps
        self.weight = None if kind == "none" else jnp.ones(width)
        self.bias = jnp.zeros(width) if kind == "layernorm" else None

    def __call__(self, h: jax.Array) -> jax.Array:
        if self.kind == "none":
            return h
        if self.kind == "layernorm":
            h = h - jnp.mean(h, axis=-1, keepdims=True)
        h = h * jax.lax.rsqrt(jnp.mean(h**2, axis=-1, keepdims=True) + self.eps) * self.weight
        return h if self.bias is None else h + self.bias


def rope(x: jax.Array, base: float = 10000.0) -> jax.Array:
    """Rotary position embedding of x: (T, H, dh) (dh even): pairs (x_{2i}, x_{2i+1}) at position t are rotated
    by t base^(-2i/dh), so q_t . k_s depends on the positions only through t - s."""
    T, _, dh = x.shape
    freq = base ** (-jnp.arange(0, dh, 2, dtype=x.dtype) / dh)
    ang = jnp.arange(T, dtype=x.dtype)[:, None] * freq  # (T, dh/2)
    cos, sin = jnp.cos(ang)[:, None], jnp.sin(ang)[:, None]
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return jnp.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], axis=-1).reshape(x.shape)


def _embed_config(cfg):
    """Shared input / output checks of the transformer and the mixer."""
    if (cfg.vocab is None) == (cfg.d_in is None):
        raise ValueError(f"vocab={cfg.vocab!r}, d_in={cfg.d_in!r}: give exactly one (tokens or vector inputs)")
    object.__setattr__(cfg, "vocab", optional_int("vocab", cfg.vocab))
    object.__setattr__(cfg, "d_in", optional_int("d_in", cfg.d_in))
    d_out = optional_int("d_out", cfg.d_out) or cfg.vocab or cfg.d_in
    object.__setattr__(cfg, "d_out", d_out)
    for f in ("T", "width", "layers"):
        object.__setattr__(cfg, f, check_int(f, getattr(cfg, f), minimum=1))
    object.__setattr__(cfg, "mlp", optional_int("mlp", cfg.mlp or None))
    object.__setattr__(cfg, "embed_std", check_positive("embed_std", cfg.embed_std))
    check_choice("norm", cfg.norm, NORMS)
    if cfg.tied and d_out != (cfg.vocab or cfg.d_in):
        raise ValueError(
            f"tied=True: the output map is the input embedding transposed, so d_out={d_out} must "
            f"equal {'vocab' if cfg.vocab else 'd_in'}={cfg.vocab or cfg.d_in}"
        )


class _Embedding(eqx.Module):
    """Input embedding (tokens: rows of W_E; vectors: W_E x) and the output map (tied: W_E^T)."""

    W_E: jax.Array  # tokens: (vocab, d_embed); vectors: (d_embed, d_in)
    W_U: jax.Array | None  # (d_out, width); None when tied
    tokens: bool = eqx.field(static=True)

    def __init__(self, cfg, d_embed: int, key):
        k1, k2 = jax.random.split(key)
        self.tokens = cfg.vocab is not None
        xavier = getattr(cfg, "init", "normal") == "xavier"  # the transformer's init="xavier": orthonormal maps
        if self.tokens:
            self.W_E = (
                _dense(k1, cfg.vocab, d_embed, "orthogonal")
                if xavier
                else cfg.embed_std * jax.random.normal(k1, (cfg.vocab, d_embed))
            )
        else:
            self.W_E = _dense(k1, d_embed, cfg.d_in, "orthogonal" if xavier else "normal")
        self.W_U = None if cfg.tied else _dense(k2, cfg.d_out, cfg.width, "orthogonal" if xavier else "normal")

    def embed(self, x):
        return self.W_E[x] if self.tokens else x @ self.W_E.T

    def unembed(self, h):
        if self.W_U is not None:
            return h @ self.W_U.T
        d_embed = self.W_E.shape[1] if self.tokens else self.W_E.shape[0]
        h = h[..., :d_embed]
        return h @ self.W_E.T if self.tokens else h @ self.W_E


# ----------------------------------------------------------------------------------------------------------
# the decoder-only transformer
# ----------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TransformerConfig(NetworkConfig):
    """A decoder-only transformer.

    Inputs: tokens (``vocab`` set; x: (T,) int) or vectors (``d_in`` set; x: (T, d_in)). Residual width
    ``width``; positions: "learned" (added), "onehot" (the last T coordinates of the residual stream hold the
    one-hot position, the embedding the first width - T), "rope" (rotary, on queries and keys), "none".
    ``layers`` blocks of attention (``heads`` heads of dimension ``head_dim``, default width / heads; scores
    q.k / sqrt(head_dim), then softmax or linear = score / sqrt(T) on the allowed keys) and, if ``mlp``, a GELU
    MLP of that hidden width; norm "layernorm" / "rmsnorm" / "none", "pre" (with a final norm) or "post".
    Output: W_U h (untied) or the embedding transposed (``tied``; its first width - T coordinates for onehot
    positions). ``causal``: keys s <= t (decoder-only); False opens every key.
    activation: the MLP's "gelu" or "relu"; mlp_bias: biases in the MLP (zero at init). init: "normal" (dense
    weights N(0, 1/fan_in), token embedding embed_std N(0, 1), positions 0.02 N(0, 1)) or "xavier" (as torch layers with
    xavier_uniform_: dense weights and learned positions Xavier-uniform, the token embedding and the output map
    orthogonal, as in the full transformer of Yueksel et al.).
    """

    name: ClassVar[str] = "transformer"
    T: int = 16
    width: int = 32
    layers: int = 1
    heads: int = 1
    head_dim: int | None = None
    mlp: int | None = None
    norm: NormKind = "layernorm"
    norm_position: Literal["pre", "post"] = "pre"
    positions: Literal["learned", "onehot", "rope", "none"] = "learned"
    vocab: int | None = None
    d_in: int | None = None
    d_out: int | None = None
    tied: bool = False
    attention: AttentionName = "softmax"
    causal: bool = True
    activation: Literal["gelu", "relu"] = "gelu"
    mlp_bias: bool = False
    init: Literal["normal", "xavier"] = "normal"
    embed_std: float = 1.0

    def __post_init__(self):
        _embed_config(self)
        check_choice("activation", self.activation, ("gelu", "relu"))
        check_choice("init", self.init, ("normal", "xavier"))
        object.__setattr__(self, "heads", check_int("heads", self.heads, minimum=1))
        if self.head_dim is None:
            if self.width % self.heads:
                raise ValueError(f"heads={self.heads}: must divide width={self.width} (or give head_dim)")
            object.__setattr__(self, "head_dim", self.width // self.heads)
        object.__setattr__(self, "head_dim", check_int("head_dim", self.head_dim, minimum=1))
        check_choice("norm_position", self.norm_position, ("pre", "post"))
        check_choice("positions", self.positions, POSITIONS)
        object.__setattr__(self, "attention", attention_kind(self.attention).name)
        if self.positions == "onehot" and self.width <= self.T:
            raise ValueError(
                f"width={self.width}: onehot positions take T={self.T} coordinates of the residual "
                f"stream, so width must exceed T"
            )
        if self.positions == "rope" and self.head_dim % 2:
            raise ValueError(f"head_dim={self.head_dim}: rope positions need an even head dimension")

    @property
    def d_embed(self) -> int:
        return self.width - self.T if self.positions == "onehot" else self.width


def _mlp(block, x, act):
    """A block's MLP: act(x W_in^T + b_in) W_out^T + b_out, the biases where the block has them (mlp_bias)."""
    z = x @ block.W_in.T
    m = act(z if block.b_in is None else z + block.b_in) @ block.W_out.T
    return m if block.b_out is None else m + block.b_out


class Block(eqx.Module):
    W_Q: jax.Array  # (H dh, width)
    W_K: jax.Array
    W_V: jax.Array
    W_O: jax.Array  # (width, H dh)
    norm1: Norm
    norm2: Norm
    W_in: jax.Array | None  # (mlp, width)
    W_out: jax.Array | None  # (width, mlp)
    b_in: jax.Array | None = None  # (mlp,) with mlp_bias
    b_out: jax.Array | None = None  # (width,)

    def __init__(self, c: TransformerConfig, key):
        k = jax.random.split(key, 6)
        Hd = c.heads * c.head_dim
        self.W_Q, self.W_K, self.W_V = (_dense(k[i], Hd, c.width, c.init) for i in range(3))
        self.W_O = _dense(k[3], c.width, Hd, c.init)
        self.norm1 = Norm(c.norm, c.width)
        self.norm2 = Norm(c.norm if c.mlp else "none", c.width)
        self.W_in = _dense(k[4], c.mlp, c.width, c.init) if c.mlp else None
        self.W_out = _dense(k[5], c.width, c.mlp, c.init) if c.mlp else None
        if c.mlp and c.mlp_bias:
            self.b_in, self.b_out = jnp.zeros(c.mlp), jnp.zeros(c.width)

    def attend(self, c: TransformerConfig, h):
        T = h.shape[0]
        split = lambda W: (h @ W.T).reshape(T, c.heads, c.head_dim)  # noqa: E731
        q, k, v = split(self.W_Q), split(self.W_K), split(self.W_V)
        if c.positions == "rope":
            q, k = rope(q), rope(k)
        scores = jnp.einsum("thd,shd->hts", q, k) / float(np.sqrt(c.head_dim))  # a Python float: keeps the dtype
        mask = key_mask_of("causal" if c.causal else "full", T)
        alpha = attention_weights(scores, c.attention, mask)
        out = jnp.einsum("hts,shd->thd", alpha, v).reshape(T, -1) @ self.W_O.T
        return out, alpha

    def __call__(self, c: TransformerConfig, h):
        pre = c.norm_position == "pre"
        out, alpha = self.attend(c, self.norm1(h) if pre else h)
        h = h + out if pre else self.norm1(h + out)
        if self.W_in is not None:
            act = jax.nn.relu if c.activation == "relu" else jax.nn.gelu
            m = _mlp(self, self.norm2(h) if pre else h, act)
            h = h + m if pre else self.norm2(h + m)
        return h, alpha


class Transformer(eqx.Module):
    """See :class:`TransformerConfig`. ``net(x)`` -> (y (T, d_out), attn (layers, heads, T, T))."""

    embedding: _Embedding
    pos: jax.Array | None  # (T, width) learned positions
    blocks: list
    final_norm: Norm
    config: TransformerConfig = eqx.field(static=True)

    def __init__(self, config: TransformerConfig, key: jax.Array):
        c = config
        ke, kp, kb = jax.random.split(key, 3)
        self.embedding = _Embedding(c, c.d_embed, ke)
        self.pos = None
        if c.positions == "learned":
            self.pos = (
                _dense(kp, c.T, c.width, "xavier")
                if c.init == "xavier"
                else 0.02 * jax.random.normal(kp, (c.T, c.width))
            )
        self.blocks = [Block(c, k) for k in jax.random.split(kb, c.layers)]
        self.final_norm = Norm(c.norm if c.norm_position == "pre" else "none", c.width)
        self.config = c

    @property
    def attention_model(self) -> AttentionModel:
        return AttentionModel(self.config.attention, self.config.heads)

    def __call__(self, x: jax.Array) -> tuple[jax.Array, jax.Array]:
        c = self.config
        net = compute_dtype(self, x)
        h = net.embedding.embed(x)
        T = h.shape[0]
        if c.positions == "onehot":
            h = jnp.concatenate([h, jnp.eye(c.T, dtype=h.dtype)[:T]], axis=-1)
        elif c.positions == "learned":
            h = h + net.pos[:T]
        attn = []
        for block in net.blocks:
            h, alpha = block(c, h)
            attn.append(alpha)
        return net.embedding.unembed(net.final_norm(h)), jnp.stack(attn)


# ----------------------------------------------------------------------------------------------------------
# the causal MLP-Mixer
# ----------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MixerConfig(NetworkConfig):
    """A causal MLP-Mixer: per layer, token mixing h <- h + M norm(h) with M = tril(W) a learned lower-triangular
    (T, T) matrix (so position t mixes positions s <= t only), then, if ``mlp``, a channel GELU MLP
    h <- h + MLP(norm(h)). Inputs, outputs, ``tied`` as for :class:`TransformerConfig` (learned positions are
    not needed: M is positional). W starts at the causal running mean (M_ts = 1/(t+1)) plus init_noise N(0, 1);
    the token embedding at embed_std N(0, 1); mlp_bias: biases in the channel MLP (zero at init)."""

    name: ClassVar[str] = "mixer"
    T: int = 16
    width: int = 32
    layers: int = 1
    mlp: int | None = None
    norm: NormKind = "layernorm"
    vocab: int | None = None
    d_in: int | None = None
    d_out: int | None = None
    tied: bool = False
    init_noise: float = 0.02
    embed_std: float = 1.0
    mlp_bias: bool = False

    def __post_init__(self):
        _embed_config(self)


class MixerBlock(eqx.Module):
    W: jax.Array  # (T, T); only its lower triangle is used
    norm1: Norm
    norm2: Norm
    W_in: jax.Array | None
    W_out: jax.Array | None
    b_in: jax.Array | None = None  # (mlp,) with mlp_bias
    b_out: jax.Array | None = None  # (width,)

    def __init__(self, c: MixerConfig, key):
        k = jax.random.split(key, 3)
        mean = np.tril(np.ones((c.T, c.T))) / np.arange(1, c.T + 1)[:, None]
        self.W = jnp.asarray(mean) + c.init_noise * jax.random.normal(k[0], (c.T, c.T))
        self.norm1 = Norm(c.norm, c.width)
        self.norm2 = Norm(c.norm if c.mlp else "none", c.width)
        self.W_in = _dense(k[1], c.mlp, c.width) if c.mlp else None
        self.W_out = _dense(k[2], c.width, c.mlp) if c.mlp else None
        if c.mlp and c.mlp_bias:
            self.b_in, self.b_out = jnp.zeros(c.mlp), jnp.zeros(c.width)

    def mixing(self, T: int) -> jax.Array:
        """M = tril(W)[:T, :T]: (T, T), zero above the diagonal."""
        return jnp.tril(self.W[:T, :T])

    def __call__(self, h):
        M = self.mixing(h.shape[0])
        h = h + M @ self.norm1(h)
        if self.W_in is not None:
            h = h + _mlp(self, self.norm2(h), jax.nn.gelu)
        return h, M


class CausalMixer(eqx.Module):
    """See :class:`MixerConfig`. ``net(x)`` -> (y (T, d_out), attn (layers, 1, T, T): the mixing matrices)."""

    embedding: _Embedding
    blocks: list
    final_norm: Norm
    config: MixerConfig = eqx.field(static=True)

    def __init__(self, config: MixerConfig, key: jax.Array):
        c = config
        ke, kb = jax.random.split(key)
        self.embedding = _Embedding(c, c.width, ke)
        self.blocks = [MixerBlock(c, k) for k in jax.random.split(kb, c.layers)]
        self.final_norm = Norm(c.norm, c.width)
        self.config = c

    @property
    def attention_model(self) -> AttentionModel:
        # the mixing matrix is not normalised: its observables are those of a linear attention
        return AttentionModel("linear", 1)

    def __call__(self, x: jax.Array) -> tuple[jax.Array, jax.Array]:
        net = compute_dtype(self, x)
        h = net.embedding.embed(x)
        mix = []
        for block in net.blocks:
            h, M = block(h)
            mix.append(M[None])
        return net.embedding.unembed(net.final_norm(h)), jnp.stack(mix)


register_network(TransformerConfig, Transformer)
register_network(MixerConfig, CausalMixer)
