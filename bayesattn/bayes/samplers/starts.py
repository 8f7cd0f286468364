"""Starting points of the samplers' chains: cold, hot, prior draws or given arrays."""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ..._validate import brief, check_between, check_choice, check_int, check_key, check_real_dtype
from ...models.attention import hot_logits
from ..posterior import Posterior, check_posterior

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


def branch_starts(posterior: Posterior, key: jax.Array, num_chains: int, m: float) -> np.ndarray:
    """Starting points (num_chains, T, T) on a branch of the order-parameter theory: one softmax head whose copy
    weight is ``m`` in every query row (``m = phase_curve(...).stable["m"]`` for the stable branch).

    The theory integrates each row's non-source logits over the prior (docs/theory.md), so every chain draws all
    its logits from the prior N(0, sigma_A2) and then sets each query row's source logit to
    logit(m) + logsumexp(the row's other allowed logits): the row puts exactly ``m`` on its source, and the chains
    differ in everything else. Pass the result as ``init`` to :func:`bayesattn.sample`.
    """
    check_posterior(posterior)
    check_key("key", key)
    task, kind = posterior.task, posterior.attention_kind
    if not kind.normalised or posterior.heads != 1:
        raise ValueError(
            f"attention={posterior.attention!r}, heads={posterior.heads}: branch starts are written for one "
            "softmax head (the theory's row law); expected attention='softmax' with heads=1"
        )
    num_chains = check_int("num_chains", num_chains, minimum=1)
    weight = check_between("m", m, 0, 1)
    T = posterior.T
    L = math.sqrt(posterior.prior.sigma_A2) * np.asarray(jax.random.normal(key, (num_chains, T, T), jnp.float64))
    allowed = np.asarray(posterior.key_mask, bool)
    source = np.asarray(task.target_pattern, np.float64) > 0
    rows = np.flatnonzero(np.asarray(task.query_mask, bool))
    others = np.where(allowed & ~source, L, -np.inf)[:, rows]  # (chains, rows, T)
    src_cols = source[rows].argmax(axis=1)
    with np.errstate(divide="ignore"):
        h = math.log(weight / (1.0 - weight)) + np.logaddexp.reduce(others, axis=-1)
    # a row whose only allowed key is its source (a causal first row) puts weight 1 there whatever its logit
    L[:, rows, src_cols] = np.where(np.isfinite(h), h, L[:, rows, src_cols])
    return L


def initial_positions(posterior: Posterior, key: jax.Array, init: Any, num_chains: int) -> jax.Array:
    """Starting points (num_chains, *L_shape): "cold" (L = 0, uniform softmax attention), "hot"
    (:func:`hot_pattern`), "prior" (an independent prior draw per chain), or an array of shape L_shape
    (same for every chain) or (num_chains, *L_shape). L_shape is (T, T) for one head, (H, T, T) for H."""
    check_posterior(posterior)
    check_key("key", key)
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
        # complex numbers refused, not cut to their real part with only NumPy's warning
        arr = np.asarray(check_real_dtype("init", init), dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(
            f"init={brief(init)}: expected one of {', '.join(map(repr, SAMPLER_INITS))} or an array of real numbers"
        ) from None
    if arr.shape == shape:
        arr = np.broadcast_to(arr, (num_chains, *shape))
    if arr.shape != (num_chains, *shape):
        raise ValueError(
            f"init has shape {arr.shape}: expected {shape} or {(num_chains, *shape)} "
            f"(heads={posterior.heads}, T={posterior.T})"
        )
    if not np.all(np.isfinite(arr)):
        raise ValueError("init contains NaN or inf: expected finite numbers")
    # a start where the posterior's log density is not finite (logits so large that it overflows) leaves every
    # chain there, rejecting each move: refused instead of returning its start as draws
    ld = np.asarray(jax.vmap(posterior.log_density)(jnp.asarray(arr)))
    if not np.all(np.isfinite(ld)):
        bad = int(np.flatnonzero(~np.isfinite(ld))[0])
        raise ValueError(
            f"init: the log density is {ld[bad]} at chain {bad}'s start (largest |entry| {np.abs(arr[bad]).max():.3g});"
            f" expected starts where it is finite, such as entries of order sqrt(sigma_A2) = "
            f"{math.sqrt(posterior.prior.sigma_A2):.3g}"
        )
    return jnp.asarray(arr)


def chain_starts(posterior: Posterior, init_key: jax.Array, init: Any, num_chains: int, options: dict):
    """(positions (num_chains, *L_shape), superchains = None): the starts of chains that adapt one by one
    (:func:`initial_positions`; the options do not choose them)."""
    return initial_positions(posterior, init_key, init, num_chains), None


def no_starts(posterior: Posterior, init_key: jax.Array, init: Any, num_chains: int, options: dict):
    """(None, None): for a sampler that draws its own starting points from the prior inside its program (SMC).
    ``init`` must say so ("prior", recorded with the result): a cold or hot start, or an array, would be
    recorded but not used."""
    if not (isinstance(init, str) and init == "prior"):
        raise ValueError(
            f"init={brief(init)}: smc draws its particles from the prior; expected init='prior' (or none given)"
        )
    return None, None
