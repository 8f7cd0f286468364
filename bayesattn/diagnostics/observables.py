"""Observables: functions of attention weights alpha: (..., T, T) and of the task (docs/theory.md section 3).

Used alike by the samplers, the training loop and the experiments; nothing here knows a network or a sampler.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np


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
