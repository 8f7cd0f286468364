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
from .attention import ATTENTIONS, ORDER_PARAMETER
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
    detC: np.ndarray = None  # (Nh, Ng): det Cov(a, b) of the tilted row = Jacobian of (h, g) -> (m, q)


@functools.lru_cache(maxsize=16)
def _std_draws(seed: int, T: int, num_samples: int):
    """Standard-normal prior draws of the T-1 non-source logits, (num_samples, T-1). Scaled by sigma_A where
    used, so one set of draws serves every sigma_A2 (the same numbers as drawing N(0, sigma_A2) directly)."""
    return jax.random.normal(jax.random.key(seed), (num_samples, T - 1), dtype=jnp.float64)


def _padded_draws(seed, T, num_samples, width):
    """_std_draws padded with -inf columns to `width` (exp(-inf) = 0 adds nothing to S1, S2)."""
    z = _std_draws(seed, T, num_samples)
    if width > T - 1:
        z = jnp.pad(z, ((0, 0), (0, width - (T - 1))), constant_values=-jnp.inf)
    return z


def _row_moments(z0, Tm1, sigma_A2, c_min, x_max_extra, nl, nc, ny):
    """log M(y, c) = log E[phi(y + l1) exp(c r)], R = E[r | y, c], R2 = E[r^2 | y, c] on a (y, c) grid.

    z0: (K, W) standard-normal draws (-inf padded beyond the Tm1 = T-1 non-source logits); l1 = log S1,
    r = S2 / S1^2 for the T-1 non-source logits, y = x - l1 with x the source logit; the row statistics are
    a = sigmoid(y), b = a^2 + (1 - a)^2 r.
    """
    num_samples = z0.shape[0]
    sA = jnp.sqrt(sigma_A2)
    z = z0 * sA
    l1 = logsumexp(z, axis=1)
    r = jnp.exp(logsumexp(2 * z, axis=1) - 2 * l1)
    r_ref = 1.0 / Tm1
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


def _interp_c(g, y, s, logM, R, R2, ci=None):
    """The (y, c) moments at c = g (1 - a(y))^2, linear in log(1 - c): (lm, rr, rr2), each shaped like y.
    ci: index of the configuration when logM, R, R2 carry a leading configuration axis (y, s already picked)."""
    one_a = jax.nn.sigmoid(-y)
    c = g * one_a**2
    ds = s[1] - s[0]
    pos = jnp.log1p(-c) / ds
    i0 = jnp.clip(jnp.floor(pos).astype(jnp.int32), 0, s.shape[0] - 2)
    f = pos - i0
    rows = jnp.arange(y.shape[0])

    def interp(A):
        if ci is None:
            return (1 - f) * A[rows, i0] + f * A[rows, i0 + 1]
        # one flat gather: indexing A[ci, rows, i0] under vmap would copy A[ci] per batch element
        flat = (ci * A.shape[1] + rows) * A.shape[2] + i0
        Af = A.reshape(-1)
        return (1 - f) * Af[flat] + f * Af[flat + 1]

    return interp(logM), interp(R), interp(R2)


@jax.jit
def _tilt(h, g, y, s, logM, R, R2, ci=None):
    """One row tilted by exp(h a + g b): Lambda, m = <a>, q = <b> and Cov(a, b) = (Vaa, Vab, Vbb).
    With ci: y, s, logM, R, R2 carry a leading configuration axis and configuration ci is used."""
    if ci is not None:
        y = jax.lax.dynamic_index_in_dim(y, ci, keepdims=False)
        s = jax.lax.dynamic_index_in_dim(s, ci, keepdims=False)
    a = jax.nn.sigmoid(y)
    one_a = jax.nn.sigmoid(-y)
    lm, rr, rr2 = _interp_c(g, y, s, logM, R, R2, ci)
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


