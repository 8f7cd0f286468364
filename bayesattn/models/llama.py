"""A llama-architecture decoder in JAX (float32), for screening pretrained models (docs/results/screens.md).

Architecture: token embedding; per layer h <- h + Attn(RMSNorm(h)), h <- h + W_down(silu(W_gate x) * W_up x)
with x = RMSNorm(h); a final RMSNorm and the output map (the embedding transposed when tied). Attention:
``heads`` query heads sharing ``kv_heads`` key/value heads (query head j reads key/value head
j // (heads / kv_heads)), scores q.k / sqrt(head_dim), causal softmax; rotary positions of base ``rope_base``.

Rotary convention: the GGUF converter permutes the rows of W_Q and W_K of each head so that the pairs rotated
together, (i, i + head_dim / 2) in the Hugging Face layout, become adjacent (2i, 2i + 1). Weights read from a
GGUF file are used as stored, so RoPE here rotates adjacent pairs (:func:`bayesattn.models.transformer.rope`,
pair i at frequency base^(-2i / head_dim)); the scores q.k are unchanged by the permutation.

Weights: a dict of float32 arrays; per-layer weights stacked on a leading layer axis (scanned over):
``embed`` (vocab, width), ``norm`` (width,), ``output`` (vocab, width) or absent (tied), and ``layers`` with
``attn_norm`` (L, width), ``wq`` (L, heads*hd, width), ``wk``, ``wv`` (L, kv*hd, width), ``wo`` (L, width,
heads*hd), ``ffn_norm`` (L, width), ``w_gate``, ``w_up`` (L, ffn, width), ``w_down`` (L, width, ffn).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from .transformer import rope

LAYER_KEYS = ("attn_norm", "wq", "wk", "wv", "wo", "ffn_norm", "w_gate", "w_up", "w_down")


@dataclass(frozen=True)
class LlamaConfig:
    vocab: int
    width: int
    layers: int
    heads: int
    kv_heads: int
    ffn: int
    rope_base: float = 10000.0
    eps: float = 1e-5
    context: int = 2048
    head_dim: int | None = None
    bos_token_id: int | None = None
    name: str = "llama"

    def __post_init__(self):
        if self.head_dim is None:
            object.__setattr__(self, "head_dim", self.width // self.heads)
        if self.heads % self.kv_heads:
            raise ValueError(f"heads={self.heads}: must be a multiple of kv_heads={self.kv_heads}")
        if self.head_dim % 2:
            raise ValueError(f"head_dim={self.head_dim}: rotary positions need an even head dimension")

    def config(self) -> dict:
        return asdict(self)

    def shapes(self) -> dict:
        """Expected shape of every weight (per-layer ones without the layer axis)."""
        D, F, hd = self.width, self.ffn, self.head_dim
        return {
            "embed": (self.vocab, D),
            "norm": (D,),
            "output": (self.vocab, D),
            "attn_norm": (D,),
            "wq": (self.heads * hd, D),
            "wk": (self.kv_heads * hd, D),
            "wv": (self.kv_heads * hd, D),
            "wo": (D, self.heads * hd),
            "ffn_norm": (D,),
            "w_gate": (F, D),
            "w_up": (F, D),
            "w_down": (D, F),
        }


class Llama:
    """A config and its weights. ``logits(tokens)``, ``nll(tokens)``, ``trace(tokens, queries, patterns)``."""

    def __init__(self, config: LlamaConfig, weights: dict):
        self.config = config
        shapes = config.shapes()
        for k in ("embed", "norm"):
            _check_shape(k, weights[k], shapes[k])
        if weights.get("output") is not None:
            _check_shape("output", weights["output"], shapes["output"])
        for k in LAYER_KEYS:
            _check_shape(f"layers.{k}", weights["layers"][k], (config.layers, *shapes[k]))
        cast = lambda a: jnp.asarray(np.asarray(a, dtype=np.float32))  # noqa: E731
        self.weights = {
            "embed": cast(weights["embed"]),
            "norm": cast(weights["norm"]),
            "output": None if weights.get("output") is None else cast(weights["output"]),
            "layers": {k: cast(weights["layers"][k]) for k in LAYER_KEYS},
        }

    def _tokens(self, tokens) -> jax.Array:
        tok = np.asarray(tokens)
        if tok.ndim != 2 or not np.issubdtype(tok.dtype, np.integer):
            raise ValueError(f"tokens has shape {tok.shape} and dtype {tok.dtype}: expected (batch, T) integers")
        if tok.shape[1] > self.config.context:
            raise ValueError(
                f"tokens of length T={tok.shape[1]}: longer than the model's context {self.config.context}"
            )
        if tok.size and (tok.min() < 0 or tok.max() >= self.config.vocab):
            raise ValueError(f"tokens in {tok.min()}..{tok.max()}: expected ids in 0..{self.config.vocab - 1}")
        return jnp.asarray(tok, dtype=jnp.int32)

    def logits(self, tokens) -> jax.Array:
        """(batch, T, vocab) next-token logits."""
        return _logits(self.config, self.weights, self._tokens(tokens))

    def nll(self, tokens) -> np.ndarray:
        """(batch, T - 1) negative log-likelihood of token t + 1 given tokens 0 .. t (nats)."""
        tok = self._tokens(tokens)
        return np.asarray(_nll(self.config, self.weights, tok))

    def trace(self, tokens, queries, patterns=None) -> dict:
        """Attention rows at ``queries`` (batch, layers, heads, Q, T); each head's output at the last query
        before the output projection (batch, layers, heads, head_dim); with ``patterns`` (kind -> (batch, T, T)),
        per-sequence detection scores sum(attn x pattern) / sum(attn) (kind -> (batch, layers, heads))."""
        tok = self._tokens(tokens)
        q = np.asarray(queries)
        if q.ndim != 1 or q.min() < 0 or q.max() >= tok.shape[1]:
            raise ValueError(f"queries={q.tolist()}: expected positions in 0..{tok.shape[1] - 1}")
        kinds = tuple(patterns or ())
        pats = jnp.stack([jnp.asarray(patterns[k], jnp.float32) for k in kinds], 1) if kinds else None
        rows, outs, det = _trace(self.config, self.weights, tok, jnp.asarray(q), pats)
        res = {"attn": np.asarray(rows), "outputs": np.asarray(outs)}
        if kinds:
            det = np.asarray(det)
            res["detection"] = {k: det[..., i] for i, k in enumerate(kinds)}
        return res


def _check_shape(name, a, shape):
    if tuple(np.shape(a)) != tuple(shape):
        raise ValueError(f"weight {name} has shape {tuple(np.shape(a))}: expected {tuple(shape)}")


def _rms(x, w, eps):
    return x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + eps) * w


def _attention(cfg: LlamaConfig, lw, h):
    """One layer's attention on h (B, T, D): (attention (B, H, T, T), per-head outputs (B, T, H, hd), out)."""
    B, T, _ = h.shape
    hd, H, K = cfg.head_dim, cfg.heads, cfg.kv_heads
    x = _rms(h, lw["attn_norm"], cfg.eps)
    q = (x @ lw["wq"].T).reshape(B, T, H, hd)
    k = (x @ lw["wk"].T).reshape(B, T, K, hd)
    v = (x @ lw["wv"].T).reshape(B, T, K, hd)
    rot = jax.vmap(partial(rope, base=cfg.rope_base))
    q, k = rot(q), rot(k)
    k = jnp.repeat(k, H // K, axis=2)  # query head j reads kv head j // (H / K)
    v = jnp.repeat(v, H // K, axis=2)
    s = jnp.einsum("bthd,bshd->bhts", q, k) / np.float32(np.sqrt(hd))
    mask = np.tril(np.ones((T, T), dtype=bool))
    a = jax.nn.softmax(jnp.where(mask, s, -jnp.inf), axis=-1)
    o = jnp.einsum("bhts,bshd->bthd", a, v)
    return a, o, o.reshape(B, T, H * hd) @ lw["wo"].T


def _mlp(cfg, lw, h):
    x = _rms(h, lw["ffn_norm"], cfg.eps)
    return (jax.nn.silu(x @ lw["w_gate"].T) * (x @ lw["w_up"].T)) @ lw["w_down"].T


@partial(jax.jit, static_argnums=0)
def _logits(cfg, w, tok):
    def layer(h, lw):
        _, _, att = _attention(cfg, lw, h)
        h = h + att
        return h + _mlp(cfg, lw, h), None

    h, _ = jax.lax.scan(layer, w["embed"][tok], w["layers"])
    out = w["embed"] if w["output"] is None else w["output"]
    return _rms(h, w["norm"], cfg.eps) @ out.T


@partial(jax.jit, static_argnums=0)
def _nll(cfg, w, tok):
    logp = jax.nn.log_softmax(_logits(cfg, w, tok)[:, :-1], axis=-1)
    return -jnp.take_along_axis(logp, tok[:, 1:, None], axis=-1)[..., 0]


@partial(jax.jit, static_argnums=0)
def _trace(cfg, w, tok, queries, pats):
    last = queries[-1]

    def layer(h, lw):
        a, o, att = _attention(cfg, lw, h)
        h = h + att
        h = h + _mlp(cfg, lw, h)
        rows = a[:, :, queries]  # (B, H, Q, T)
        det = None
        if pats is not None:  # (B, kinds, T, T)
            det = jnp.einsum("bhts,bkts->bhk", a, pats) / jnp.sum(a, axis=(-2, -1))[..., None]
        return h, (rows, o[:, last], det)

    _, (rows, outs, det) = jax.lax.scan(layer, w["embed"][tok], w["layers"])
    # scanned outputs have the layer axis first
    rows = jnp.moveaxis(rows, 0, 1)
    outs = jnp.moveaxis(outs, 0, 1)
    det = None if det is None else jnp.moveaxis(det, 0, 1)
    return rows, outs, det
