"""Attention maps a(L) (docs/theory.md section 1).

L is the (T, T) matrix of positional logits. Both maps accept any leading batch shape: L: (..., T, T).
"""

from __future__ import annotations

from typing import Literal

import jax
import jax.numpy as jnp
import numpy as np

from .._validate import check_choice

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
