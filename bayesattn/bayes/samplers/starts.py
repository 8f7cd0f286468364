"""Starting points of the samplers' chains: cold, hot, prior draws or given arrays."""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ..._validate import check_choice, check_int
from ...models.attention import hot_logits
from ..posterior import Posterior

SAMPLER_INITS = ("cold", "hot", "prior")


def hot_pattern(posterior: Posterior) -> np.ndarray:
    """A strong copy pattern L: ``posterior.L_shape`` (:func:`bayesattn.models.attention.hot_logits`), the same
    in every head.

    softmax: 0.9 on the source in every query row; linear: the target direction scaled to the prior's typical
    radius sqrt(sigma_A2 * D) (D = allowed entries), i.e. u = 1 at the radius where the posterior mass sits for
    q >> eps.
    """
    task, mask, kind = posterior.task, posterior.key_mask, posterior.attention_kind
    pat = np.asarray(task.target_pattern, np.float64)
    scale = None
    if not kind.normalised:  # an unnormalised map has no preferred scale: take the prior's typical radius
        scale = np.sqrt(float(posterior.prior.sigma_A2) * int(mask.sum())) / max(np.sqrt(pat.sum()), 1e-300)
    return np.broadcast_to(hot_logits(pat, mask, kind, scale), posterior.L_shape).copy()


def initial_positions(posterior: Posterior, key: jax.Array, init: Any, num_chains: int) -> jax.Array:
    """Starting points (num_chains, *L_shape): "cold" (L = 0, uniform softmax attention), "hot"
    (:func:`hot_pattern`), "prior" (an independent prior draw per chain), or an array of shape L_shape
    (same for every chain) or (num_chains, *L_shape). L_shape is (T, T) for one head, (H, T, T) for H."""
    shape = posterior.L_shape
    num_chains = check_int("num_chains", num_chains, minimum=1)
    if isinstance(init, str):
        check_choice("init", init, SAMPLER_INITS)
        if init == "cold":
            return jnp.zeros((num_chains, *shape))
        if init == "hot":
            return jnp.broadcast_to(jnp.asarray(hot_pattern(posterior)), (num_chains, *shape))
        return math.sqrt(posterior.prior.sigma_A2) * jax.random.normal(key, (num_chains, *shape), jnp.float64)
    try:
        arr = np.asarray(init, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"init={init!r}: expected one of {', '.join(map(repr, SAMPLER_INITS))} or an array") from None
    if arr.shape == shape:
        arr = np.broadcast_to(arr, (num_chains, *shape))
    if arr.shape != (num_chains, *shape):
        raise ValueError(
            f"init has shape {arr.shape}: expected {shape} or {(num_chains, *shape)} "
            f"(heads={posterior.heads}, T={posterior.T})"
        )
    if not np.all(np.isfinite(arr)):
        raise ValueError("init contains NaN or inf: expected finite numbers")
    return jnp.asarray(arr)


def chain_starts(posterior: Posterior, init_key: jax.Array, init: Any, num_chains: int, options: dict):
    """(positions (num_chains, *L_shape), superchains = None): the starts of chains that adapt one by one
    (:func:`initial_positions`; the options do not choose them)."""
    return initial_positions(posterior, init_key, init, num_chains), None


def no_starts(posterior: Posterior, init_key: jax.Array, init: Any, num_chains: int, options: dict):
    """(None, None): for a sampler that draws its own starting points inside its program (SMC, from the prior)."""
    return None, None
