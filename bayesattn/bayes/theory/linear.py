"""Linear attention: exact Beta law of the cosine and the exact radius integral."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import logsumexp

from ..._validate import brief, check_positive, check_real_array
from .common import action, check_prior, covered, scales

# ----------------------------------------------------------------------------------------------------
# linear: exact Beta law of the cosine and exact radius integral
# ----------------------------------------------------------------------------------------------------


def linear_dims(task):
    """D = number of free logits (unmasked entries in query rows) and T_q."""
    km = task.key_mask & task.query_mask[:, None]
    return int(km.sum()), int(task.query_mask.sum())


RADIUS_NODES = 400


def radius_quadrature(D, sigma_A2, T, Tq, xp=jnp, nt=RADIUS_NODES):
    """Nodes of the exact radius integral, in log t around the chi^2_D bulk (t = |L|^2 / sigma_A2 ~ chi^2_D; the
    energy tilts it only mildly): (log t, t, log density of log t up to a constant, q = sigma_A2 t / (T T_q))."""
    lt = xp.linspace(xp.log(D) - 12.0 / xp.sqrt(D) - 4.0, xp.log(D) + 12.0 / xp.sqrt(D) + 1.0, nt)
    t = xp.exp(lt)
    return lt, t, 0.5 * D * lt - 0.5 * t, sigma_A2 * t / (T * Tq)


def linear_energy(u, q, beta_eff, eps, Tq, d):
    """T_q E(m, q) at m^2 = u q: the energy part of :func:`~bayesattn.bayes.theory.action` (no entropy) times T_q,
    in terms of the squared cosine u and the radius variable q (beta_eff = beta - noise-fit coefficient)."""
    return Tq * action(jnp.sqrt(u * q), q, 0.0, beta=beta_eff, eps=eps, d=d, T_q=Tq)


@functools.partial(jax.jit, static_argnames=("D", "Tq", "T", "d", "nt"))
def linear_cosine_log_density(c, beta, eps, sigma_A2, D, Tq, T, d, nf, nt=RADIUS_NODES):
    """log p(c) up to a constant, c = cosine between L and the shift pattern, radius integrated exactly.

    c: (Nc,), beta/eps/nf scalars. t = |L|^2 / sigma_A2 ~ chi^2_D, q = sigma_A2 t / (T T_q), u = c^2.
    """
    _, _, log_pt, qv = radius_quadrature(D, sigma_A2, T, Tq, nt=nt)
    E = linear_energy(c[:, None] ** 2, qv, beta - nf, eps, Tq, d)
    lr = logsumexp(log_pt[None, :] - E, axis=1)
    return 0.5 * (D - 3) * jnp.log1p(-(c**2)) + lr


def linear_log_density(task, prior, P, u):
    """Reduced log density of u for linear attention, up to a constant, with respect to du / sqrt(u)
    (i.e. the density of the cosine c = sqrt(u)); exact Beta law of the direction, exact radius integral.

    u: a number or a 1-D array of squared cosines in [0, 1]; the result has its shape. ValueError otherwise."""
    covered(task, "linear")
    prior = check_prior(prior)
    P = check_positive("P", P)
    uu = np.asarray(check_real_array("u", np.atleast_1d(np.asarray(u)), (None,)), np.float64)
    if np.any((uu < 0) | (uu > 1)):
        raise ValueError(f"u={brief(u)}: expected squared cosines in [0, 1]")
    D, Tq = linear_dims(task)
    beta, eps, _ = scales(task, prior, P)
    c = jnp.sqrt(jnp.asarray(uu))
    out = linear_cosine_log_density(c, float(beta), float(eps), float(prior.sigma_A2), D, Tq, task.T, task.d_out, 0.0)
    return out.reshape(np.shape(u))


@functools.partial(jax.jit, static_argnames=("D", "Tq", "T", "d", "nu", "nt"))
def _linear_log_density_hermite(c, beta, eps, sigma_A2, D, Tq, T, d, nf, nu=65, nt=RADIUS_NODES):
    """``linear_cosine_log_density`` for a batch of P (beta, eps, nf: (NP,)) on a fixed cosine grid c: (Nc,).

    The radius integral r(u) = log Int dt p(t) exp(-E(u, t)) is a log-sum-exp of functions linear in u = c^2,
    so it is smooth and convex in u: it is computed exactly on nu nodes in u, with its exact derivative
    dr/du = <T_q beta q/(q+eps)>, and interpolated by cubic Hermite polynomials instead of being summed at
    every c (nt x Nc -> nt x nu work per P)."""
    _, _, log_pt, qv = radius_quadrature(D, sigma_A2, T, Tq, nt=nt)
    ug = jnp.linspace(0.0, 1.0, nu)
    hu = ug[1] - ug[0]
    u = c**2
    k = jnp.clip(jnp.floor(u / hu).astype(jnp.int32), 0, nu - 2)
    s = u / hu - k

    def one(be, ep, f):
        # -E is linear in u: -E(u) = A + u B
        A = log_pt - linear_energy(0.0, qv, be - f, ep, Tq, d)
        B = Tq * (be - f) * qv / (qv + ep)
        X = A[None, :] + ug[:, None] * B[None, :]  # (nu, nt)
        r = logsumexp(X, axis=1)
        dr = jnp.sum(jnp.exp(X - r[:, None]) * B[None, :], axis=1)
        r0, r1, d0, d1 = r[k], r[k + 1], dr[k] * hu, dr[k + 1] * hu
        h00, h10, h01, h11 = 2 * s**3 - 3 * s**2 + 1, s**3 - 2 * s**2 + s, -2 * s**3 + 3 * s**2, s**3 - s**2
        return 0.5 * (D - 3) * jnp.log1p(-u) + h00 * r0 + h10 * d0 + h01 * r1 + h11 * d1

    return jax.vmap(one)(beta, eps, nf)


def linear_curves(task, prior, P_values, nf_flag, nc=2001):
    """The reduced density of the cosine over a grid of P: (c: (nc - 1,) cosine grid in [0, 1), logp: (NP, nc - 1)
    log density of c up to a constant, mean_u: (NP,) posterior mean of u = c^2, T_q, D). nf_flag: 1.0 adds the
    noise-fit term."""
    D, Tq = linear_dims(task)
    beta, eps, _ = scales(task, prior, P_values)
    nf = nf_flag * task.d_out**2 / (2.0 * prior.sigma2 * Tq) * np.ones_like(beta)
    # the cosine grid: c in [0, 1), dense near 0 and resolving the Beta law width 1/sqrt(D)
    c = jnp.asarray(np.sin(np.linspace(0.0, np.pi / 2, nc))[:-1])
    logp = np.asarray(
        _linear_log_density_hermite(
            c, jnp.asarray(beta), jnp.asarray(eps), float(prior.sigma_A2), D, Tq, task.T, task.d_out, jnp.asarray(nf)
        )
    )
    c = np.asarray(c)
    # the density of c is symmetric; integrate over c in [0, 1) with trapezoid weights dc
    wc = np.gradient(c)
    lw = logp + np.log(wc)[None, :]
    w = np.exp(lw - lw.max(axis=1, keepdims=True))
    w /= w.sum(axis=1, keepdims=True)
    u = c**2
    mean_u = w @ u
    return c, logp, mean_u, Tq, D
