"""The networks of the training staircase (docs/results/staircase.md section 3), written for speed on CPUs.

:func:`minimal_logits` is the forward pass of the paper's minimal model
(:class:`~bayesattn.models.MultiHeadAttention` with one-hot positions, causal mask and the frozen identity decoder)
on integer tokens. With x'_t = [onehot(tok_t) ; e_t] (width D = V + T) every product with a one-hot input is a
table lookup:

    score^h_ts = c (W_Q[tok_t, tok_s] + W_Q[tok_t, V+s] + W_Q[V+t, tok_s] + W_Q[V+t, V+s])
               = A^h[tok_t, t, tok_s] + P^h[tok_t, t, s],

with the two small tables A (V, T, V) and P (V, T, T) built from W_Q once per step, so the scores of a batch are
two gathers instead of two (T, D) x (D, D) products per sequence. The output is
y_t = sum_h W_V^h xbar^h_t with xbar^h_t = sum_s a^h_ts x'_s = [token mass of a^h_t ; a^h_t]: one dense product
(B T_q, H D) x (H D, V). Only the query rows ``first_query``..T-1 are computed (the loss covers the chain rows
only). Same parameters, same result as the general path to float rounding (tests/test_staircase_training.py).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np


def minimal_logits(
    W_Q: jax.Array, W_V: jax.Array, tokens: jax.Array, score_scale: float, first_query: int = 0, dtype=jnp.float32
) -> tuple[jax.Array, jax.Array]:
    """The minimal model on a batch of token sequences.

    W_Q: (H, D, D), W_V: (H, V, D) with D = V + T (one-hot token, then one-hot position); tokens: (B, T) int in
    0..V-1. Returns (logits (B, T_q, V), attention (B, T_q, H, T)) for the query rows t = first_query..T-1
    (T_q = T - first_query), computed in ``dtype``.
    """
    H, D, _ = W_Q.shape
    V = W_V.shape[1]
    B, T = tokens.shape
    if D != V + T or W_V.shape != (H, V, D):
        raise ValueError(
            f"W_Q {W_Q.shape}, W_V {W_V.shape}, tokens {tokens.shape}: expected W_Q (H, V+T, V+T) "
            f"and W_V (H, V, V+T) for tokens (B, T)"
        )
    q0 = int(first_query)
    Tq = T - q0
    W = W_Q.astype(dtype) * float(score_scale)
    tq = slice(V + q0, V + T)  # positional rows of the queries
    mask = jnp.asarray(np.where(np.tril(np.ones((T, T), bool))[q0:], 0.0, -np.inf), dtype)  # (Tq, T)
    # A[v, t, u, h] = W_Q^h[v, u] + W_Q^h[V+t, u];  P[v, t, s, h] = W_Q^h[v, V+s] + W_Q^h[V+t, V+s] + mask
    A = jnp.transpose(W[:, :V, None, :V] + W[:, None, tq, :V], (1, 2, 3, 0))
    P = jnp.transpose(W[:, :V, None, V:] + W[:, None, tq, V:] + mask, (1, 2, 3, 0))
    xt = tokens[:, q0:, None]
    xs = tokens[:, None, :]
    t = np.arange(Tq)[None, :, None]
    s = np.arange(T)[None, None, :]
    scores = jnp.transpose(A[xt, t, xs] + P[xt, t, s], (0, 1, 3, 2))  # (B, Tq, H, T)
    alpha = jax.nn.softmax(scores, axis=-1)
    mass = jnp.einsum("bths,bsv->bthv", alpha, jax.nn.one_hot(tokens, V, dtype=dtype))  # token mass per head
    xbar = jnp.concatenate([mass, alpha], axis=-1).reshape(B * Tq, H * D)  # [token mass ; position weights]
    Wv = jnp.transpose(W_V.astype(dtype), (0, 2, 1)).reshape(H * D, V)
    return (xbar @ Wv).reshape(B, Tq, V), alpha
