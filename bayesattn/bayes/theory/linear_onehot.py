"""Linear attention with one-hot tokens (cyclic): the exact four-variable reduction (docs/theory.md section 8.1).

One-hot tokens have mean 1/d, so the readout sees two sectors: the d - 1 centred directions, where the copy signal
lives (order parameters m, q), and the all-ones direction e, which linear attention passes on with the row sums
r_t = sum_s L_ts / sqrt(T) (order parameters v = <r_t>, w = <r_t^2>). Per data set, to leading order in n,

    -log p(D | L) = c1 [1 - m^2/(q + eps)] + c2 [1 - v^2/(w + eps)] + o1 log(1 + q/eps) + o2 log(1 + w/eps) + const,
    c1 = n (d - 1) / (2 sigma2 d), c2 = n / (2 sigma2 d), o1 = d (d - 1) / 2, o2 = d / 2, eps = d lam / n.

In the orthonormal frame of R^{T x T} made of j = 1 1^T / T, p = (pattern - j) / sqrt(T - 1), the T - 1 other
row-sum directions (squared norm R) and the rest (squared norm K),

    m = (sqrt(T - 1) B + A) / T^{3/2},  v = A / sqrt(T),  w = (A^2 + R) / T,  q = (A^2 + B^2 + R + K) / T^2,

and under the isotropic prior A, B ~ N(0, sigma_A2), R ~ sigma_A2 chi^2_{T-1}, K ~ sigma_A2 chi^2_{T^2-T-1}, all
independent. The posterior of (A, B, R, K) is therefore known exactly (within self-averaging); it is integrated
here on a grid: A >= 0 (the law is even under (A, B) -> (-A, -B)) and B on uniform grids, log R on a fixed grid,
and log K on trapezoid nodes over +-7 conditional widths around the conditional mode of each (A, B, R) (K has
T^2 - T - 1 degrees of freedom, so its conditional law is narrow in log K).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import logsumexp

from .phase_curve import PhaseCurve

NA, NB, NR, NK = 65, 161, 40, 18  # grid sizes; doubling every one moves <u> by < 1e-4 (T = 8, 32)


def onehot_linear_coefficients(task, prior, P):
    """(c1, c2, o1, o2, eps) over P (arrays) for linear attention with one-hot tokens, cyclic boundary."""
    T, d = task.T, task.d
    P = np.asarray(P, dtype=np.float64)
    n = P * T
    return (
        n * (d - 1) / (2 * prior.sigma2 * d),
        n / (2 * prior.sigma2 * d),
        d * (d - 1) / 2.0,
        d / 2.0,
        d * prior.lam(d) / n,
    )


def onehot_linear_energy(A, B, R, K, T, c1, c2, o1, o2, eps):
    """-log p(D | L) up to an L-independent constant, in the frame variables (A, B, R, K) (broadcasting)."""
    m = (jnp.sqrt(T - 1.0) * B + A) / T**1.5
    v2, w = A**2 / T, (A**2 + R) / T
    q = (A**2 + B**2 + R + K) / T**2
    return (
        c1 * (1.0 - m**2 / (q + eps)) + c2 * (1.0 - v2 / (w + eps)) + o1 * jnp.log1p(q / eps) + o2 * jnp.log1p(w / eps)
    )


def frame_variables(L):
    """(A, B, R, K) of logits L: (..., T, T) (the frame of the module docstring)."""
    L = jnp.asarray(L)
    T = L.shape[-1]
    src = (jnp.arange(T) - 1) % T
    A = L.sum((-1, -2)) / T
    m = L[..., jnp.arange(T), src].sum(-1) / T**1.5
    B = (T**1.5 * m - A) / jnp.sqrt(T - 1.0)
    rows = L.sum(-1) / jnp.sqrt(T)  # projections on the row-sum directions e_t 1^T / sqrt(T)
    R = jnp.sum(rows**2, -1) - A**2
    K = jnp.sum(L**2, (-1, -2)) - A**2 - B**2 - R
    return A, B, R, K


@functools.partial(jax.jit, static_argnames=("T", "na", "nb", "nr", "nk"))
def _ab_table(coef, T, sigma_A2, na=NA, nb=NB, nr=NR, nk=NK):
    """For one P (coef = (c1, c2, o1, o2, eps, amax, bmax)): on the (A, B) grid, the log of the marginal density
    (R and K integrated) and the conditional means of u, q, the one-hot test error and v^2/w.

    Returns A (na,), B (nb,), logZ (na, nb), cond (4, na, nb)."""
    c1, c2, o1, o2, eps, amax, bmax = (coef[i] for i in range(7))
    A = jnp.linspace(0.0, amax, na)
    B = jnp.linspace(-bmax, bmax, nb)
    dR, dK = T - 1.0, T * T - T - 1.0
    lr = jnp.linspace(jnp.log(sigma_A2 * dR) - 60.0 / dR - 3.0, jnp.log(sigma_A2 * dR) + 2.5, nr)
    R = jnp.exp(lr)
    log_pr = 0.5 * dR * lr - R / (2 * sigma_A2)  # density of log R up to a constant
    wr = jnp.log(lr[1] - lr[0])
    xk = jnp.linspace(-7.0, 7.0, nk)

    def logf_k(lk, a, b, r):  # log integrand in log K (prior of log K and the energy)
        return (
            0.5 * dK * lk
            - jnp.exp(lk) / (2 * sigma_A2)
            - onehot_linear_energy(a, b, r, jnp.exp(lk), T, c1, c2, o1, o2, eps)
        )

    def row(a):
        a_, b_, r_ = a, B[:, None], R[None, :]
        lk = jnp.full((nb, nr), jnp.log(sigma_A2 * dK))
        # logf_k is elementwise in lk, so the gradient of its sum is the elementwise derivative
        g1 = jax.grad(lambda x, *z: jnp.sum(logf_k(x, *z)))
        g2 = jax.grad(lambda x, *z: jnp.sum(g1(x, *z)))
        for _ in range(8):  # damped Newton to the conditional mode of log K
            h2 = jnp.minimum(g2(lk, a_, b_, r_), -1.0)
            lk = lk - jnp.clip(g1(lk, a_, b_, r_) / h2, -1.0, 1.0)
        # trapezoid nodes over +-7 conditional widths (the law of log K is skewed at small T, where the Occam
        # weight o1 competes with the T^2 - T - 1 degrees of freedom of K; trapezoid, not Gauss-Hermite)
        sd = 1.0 / jnp.sqrt(-jnp.minimum(g2(lk, a_, b_, r_), -1e-2))
        nodes = lk[..., None] + sd[..., None] * xk  # (nb, nr, nk)
        K = jnp.exp(nodes)
        lf = logf_k(nodes, a_, b_[..., None], r_[..., None]) + jnp.log(sd * (xk[1] - xk[0]))[..., None]
        lf = lf + (log_pr + wr)[None, :, None] - a**2 / (2 * sigma_A2) - B[:, None, None] ** 2 / (2 * sigma_A2)
        lz = logsumexp(lf, axis=(1, 2))
        wgt = jnp.exp(lf - lz[:, None, None])
        m = (jnp.sqrt(T - 1.0) * b_[..., None] + a) / T**1.5
        q = (a**2 + b_[..., None] ** 2 + r_[..., None] + K) / T**2
        w = (a**2 + r_[..., None]) / T
        obs = jnp.stack(
            [
                m**2 / q * jnp.ones_like(K),
                q,
                1.0 - m**2 * (q + 2 * eps) / (q + eps) ** 2,
                (a**2 / T) / w * jnp.ones_like(K),
            ]
        )
        return lz, jnp.sum(obs * wgt[None], axis=(2, 3))

    lz, cond = jax.lax.map(row, A)
    return A, B, lz, jnp.moveaxis(cond, 1, 0)


def _ranges(c1, c2, sigma_A2):
    """Grid half-widths in A and B: the energy gain over the prior is below c1 + c2, so mass beyond
    A^2, B^2 > 2 sigma_A2 (c1 + c2 + 60) is below e^-60 of the bulk."""
    r = np.sqrt(2.0 * sigma_A2 * (np.asarray(c1) + np.asarray(c2) + 60.0))
    return r, r


def onehot_linear_tables(task, prior, P, *, na=NA, nb=NB, nr=NR, nk=NK):
    """Per P: the (A, B) grids, log marginal density and conditional means (numpy arrays, leading axis P)."""
    c1, c2, o1, o2, eps = onehot_linear_coefficients(task, prior, P)
    amax, bmax = _ranges(c1, c2, prior.sigma_A2)
    out = []
    for i in range(len(np.atleast_1d(P))):
        coef = jnp.asarray([c1[i], c2[i], o1, o2, eps[i], amax[i], bmax[i]])
        out.append([np.asarray(x) for x in _ab_table(coef, task.T, float(prior.sigma_A2), na, nb, nr, nk)])
    return [np.stack([o[k] for o in out]) for k in range(4)]


def onehot_linear_means(A, B, lz, cond):
    """Posterior means of (u, q, test error, v^2/w) from one P's table, and the share of the weight on the grid's
    outer edge (A = amax or |B| = bmax)."""
    wa = np.full(len(A), 1.0)
    wa[0] = wa[-1] = 0.5  # trapezoid; the A = 0 node is the symmetry axis (half weight)
    wb = np.full(len(B), 1.0)
    wb[0] = wb[-1] = 0.5
    lw = lz + np.log(wa)[:, None] + np.log(wb)[None, :]
    w = np.exp(lw - lw.max())
    w /= w.sum()
    means = np.einsum("kab,ab->k", cond, w)
    edge = w[-1, :].sum() + w[:, 0].sum() + w[:, -1].sum()
    return means, float(edge)


def local_maxima(A, B, lz):
    """Local maxima of the (A, B) log density on the grid (A >= 0; the A = 0 column is mirrored through the
    symmetry (A, B) -> (-A, -B)), as a list of (i, j, value)."""
    ext = np.concatenate([lz[1:2, ::-1], lz], axis=0)  # row -1 is the mirror image of row 1
    pad = np.pad(ext, 1, constant_values=-np.inf)
    core = pad[1:-1, 1:-1]
    is_max = np.ones_like(core, dtype=bool)
    for di in (-1, 0, 1):
        for dj in (-1, 0, 1):
            if di or dj:
                is_max &= core >= pad[1 + di : pad.shape[0] - 1 + di, 1 + dj : pad.shape[1] - 1 + dj]
    is_max = is_max[1:]
    ii, jj = np.nonzero(is_max)
    return [(int(i), int(j), float(lz[i, j])) for i, j in zip(ii, jj)]


def _origin_hessian(task, prior, P, nr=240, nk=1200):
    """The 2 x 2 Hessian in (A, B) of the log marginal density at the origin: <-grad^2 E> - I / sigma_A2, the mean
    over the exact conditional law of (R, K) at A = B = 0 (a 2-D grid in log R, log K)."""
    T, sA2 = task.T, float(prior.sigma_A2)
    c1, c2, o1, o2, eps = (float(np.asarray(x)) for x in onehot_linear_coefficients(task, prior, P))
    dR, dK = T - 1.0, T * T - T - 1.0
    lr = np.linspace(np.log(sA2 * dR) - 60.0 / dR - 3.0, np.log(sA2 * dR) + 2.5, nr)
    lk = np.linspace(np.log(sA2 * dK) - 30.0 / np.sqrt(dK) - 6.0, np.log(sA2 * dK) + 30.0 / np.sqrt(dK) + 1.0, nk)
    R, K = np.exp(lr)[:, None], np.exp(lk)[None, :]
    lw = 0.5 * dR * lr[:, None] - R / (2 * sA2) + 0.5 * dK * lk[None, :] - K / (2 * sA2)
    lw = lw - np.asarray(onehot_linear_energy(0.0, 0.0, R, K, T, c1, c2, o1, o2, eps))
    w = np.exp(lw - lw.max())
    w /= w.sum()
    iq, iw = (w * 1.0 / ((R + K) / T**2 + eps)).sum(), (w * 1.0 / (R / T + eps)).sum()
    s = np.sqrt(T - 1.0)
    k = 2 * c1 * iq / T**3
    haa = k + 2 * (c2 - o2) * iw / T - 2 * o1 * iq / T**2 - 1 / sA2
    hbb = k * s * s - 2 * o1 * iq / T**2 - 1 / sA2
    return np.array([[haa, k * s], [k * s, hbb]])


def _critical_P(task, prior, which="max"):
    """P where the origin stops being a maximum (the largest eigenvalue of the origin Hessian crosses 0;
    which="copy": where its B-B element alone does, the copy instability at A = 0)."""
    from scipy.optimize import brentq

    def f(P):
        H = _origin_hessian(task, prior, P)
        return float(np.linalg.eigvalsh(H)[-1]) if which == "max" else float(H[1, 1])

    P0 = (
        prior.sigma2 * task.d * (task.T - 1) / task.T
        if which == "max"
        else prior.sigma2 * task.d * task.T / (task.d - 1)
    )
    lo, hi = 0.5 * P0, 2.0 * P0
    while f(lo) > 0:
        lo /= 2
    while f(hi) < 0:
        hi *= 2
    return float(brentq(f, lo, hi, xtol=1e-9 * P0))


def onehot_linear_phase_curve(task, prior, P):
    """The PhaseCurve of linear attention with one-hot tokens (cyclic) over the grid P."""
    import warnings

    A, B, lz, cond = onehot_linear_tables(task, prior, P)
    NPv = len(P)
    means = np.zeros((NPv, 4))
    keys = ("m", "q", "u", "free_energy")
    stable = {k: np.full(NPv, np.nan) for k in keys}
    meta = {k: np.full(NPv, np.nan) for k in keys}  # the branch with A and B of opposite signs
    edges = np.zeros(NPv)
    for i in range(NPv):
        means[i], edges[i] = onehot_linear_means(A[i], B[i], lz[i], cond[i])
        j0 = len(B[i]) // 2  # B = 0
        for a, b, val in local_maxima(A[i], B[i], lz[i]):
            u, q = cond[i][0, a, b], cond[i][1, a, b]
            row = (float(np.sqrt(u * q)), float(q), float(u), float(lz[i][0, j0] - val))
            # A >= 0 on the grid: B < 0 with A > 0 is the sign-mismatched state (m^2 = (sqrt(T-1) B + A)^2 / T^3
            # is smaller there than at (A, -B), so it is never the stable one)
            target = meta if (a > 0 and B[i][b] < 0) else stable
            if np.isnan(target["free_energy"][i]) or row[3] < target["free_energy"][i]:
                for k, v in zip(keys, row):
                    target[k][i] = v
    if np.any(edges > 1e-6):
        warnings.warn("theory: posterior mass on the edge of the one-hot linear (A, B) grid", stacklevel=3)
    branches = [{"P": np.asarray(P, float), **{k: v.copy() for k, v in stable.items()}}]
    has_meta = ~np.isnan(meta["free_energy"])
    if has_meta.any():
        branches.append({"P": np.asarray(P, float)[has_meta], **{k: v[has_meta] for k, v in meta.items()}})
    Pc = _critical_P(task, prior)
    trans = {"order": "second", "P_c": Pc if P[0] <= Pc <= P[-1] else None, "spinodals": [], "P_c_exact": Pc}
    # the metastable sign-mismatched branch never becomes stable (no binodal): the first P of this grid where it is
    trans["metastable_from"] = float(np.asarray(P, float)[has_meta][0]) if has_meta.any() else None
    trans["P_copy_at_A0"] = _critical_P(task, prior, "copy")
    trans["unstable_direction"] = "row sums (the all-ones component A of L), with the copy component B through m"
    mean = {
        "u": means[:, 0],
        "q": means[:, 1],
        "m": np.sqrt(means[:, 0] * means[:, 1]),
        "test_error": means[:, 2],
        "v2_over_w": means[:, 3],
    }
    return PhaseCurve("linear", np.asarray(P, float), branches, stable, mean, trans)
