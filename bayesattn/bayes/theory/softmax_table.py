"""Softmax: the cumulant generating function of one row, tabulated in its dual variables (h, g)."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import logsumexp

from ..._validate import check_int, check_positive
from .common import check_prior, covered

# ----------------------------------------------------------------------------------------------------
# softmax: the cumulant generating function of one row, tabulated in its dual variables
# ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SoftmaxTable:
    """Row moments on a (y, c) grid and Lambda(h, g) with its gradient (m, q) on an (h, g) grid."""

    h: np.ndarray
    g: np.ndarray
    Lam: np.ndarray  # (Nh, Ng)
    m: np.ndarray
    q: np.ndarray
    mom: tuple  # (y, s, logM, R, R2): what tilted_row needs for exact evaluation off the grid
    detC: np.ndarray = None  # (Nh, Ng): det Cov(a, b) of the tilted row = Jacobian of (h, g) -> (m, q)


@functools.lru_cache(maxsize=16)
def std_draws(seed: int, T: int, num_samples: int):
    """Standard-normal prior draws of the T-1 non-source logits, (num_samples, T-1). Scaled by sigma_A where
    used, so one set of draws serves every sigma_A2 (the same numbers as drawing N(0, sigma_A2) directly)."""
    return jax.random.normal(jax.random.key(seed), (num_samples, T - 1), dtype=jnp.float64)


def padded_draws(seed, T, num_samples, width):
    """std_draws padded with -inf columns to `width` (exp(-inf) = 0 adds nothing to S1, S2)."""
    z = std_draws(seed, T, num_samples)
    if width > T - 1:
        z = jnp.pad(z, ((0, 0), (0, width - (T - 1))), constant_values=-jnp.inf)
    return z


def row_bins(z0, sigma_A2, nl):
    """The non-source logits z = sigma_A z0 of each prior draw, l1 = log S1 and r = S2 / S1^2, and a cloud-in-cell
    histogram of l1 (second-order accurate) on nl nodes: (z, l1, r, lgrid, hist), hist(V) the per-node sum of
    the rows of V (K, ...) over the draws, divided by their number."""
    num_samples = z0.shape[0]
    z = z0 * jnp.sqrt(sigma_A2)
    l1 = logsumexp(z, axis=1)
    r = jnp.exp(logsumexp(2 * z, axis=1) - 2 * l1)
    lo, hi = jnp.min(l1) - 0.05, jnp.max(l1) + 0.05
    dl = (hi - lo) / (nl - 1)
    lgrid = lo + dl * jnp.arange(nl)
    pos = (l1 - lo) / dl
    i0 = jnp.clip(jnp.floor(pos).astype(jnp.int32), 0, nl - 2)
    f = pos - i0

    def hist(V):
        f_ = f.reshape(f.shape + (1,) * (V.ndim - 1))
        return (jax.ops.segment_sum((1 - f_) * V, i0, nl) + jax.ops.segment_sum(f_ * V, i0 + 1, nl)) / num_samples

    return z, l1, r, lgrid, hist


def row_moments(z0, Tm1, sigma_A2, c_min, x_max_extra, nl, nc, ny):
    """log M(y, c) = log E[phi(y + l1) exp(c r)], R = E[r | y, c], R2 = E[r^2 | y, c] on a (y, c) grid.

    z0: (K, W) standard-normal draws (-inf padded beyond the Tm1 = T-1 non-source logits); l1 = log S1,
    r = S2 / S1^2 for the T-1 non-source logits, y = x - l1 with x the source logit; the row statistics are
    a = sigmoid(y), b = a^2 + (1 - a)^2 r.
    """
    sA = jnp.sqrt(sigma_A2)
    _, l1, r, lgrid, hist = row_bins(z0, sigma_A2, nl)
    lo, hi = lgrid[0], lgrid[-1]
    r_ref = 1.0 / Tm1
    s = jnp.linspace(0.0, jnp.log1p(-c_min), nc)
    c = -jnp.expm1(s)  # c from 0 down to c_min
    E = jnp.exp(c[None, :] * (r[:, None] - r_ref))  # (K, nc)
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


def interp_c(g, y, s, logM, R, R2, ci=None):
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
def tilted_row(h, g, y, s, logM, R, R2, ci=None):
    """One row tilted by exp(h a + g b): Lambda, m = <a>, q = <b> and Cov(a, b) = (Vaa, Vab, Vbb).
    With ci: y, s, logM, R, R2 carry a leading configuration axis and configuration ci is used."""
    if ci is not None:
        y = jax.lax.dynamic_index_in_dim(y, ci, keepdims=False)
        s = jax.lax.dynamic_index_in_dim(s, ci, keepdims=False)
    a = jax.nn.sigmoid(y)
    one_a = jax.nn.sigmoid(-y)
    lm, rr, rr2 = interp_c(g, y, s, logM, R, R2, ci)
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
    """Lambda, m, q and det Cov on the whole (h, g) grid (``table_parts`` with the covariance reduced to its
    determinant)."""
    Lam, m, q, Vaa, Vab, Vbb = table_parts(h, g, mom)
    return Lam, m, q, Vaa * Vbb - Vab**2


def table_parts(h, g, mom):
    """Lambda, m, q and Cov(a, b) = (Vaa, Vab, Vbb) on the whole (h, g) grid, as the same sums over y as ``tilted_row`` but arranged as
    matrix products: sum_y exp(h a_y) exp(B_y(g)) with B = g a^2 + log M(y, g (1-a)^2). Each factor is shifted
    by its own maximum, so the product can underflow where the two maxima sit at different y (large |h| and
    |g|, i.e. large beta): such entries come out NaN or non-physical and ``_fix_table`` recomputes them by
    ``tilted_row``."""
    y, s, logM, R, R2 = mom
    a = jax.nn.sigmoid(y)
    one_a = jax.nn.sigmoid(-y)
    lm, rr, rr2 = jax.vmap(lambda gg: interp_c(gg, y, s, logM, R, R2))(g)  # (Ng, ny)
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
    return Lam, m, q, Vaa, Vab, Vbb


def dual_grids(T, d, beta_max, nh, ng):
    """The dual grids (h: (nh,), g: (ng,), ascending, g <= 0) of a T-key row table wide enough for every
    beta <= beta_max (d: the Occam term's d)."""
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
        mom = row_moments(z0[k], tm1, sa2, c_min, x_extra, nl, nc, ny)
        Lam, m, q, detC = _table_from_moments(hh, gg, mom)
        return (Lam, m, q, detC), mom

    return jax.lax.map(one, (zi, Tm1, sigma_A2, h, g))


def unphysical(T, Lam, m, q, detC):
    """Entries no tilted softmax row over T keys can have: non-finite, m outside [0, 1], q below 1/T (the
    uniform row's sum of squares) or above 1, m^2 > q (Cauchy-Schwarz: a^2 <= b row by row), det Cov <= 0.
    These are what underflow in the matrix-product form leaves behind (seen at beta ~ 200 and more)."""
    fin = np.isfinite(Lam) & np.isfinite(m) & np.isfinite(q) & np.isfinite(detC)
    with np.errstate(invalid="ignore"):
        ok = (
            fin & (m >= 0) & (m <= 1) & (q >= (1 - 1e-9) / T) & (q <= 1 + 1e-9) & (m * m <= q * (1 + 1e-9)) & (detC > 0)
        )
    return ~ok


_tilt_many = jax.jit(jax.vmap(tilted_row, in_axes=(0, 0, None, None, None, None, None)))


def _fix_table(T, h, g, tab, mom):
    """Recompute by ``tilted_row`` (a log-sum-exp over the y nodes of each entry alone) the entries the
    matrix-product form lost to underflow; returns the table and how many entries were recomputed."""
    Lam, m, q, detC = (np.array(a) for a in tab)
    bad = unphysical(T, Lam, m, q, detC)
    i, j = np.nonzero(bad)
    if i.size:
        L_, m_, q_, Vaa, Vab, Vbb = (np.asarray(v) for v in _tilt_many(jnp.asarray(h[i]), jnp.asarray(g[j]), *mom))
        Lam[i, j], m[i, j], q[i, j], detC[i, j] = L_, m_, q_, Vaa * Vbb - Vab**2
    return (Lam, m, q, detC), int(i.size)


def softmax_tables(Ts, sigma_A2s, d, beta_max, nh, ng, num_samples, seed, nl, nc, ny):
    """Tables for configurations (T_k, sigma_A2_k), built in one compiled call. Returns a list of SoftmaxTable."""
    Ts = [int(t) for t in Ts]
    uT = sorted(set(Ts))
    W = max(uT) - 1
    z0 = jnp.stack([padded_draws(seed, T, num_samples, W) for T in uT])
    zi = np.array([uT.index(T) for T in Ts], np.int32)
    grids = [dual_grids(T, d, beta_max, nh, ng) for T in Ts]
    h = np.stack([gr[0] for gr in grids])
    g = np.stack([gr[1] for gr in grids])
    (Lam, m, q, detC), mom = _build_tables(
        z0,
        jnp.asarray(zi),
        jnp.asarray(np.array(Ts, float) - 1),
        jnp.asarray(np.asarray(sigma_A2s, float)),
        jnp.asarray(h),
        jnp.asarray(g),
        nl,
        nc,
        ny,
    )
    Lam, m, q, detC = (np.asarray(a) for a in (Lam, m, q, detC))
    out = []
    for k in range(len(Ts)):
        mk = tuple(a[k] for a in mom)
        tk, _ = _fix_table(Ts[k], h[k], g[k], (Lam[k], m[k], q[k], detC[k]), mk)
        out.append(SoftmaxTable(h[k], g[k], tk[0], tk[1], tk[2], mk, tk[3]))
    return out


@functools.lru_cache(maxsize=64)
def cached_table(T, sigma_A2, d, beta_max, nh, ng, num_samples, seed, nl, nc, ny):
    """:func:`softmax_tables` for one configuration, cached (the phase curves, the entropy and the landscape of
    one (T, sigma_A2, beta_max) share it)."""
    return softmax_tables([T], [sigma_A2], d, beta_max, nh, ng, num_samples, seed, nl, nc, ny)[0]


def check_table_numerics(*, num_samples, seed, nh, ng, nl=200, nc=96, ny=800) -> None:
    """The softmax table's numerics, checked before it is built: ``num_samples`` >= 100 prior draws, a ``seed``
    >= 0 and grids of at least 3 points (``nh``, ``ng``, ``nl``, ``nc``, ``ny``); ValueError naming the first that
    is not."""
    check_int("num_samples", num_samples, minimum=100)
    check_int("seed", seed, minimum=0)
    for name, value in (("nh", nh), ("ng", ng), ("nl", nl), ("nc", nc), ("ny", ny)):
        check_int(name, value, minimum=3)


def softmax_action_table(
    task,
    prior,
    beta_max: float,
    *,
    nh: int = 241,
    ng: int = 121,
    num_samples: int = 20000,
    seed: int = 0,
    nl: int = 200,
    nc: int = 96,
    ny: int = 800,
) -> SoftmaxTable:
    """The per-row cumulant generating function Lambda(h, g) = log E_prior exp(h a + g b) of one softmax row
    and its gradient (m, q) on an (h, g) grid wide enough for every beta <= beta_max.

    Exact over the T-1 non-source logits up to Monte Carlo error (``num_samples`` prior draws of (S1, S2),
    fixed ``seed``) and quadrature error (``ny`` source-logit nodes, ``nc`` tilt nodes, ``nl`` bins).
    """
    covered(task, "softmax")
    prior = check_prior(prior)
    beta_max = check_positive("beta_max", beta_max)
    check_table_numerics(num_samples=num_samples, seed=seed, nh=nh, ng=ng, nl=nl, nc=nc, ny=ny)
    return cached_table(
        task.T, float(prior.sigma_A2), task.d_out, float(beta_max), nh, ng, num_samples, seed, nl, nc, ny
    )