def _table_from_moments(h, g, mom):
    """Lambda, m, q and det Cov on the whole (h, g) grid, as the same sums over y as ``_tilt`` but arranged as
    matrix products: sum_y exp(h a_y) exp(B_y(g)) with B = g a^2 + log M(y, g (1-a)^2). Each factor is shifted
    by its own maximum; the product then lies within exp(-|h|) of the largest term, far above underflow for
    the |h| of the dual grid (checked: NaN entries are recomputed by ``_tilt``)."""
    y, s, logM, R, R2 = mom
    a = jax.nn.sigmoid(y)
    one_a = jax.nn.sigmoid(-y)
    lm, rr, rr2 = jax.vmap(lambda gg: _interp_c(gg, y, s, logM, R, R2))(g)  # (Ng, ny)
    B = g[:, None] * a[None, :] ** 2 + lm
    sb = jnp.max(B, axis=1)
    F = jnp.exp(B - sb[:, None])  # (Ng, ny)
    b = a**2 + one_a**2 * rr
    b2 = a**4 + 2 * a**2 * one_a**2 * rr + one_a**4 * rr2
    sh = jnp.where(h > 0, h * jnp.max(a), h * jnp.min(a))
    E = jnp.exp(h[:, None] * a[None, :] - sh[:, None])  # (Nh, ny)
    S0 = E @ F.T
    mean = lambda V: (E @ (F * V).T) / S0  # noqa: E731
    m, q = mean(jnp.broadcast_to(a, F.shape)), mean(b)
    Vaa = mean(jnp.broadcast_to(a**2, F.shape)) - m**2
    Vab = mean(a * b) - m * q
    Vbb = mean(b2) - q**2
    Lam = jnp.log(S0) + sh[:, None] + sb[None, :]
    return Lam, m, q, Vaa * Vbb - Vab**2


def _grids(T, d, beta_max, nh, ng):
    h_max = 6.0 * beta_max + 4.0 * d**2 / T + 10.0
    h = np.linspace(-0.1 * h_max, h_max, nh)
    g_min = -(1.05 * beta_max * T + d**2 / 2.0 + 10.0)
    g = -np.expm1(np.linspace(np.log1p(-g_min), 0.0, ng))  # ascending, from g_min to 0
    return h, g


@functools.partial(jax.jit, static_argnames=("nl", "nc", "ny"))
def _build_tables(z0, zi, Tm1, sigma_A2, h, g, nl, nc, ny):
    """Tables for C configurations, one after another (lax.map bounds the memory). z0: (Cz, K, W) draws;
    zi, Tm1, sigma_A2: (C,); h: (C, Nh), g: (C, Ng). Returns (Lam, m, q, detC) each (C, Nh, Ng) and the
    moments (y, s, logM, R, R2) with a leading C axis."""

    def one(args):
        k, tm1, sa2, hh, gg = args
        c_min = jnp.min(gg) * 1.0001 - 1e-9
        x_extra = jnp.log1p(jnp.max(jnp.abs(hh)) * sa2)
        mom = _row_moments(z0[k], tm1, sa2, c_min, x_extra, nl, nc, ny)
        Lam, m, q, detC = _table_from_moments(hh, gg, mom)
        return (Lam, m, q, detC), mom

    return jax.lax.map(one, (zi, Tm1, sigma_A2, h, g))


def _fix_table(h, g, tab, mom):
    """Recompute by ``_tilt`` any entry the matrix-product form lost to underflow (not expected)."""
    Lam, m, q, detC = (np.array(a) for a in tab)
    bad = ~(np.isfinite(Lam) & np.isfinite(m) & np.isfinite(q) & np.isfinite(detC))
    for i, j in zip(*np.nonzero(bad)):
        L_, m_, q_, Vaa, Vab, Vbb = (float(v) for v in _tilt(h[i], g[j], *mom))
        Lam[i, j], m[i, j], q[i, j], detC[i, j] = L_, m_, q_, Vaa * Vbb - Vab**2
    return Lam, m, q, detC


def _softmax_tables(Ts, sigma_A2s, d, beta_max, nh, ng, num_samples, seed, nl, nc, ny):
    """Tables for configurations (T_k, sigma_A2_k), built in one compiled call. Returns a list of _Table."""
    Ts = [int(t) for t in Ts]
    uT = sorted(set(Ts))
    W = max(uT) - 1
    z0 = jnp.stack([_padded_draws(seed, T, num_samples, W) for T in uT])
    zi = np.array([uT.index(T) for T in Ts], np.int32)
    grids = [_grids(T, d, beta_max, nh, ng) for T in Ts]
    h = np.stack([gr[0] for gr in grids])
    g = np.stack([gr[1] for gr in grids])
    (Lam, m, q, detC), mom = _build_tables(z0, jnp.asarray(zi), jnp.asarray(np.array(Ts, float) - 1),
                                           jnp.asarray(np.asarray(sigma_A2s, float)), jnp.asarray(h), jnp.asarray(g),
                                           nl, nc, ny)
    Lam, m, q, detC = (np.asarray(a) for a in (Lam, m, q, detC))
    out = []
    for k in range(len(Ts)):
        mk = tuple(a[k] for a in mom)
        tk = (Lam[k], m[k], q[k], detC[k])
        if not all(np.all(np.isfinite(a)) for a in tk):
            tk = _fix_table(h[k], g[k], tk, mk)
        out.append(_Table(h[k], g[k], tk[0], tk[1], tk[2], mk, tk[3]))
    return out


