"""Attention maps a(L) and the order parameters m, q, u (THEORY.md sections 1 and 3).

L is the (T, T) matrix of positional logits. Both maps accept any leading batch shape: L: (..., T, T).
"""

from __future__ import annotations

from typing import Literal

import jax
import jax.numpy as jnp
import numpy as np

from ._validate import check_choice

AttentionKind = Literal["softmax", "linear"]
ATTENTIONS = ("softmax", "linear")
# the order parameter that characterises each attention's transition (THEORY.md section 3)
ORDER_PARAMETER = {"softmax": "m", "linear": "u"}


def softmax_attention(L: jax.Array, key_mask: np.ndarray) -> jax.Array:
    """Row softmax over the allowed keys. L: (..., T, T) -> alpha: (..., T, T), zero where masked."""
    logits = jnp.where(key_mask, L, -jnp.inf)
    return jax.nn.softmax(logits, axis=-1, where=key_mask) * key_mask


def linear_attention(L: jax.Array, key_mask: np.ndarray) -> jax.Array:
    """Unnormalised linear attention alpha = L / sqrt(T) on the allowed keys. L: (..., T, T)."""
    T = L.shape[-1]
    return jnp.where(key_mask, L, 0.0) / jnp.sqrt(T)


def attention_weights(L: jax.Array, attention: AttentionKind, key_mask: np.ndarray) -> jax.Array:
    """alpha = a(L) for ``attention`` in {"softmax", "linear"}. L: (..., T, T)."""
    check_choice("attention", attention, ATTENTIONS)
    if attention == "softmax":
        return softmax_attention(L, key_mask)
    return linear_attention(L, key_mask)


def order_parameters(alpha: jax.Array, target_pattern: np.ndarray, query_mask: np.ndarray) -> dict:
    """Order parameters of attention weights alpha: (..., T, T), averaged over the query rows.

    m = <sum_s alpha_ts pattern_ts>_t (copy weight), q = <sum_s alpha_ts^2>_t (self-overlap),
    u = m^2 / q (squared cosine with the target pattern; 0 where q = 0). Each has shape alpha.shape[:-2].
    """
    w = jnp.asarray(query_mask, alpha.dtype) / np.sum(query_mask)
    m = jnp.einsum("...ts,ts,t->...", alpha, jnp.asarray(target_pattern, alpha.dtype), w)
    q = jnp.einsum("...ts,...ts,t->...", alpha, alpha, w)
    safe_q = jnp.where(q > 0, q, 1.0)
    u = jnp.where(q > 0, m**2 / safe_q, 0.0)
    return {"m": m, "q": q, "u": u}
