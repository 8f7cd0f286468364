"""Softmax: minima of the reduced action by Newton steps in the dual variables, on the cached tables."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from .common import action, energy_grads, prediction_error
from .softmax_table import tilted_row


def energy_hessian(m, q, be, eps, d, Tq):
    """Hessian of the per-row energy in (m, q): (Hmm, Hmq, Hqq)."""
    Hmm = -2.0 * be / (q + eps)
    Hmq = 2.0 * be * m / (q + eps) ** 2
    Hqq = -2.0 * be * m**2 / (q + eps) ** 3 - d**2 / (2.0 * Tq) / (q + eps) ** 2
    return Hmm, Hmq, Hqq


def _newton_step(h, g, be, eps, mom, d, Tq, ci, tilt=tilted_row):
    """One damped Newton step on theta + grad E(grad Lambda(theta)) = 0, theta = (h, g); returns the new
    (h, g) and the relative move. ``tilt``: the row law's (Lambda, m, q, Cov) at (h, g) (``tilted_row`` for one row type;
    the causal mask averages row types, see causal.py)."""
    Lam, m, q, Vaa, Vab, Vbb = tilt(h, g, *mom, ci)
    dm, dq = energy_grads(m, q, be, eps, d, Tq, 0.0)
    r = jnp.array([h + dm, g + dq])
    Hmm, Hmq, Hqq = energy_hessian(m, q, be, eps, d, Tq)
    # J = I + H_E Cov
    J = jnp.eye(2) + jnp.array([[Hmm, Hmq], [Hmq, Hqq]]) @ jnp.array([[Vaa, Vab], [Vab, Vbb]])
    dx = jnp.linalg.solve(J, -r)
    scale = jnp.minimum(1.0, 2.0 / (jnp.abs(dx[0]) + 1e-300)) * jnp.minimum(
        1.0, (0.2 * jnp.abs(g) + 2.0) / (jnp.abs(dx[1]) + 1e-300)
    )
    scale = jnp.minimum(scale, 1.0)
    h1, g1 = h + scale * dx[0], jnp.minimum(g + scale * dx[1], -1e-6)
    moved = jnp.abs(h1 - h) / (1.0 + jnp.abs(h)) + jnp.abs(g1 - g) / (1.0 + jnp.abs(g))
    return h1, g1, moved


@functools.partial(jax.jit, static_argnames=("d", "tilt"))
def _newton_steps(h, g, ci, be, eps, Tq, mom, d, iters, tilt=tilted_row):
    """`iters` Newton steps for a flat batch of starts (each with its configuration index ci into the stacked
    moments `mom`); a start stops moving once a step moves it by less than 1e-9 (relative; Newton converges quadratically, so the
    point is then exact to ~1e-15). Returns h, g
    and whether it has stopped."""

    def one(h, g, c, be, ep, tq):
        def body(_, carry):
            h, g, done = carry
            h1, g1, moved = _newton_step(h, g, be, ep, mom, d, tq, c, tilt)
            return jnp.where(done, h, h1), jnp.where(done, g, g1), done | (moved < 1e-9)

        return jax.lax.fori_loop(0, iters, body, (h, g, jnp.zeros((), bool)))

    return jax.vmap(one)(h, g, ci, be, eps, Tq)


@functools.partial(jax.jit, static_argnames=("d", "tilt"))
def _newton_final(h, g, ci, be, eps, Tq, mom, d, tilt=tilted_row):
    """At the Newton end points: m, q, Phi, converged, is_min, the Laplace log weight
    -T_q Phi - 0.5 log det(I + H_E Cov)."""

    def one(h, g, c, be, ep, tq):
        Lam, m, q, Vaa, Vab, Vbb = tilt(h, g, *mom, c)
        dm, dq = energy_grads(m, q, be, ep, d, tq, 0.0)
        r = jnp.array([h + dm, g + dq])
        Phi = action(m, q, h * m + g * q - Lam, beta=be, eps=ep, d=d, T_q=tq)
        Hmm, Hmq, Hqq = energy_hessian(m, q, be, ep, d, tq)
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


def _newton_batch(h0, g0, ci, be, eps, Tq, mom, d, rounds=(6, 6, 8, 20), tilt=tilted_row):
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
        hh, gg, done = _newton_steps(
            jnp.asarray(h[j]),
            jnp.asarray(g[j]),
            jnp.asarray(ci[j]),
            jnp.asarray(be[j]),
            jnp.asarray(eps[j]),
            jnp.asarray(Tq[j]),
            mom,
            d,
            it,
            tilt,
        )
        k = active.size
        h[active], g[active] = np.asarray(hh)[:k], np.asarray(gg)[:k]
        active = active[~np.asarray(done)[:k]]
    if n == 0:
        return [np.zeros(0)] * 3 + [np.zeros(0, bool)] * 2 + [np.zeros(0)] * 3
    j = padded(np.arange(n))
    out = _newton_final(
        jnp.asarray(h[j]),
        jnp.asarray(g[j]),
        jnp.asarray(ci[j]),
        jnp.asarray(be[j]),
        jnp.asarray(eps[j]),
        jnp.asarray(Tq[j]),
        mom,
        d,
        tilt,
    )
    return [np.asarray(a)[:n] for a in out] + [h, g]


def _dual_weights(h, g, detC):
    """log of the (h, g) cell areas times det Cov^{1/2}: integrating the saddle-point (Daniels) density
    p(m, q) ~ det Cov^{-1/2} exp(-T_q Phi) over (m, q) = grad Lambda(h, g) picks up the Jacobian det Cov."""
    return (
        jnp.log(jnp.gradient(h))[:, None] + jnp.log(jnp.gradient(g))[None, :] + 0.5 * jnp.log(jnp.maximum(detC, 1e-300))
    )


def cell_log_weights(h, g, Lam, m, q, detC, ok, beta, eps, Tq, d):
    """The log weights of ``PhaseCurve.mean`` on the dual grid, -T_q Phi + ``_dual_weights``, for the cells
    ``ok`` (-inf elsewhere, and where the weight is not finite): for means other than the curve's own, at one P."""
    m_, q_ = jnp.where(ok, m, 0.5), jnp.where(ok, q, 0.5)
    ent = h[:, None] * m_ + g[None, :] * q_ - jnp.where(ok, Lam, 0.0)
    lw = -Tq * action(m_, q_, ent, beta=beta, eps=eps, d=d, T_q=Tq) + _dual_weights(h, g, jnp.where(ok, detC, 1.0))
    return jnp.where(ok & jnp.isfinite(lw), lw, -jnp.inf)


