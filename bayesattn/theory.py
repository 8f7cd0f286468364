"""Order-parameter theory of the copy-head transition (THEORY.md section 4; derivation in docs/theory.md).

The closed-form posterior over the attention matrix L is reduced, at large n, to a density over the
order parameters. With beta = P d / (2 sigma2) and eps = lam / n (lam = d sigma2 / sigma_V2, n = P T_q,
T_q the number of query rows) the log density of the order parameters is -T_q Phi, with the per-row action

    Phi = beta_eff [1 - m^2 / (q + eps)] + (d^2 / (2 T_q)) log(1 + q / eps) + entropy term,
    beta_eff = beta - noise_fit * d^2 / (2 sigma2 T_q)   (the O(d^2/sigma^2) noise-fit term, off by default).

- softmax: the entropy term is the rate function I(m, q) of the row averages of a_t = alpha_{t,src} and
  b_t = sum_s alpha_ts^2 under the prior, exact over the T-1 other logits at finite T (prior samples of
  S1 = sum e^l, S2 = sum e^{2l}, a quadrature over the source logit). It is handled in its dual variables
  (h, g): a table of Lambda(h, g) = log E exp(h a + g b) and its gradient (m, q) is built once per
  (T, sigma_A2) and reused for every P, since P enters only through beta and eps.
- linear: the order parameters are the squared cosine u between L and the shift pattern and the radius;
  under the isotropic prior the cosine c = +-sqrt(u) has density (1 - c^2)^{(D-3)/2} (D = the number of
  free logits), exact at every T, and the radius is integrated exactly.

Covered: ``CopyTask`` with Gaussian tokens; softmax with the cyclic boundary; linear with cyclic or causal
boundary. Everything here is float64 (posterior energies are O(n d / sigma2); float32 loses the O(1)
differences between phases).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import warnings
from dataclasses import dataclass, field
from typing import Literal

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import logsumexp

from ._validate import check_choice, check_int, check_positive
from .attention import ATTENTIONS
from .posterior import Prior
from .tasks import CopyTask

jax.config.update("jax_enable_x64", True)  # Phi differences of O(1/T) between branches need float64

__all__ = [
    "action",
    "softmax_action_table",
    "linear_log_density",
    "phase_curve",
    "PhaseCurve",
    "landscape",
    "phase_diagram",
    "PhaseDiagram",
    "critical_exponent",
    "finite_size_scaling",
    "covered",
]

Attention = Literal["softmax", "linear"]

# ----------------------------------------------------------------------------------------------------
# input checks
# ----------------------------------------------------------------------------------------------------

COVERED = (
    "the reduced theory covers CopyTask with tokens='gaussian'; softmax attention with boundary='cyclic'; "
    "linear attention with boundary='cyclic' or 'causal'"
)


def covered(task, attention: str) -> None:
    """Raise ValueError unless the reduced theory is derived for this task and attention."""
    check_choice("attention", attention, ATTENTIONS)
    if not isinstance(task, CopyTask):
        raise ValueError(f"task={task!r}: not covered; {COVERED}")
    if task.tokens != "gaussian":
        raise ValueError(f"task.tokens={task.tokens!r}: not covered (G and C are not isotropic); {COVERED}")
    if attention == "softmax" and task.boundary != "cyclic":
        raise ValueError(f"task.boundary={task.boundary!r} with attention='softmax': not covered; {COVERED}")


def _check_prior(prior):
    if not isinstance(prior, Prior):
        raise ValueError(f"prior={prior!r}: expected a bayesattn Prior")
    return prior


def _check_grid(name: str, values, *, integer: bool = False) -> np.ndarray:
    """A non-empty, strictly increasing, positive, finite 1-D grid."""
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{name}={values!r}: expected a 1-D sequence of positive numbers") from None
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name}={values!r}: expected a non-empty 1-D sequence of positive numbers")
    if not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        raise ValueError(f"{name}={values!r}: expected finite positive values")
    if np.any(np.diff(arr) <= 0):
        raise ValueError(f"{name}={values!r}: expected strictly increasing values (sorted, no repeats)")
    if integer and np.any(arr != np.round(arr)):
        raise ValueError(f"{name}={values!r}: expected integers")
    return arr


def _scales(task, prior, P):
    """beta = P d / (2 sigma2) and eps = lam / n as arrays over P; T_q = number of query rows."""
    Tq = int(np.sum(task.query_mask))
    P = np.asarray(P, dtype=np.float64)
    beta = P * task.d_out / (2.0 * prior.sigma2)
    eps = prior.lam(task.d) / (P * Tq)
    return beta, eps, Tq


# ----------------------------------------------------------------------------------------------------
# the reduced action (energy part) -- shared by both attentions
# ----------------------------------------------------------------------------------------------------


def action(m, q, entropy, *, beta, eps, d: int, T_q: int, noise_fit_coef=0.0):
    """The reduced per-row action Phi(m, q) = E(m, q) / T_q + entropy (vectorised in JAX, broadcasting).

    m, q: order parameters; entropy: the entropy term at (m, q) (the rate function I(m, q) for softmax,
    -(1/T_q) log of the prior density of the order parameters for linear); beta = P d / (2 sigma2);
    eps = lam / n; d: output dimension; T_q: query rows; noise_fit_coef = d^2 / (2 sigma2 T_q) switches on
    the O(d^2/sigma^2) noise-fit term. The log density of (m, q) is -T_q * Phi.
    """
    m, q = jnp.asarray(m), jnp.asarray(q)
    be = beta - noise_fit_coef
    return be * (1.0 - m**2 / (q + eps)) + d**2 / (2.0 * T_q) * jnp.log1p(q / eps) + entropy


def _energy_grads(m, q, beta, eps, d, Tq, nf):
    be = beta - nf
    dm = -2.0 * be * m / (q + eps)
    dq = be * m**2 / (q + eps) ** 2 + d**2 / (2.0 * Tq) / (q + eps)
    return dm, dq


# ----------------------------------------------------------------------------------------------------
# softmax: the cumulant generating function of one row, tabulated in its dual variables
# ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Table:
    """Row moments on a (y, c) grid and Lambda(h, g) with its gradient (m, q) on an (h, g) grid."""

    h: np.ndarray
    g: np.ndarray
    Lam: np.ndarray  # (Nh, Ng)
    m: np.ndarray
    q: np.ndarray
    mom: tuple  # (y, s, logM, R, R2): what _tilt needs for exact evaluation off the grid


@functools.partial(jax.jit, static_argnames=("T", "num_samples", "nl", "nc", "ny"))
def _row_moments(key, T, sigma_A2, c_min, x_max_extra, num_samples, nl, nc, ny):
    """log M(y, c) = log E[phi(y + l1) exp(c r)], R = E[r | y, c], R2 = E[r^2 | y, c] on a (y, c) grid.

    l1 = log S1, r = S2 / S1^2 for the T-1 non-source logits (prior samples), y = x - l1 with x the
    source logit; the row statistics are a = sigmoid(y), b = a^2 + (1 - a)^2 r.
    """
    sA = jnp.sqrt(sigma_A2)
    z = jax.random.normal(key, (num_samples, T - 1), dtype=jnp.float64) * sA
    l1 = logsumexp(z, axis=1)
    r = jnp.exp(logsumexp(2 * z, axis=1) - 2 * l1)
    r_ref = 1.0 / (T - 1)
    # cloud-in-cell histogram of l1 (second-order accurate), carrying exp(c (r - r_ref)) per sample
    lo, hi = jnp.min(l1) - 0.05, jnp.max(l1) + 0.05
    dl = (hi - lo) / (nl - 1)
    lgrid = lo + dl * jnp.arange(nl)
    pos = (l1 - lo) / dl
    i0 = jnp.clip(jnp.floor(pos).astype(jnp.int32), 0, nl - 2)
    f = pos - i0
    s = jnp.linspace(0.0, jnp.log1p(-c_min), nc)
    c = -jnp.expm1(s)  # c from 0 down to c_min
    E = jnp.exp(c[None, :] * (r[:, None] - r_ref))  # (K, nc)

    def hist(V):
        return (jax.ops.segment_sum((1 - f)[:, None] * V, i0, nl) + jax.ops.segment_sum(f[:, None] * V, i0 + 1, nl)) / num_samples

    H, HR, HR2 = hist(E), hist(E * r[:, None]), hist(E * r[:, None] ** 2)
    x_min = -10.0 * sA
    x_max = hi + x_max_extra + 10.0 * sA
    y = jnp.linspace(x_min - hi, x_max - lo, ny)
    dy = y[1] - y[0]
    logphi = -0.5 * (y[:, None] + lgrid[None, :]) ** 2 / sigma_A2 - 0.5 * jnp.log(2 * jnp.pi * sigma_A2)
    shift = jnp.max(logphi, axis=1, keepdims=True)
    W = jnp.exp(logphi - shift)
    M, MR, MR2 = W @ H, W @ HR, W @ HR2
    tiny = 1e-300
    logM = jnp.log(M + tiny) + shift + c[None, :] * r_ref + jnp.log(dy)
    return y, s, logM, MR / (M + tiny), MR2 / (M + tiny)


@jax.jit
def _tilt(h, g, y, s, logM, R, R2):
    """One row tilted by exp(h a + g b): Lambda, m = <a>, q = <b> and Cov(a, b) = (Vaa, Vab, Vbb)."""
    a = jax.nn.sigmoid(y)
    one_a = jax.nn.sigmoid(-y)
    c = g * one_a**2
    ds = s[1] - s[0]
    pos = jnp.log1p(-c) / ds
    i0 = jnp.clip(jnp.floor(pos).astype(jnp.int32), 0, s.shape[0] - 2)
    f = pos - i0
    rows = jnp.arange(y.shape[0])

    def interp(A):
        return (1 - f) * A[rows, i0] + f * A[rows, i0 + 1]

    lm, rr, rr2 = interp(logM), interp(R), interp(R2)
    logw = h * a + g * a**2 + lm
    Lam = logsumexp(logw)
    p = jnp.exp(logw - Lam)
    b = a**2 + one_a**2 * rr
    b2 = a**4 + 2 * a**2 * one_a**2 * rr + one_a**4 * rr2
    m, q = jnp.sum(p * a), jnp.sum(p * b)
    Vaa = jnp.sum(p * a**2) - m**2
    Vab = jnp.sum(p * a * b) - m * q
    Vbb = jnp.sum(p * b2) - q**2
    return Lam, m, q, Vaa, Vab, Vbb


@functools.partial(jax.jit, static_argnames=("T", "num_samples", "nl", "nc", "ny"))
def _build_table(key, T, sigma_A2, h, g, num_samples, nl, nc, ny):
    c_min = jnp.min(g) * 1.0001 - 1e-9
    x_extra = jnp.log1p(jnp.max(jnp.abs(h)) * sigma_A2)
    mom = _row_moments(key, T, sigma_A2, c_min, x_extra, num_samples, nl, nc, ny)
    f = jax.vmap(jax.vmap(lambda hh, gg: _tilt(hh, gg, *mom)[:3], in_axes=(None, 0)), in_axes=(0, None))
    Lam, m, q = f(h, g)
    return Lam, m, q, mom


def _grids(T, d, beta_max, nh, ng):
    h_max = 6.0 * beta_max + 4.0 * d**2 / T + 10.0
    h = np.linspace(-0.1 * h_max, h_max, nh)
    g_min = -(1.05 * beta_max * T + d**2 / 2.0 + 10.0)
    g = -np.expm1(np.linspace(np.log1p(-g_min), 0.0, ng))  # ascending, from g_min to 0
    return h, g


@functools.lru_cache(maxsize=64)
def _cached_table(T, sigma_A2, d, beta_max, nh, ng, num_samples, seed, nl, nc, ny):
    h, g = _grids(T, d, beta_max, nh, ng)
    Lam, m, q, mom = _build_table(jax.random.key(seed), T, sigma_A2, jnp.asarray(h), jnp.asarray(g), num_samples, nl, nc, ny)
    return _Table(h, g, np.asarray(Lam), np.asarray(m), np.asarray(q), mom)


def softmax_action_table(task, prior, beta_max: float, *, nh: int = 241, ng: int = 121, num_samples: int = 20000,
                         seed: int = 0, nl: int = 200, nc: int = 96, ny: int = 800) -> _Table:
    """The per-row cumulant generating function Lambda(h, g) = log E_prior exp(h a + g b) of one softmax row
    and its gradient (m, q) on an (h, g) grid wide enough for every beta <= beta_max.

    Exact over the T-1 non-source logits up to Monte Carlo error (``num_samples`` prior draws of (S1, S2),
    fixed ``seed``) and quadrature error (``ny`` source-logit nodes, ``nc`` tilt nodes, ``nl`` bins).
    """
    covered(task, "softmax")
    return _cached_table(task.T, float(prior.sigma_A2), task.d_out, float(beta_max), nh, ng, num_samples, seed, nl, nc, ny)


def _hess_E(m, q, be, eps, d, Tq):
    """Hessian of the per-row energy in (m, q): (Hmm, Hmq, Hqq)."""
    Hmm = -2.0 * be / (q + eps)
    Hmq = 2.0 * be * m / (q + eps) ** 2
    Hqq = -2.0 * be * m**2 / (q + eps) ** 3 - d**2 / (2.0 * Tq) / (q + eps) ** 2
    return Hmm, Hmq, Hqq


def _newton_min(h0, g0, be, eps, mom, d, Tq, iters=40):
    """Refine a stationary point of Phi(m, q): solve theta + grad E(grad Lambda(theta)) = 0 in theta = (h, g).

    Returns m, q, Phi, converged, is_min and the Laplace log weight -T_q Phi - 0.5 log det(I + H_E Cov)."""

    def resid(h, g):
        Lam, m, q, Vaa, Vab, Vbb = _tilt(h, g, *mom)
        dm, dq = _energy_grads(m, q, be, eps, d, Tq, 0.0)
        return jnp.array([h + dm, g + dq]), (Lam, m, q, Vaa, Vab, Vbb)

    def step(carry, _):
        h, g = carry
        r, (Lam, m, q, Vaa, Vab, Vbb) = resid(h, g)
        Hmm, Hmq, Hqq = _hess_E(m, q, be, eps, d, Tq)
        # J = I + H_E Cov
        J = jnp.eye(2) + jnp.array([[Hmm, Hmq], [Hmq, Hqq]]) @ jnp.array([[Vaa, Vab], [Vab, Vbb]])
        dx = jnp.linalg.solve(J, -r)
        scale = jnp.minimum(1.0, 2.0 / (jnp.abs(dx[0]) + 1e-300)) * jnp.minimum(1.0, (0.2 * jnp.abs(g) + 2.0) / (jnp.abs(dx[1]) + 1e-300))
        scale = jnp.minimum(scale, 1.0)
        return (h + scale * dx[0], jnp.minimum(g + scale * dx[1], -1e-6)), None

    (h, g), _ = jax.lax.scan(step, (h0, g0), None, length=iters)
    r, (Lam, m, q, Vaa, Vab, Vbb) = resid(h, g)
    Phi = action(m, q, h * m + g * q - Lam, beta=be, eps=eps, d=d, T_q=Tq)
    Hmm, Hmq, Hqq = _hess_E(m, q, be, eps, d, Tq)
    detC = Vaa * Vbb - Vab**2
    # Hessian of Phi in (m, q): H_E + Cov^{-1}
    K11, K12, K22 = Hmm + Vbb / detC, Hmq - Vab / detC, Hqq + Vaa / detC
    is_min = (K11 > 0) & (K11 * K22 - K12**2 > 0)
    J = jnp.eye(2) + jnp.array([[Hmm, Hmq], [Hmq, Hqq]]) @ jnp.array([[Vaa, Vab], [Vab, Vbb]])
    logw = -Tq * Phi - 0.5 * jnp.log(jnp.abs(jnp.linalg.det(J)))
    conv = jnp.max(jnp.abs(r) / (1.0 + jnp.abs(jnp.array([h, g])))) < 1e-7
    return m, q, Phi, conv, is_min, logw, h, g


@functools.partial(jax.jit, static_argnames=("d", "Tq", "kmax"))
def _softmax_minima_jit(h, g, Lam, m, q, mom, beta, eps, d, Tq, kmax=4):
    """Local minima of Phi(m, q) for each beta: discrete minima of Phi on the dual grid, refined by Newton."""

    def one(be, ep):
        H, G = h[:, None], g[None, :]
        Phi = action(m, q, H * m + G * q - Lam, beta=be, eps=ep, d=d, T_q=Tq)
        P = jnp.pad(Phi, 1, constant_values=jnp.inf)
        is_min = jnp.ones_like(Phi, dtype=bool)
        for di in (-1, 0, 1):
            for dj in (-1, 0, 1):
                if di == 0 and dj == 0:
                    continue
                nb = P[1 + di: 1 + di + Phi.shape[0], 1 + dj: 1 + dj + Phi.shape[1]]
                is_min &= Phi <= nb
        score = jnp.where(is_min, Phi, jnp.inf).ravel()
        _, idx = jax.lax.top_k(-score, kmax)
        valid = jnp.isfinite(score[idx])
        ii, jj = idx // Phi.shape[1], idx % Phi.shape[1]
        res = jax.vmap(lambda h0, g0: _newton_min(h0, g0, be, ep, mom, d, Tq))(h[ii], g[jj])
        edge = (ii == 0) | (ii == h.shape[0] - 1) | (jj == 0)
        return res, valid, edge

    return jax.vmap(one)(beta, eps)


@functools.partial(jax.jit, static_argnames=("d", "Tq"))
def _newton_from(h0, g0, mom, beta, eps, d, Tq):
    """Newton from given starts. h0, g0: (NP, K); beta, eps: (NP,)."""
    f = jax.vmap(jax.vmap(lambda a, b, be, ep: _newton_min(a, b, be, ep, mom, d, Tq), in_axes=(0, 0, None, None)))
    return f(h0, g0, beta, eps)


def _softmax_minima(tab, beta, eps, d, Tq, passes=4):
    """Per P: list of distinct local minima (m, q, Phi, logw), and a flag if a grid edge was hit.

    Candidates: the discrete local minima of Phi on the dual grid, then continuation in P (Newton started
    from the minima at the neighbouring P), which finds shallow metastable minima near their spinodals.
    """
    (m, q, Phi, conv, is_min, logw, hs, gs), valid, edge = _softmax_minima_jit(
        jnp.asarray(tab.h), jnp.asarray(tab.g), jnp.asarray(tab.Lam), jnp.asarray(tab.m), jnp.asarray(tab.q), tab.mom,
        jnp.asarray(beta), jnp.asarray(eps), d, Tq)
    res = [np.asarray(a) for a in (m, q, Phi, conv, is_min, logw, hs, gs)]
    ok = np.asarray(valid) & res[3] & res[4]
    edge_hit = bool(np.any(np.asarray(valid) & np.asarray(edge)))
    NP = len(beta)

    def collect(res, ok):
        out = []
        for i in range(NP):
            mins = []
            for k in np.flatnonzero(ok[i]):
                if any(abs(res[0][i, k] - mm[0]) < 1e-4 for mm in mins):
                    continue
                mins.append(tuple(float(a[i, k]) for a in (res[0], res[1], res[2], res[5], res[6], res[7])))
            out.append(sorted(mins))
        return out

    mins = collect(res, ok)
    for _ in range(passes if NP > 1 else 0):
        K = max(1, max(len(x) for x in mins))
        h0 = np.zeros((NP, 2 * K))
        g0 = np.full((NP, 2 * K), -1.0)
        have = np.zeros((NP, 2 * K), bool)
        for i in range(NP):
            for side, j in ((0, i - 1), (1, i + 1)):
                if 0 <= j < NP:
                    for k, t in enumerate(mins[j]):
                        h0[i, side * K + k], g0[i, side * K + k], have[i, side * K + k] = t[4], t[5], True
        r2 = [np.asarray(a) for a in _newton_from(jnp.asarray(h0), jnp.asarray(g0), tab.mom, jnp.asarray(beta),
                                                   jnp.asarray(eps), d, Tq)]
        ok2 = have & r2[3] & r2[4]
        res = [np.concatenate([a, b], axis=1) for a, b in zip(res, r2)]
        ok = np.concatenate([ok, ok2], axis=1)
        new = collect(res, ok)
        if all(len(a) == len(b) for a, b in zip(new, mins)):
            mins = new
            break
        mins = new
    return [[t[:4] for t in x] for x in mins], edge_hit


# ----------------------------------------------------------------------------------------------------
# linear: exact Beta law of the cosine and exact radius integral
# ----------------------------------------------------------------------------------------------------


def _linear_dims(task):
    """D = number of free logits (unmasked entries in query rows) and T_q."""
    km = task.key_mask & task.query_mask[:, None]
    return int(km.sum()), int(task.query_mask.sum())


@functools.partial(jax.jit, static_argnames=("D", "Tq", "T", "d", "nt"))
def _linear_log_density_c(c, beta, eps, sigma_A2, D, Tq, T, d, nf, nt=400):
    """log p(c) up to a constant, c = cosine between L and the shift pattern, radius integrated exactly.

    c: (Nc,), beta/eps/nf scalars. t = |L|^2 / sigma_A2 ~ chi^2_D, q = sigma_A2 t / (T T_q), u = c^2.
    """
    # radius quadrature in log t around the chi^2_D bulk (the energy tilts it only mildly)
    lt = jnp.linspace(jnp.log(D) - 12.0 / jnp.sqrt(D) - 4.0, jnp.log(D) + 12.0 / jnp.sqrt(D) + 1.0, nt)
    t = jnp.exp(lt)
    log_pt = 0.5 * D * lt - 0.5 * t  # density of log t
    qv = sigma_A2 * t / (T * Tq)
    u = c[:, None] ** 2
    be = beta - nf
    E = Tq * be * (1.0 - u * qv / (qv + eps)) + 0.5 * d**2 * jnp.log1p(qv / eps)
    lr = logsumexp(log_pt[None, :] - E, axis=1)
    return 0.5 * (D - 3) * jnp.log1p(-c**2) + lr


def linear_log_density(task, prior, P, u):
    """Reduced log density of u for linear attention, up to a constant, with respect to du / sqrt(u)
    (i.e. the density of the cosine c = sqrt(u)); exact Beta law of the direction, exact radius integral."""
    covered(task, "linear")
    D, Tq = _linear_dims(task)
    beta, eps, _ = _scales(task, prior, P)
    c = jnp.sqrt(jnp.asarray(u, jnp.float64))
    return _linear_log_density_c(c, float(beta), float(eps), float(prior.sigma_A2), D, Tq, task.T, task.d_out, 0.0)


def _linear_curves(task, prior, P_values, nf_flag, nc=2001):
    D, Tq = _linear_dims(task)
    beta, eps, _ = _scales(task, prior, P_values)
    nf = nf_flag * task.d_out**2 / (2.0 * prior.sigma2 * Tq) * np.ones_like(beta)
    # the cosine grid: c in [0, 1), dense near 0 and resolving the Beta law width 1/sqrt(D)
    c = jnp.asarray(np.sin(np.linspace(0.0, np.pi / 2, nc))[:-1])
    f = jax.vmap(_linear_log_density_c, in_axes=(None, 0, 0, None, None, None, None, None, 0))
    logp = np.asarray(f(c, jnp.asarray(beta), jnp.asarray(eps), float(prior.sigma_A2), D, Tq, task.T, task.d_out,
                        jnp.asarray(nf)))
    c = np.asarray(c)
    # the density of c is symmetric; integrate over c in [0, 1) with trapezoid weights dc
    wc = np.gradient(c)
    lw = logp + np.log(wc)[None, :]
    w = np.exp(lw - lw.max(axis=1, keepdims=True))
    w /= w.sum(axis=1, keepdims=True)
    u = c**2
    mean_u = w @ u
    return c, logp, mean_u, Tq, D


# ----------------------------------------------------------------------------------------------------
# phase curves
# ----------------------------------------------------------------------------------------------------


@dataclass
class PhaseCurve:
    """Branches, stable branch, posterior means and the transition over a grid of P.

    free energies are T_q * Phi in nats (differences are log posterior odds between the phases).
    """

    attention: str
    P: np.ndarray
    branches: list = field(default_factory=list)
    stable: dict = field(default_factory=dict)
    mean: dict = field(default_factory=dict)
    transition: dict = field(default_factory=dict)
    config: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        def conv(x):
            if isinstance(x, np.ndarray):
                return [None if (isinstance(v, float) and not math.isfinite(v)) else v for v in x.tolist()]
            if isinstance(x, dict):
                return {k: conv(v) for k, v in x.items()}
            if isinstance(x, (list, tuple)):
                return [conv(v) for v in x]
            if isinstance(x, (np.floating, float)):
                return None if not math.isfinite(float(x)) else float(x)
            if isinstance(x, np.integer):
                return int(x)
            return x

        return {"attention": self.attention, "P": conv(self.P), "branches": conv(self.branches),
                "stable": conv(self.stable), "mean": conv(self.mean), "transition": conv(self.transition),
                "config": conv(self.config)}

    @classmethod
    def from_dict(cls, d: dict) -> "PhaseCurve":
        def arr(v):
            return np.array([np.nan if x is None else x for x in v], dtype=np.float64)

        return cls(
            attention=d["attention"],
            P=arr(d["P"]),
            branches=[{k: arr(v) for k, v in b.items()} for b in d["branches"]],
            stable={k: arr(v) for k, v in d["stable"].items()},
            mean={k: arr(v) for k, v in d["mean"].items()},
            transition=dict(d["transition"]),
            config=dict(d.get("config", {})),
        )


def _track_branches(P, minima, tol):
    """Link the local minima at successive P into branches (nearest m, within tol)."""
    branches = []  # each: dict of lists
    active = []
    for i, mins in enumerate(minima):
        new_active = []
        used = set()
        for (m, q, F) in sorted(mins):
            best, bd = None, tol
            for b in active:
                if id(b) in used:
                    continue
                dist = abs(b["m"][-1] - m)
                if dist < bd:
                    best, bd = b, dist
            if best is None:
                best = {"P": [], "m": [], "q": [], "u": [], "free_energy": []}
                branches.append(best)
            used.add(id(best))
            best["P"].append(float(P[i]))
            best["m"].append(m)
            best["q"].append(q)
            best["u"].append(m * m / q if q > 0 else 0.0)
            best["free_energy"].append(F)
            new_active.append(best)
        active = new_active
    return [{k: np.asarray(v) for k, v in b.items()} for b in branches]


def _first_order(P, branches):
    """Binodal and spinodals from two branches that overlap in P."""
    if len(branches) < 2:
        return None
    lo = min(branches, key=lambda b: b["m"][0] if b["m"].size else np.inf)
    hi = max(branches, key=lambda b: b["m"][-1] if b["m"].size else -np.inf)
    if lo is hi:
        return None
    Ps = np.intersect1d(lo["P"], hi["P"])
    if Ps.size == 0:
        return None
    spin = [float(hi["P"][0]), float(lo["P"][-1])]
    Flo = np.interp(Ps, lo["P"], lo["free_energy"])
    Fhi = np.interp(Ps, hi["P"], hi["free_energy"])
    diff = Fhi - Flo  # > 0 below the binodal
    Pc = None
    for i in range(len(Ps) - 1):
        if diff[i] > 0 >= diff[i + 1]:
            Pc = float(Ps[i] + diff[i] / (diff[i] - diff[i + 1]) * (Ps[i + 1] - Ps[i]))
    if Pc is None:
        # no sign change on the overlap grid (window narrower than the P spacing): the binodal lies at
        # the end of the window where |F_hi - F_lo| is smallest
        Pc = float(Ps[int(np.argmin(np.abs(diff)))])
    return {"order": "first", "P_c": Pc, "spinodals": spin}


def _softmax_phase_curve(task, prior, P, nf_flag, numerics, tab=None):
    beta, eps, Tq = _scales(task, prior, P)
    # the noise-fit term only shifts beta: beta_eff = beta - d^2 / (2 sigma2 T_q)
    beta = beta - nf_flag * task.d_out**2 / (2.0 * prior.sigma2 * Tq)
    if tab is None:
        tab = softmax_action_table(task, prior, float(beta.max()), **numerics)
    minima, edge_hit = _softmax_minima(tab, beta, eps, task.d_out, Tq)
    if edge_hit:
        warnings.warn("theory: a minimum of the action lies on the edge of the dual (h, g) grid", stacklevel=3)
    branches = _track_branches(P, [[t[:3] for t in mins] for mins in minima], tol=0.05)
    for b in branches:
        b["free_energy"] = b["free_energy"] * Tq
    stable = {k: np.full(len(P), np.nan) for k in ("m", "q", "u", "free_energy")}
    mean = {k: np.full(len(P), np.nan) for k in ("m", "q", "u")}
    for i, mins in enumerate(minima):
        if not mins:
            continue
        m_, q_, F_, _ = min(mins, key=lambda t: t[2])
        stable["m"][i], stable["q"][i], stable["u"][i], stable["free_energy"][i] = m_, q_, m_ * m_ / q_, F_ * Tq
        # posterior means: Laplace mixture of the local minima of the saddle-point density
        arr = np.array(mins)
        w = np.exp(arr[:, 3] - arr[:, 3].max())
        w /= w.sum()
        mean["m"][i], mean["q"][i], mean["u"][i] = w @ arr[:, 0], w @ arr[:, 1], w @ (arr[:, 0] ** 2 / arr[:, 1])
    trans = _first_order(P, branches)
    if trans is None:
        trans = {"order": "crossover", "P_c": None, "spinodals": []}
    return PhaseCurve("softmax", np.asarray(P), branches, stable, mean, trans)


def _linear_critical_P(task, prior, nf_flag):
    """P where the curvature of the c-action at c = 0 changes sign: (D - 3) = 2 T_q beta_eff <q/(q+eps)>_{c=0}."""
    from scipy.optimize import brentq

    D, Tq = _linear_dims(task)

    def curv(P):
        beta, eps, _ = _scales(task, prior, P)
        nf = nf_flag * task.d_out**2 / (2.0 * prior.sigma2 * Tq)
        lt = np.linspace(np.log(D) - 12 / np.sqrt(D) - 4, np.log(D) + 12 / np.sqrt(D) + 1, 400)
        t = np.exp(lt)
        q = prior.sigma_A2 * t / (task.T * Tq)
        lw = 0.5 * D * lt - 0.5 * t - 0.5 * task.d_out**2 * np.log1p(q / eps)
        w = np.exp(lw - lw.max())
        w /= w.sum()
        return 2 * Tq * (beta - nf) * np.sum(w * q / (q + eps)) - (D - 3)

    P0 = prior.sigma2 * (D - 3) / (task.d_out * Tq)
    lo, hi = P0 * 0.5, P0 * 2.0
    while curv(lo) > 0:
        lo /= 2
    while curv(hi) < 0:
        hi *= 2
    return float(brentq(curv, lo, hi, xtol=1e-10 * P0))


def _linear_phase_curve(task, prior, P, nf_flag):
    c, logp, mean_u, Tq, D = _linear_curves(task, prior, P, nf_flag)
    Pc = _linear_critical_P(task, prior, nf_flag)
    S = -logp  # total action in nats on the cosine grid
    u = c**2
    branch = {"P": [], "m": [], "q": [], "u": [], "free_energy": []}
    beta, eps, _ = _scales(task, prior, P)
    stable = {k: np.full(len(P), np.nan) for k in ("m", "q", "u", "free_energy")}
    for i in range(len(P)):
        j = int(np.argmin(S[i]))
        # parabolic refinement of the minimum in c
        if 0 < j < len(c) - 1:
            y0, y1, y2 = S[i, j - 1], S[i, j], S[i, j + 1]
            den = y0 - 2 * y1 + y2
            dt = 0.5 * (y0 - y2) / den if den > 0 else 0.0
            cs = c[j] + dt * (c[j + 1] - c[j - 1]) / 2
            Fs = y1 - 0.25 * (y0 - y2) * dt
        else:
            cs, Fs = c[j], S[i, j]
        us = cs**2
        # radius at the minimum: the conditional mean of q given c
        qs = _linear_q_given_c(task, prior, beta[i], eps[i], cs, D, Tq)
        # zero of the free energy: -log of the normalisation of the Beta law at c = 0 is not tracked;
        # free energies are reported relative to the c = 0 point of the same P
        F0 = S[i, 0]
        vals = (np.sqrt(us * qs), qs, us, Fs - F0)
        for k, v in zip(("m", "q", "u", "free_energy"), vals):
            branch[k].append(float(v))
            stable[k][i] = v
        branch["P"].append(float(P[i]))
    qbar = np.array([_linear_q_given_c(task, prior, beta[i], eps[i], 0.0, D, Tq) for i in range(len(P))])
    mean = {"u": mean_u, "q": qbar, "m": np.sqrt(mean_u * qbar)}
    inside = P[0] <= Pc <= P[-1]
    trans = {"order": "second", "P_c": float(Pc) if inside else None, "spinodals": [], "P_c_exact": float(Pc)}
    return PhaseCurve("linear", np.asarray(P), [{k: np.asarray(v) for k, v in branch.items()}], stable, mean, trans)


def _linear_q_given_c(task, prior, beta, eps, c, D, Tq):
    lt = np.linspace(np.log(D) - 12 / np.sqrt(D) - 4, np.log(D) + 12 / np.sqrt(D) + 1, 400)
    t = np.exp(lt)
    q = prior.sigma_A2 * t / (task.T * Tq)
    E = Tq * beta * (1 - c**2 * q / (q + eps)) + 0.5 * task.d_out**2 * np.log1p(q / eps)
    lw = 0.5 * D * lt - 0.5 * t - E
    w = np.exp(lw - lw.max())
    return float(np.sum(w * q) / np.sum(w))


def phase_curve(task, prior, attention: Attention, P_values, *, noise_fit: bool = False, num_samples: int = 20000,
                seed: int = 0, nh: int = 241, ng: int = 121) -> PhaseCurve:
    """Branches of local minima of the reduced action over P, the stable branch, the posterior means from
    the reduced density and the transition.

    task: CopyTask (Gaussian tokens; softmax needs boundary='cyclic'); prior: Prior (sigma2 fixed, so
    beta = P d / (2 sigma2) grows with P); P_values: increasing positive grid. ``noise_fit`` adds the
    O(d^2/sigma^2) noise-fit term; ``num_samples``/``seed``: prior draws of the non-source logits (softmax);
    ``nh``, ``ng``: dual grid sizes (softmax).

    >>> import bayesattn as ba
    >>> pc = ba.theory.phase_curve(ba.CopyTask(T=16, d=8), ba.Prior(1, 100, 400), "linear", [100, 400, 1000])
    >>> pc.transition["order"]
    'second'
    """
    covered(task, attention)
    prior = _check_prior(prior)
    P = _check_grid("P_values", P_values)
    num_samples = check_int("num_samples", num_samples, minimum=100)
    if attention == "softmax":
        pc = _softmax_phase_curve(task, prior, P, float(noise_fit), dict(num_samples=num_samples, seed=seed, nh=nh, ng=ng))
    else:
        pc = _linear_phase_curve(task, prior, P, float(noise_fit))
    pc.config = {"task": task.config(), "prior": prior.config(), "attention": attention, "noise_fit": bool(noise_fit),
                 "num_samples": num_samples, "seed": seed}
    return pc


# ----------------------------------------------------------------------------------------------------
# free-energy landscape
# ----------------------------------------------------------------------------------------------------


@functools.partial(jax.jit, static_argnames=("d", "Tq"))
def _profile_softmax(mt, h0, g0, mom, be, eps, d, Tq, iters=40):
    """Phi(m) = min_q Phi(m, q) at fixed m = mt: solve m(h, g) = mt and dPhi/dq = 0 by Newton."""

    def body(carry, _):
        h, g = carry
        Lam, m, q, Vaa, Vab, Vbb = _tilt(h, g, *mom)
        _, dq = _energy_grads(mt, q, be, eps, d, Tq, 0.0)
        _, _, Hqq = _hess_E(mt, q, be, eps, d, Tq)
        r = jnp.array([m - mt, g + dq])
        J = jnp.array([[Vaa, Vab], [Hqq * Vab, 1.0 + Hqq * Vbb]])
        dx = jnp.linalg.solve(J, -r)
        scale = jnp.minimum(1.0, jnp.minimum(2.0 / (jnp.abs(dx[0]) + 1e-300), (0.2 * jnp.abs(g) + 2.0) / (jnp.abs(dx[1]) + 1e-300)))
        return (h + scale * dx[0], jnp.minimum(g + scale * dx[1], -1e-6)), None

    (h, g), _ = jax.lax.scan(body, (h0, g0), None, length=iters)
    Lam, m, q, *_ = _tilt(h, g, *mom)
    Phi = action(mt, q, h * mt + g * q - Lam, beta=be, eps=eps, d=d, T_q=Tq)
    ok = jnp.abs(m - mt) < 1e-6 * (1 + mt)
    return jnp.where(ok, Phi, jnp.nan)


def landscape(task, prior, attention: Attention, P, grid=None, *, noise_fit: bool = False, num_samples: int = 20000,
              seed: int = 0) -> dict:
    """Free-energy landscape S(x) = T_q * min over the other order parameters of Phi, in nats, shifted so
    that min S = 0 (differences are log posterior odds). x = m for softmax (double well near the
    transition), x = u for linear (a single well at u = 0 that moves away continuously; the density is
    taken with respect to du / sqrt(u), i.e. of the cosine sqrt(u), so the well at u = 0 is finite).

    Returns {"x", "x_name", "S", "P", "attention"}. grid: increasing values in (0, 1).
    """
    covered(task, attention)
    prior = _check_prior(prior)
    P = check_positive("P", P)
    if grid is None:
        grid = np.linspace(0.5 / task.T, 0.9, 200) if attention == "softmax" else np.linspace(0.0, 0.9, 200)[1:]
    x = _check_grid("grid", grid)
    if x[-1] >= 1:
        raise ValueError(f"grid={grid!r}: expected values in (0, 1)")
    beta, eps, Tq = _scales(task, prior, np.array([P]))
    beta = beta - float(noise_fit) * task.d_out**2 / (2.0 * prior.sigma2 * Tq)
    if attention == "softmax":
        tab = softmax_action_table(task, prior, float(beta[0]), num_samples=check_int("num_samples", num_samples, minimum=100),
                                   seed=seed)
        H, G = tab.h[:, None], tab.g[None, :]
        Phi = np.asarray(action(tab.m, tab.q, H * tab.m + G * tab.q - tab.Lam, beta=beta[0], eps=eps[0], d=task.d_out, T_q=Tq))
        _, dq = _energy_grads(tab.m, tab.q, beta[0], eps[0], task.d_out, Tq, 0.0)
        F = np.abs(G + dq)
        # starts: the table point closest in m among those near q-stationarity, lowest Phi
        starts = []
        for mt in x:
            score = Phi + 1e4 * (tab.m - mt) ** 2 + 0.1 * F
            i, j = np.unravel_index(np.argmin(score), score.shape)
            starts.append((tab.h[i], tab.g[j]))
        h0, g0 = (jnp.asarray(a) for a in zip(*starts))
        S = np.asarray(jax.vmap(lambda mt, a, b: _profile_softmax(mt, a, b, tab.mom, beta[0], eps[0], task.d_out, Tq))(
            jnp.asarray(x), h0, g0)) * Tq
        name = "m"
    else:
        D, Tq = _linear_dims(task)
        S = -np.asarray(_linear_log_density_c(jnp.sqrt(jnp.asarray(x)), beta[0], eps[0], float(prior.sigma_A2), D, Tq,
                                              task.T, task.d_out, 0.0))
        name = "u"
    S = S - np.nanmin(S)
    return {"x": x, "x_name": name, "S": S, "P": float(P), "attention": attention}


# ----------------------------------------------------------------------------------------------------
# phase diagrams, critical exponent, finite-size scaling
# ----------------------------------------------------------------------------------------------------


def _crossover(pc: PhaseCurve) -> float:
    """Crossover marker: linear -> the P where <u> reaches 1/2; softmax -> the P of steepest rise of <m>
    in log P (for a first-order transition this sits at the jump)."""
    P = pc.P
    if pc.attention == "linear":
        u = pc.mean["u"]
        k = np.flatnonzero((u[:-1] < 0.5) & (u[1:] >= 0.5))
        if k.size == 0:
            return float("nan")
        k = k[0]
        return float(P[k] + (0.5 - u[k]) / (u[k + 1] - u[k]) * (P[k + 1] - P[k]))
    if len(P) < 3:
        return float("nan")
    slope = np.gradient(pc.mean["m"], np.log(P))
    return float(P[int(np.nanargmax(slope))])


@dataclass
class PhaseDiagram:
    """Transition lines over (P, vary): P_c (binodal / critical), spinodals, order and crossover per value."""

    attention: str
    vary_name: str
    vary_values: np.ndarray
    P_c: np.ndarray
    spinodal_low: np.ndarray
    spinodal_high: np.ndarray
    order: list
    crossover: np.ndarray
    P: np.ndarray = None
    config: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        def lst(a):
            return [None if not np.isfinite(v) else float(v) for v in np.asarray(a, float)]

        return {"attention": self.attention, "vary_name": self.vary_name, "vary_values": lst(self.vary_values),
                "P_c": lst(self.P_c), "spinodal_low": lst(self.spinodal_low), "spinodal_high": lst(self.spinodal_high),
                "order": list(self.order), "crossover": lst(self.crossover),
                "P": None if self.P is None else lst(self.P), "config": self.config}

    @classmethod
    def from_dict(cls, d: dict) -> "PhaseDiagram":
        def arr(v):
            return np.array([np.nan if x is None else x for x in v], dtype=np.float64)

        return cls(d["attention"], d["vary_name"], arr(d["vary_values"]), arr(d["P_c"]), arr(d["spinodal_low"]),
                   arr(d["spinodal_high"]), list(d["order"]), arr(d["crossover"]),
                   None if d.get("P") is None else arr(d["P"]), dict(d.get("config", {})))


def phase_diagram(task, prior, attention: Attention, P_values, vary: dict, *, noise_fit: bool = False,
                  num_samples: int = 20000, seed: int = 0, nh: int = 241, ng: int = 121) -> PhaseDiagram:
    """The transition over the (P, vary) plane. vary: {"sigma_A2": [...]} or {"T": [...]} (increasing).

    Per value: P_c (binodal for first order, critical point for second; NaN where none in the P range),
    the spinodals (NaN where none), the order and the crossover marker (see ``_crossover``).
    """
    covered(task, attention)
    prior = _check_prior(prior)
    P = _check_grid("P_values", P_values)
    if not isinstance(vary, dict) or len(vary) != 1 or next(iter(vary)) not in ("sigma_A2", "T"):
        raise ValueError(f"vary={vary!r}: expected a dict with one key, 'sigma_A2' or 'T', mapping to a grid")
    name, values = next(iter(vary.items()))
    vals = _check_grid(f"vary[{name!r}]", values, integer=(name == "T"))
    out = {k: np.full(len(vals), np.nan) for k in ("P_c", "lo", "hi", "cross")}
    order = []
    for k, v in enumerate(vals):
        if name == "T":
            t, p = task.replace(T=int(v)), prior
        else:
            t, p = task, prior.replace(sigma_A2=float(v))
        pc = phase_curve(t, p, attention, P, noise_fit=noise_fit, num_samples=num_samples, seed=seed, nh=nh, ng=ng)
        tr = pc.transition
        order.append(tr["order"])
        if tr["P_c"] is not None:
            out["P_c"][k] = tr["P_c"]
        if tr["spinodals"]:
            out["lo"][k], out["hi"][k] = tr["spinodals"]
        out["cross"][k] = _crossover(pc)
    return PhaseDiagram(attention, name, vals, out["P_c"], out["lo"], out["hi"], order, out["cross"], P,
                        {"task": task.config(), "prior": prior.config(), "noise_fit": bool(noise_fit),
                         "num_samples": num_samples, "seed": seed})


def _linear_mode_u(task, prior, P):
    """Mode of the reduced density of the cosine (u* = c*^2) by bounded 1-D minimisation."""
    from scipy.optimize import minimize_scalar

    D, Tq = _linear_dims(task)
    beta, eps, _ = _scales(task, prior, np.array([P]))
    f = jax.jit(lambda c: -_linear_log_density_c(jnp.atleast_1d(c), beta[0], eps[0], float(prior.sigma_A2), D, Tq,
                                                   task.T, task.d_out, 0.0)[0])
    grid = np.linspace(0, 0.999, 400)
    vals = np.asarray(-_linear_log_density_c(
        jnp.asarray(grid), beta[0], eps[0], float(prior.sigma_A2), D, Tq, task.T, task.d_out, 0.0))
    j = int(np.argmin(vals))
    lo, hi = grid[max(j - 1, 0)], grid[min(j + 1, len(grid) - 1)]
    if j == 0:
        return 0.0 if vals[0] <= vals[1] else float(minimize_scalar(lambda c: float(f(c)), bounds=(0, hi), method="bounded",
                                                                    options={"xatol": 1e-12}).x) ** 2
    c = minimize_scalar(lambda c: float(f(c)), bounds=(lo, hi), method="bounded", options={"xatol": 1e-12}).x
    return float(c) ** 2


def critical_exponent(task, prior, *, rel_range=(1e-3, 3e-2), num: int = 8) -> dict:
    """Exponent of the linear-attention onset: fit u*(P) = A (P - P_c)^gamma just above the exact P_c.

    Returns {"P_c", "exponent", "amplitude", "P", "u"}; mean-field theory predicts exponent 1.
    """
    covered(task, "linear")
    prior = _check_prior(prior)
    Pc = _linear_critical_P(task, prior, 0.0)
    P = Pc * (1 + np.geomspace(*rel_range, num))
    u = np.array([_linear_mode_u(task, prior, p) for p in P])
    good = u > 0
    if good.sum() < 2:
        return {"P_c": Pc, "exponent": float("nan"), "amplitude": float("nan"), "P": P, "u": u}
    slope, icpt = np.polyfit(np.log(P[good] - Pc), np.log(u[good]), 1)
    return {"P_c": Pc, "exponent": float(slope), "amplitude": float(np.exp(icpt)), "P": P, "u": u}


def finite_size_scaling(task, prior, attention: Attention, P_values, T_values, **numerics) -> dict:
    """How the transition sharpens with T. Per T (arrays over T_values):

    - "P_c", "order", "crossover" (as in ``phase_diagram``);
    - "jump": softmax, the jump of m between the branches at the binodal (0 for a crossover);
    - "window": softmax, relative width of the coexistence window (P_high - P_low) / P_c;
    - "width": the width of the rise of the posterior mean in log P: 1 / max d<x>/dlog P (x = m or u);
    - "onset_slope": linear, du*/dP * P_c just above P_c from ``critical_exponent`` (amplitude * P_c);
    - "exponent": linear, the fitted onset exponent.
    """
    covered(task, attention)
    P = _check_grid("P_values", P_values)
    Ts = _check_grid("T_values", T_values, integer=True).astype(int)
    keys = ("P_c", "crossover", "jump", "window", "width", "onset_slope", "exponent")
    out = {k: np.full(len(Ts), np.nan) for k in keys}
    order = []
    for k, T in enumerate(Ts):
        t = task.replace(T=int(T))
        pc = phase_curve(t, prior, attention, P, **numerics)
        tr = pc.transition
        order.append(tr["order"])
        x = pc.mean["m" if attention == "softmax" else "u"]
        if len(P) >= 3:
            out["width"][k] = 1.0 / np.nanmax(np.gradient(x, np.log(P)))
        out["crossover"][k] = _crossover(pc)
        if tr["P_c"] is not None:
            out["P_c"][k] = tr["P_c"]
        if attention == "softmax":
            out["jump"][k] = 0.0
            if tr["order"] == "first" and tr["P_c"] is not None:
                ms = [np.interp(tr["P_c"], b["P"], b["m"]) for b in pc.branches if b["P"][0] <= tr["P_c"] <= b["P"][-1]]
                out["jump"][k] = max(ms) - min(ms) if len(ms) >= 2 else np.nan
                out["window"][k] = (tr["spinodals"][1] - tr["spinodals"][0]) / tr["P_c"]
        else:
            ce = critical_exponent(t, prior)
            out["exponent"][k] = ce["exponent"]
            out["onset_slope"][k] = ce["amplitude"] * ce["P_c"] if np.isfinite(ce["exponent"]) else np.nan
            if not np.isfinite(out["P_c"][k]):
                out["P_c"][k] = ce["P_c"]
    out["order"] = order
    out["T"] = Ts
    return out
