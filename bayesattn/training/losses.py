"""The training losses (:func:`sequence_loss`) and the checks of their targets (:func:`check_xent_targets`)."""

from __future__ import annotations

from typing import Literal

import jax
import jax.numpy as jnp
import numpy as np

from .._validate import brief, check_array, check_choice, check_real_array, check_real_dtype, is_traced

LossKind = Literal["mse", "xent"]
LOSSES = ("mse", "xent")


def check_xent_targets(name: str, Y, classes: int, rows=None) -> None:
    """Refuse cross-entropy targets that make the loss meaningless, where ``Y`` is concrete (nothing under jit):
    int classes outside 0..classes-1 (a NaN loss, or a negative class read from the end), or target rows that are
    not probabilities (>= 0, summing to 1: the loss is then unbounded below). ``rows``: a boolean mask of the rows
    of real targets (Y's leading axes) that count; the others (not queried, padding: zeros in a Dataset) may hold
    any finite numbers. Classes are checked everywhere: one past the outputs is a NaN even where it has weight 0."""
    if is_traced(Y):
        return
    y = np.asarray(Y)
    if np.issubdtype(y.dtype, np.integer):
        if y.size and (y.min() < 0 or y.max() >= classes):
            raise ValueError(
                f"{name}: classes from {y.min()} to {y.max()}; expected integers in 0..{classes - 1} for "
                f"loss='xent' over {classes} outputs"
            )
        return
    y = y if rows is None else y[np.asarray(rows, bool)]
    if y.size == 0:
        return
    sums = y.sum(-1)
    if y.min() < 0 or not np.allclose(sums, 1.0, rtol=0.0, atol=1e-5):
        raise ValueError(
            f"{name}: values from {y.min():.3g} to {y.max():.3g}, row sums from {sums.min():.3g} to {sums.max():.3g}; "
            "expected rows of probabilities (>= 0, summing to 1; one-hot tokens, say) for loss='xent', or int "
            "classes ('mse' fits real-valued targets)"
        )


def sequence_loss(kind: str, F: jax.Array, Y: jax.Array, query_mask, weights: jax.Array | None = None) -> jax.Array:
    """Mean loss over (weighted) sequences and query rows. F: (B, T, d_out); Y: (B, T, d_out) or, for "xent",
    int classes (B, T); weights: (B,) (padding), None = all 1; query_mask: (T,) of 0 / 1. ValueError naming the
    argument for another ``kind`` or shape (the same under jit), and outside jit for a query mask other than 0 / 1
    and for "xent" targets that are not classes or probabilities (:func:`check_xent_targets`)."""
    check_choice("kind", kind, LOSSES)
    F, Y = jnp.asarray(check_real_dtype("F", F)), jnp.asarray(check_real_dtype("Y", Y))
    B, T, d_out = check_array("F", F, (None, None, None), finite=False).shape
    classes = kind == "xent" and jnp.issubdtype(Y.dtype, jnp.integer)
    check_array("Y", Y, (B, T) if classes else (B, T, d_out), finite=False)
    mask = check_real_array("query_mask", query_mask, (T,), finite=False)
    if B == 0 or not (is_traced(mask) or np.any(mask)):  # a mean over no sequence or no query row
        raise ValueError(f"F of {B} sequences and query_mask={brief(mask)}: expected a sequence and a query row")
    if not is_traced(mask) and not np.all((np.asarray(mask) == 0) | (np.asarray(mask) == 1)):
        raise ValueError(f"query_mask={brief(mask)}: expected booleans or 0 / 1 (which rows are queried)")
    w = None
    if weights is not None:
        weights = jnp.asarray(check_real_array("weights", weights, (B,), finite=False))
        w = None if is_traced(weights) else np.asarray(weights)
        if w is not None and not (np.all(w >= 0) and np.sum(w) > 0):
            raise ValueError(f"weights={w.tolist()!r}: expected numbers >= 0, not all 0")
    if kind == "xent" and not is_traced(mask):
        counted = np.asarray(mask, bool)[None, :] & (np.ones(B, bool) if w is None else w > 0)[:, None]
        check_xent_targets("Y", Y, d_out, counted)
    if kind == "mse":
        per = jnp.mean((Y - F) ** 2, axis=-1)
    else:
        logp = jax.nn.log_softmax(F, axis=-1)
        if jnp.issubdtype(Y.dtype, jnp.integer):
            per = -jnp.take_along_axis(logp, Y[..., None], axis=-1)[..., 0]
        else:
            per = -jnp.sum(Y * logp, axis=-1)
    qm = jnp.asarray(query_mask, per.dtype)
    w = jnp.ones(per.shape[0], per.dtype) if weights is None else weights.astype(per.dtype)
    return jnp.sum(per * qm * w[:, None]) / (jnp.sum(w) * jnp.sum(qm))