@functools.lru_cache(maxsize=64)
def _cached_table(T, sigma_A2, d, beta_max, nh, ng, num_samples, seed, nl, nc, ny):
    return _softmax_tables([T], [sigma_A2], d, beta_max, nh, ng, num_samples, seed, nl, nc, ny)[0]


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


def _newton_step(h, g, be, eps, mom, d, Tq, ci):
    """One damped Newton step on theta + grad E(grad Lambda(theta)) = 0, theta = (h, g); returns the new
    (h, g) and the relative move."""
    Lam, m, q, Vaa, Vab, Vbb = _tilt(h, g, *mom, ci)
    dm, dq = _energy_grads(m, q, be, eps, d, Tq, 0.0)
    r = jnp.array([h + dm, g + dq])
    Hmm, Hmq, Hqq = _hess_E(m, q, be, eps, d, Tq)
    # J = I + H_E Cov
    J = jnp.eye(2) + jnp.array([[Hmm, Hmq], [Hmq, Hqq]]) @ jnp.array([[Vaa, Vab], [Vab, Vbb]])
    dx = jnp.linalg.solve(J, -r)
    scale = jnp.minimum(1.0, 2.0 / (jnp.abs(dx[0]) + 1e-300)) * jnp.minimum(1.0, (0.2 * jnp.abs(g) + 2.0) / (jnp.abs(dx[1]) + 1e-300))
    scale = jnp.minimum(scale, 1.0)
    h1, g1 = h + scale * dx[0], jnp.minimum(g + scale * dx[1], -1e-6)
    moved = jnp.abs(h1 - h) / (1.0 + jnp.abs(h)) + jnp.abs(g1 - g) / (1.0 + jnp.abs(g))
    return h1, g1, moved


@functools.partial(jax.jit, static_argnames=("d",))
def _newton_steps(h, g, ci, be, eps, Tq, mom, d, iters):
    """`iters` Newton steps for a flat batch of starts (each with its configuration index ci into the stacked
    moments `mom`); a start stops moving once a step moves it by less than 1e-9 (relative; Newton converges quadratically, so the
    point is then exact to ~1e-15). Returns h, g
    and whether it has stopped."""

    def one(h, g, c, be, ep, tq):
        def body(_, carry):
            h, g, done = carry
            h1, g1, moved = _newton_step(h, g, be, ep, mom, d, tq, c)
            return jnp.where(done, h, h1), jnp.where(done, g, g1), done | (moved < 1e-9)

        return jax.lax.fori_loop(0, iters, body, (h, g, jnp.zeros((), bool)))

    return jax.vmap(one)(h, g, ci, be, eps, Tq)


@functools.partial(jax.jit, static_argnames=("d",))
def _newton_final(h, g, ci, be, eps, Tq, mom, d):
    """At the Newton end points: m, q, Phi, converged, is_min, the Laplace log weight
    -T_q Phi - 0.5 log det(I + H_E Cov)."""

    def one(h, g, c, be, ep, tq):
        Lam, m, q, Vaa, Vab, Vbb = _tilt(h, g, *mom, c)
        dm, dq = _energy_grads(m, q, be, ep, d, tq, 0.0)
        r = jnp.array([h + dm, g + dq])
        Phi = action(m, q, h * m + g * q - Lam, beta=be, eps=ep, d=d, T_q=tq)
        Hmm, Hmq, Hqq = _hess_E(m, q, be, ep, d, tq)
        detC = Vaa * Vbb - Vab**2
        # Hessian of Phi in (m, q): H_E + Cov^{-1}
        K11, K12, K22 = Hmm + Vbb / detC, Hmq - Vab / detC, Hqq + Vaa / detC
        is_min = (K11 > 0) & (K11 * K22 - K12**2 > 0)
        J = jnp.eye(2) + jnp.array([[Hmm, Hmq], [Hmq, Hqq]]) @ jnp.array([[Vaa, Vab], [Vab, Vbb]])
        logw = -tq * Phi - 0.5 * jnp.log(jnp.abs(jnp.linalg.det(J)))
        conv = jnp.max(jnp.abs(r) / (1.0 + jnp.abs(jnp.array([h, g])))) < 1e-7
        return m, q, Phi, conv, is_min, logw

    return jax.vmap(one)(h, g, ci, be, eps, Tq)


