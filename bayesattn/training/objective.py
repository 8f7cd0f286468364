"""The training objective J(L, V) of the single-layer network: minus the joint log density per query row
(the squared loss plus the weight decay that *is* the prior; see :mod:`bayesattn.training.loop`)."""

from __future__ import annotations


import jax
import jax.numpy as jnp

from .._validate import check_array
from ..models.attention import AttentionModel
from ..bayes.posterior import Posterior, Prior
from ..tasks import Task


def _sq_error(post: Posterior, L, V):
    """sum over query rows of |y - V z|^2 from the statistics: |Y|^2 - 2 tr(V C) + tr(V G V^T)."""
    G, C = post.gram(L)
    return post.yy - 2.0 * jnp.sum(V * C.T) + jnp.sum((V @ G) * V)


def _decay(prior: Prior, d: int, n, L, V):
    """The prior as weight decay, in the per-row normalisation of J."""
    s2 = prior.sigma2
    return 0.5 * s2 / n * (jnp.sum(L**2) / prior.sigma_A2 + d * jnp.sum(V**2) / prior.sigma_V2)


def _objective(post: Posterior, L, V):
    return 0.5 * _sq_error(post, L, V) / post.n + _decay(post.prior, post.d, post.n, L, V)


def _batch_sq_error(task: Task, attention, L, V, Xb, Yb):
    """sum over query rows of |y - V z|^2 on a batch Xb: (B, T, d), with z = [z^1, ..., z^H] the concatenated head
    outputs (attention: a kind string for one head or an AttentionModel)."""
    model = AttentionModel.coerce(attention)
    alpha = model.weights(L, task.key_mask).reshape(model.heads, task.T, task.T)
    Z = jnp.einsum("hts,bsi->bthi", alpha, Xb).reshape(*Xb.shape[:2], -1)
    F = Z @ V.T
    qm = jnp.asarray(task.query_mask, F.dtype)[None, :, None]
    return jnp.sum(((Yb - F) * qm) ** 2)


def training_objective(L: jax.Array, V: jax.Array, posterior: Posterior) -> jax.Array:
    """The full-batch training objective J(L, V) (module docstring) for L: ``posterior.L_shape`` ((T, T), or
    (H, T, T) for H heads) and V: (d_out, H d).

    J = -(sigma2 / n) log p(L, V, D) + const, so ``training_objective`` and ``ba.joint_log_density`` have
    the same minimisers and gradients up to the factor -sigma2 / n.
    """
    if not isinstance(posterior, Posterior):
        raise ValueError(f"posterior={type(posterior).__name__}: expected a bayesattn Posterior")
    L = jnp.asarray(check_array("L", L, posterior.L_shape), jnp.float64)
    V = jnp.asarray(check_array("V", V, (posterior.d_out, posterior.heads * posterior.d)), jnp.float64)
    return _objective(posterior, L, V)