@functools.partial(jax.jit, static_argnames=("d", "kmax"))
def _softmax_scan(h, g, Lam, m, q, detC, beta, eps, Tq, d, kmax=4):
    """For each configuration (leading axis C) and each P (beta, eps: (C, NP)): the kmax lowest discrete local
    minima of Phi on the dual grid (indices and validity), and the posterior means of (m, q, u, test error) from the
    saddle-point density integrated over the dual grid and the largest cell's share of it, with the share of it on
    the grid's border. Tq: (C,)."""

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
            err = prediction_error(m, q, ep)
            # last entry: the largest cell's share of the density (1 / Z, as max w = 1)
            means = jnp.stack(
                [jnp.sum(w * m) / Z, jnp.sum(w * q) / Z, jnp.sum(w * u) / Z, jnp.sum(w * err) / Z, 1.0 / Z]
            )
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


def _newton_grid(h0, g0, live, beta, eps, Tq, mom, d, tilt=tilted_row):
    """Newton from starts on a (C, NP, K) array (only where live); results as (C, NP, K) arrays."""
    C, NP, K = h0.shape
    c, i, k = np.nonzero(live)
    res = _newton_batch(h0[c, i, k], g0[c, i, k], c, beta[c, i], eps[c, i], np.asarray(Tq, float)[c], mom, d, tilt=tilt)
    out = []
    for r, fill in zip(res, (np.nan, np.nan, np.nan, False, False, np.nan, np.nan, np.nan)):
        a = np.full((C, NP, K), fill, dtype=bool if isinstance(fill, bool) else float)
        a[c, i, k] = r
        out.append(a)
    return out


def softmax_action_minima(tabs, beta, eps, Tq, d, passes=4, tilt=tilted_row):
    """For each table (configuration) and P: the distinct local minima (m, q, Phi, logw), an edge flag (C, NP:
    a candidate minimum on the grid's border), and the posterior means (C, NP, 5: m, q, u, test error, then the largest cell's share of the
    density) with the density mass on the grid border (C, NP).

    Candidates: the discrete local minima of Phi on the dual grid, then continuation in P (Newton started
    from the minima at the neighbouring P), which finds shallow metastable minima near their spinodals.
    beta, eps: (C, NP); Tq: (C,). ``tilt``: the row law at (h, g), ``tilted_row`` or the causal average of row types.
    """
    stack = lambda f: np.stack([f(t) for t in tabs])  # noqa: E731
    H, G = stack(lambda t: t.h), stack(lambda t: t.g)
    mom = tuple(jnp.stack([t.mom[k] for t in tabs]) for k in range(len(tabs[0].mom)))
    beta, eps, Tq = np.asarray(beta, float), np.asarray(eps, float), np.asarray(Tq, float)
    ii, jj, valid, means, edge_mass = (
        np.asarray(a)
        for a in _softmax_scan(
            jnp.asarray(H),
            jnp.asarray(G),
            *(jnp.asarray(stack(lambda t, k=k: getattr(t, k))) for k in ("Lam", "m", "q", "detC")),
            jnp.asarray(beta),
            jnp.asarray(eps),
            jnp.asarray(Tq),
            d,
        )
    )
    C, NP, K0 = ii.shape
    cidx = np.arange(C)[:, None, None]
    # candidates in order of Phi; one Newton start per group of candidates within 0.01 in m (the grid's
    # ripple makes several discrete minima in one well; they converge to the same minimum)
    mgrid = stack(lambda t: t.m)[cidx, ii, jj]
    live = valid.copy()
    for k in range(1, K0):
        for k2 in range(k):
            live[:, :, k] &= ~(valid[:, :, k2] & live[:, :, k2] & (np.abs(mgrid[:, :, k] - mgrid[:, :, k2]) < 0.01))
    res = _newton_grid(H[cidx, ii], G[cidx, jj], live, beta, eps, Tq, mom, d, tilt)
    valid = live
    ok = valid & res[3] & res[4]
    nh = H.shape[1]
    edge_hit = np.any(valid & ((ii == 0) | (ii == nh - 1) | (jj == 0)), axis=2)  # (C, NP)
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
        r2 = _newton_grid(h0, g0, have, beta, eps, Tq, mom, d, tilt)
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