def _bucket(n):
    """Padded batch size: 64, or the next multiple of a quarter of the power of 2 below n (at most 25% padding,
    four compilations per doubling)."""
    if n <= 64:
        return 64
    q = 1 << (int(np.floor(np.log2(n))) - 2)
    return int(-(-n // q) * q)


def _newton_batch(h0, g0, ci, be, eps, Tq, mom, d, rounds=(6, 6, 8, 20)):
    """Newton from a flat list of starts, in rounds of fixed steps; only the starts still moving go on to the
    next round (at most sum(rounds) = 40 steps each). Returns (m, q, Phi, conv, is_min, logw, h, g)."""
    n = len(h0)
    h, g = np.array(h0, float), np.array(g0, float)
    ci, be, eps, Tq = (np.asarray(a) for a in (ci, be, eps, Tq))

    def padded(idx):
        B = _bucket(len(idx))
        j = np.concatenate([idx, np.full(B - len(idx), idx[0] if len(idx) else 0)])
        return j

    active = np.arange(n)
    for it in rounds:
        if active.size == 0:
            break
        j = padded(active)
        hh, gg, done = _newton_steps(jnp.asarray(h[j]), jnp.asarray(g[j]), jnp.asarray(ci[j]), jnp.asarray(be[j]),
                                     jnp.asarray(eps[j]), jnp.asarray(Tq[j]), mom, d, it)
        k = active.size
        h[active], g[active] = np.asarray(hh)[:k], np.asarray(gg)[:k]
        active = active[~np.asarray(done)[:k]]
    if n == 0:
        return [np.zeros(0)] * 3 + [np.zeros(0, bool)] * 2 + [np.zeros(0)] * 3
    j = padded(np.arange(n))
    out = _newton_final(jnp.asarray(h[j]), jnp.asarray(g[j]), jnp.asarray(ci[j]), jnp.asarray(be[j]),
                        jnp.asarray(eps[j]), jnp.asarray(Tq[j]), mom, d)
    return [np.asarray(a)[:n] for a in out] + [h, g]


def _dual_weights(h, g, detC):
    """log of the (h, g) cell areas times det Cov^{1/2}: integrating the saddle-point (Daniels) density
    p(m, q) ~ det Cov^{-1/2} exp(-T_q Phi) over (m, q) = grad Lambda(h, g) picks up the Jacobian det Cov."""
    return (jnp.log(jnp.gradient(h))[:, None] + jnp.log(jnp.gradient(g))[None, :]
            + 0.5 * jnp.log(jnp.maximum(detC, 1e-300)))


@functools.partial(jax.jit, static_argnames=("d", "kmax"))
def _softmax_scan(h, g, Lam, m, q, detC, beta, eps, Tq, d, kmax=4):
    """For each configuration (leading axis C) and each P (beta, eps: (C, NP)): the kmax lowest discrete local
    minima of Phi on the dual grid (indices and validity), and the posterior means of (m, q, u) from the
    saddle-point density integrated over the dual grid, with the share of it on the grid's border. Tq: (C,)."""

    def config(args):
        h, g, Lam, m, q, detC, beta, eps, Tq = args
        H, G = h[:, None], g[None, :]
        ent = H * m + G * q - Lam
        logdA = _dual_weights(h, g, detC)
        u = m**2 / q
        nh, ng = m.shape
        border = jnp.zeros((nh, ng), bool).at[0, :].set(True).at[-1, :].set(True).at[:, 0].set(True)

        def one(be, ep):
            Phi = action(m, q, ent, beta=be, eps=ep, d=d, T_q=Tq)
            # candidates: the minimum over g of each h row and the minimum over h of each g column (one pass
            # over the grid each), kept where it is a discrete local minimum of Phi in (h, g) (<= its 8
            # neighbours); then the kmax lowest candidates that lie in distinct wells (> 0.01 apart in m), so
            # that ripples of one deep well cannot crowd out a shallow metastable one
            jrow = jnp.argmin(Phi, axis=1)
            icol = jnp.argmin(Phi, axis=0)
            ci_ = jnp.concatenate([jnp.arange(nh), icol])
            cj_ = jnp.concatenate([jrow, jnp.arange(ng)])
            Pp = jnp.pad(Phi, 1, constant_values=jnp.inf)
            sc_ = Phi[ci_, cj_]
            is_min = jnp.ones(sc_.shape, bool)
            for di in (-1, 0, 1):
                for dj in (-1, 0, 1):
                    if di == 0 and dj == 0:
                        continue
                    is_min &= sc_ <= Pp[ci_ + 1 + di, cj_ + 1 + dj]
            sc_ = jnp.where(is_min, sc_, jnp.inf)
            mc_ = m[ci_, cj_]
            ii, jj, sc = [], [], []
            for _ in range(kmax):
                k = jnp.argmin(sc_)
                ii.append(ci_[k])
                jj.append(cj_[k])
                sc.append(sc_[k])
                sc_ = jnp.where(jnp.abs(mc_ - mc_[k]) < 0.01, jnp.inf, sc_)
            ii, jj, sc = jnp.stack(ii), jnp.stack(jj), jnp.stack(sc)
            valid = jnp.isfinite(sc)
            # posterior means: the Daniels density over (m, q) integrated on the dual grid
            lw = -Tq * Phi + logdA
            w = jnp.exp(lw - jnp.max(lw))
            Z = jnp.sum(w)
            means = jnp.stack([jnp.sum(w * m), jnp.sum(w * q), jnp.sum(w * u)]) / Z
            edge_mass = jnp.sum(jnp.where(border, w, 0.0)) / Z
            return ii, jj, valid, means, edge_mass

        # one P at a time: the (Nh, Ng) temporaries stay in cache (vmap over P would stream them through memory)
        return jax.lax.map(lambda be_ep: one(*be_ep), (beta, eps))

    return jax.lax.map(config, (h, g, Lam, m, q, detC, beta, eps, Tq))


def _collect(res, ok):
    """Per configuration and P: the distinct minima (m, q, Phi, logw, h, g), sorted by m."""
    C, NP = ok.shape[:2]
    out = []
    for c in range(C):
        rows = []
        for i in range(NP):
            mins = []
            for k in np.flatnonzero(ok[c, i]):
                if any(abs(res[0][c, i, k] - mm[0]) < 1e-4 for mm in mins):
                    continue
                mins.append(tuple(float(a[c, i, k]) for a in (res[0], res[1], res[2], res[5], res[6], res[7])))
            rows.append(sorted(mins))
        out.append(rows)
    return out


def _newton_grid(h0, g0, live, beta, eps, Tq, mom, d):
    """Newton from starts on a (C, NP, K) array (only where live); results as (C, NP, K) arrays."""
    C, NP, K = h0.shape
    c, i, k = np.nonzero(live)
    res = _newton_batch(h0[c, i, k], g0[c, i, k], c, beta[c, i], eps[c, i], np.asarray(Tq, float)[c], mom, d)
    out = []
    for r, fill in zip(res, (np.nan, np.nan, np.nan, False, False, np.nan, np.nan, np.nan)):
        a = np.full((C, NP, K), fill, dtype=bool if isinstance(fill, bool) else float)
        a[c, i, k] = r
        out.append(a)
    return out


def _softmax_minima(tabs, beta, eps, Tq, d, passes=4):
    """For each table (configuration) and P: the distinct local minima (m, q, Phi, logw), an edge flag per
    configuration, and the posterior means (C, NP, 3) with the density mass on the grid border (C, NP).

    Candidates: the discrete local minima of Phi on the dual grid, then continuation in P (Newton started
    from the minima at the neighbouring P), which finds shallow metastable minima near their spinodals.
    beta, eps: (C, NP); Tq: (C,).
    """
    stack = lambda f: np.stack([f(t) for t in tabs])  # noqa: E731
    H, G = stack(lambda t: t.h), stack(lambda t: t.g)
    mom = tuple(jnp.stack([t.mom[k] for t in tabs]) for k in range(5))
    beta, eps, Tq = np.asarray(beta, float), np.asarray(eps, float), np.asarray(Tq, float)
    ii, jj, valid, means, edge_mass = (np.asarray(a) for a in _softmax_scan(
        jnp.asarray(H), jnp.asarray(G), *(jnp.asarray(stack(lambda t, k=k: getattr(t, k))) for k in ("Lam", "m", "q", "detC")),
        jnp.asarray(beta), jnp.asarray(eps), jnp.asarray(Tq), d))
    C, NP, K0 = ii.shape
    cidx = np.arange(C)[:, None, None]
    # candidates in order of Phi; one Newton start per group of candidates within 0.01 in m (the grid's
    # ripple makes several discrete minima in one well; they converge to the same minimum)
    mgrid = stack(lambda t: t.m)[cidx, ii, jj]
    live = valid.copy()
    for k in range(1, K0):
        for k2 in range(k):
            live[:, :, k] &= ~(valid[:, :, k2] & live[:, :, k2] & (np.abs(mgrid[:, :, k] - mgrid[:, :, k2]) < 0.01))
    res = _newton_grid(H[cidx, ii], G[cidx, jj], live, beta, eps, Tq, mom, d)
    valid = live
    ok = valid & res[3] & res[4]
    nh = H.shape[1]
    edge_hit = np.any(valid & ((ii == 0) | (ii == nh - 1) | (jj == 0)), axis=(1, 2))
    mins = _collect(res, ok)
    for _ in range(passes if NP > 1 else 0):
        K = max(1, max(len(x) for xs in mins for x in xs))
        h0 = np.zeros((C, NP, 2 * K))
        g0 = np.full((C, NP, 2 * K), -1.0)
        have = np.zeros((C, NP, 2 * K), bool)
        for c in range(C):
            for i in range(NP):
                for side, j in ((0, i - 1), (1, i + 1)):
                    if 0 <= j < NP:
                        for k, t in enumerate(mins[c][j]):
                            # only a branch not already found at this P (within 0.02 in m) needs a start
                            if any(abs(t[0] - u[0]) < 0.02 for u in mins[c][i]):
                                continue
                            h0[c, i, side * K + k], g0[c, i, side * K + k], have[c, i, side * K + k] = t[4], t[5], True
        if not have.any():
            break
        r2 = _newton_grid(h0, g0, have, beta, eps, Tq, mom, d)
        ok2 = have & r2[3] & r2[4]
        res = [np.concatenate([a, b], axis=2) for a, b in zip(res, r2)]
        ok = np.concatenate([ok, ok2], axis=2)
        new = _collect(res, ok)
        done = all(len(a) == len(b) for xa, xb in zip(new, mins) for a, b in zip(xa, xb))
        mins = new
        if done:
            break
    mins = [[[t[:4] for t in x] for x in xs] for xs in mins]
    return mins, edge_hit, means, edge_mass


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


@functools.partial(jax.jit, static_argnames=("D", "Tq", "T", "d", "nu", "nt"))
def _linear_log_density_hermite(c, beta, eps, sigma_A2, D, Tq, T, d, nf, nu=65, nt=400):
    """``_linear_log_density_c`` for a batch of P (beta, eps, nf: (NP,)) on a fixed cosine grid c: (Nc,).

    The radius integral r(u) = log Int dt p(t) exp(-E(u, t)) is a log-sum-exp of functions linear in u = c^2,
    so it is smooth and convex in u: it is computed exactly on nu nodes in u, with its exact derivative
    dr/du = <T_q beta q/(q+eps)>, and interpolated by cubic Hermite polynomials instead of being summed at
    every c (nt x Nc -> nt x nu work per P)."""
    lt = jnp.linspace(jnp.log(D) - 12.0 / jnp.sqrt(D) - 4.0, jnp.log(D) + 12.0 / jnp.sqrt(D) + 1.0, nt)
    t = jnp.exp(lt)
    log_pt = 0.5 * D * lt - 0.5 * t
    qv = sigma_A2 * t / (T * Tq)
    ug = jnp.linspace(0.0, 1.0, nu)
    hu = ug[1] - ug[0]
    u = c**2
    k = jnp.clip(jnp.floor(u / hu).astype(jnp.int32), 0, nu - 2)
    s = u / hu - k

    def one(be, ep, f):
        w = qv / (qv + ep)
        A = log_pt - Tq * (be - f) - 0.5 * d**2 * jnp.log1p(qv / ep)
        B = Tq * (be - f) * w
        X = A[None, :] + ug[:, None] * B[None, :]  # (nu, nt)
        r = logsumexp(X, axis=1)
        dr = jnp.sum(jnp.exp(X - r[:, None]) * B[None, :], axis=1)
        r0, r1, d0, d1 = r[k], r[k + 1], dr[k] * hu, dr[k + 1] * hu
        h00, h10, h01, h11 = 2 * s**3 - 3 * s**2 + 1, s**3 - 2 * s**2 + s, -2 * s**3 + 3 * s**2, s**3 - s**2
        return 0.5 * (D - 3) * jnp.log1p(-u) + h00 * r0 + h10 * d0 + h01 * r1 + h11 * d1

    return jax.vmap(one)(beta, eps, nf)


def _linear_curves(task, prior, P_values, nf_flag, nc=2001):
    D, Tq = _linear_dims(task)
    beta, eps, _ = _scales(task, prior, P_values)
    nf = nf_flag * task.d_out**2 / (2.0 * prior.sigma2 * Tq) * np.ones_like(beta)
    # the cosine grid: c in [0, 1), dense near 0 and resolving the Beta law width 1/sqrt(D)
    c = jnp.asarray(np.sin(np.linspace(0.0, np.pi / 2, nc))[:-1])
    logp = np.asarray(_linear_log_density_hermite(c, jnp.asarray(beta), jnp.asarray(eps), float(prior.sigma_A2), D,
                                                  Tq, task.T, task.d_out, jnp.asarray(nf)))
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


def _softmax_curve(P, minima, edge_hit, means, edge_mass, Tq):
    """Assemble a PhaseCurve from the minima (per P) and the posterior means (NP, 3) of one configuration."""
    if edge_hit:
        warnings.warn("theory: a minimum of the action lies on the edge of the dual (h, g) grid", stacklevel=4)
    if np.any(edge_mass > 2e-2):
        warnings.warn("theory: the posterior density reaches the edge of the dual (h, g) grid; the means may be "
                      "biased", stacklevel=4)
    branches = _track_branches(P, [[t[:3] for t in mins] for mins in minima], tol=0.05)
    for b in branches:
        b["free_energy"] = b["free_energy"] * Tq
    stable = {k: np.full(len(P), np.nan) for k in ("m", "q", "u", "free_energy")}
    for i, mins in enumerate(minima):
        if not mins:
            continue
        m_, q_, F_, _ = min(mins, key=lambda t: t[2])
        stable["m"][i], stable["q"][i], stable["u"][i], stable["free_energy"][i] = m_, q_, m_ * m_ / q_, F_ * Tq
    # posterior means: the saddle-point density integrated over the whole dual grid (not only the Laplace
    # mixture of the minima: the skewed tail of the low well towards the copy branch matters below the jump)
    mean = {"m": means[:, 0].copy(), "q": means[:, 1].copy(), "u": means[:, 2].copy()}
    trans = _first_order(P, branches)
    if trans is None:
        trans = {"order": "crossover", "P_c": None, "spinodals": []}
    return PhaseCurve("softmax", np.asarray(P), branches, stable, mean, trans)


def _softmax_phase_curves(tasks, priors, P, nf_flag, numerics):
    """Phase curves of several (task, prior) configurations over one P grid, in a few compiled calls."""
    num_samples, seed = numerics.get("num_samples", 20000), numerics.get("seed", 0)
    nh, ng = numerics.get("nh", 241), numerics.get("ng", 121)
    betas, epss, Tqs = [], [], []
    for task, prior in zip(tasks, priors):
        beta, eps, Tq = _scales(task, prior, P)
        # the noise-fit term only shifts beta: beta_eff = beta - d^2 / (2 sigma2 T_q)
        betas.append(beta - nf_flag * task.d_out**2 / (2.0 * prior.sigma2 * Tq))
        epss.append(eps)
        Tqs.append(Tq)
    beta, eps = np.stack(betas), np.stack(epss)
    d = tasks[0].d_out
    beta_max = float(beta.max())
    if len(tasks) == 1:
        tabs = [_cached_table(tasks[0].T, float(priors[0].sigma_A2), d, beta_max, nh, ng, num_samples, seed, 200, 96, 800)]
    else:
        tabs = _softmax_tables([t.T for t in tasks], [p.sigma_A2 for p in priors], d, beta_max, nh, ng, num_samples,
                               seed, 200, 96, 800)
    minima, edge_hit, means, edge_mass = _softmax_minima(tabs, beta, eps, Tqs, d)
    return [_softmax_curve(P, minima[c], edge_hit[c], means[c], edge_mass[c], Tqs[c]) for c in range(len(tasks))]


def _softmax_phase_curve(task, prior, P, nf_flag, numerics):
    return _softmax_phase_curves([task], [prior], P, nf_flag, numerics)[0]


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


def _linear_phase_curves(tasks, priors, P, nf_flag):
    return [_linear_phase_curve(t, p, P, nf_flag) for t, p in zip(tasks, priors)]


def _linear_phase_curve(task, prior, P, nf_flag):
    c, logp, mean_u, Tq, D = _linear_curves(task, prior, P, nf_flag)
    Pc = _linear_critical_P(task, prior, nf_flag)
    S = -logp  # total action in nats on the cosine grid
    beta, eps, _ = _scales(task, prior, P)
    # minimum in c per P, refined by a parabola through the grid minimum and its neighbours
    rows = np.arange(len(P))
    j = np.argmin(S, axis=1)
    inner = (j > 0) & (j < len(c) - 1)
    jm, jp = np.clip(j - 1, 0, len(c) - 1), np.clip(j + 1, 0, len(c) - 1)
    y0, y1, y2 = S[rows, jm], S[rows, j], S[rows, jp]
    den = y0 - 2 * y1 + y2
    dt = np.where(inner & (den > 0), 0.5 * (y0 - y2) / np.where(den > 0, den, 1.0), 0.0)
    cs = c[j] + dt * (c[jp] - c[jm]) / 2
    Fs = y1 - 0.25 * (y0 - y2) * dt
    us = cs**2
    # radius at the minimum: the conditional mean of q given c
    qs = _linear_q_given_c(task, prior, beta, eps, cs, D, Tq)
    # zero of the free energy: -log of the normalisation of the Beta law at c = 0 is not tracked;
    # free energies are reported relative to the c = 0 point of the same P
    F0 = S[:, 0]
    stable = {"m": np.sqrt(us * qs), "q": qs, "u": us, "free_energy": Fs - F0}
    branch = {"P": np.asarray(P, float), **{k: v.copy() for k, v in stable.items()}}
    qbar = _linear_q_given_c(task, prior, beta, eps, np.zeros(len(P)), D, Tq)
    mean = {"u": mean_u, "q": qbar, "m": np.sqrt(mean_u * qbar)}
    inside = P[0] <= Pc <= P[-1]
    trans = {"order": "second", "P_c": float(Pc) if inside else None, "spinodals": [], "P_c_exact": float(Pc)}
    return PhaseCurve("linear", np.asarray(P), [branch], stable, mean, trans)


def _linear_q_given_c(task, prior, beta, eps, c, D, Tq):
    """Conditional mean of q given the cosine c (beta, eps, c: scalars or arrays of one shape)."""
    lt = np.linspace(np.log(D) - 12 / np.sqrt(D) - 4, np.log(D) + 12 / np.sqrt(D) + 1, 400)
    t = np.exp(lt)
    q = prior.sigma_A2 * t / (task.T * Tq)
    beta, eps, c = (np.asarray(x, float)[..., None] for x in (beta, eps, c))
    E = Tq * beta * (1 - c**2 * q / (q + eps)) + 0.5 * task.d_out**2 * np.log1p(q / eps)
    lw = 0.5 * D * lt - 0.5 * t - E
    w = np.exp(lw - lw.max(axis=-1, keepdims=True))
    out = np.sum(w * q, axis=-1) / np.sum(w, axis=-1)
    return float(out) if out.ndim == 0 else out


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
    tasks = [task.replace(T=int(v)) if name == "T" else task for v in vals]
    priors = [prior if name == "T" else prior.replace(sigma_A2=float(v)) for v in vals]
    for t in tasks:
        covered(t, attention)
    num_samples = check_int("num_samples", num_samples, minimum=100)
    if attention == "softmax":
        # every value in a few compiled calls: tables, grid scans and Newton batched over the second axis
        curves = _softmax_phase_curves(tasks, priors, P, float(noise_fit),
                                       dict(num_samples=num_samples, seed=seed, nh=nh, ng=ng))
    else:
        curves = _linear_phase_curves(tasks, priors, P, float(noise_fit))
    for k, pc in enumerate(curves):
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
    - "exponent": linear, the fitted onset exponent;
    - "curves": {T: PhaseCurve} the phase curves these were read from.
    """
    covered(task, attention)
    P = _check_grid("P_values", P_values)
    Ts = _check_grid("T_values", T_values, integer=True).astype(int)
    keys = ("P_c", "crossover", "jump", "window", "width", "onset_slope", "exponent")
    out = {k: np.full(len(Ts), np.nan) for k in keys}
    order, curves = [], {}
    for k, T in enumerate(Ts):
        t = task.replace(T=int(T))
        pc = curves[int(T)] = phase_curve(t, prior, attention, P, **numerics)
        tr = pc.transition
        order.append(tr["order"])
        x = pc.mean[ORDER_PARAMETER[attention]]
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
    out["curves"] = curves
    return out
