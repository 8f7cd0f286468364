"""The internals of a :class:`~bayesattn.models.transformer.Transformer` that the circuit screens read
(docs/results/screens.md): every layer's attention and every head's output before the output projection."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from .networks import compute_dtype
from .transformer import Transformer


def transformer_trace(net: Transformer, x: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """For one sequence x (tokens (T,) or vectors (T, d_in)): (y (T, d_out), attention (layers, heads, T, T),
    head outputs (layers, T, heads, head_dim) = sum_s alpha_ts v_s per head). y and attention equal ``net(x)``'s
    (the forward pass of :class:`Transformer`, with the values of each head kept)."""
    c = net.config
    net = compute_dtype(net, x)
    h = net.embedding.embed(x)
    T = h.shape[0]
    if c.positions == "onehot":
        h = jnp.concatenate([h, jnp.eye(c.T, dtype=h.dtype)[:T]], axis=-1)
    elif c.positions == "learned":
        h = h + net.pos[:T]
    pre = c.norm_position == "pre"
    attn, heads = [], []
    for block in net.blocks:
        hin = block.norm1(h) if pre else h
        out, alpha = block.attend(c, hin)
        v = (hin @ block.W_V.T).reshape(T, c.heads, c.head_dim)
        heads.append(jnp.einsum("hts,shd->thd", alpha, v))
        attn.append(alpha)
        h = h + out if pre else block.norm1(h + out)
        if block.W_in is not None:
            m = jax.nn.gelu((block.norm2(h) if pre else h) @ block.W_in.T) @ block.W_out.T
            h = h + m if pre else block.norm2(h + m)
    return net.embedding.unembed(net.final_norm(h)), jnp.stack(attn), jnp.stack(heads)
