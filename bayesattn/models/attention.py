"""Attention maps a(L) and the attention model that the posterior and the samplers see (docs/model.md
section 1).

L is the matrix of positional logits: (T, T) for one head, (H, T, T) for H heads. Both maps accept any leading
batch shape: L: (..., T, T).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

import jax
import jax.numpy as jnp
import numpy as np

from .._validate import check_choice, check_int

AttentionKind = Literal["softmax", "linear"]
ATTENTIONS = ("softmax", "linear")
MASKS = ("task", "causal", "full")
# the order parameter that characterises each attention's transition (docs/model.md section 3)
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


@dataclass(frozen=True)
class AttentionModel:
    """The attention layer whose logits the posterior is over: its map, its number of heads and its mask.

    kind: "softmax" | "linear"; heads: H >= 1 (the readout acts on the concatenated head outputs, dimension
    H d); mask: "task" (the task's key mask), "causal" (the task's mask and s <= t) or "full" (every key;
    only where the task allows it). The logits have shape :meth:`logit_shape`: (T, T) for one head, so that
    one head keeps today's arrays, and (H, T, T) for H > 1.

    >>> m = AttentionModel("softmax", heads=2)
    >>> m.logit_shape(4)
    (2, 4, 4)
    """

    kind: AttentionKind = "softmax"
    heads: int = 1
    mask: Literal["task", "causal", "full"] = "task"

    def __post_init__(self):
        check_choice("attention", self.kind, ATTENTIONS)
        object.__setattr__(self, "heads", check_int("heads", self.heads, minimum=1))
        check_choice("mask", self.mask, MASKS)

    @classmethod
    def coerce(cls, attention, heads: int | None = None) -> AttentionModel:
        """An AttentionModel from a kind string (with ``heads``, default 1) or a model (``heads`` must agree)."""
        if isinstance(attention, cls):
            if heads is not None and check_int("heads", heads, minimum=1) != attention.heads:
                raise ValueError(f"heads={heads}: the attention model already has heads={attention.heads}")
            return attention
        if not isinstance(attention, str):
            raise ValueError(
                f"attention={attention!r}: expected one of {', '.join(map(repr, ATTENTIONS))} "
                "or a bayesattn AttentionModel"
            )
        return cls(attention, 1 if heads is None else heads)

    def key_mask(self, task_mask: np.ndarray) -> np.ndarray:
        """(T, T) bool: the keys each query may attend to, given the task's own mask."""
        task_mask = np.asarray(task_mask, dtype=bool)
        if self.mask == "causal":
            return task_mask & np.tril(np.ones_like(task_mask))
        return task_mask  # "full" cannot open keys the task's statement forbids

    def logit_shape(self, T: int) -> tuple[int, ...]:
        return (T, T) if self.heads == 1 else (self.heads, T, T)

    def weights(self, L: jax.Array, task_mask: np.ndarray) -> jax.Array:
        """alpha = a(L) per head: L: (..., *logit_shape) -> the same shape."""
        return attention_weights(L, self.kind, self.key_mask(task_mask))

    def replace(self, **changes) -> AttentionModel:
        return dataclasses.replace(self, **changes)

    def config(self) -> dict:
        return dataclasses.asdict(self)


def hot_logits(
    target_pattern: np.ndarray, key_mask: np.ndarray, attention: AttentionKind, scale: float | None = None
) -> np.ndarray:
    """A strong copy pattern of logits L: (T, T), the one "hot" start of the samplers and of training.

    scale None: softmax puts 0.9 on the source in every query row, with c_t = log(9 (k_t - 1)) for the k_t keys
    row t may attend to (so causal rows with few keys get the same source weight); linear gives alpha = pattern
    (L = sqrt(T) pattern, m = 1). scale given: scale * pattern.
    """
    check_choice("attention", attention, ATTENTIONS)
    pat = np.asarray(target_pattern, np.float64)
    if scale is not None:
        return float(scale) * pat
    if attention == "softmax":
        k = np.asarray(key_mask, bool).sum(axis=1)
        return pat * np.log(9.0 * np.maximum(k - 1, 1))[:, None]
    return np.sqrt(pat.shape[-1]) * pat
