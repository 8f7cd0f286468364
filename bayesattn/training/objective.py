"""The training objectives of the single-layer network, both per query row and times sigma2:

- joint: J(L, V) = minus the joint log density (the squared loss plus the weight decay that *is* the prior; see
  :mod:`bayesattn.training.loop`); its minima are the modes of p(L, V | D);
- marginal: J_marg(L) = -(sigma2 / n) log p(L, D) + const with the readout V integrated out (the closed form of
  :class:`~bayesattn.Posterior`); its minima are the modes of p(L | D). Written as
  J_marg(L) = min_V J(L, V) + (sigma2 d_out / 2n) log det(I + G / lam): the profile of J plus the readout's Occam
  term (docs/theory.md section 7)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .._validate import check_real_array, is_traced
from ..bayes.posterior import Posterior, Prior, check_posterior
from ..models.attention import AttentionModel
from ..tasks import Task


def sq_error(post: Posterior, L, V):
    """sum over query rows of |y - V z|^2 from the statistics: |Y|^2 - 2 tr(V C) + tr(V G V^T)."""
    G, C = post.gram(L)
    return post.yy - 2.0 * jnp.sum(V * C.T) + jnp.sum((V @ G) * V)


def prior_decay(prior: Prior, d: int, n, L, V):
    """The prior as weight decay, in the per-row normalisation of J: (sigma2 / 2n) (|L|^2 / sigma_A2 + d |V|^2 /
    sigma_V2)."""
    s2 = prior.sigma2
    return 0.5 * s2 / n * (jnp.sum(L**2) / prior.sigma_A2 + d * jnp.sum(V**2) / prior.sigma_V2)


def joint_loss(post: Posterior, L, V):
    """J(L, V) (module docstring) for L: ``post.L_shape``, V: (d_out, H d), without input checks: what the
    training loop differentiates (:func:`training_objective` is the checked entry)."""
    return 0.5 * sq_error(post, L, V) / post.n + prior_decay(post.prior, post.d, post.n, L, V)


def _log_density_constant(post: Posterior):
    """The L-independent normalisers of ``Posterior.log_density``: -(size L / 2) log(2 pi sigma_A2) -
    (n d_out / 2) log(2 pi sigma2)."""
    size = int(np.prod(post.L_shape))
    return -0.5 * size * jnp.log(2 * np.pi * post.prior.sigma_A2) - 0.5 * post.n * post.d_out * jnp.log(
        2 * np.pi * post.prior.sigma2
    )


def marginal_loss(post: Posterior, L):
    """J_marg(L) = (|Y|^2 - tr C^T (G + lam)^{-1} C) / 2n + (sigma2 / 2n) (|L|^2 / sigma_A2 + d_out log det(I + G/lam)),
    without input checks (:func:`marginal_objective` is the checked entry)."""
    return -(post.prior.sigma2 / post.n) * (post.log_density(L) - _log_density_constant(post))


def minibatch_loss(post: Posterior, L, V, Xb, Yb, P):
    """An unbiased estimate of J(L, V) from B sequences drawn uniformly (with replacement) from the P training
    sequences: the batch's squared error scaled by P / B, plus the whole prior decay (the prior is not a sum over
    sequences, so it is not subsampled). Xb, Yb: (B, T, d); what a minibatch step of :func:`bayesattn.train`
    differentiates."""
    B = Xb.shape[0]
    sq = batch_sq_error(post.task, post.model, L, V, Xb, Yb) * (P / B)
    return 0.5 * sq / post.n + prior_decay(post.prior, post.d, post.n, L, V)


def batch_sq_error(task: Task, attention, L, V, Xb, Yb):
    """sum over query rows of |y - V z|^2 on a batch Xb: (B, T, d), with z = [z^1, ..., z^H] the concatenated head
    outputs (attention: a kind string for one head or an AttentionModel)."""
    model = AttentionModel.coerce(attention)
    alpha = model.weights(L, task.key_mask).reshape(model.heads, task.T, task.T)
    Z = jnp.einsum("hts,bsi->bthi", alpha, Xb).reshape(*Xb.shape[:2], -1)
    F = Z @ V.T
    qm = jnp.asarray(task.query_mask, F.dtype)[None, :, None]
    return jnp.sum(((Yb - F) * qm) ** 2)


def _with_data(posterior) -> None:
    """A posterior with data: the objectives are per data row (normalised by n), so n = 0 would give NaN."""
    check_posterior(posterior)
    if not is_traced(posterior.n) and float(posterior.n) == 0:
        raise ValueError("posterior with no data (n = 0 rows): the objective is per data row; expected P >= 1")


def training_objective(L: jax.Array, V: jax.Array, posterior: Posterior) -> jax.Array:
    """The full-batch training objective J(L, V) (module docstring) for L: ``posterior.L_shape`` ((T, T), or
    (H, T, T) for H heads) and V: (d_out, H d).

    J = -(sigma2 / n) log p(L, V, D) + const, so ``training_objective`` and ``ba.joint_log_density`` have
    the same minimisers and gradients up to the factor -sigma2 / n.
    """
    _with_data(posterior)
    L = jnp.asarray(check_real_array("L", L, posterior.L_shape), jnp.float64)
    V = jnp.asarray(check_real_array("V", V, (posterior.d_out, posterior.heads * posterior.d)), jnp.float64)
    return joint_loss(posterior, L, V)


def marginal_objective(L: jax.Array, posterior: Posterior) -> jax.Array:
    """The marginal training objective J_marg(L) (module docstring) for L: ``posterior.L_shape``.

    J_marg = -(sigma2 / n) log p(L, D) + const with the readout integrated out, normalised like J so that
    J_marg(L) = min_V J(L, V) + (sigma2 d_out / 2n) log det(I + G / lam) (the Occam term). Its minimisers are
    the modes of the marginal posterior p(L | D).
    """
    _with_data(posterior)
    L = jnp.asarray(check_real_array("L", L, posterior.L_shape), jnp.float64)
    return marginal_loss(posterior, L)
