"""Softmax with a causal mask: rows of different key counts, one row table per key count (docs/theory.md section 10).

Query row t of a causal copy task (t >= offset) may attend to its K_t = t + 1 keys; rows t < offset have no
source, are outside the likelihood and the order parameters, and their logits only carry the prior (they
integrate out to a constant). The rows are independent under the prior but not identical, so the cumulant
generating function of the row averages (m, q) is the average over query rows of each row type's
Lambda_K(h, g) (one shared dual point (h, g), since the energy depends on the averages only):

    Lambda_bar(h, g) = (1/T_q) sum_{query rows t} Lambda_{K_t}(h, g),

and (m, q) = grad Lambda_bar, Cov = Hess Lambda_bar = the average of the per-row covariances. Everything
downstream (the action on the dual grid, the minima by Newton, the saddle-point density) is the cyclic machinery
with Lambda_bar in place of Lambda.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from .softmax_table import SoftmaxTable, dual_grids, padded_draws, row_moments, table_parts, tilted_row


def row_types(task) -> tuple[np.ndarray, np.ndarray]:
    """The key counts K of the query rows and their weights (the share of query rows with that count).

    Read off the task's masks: K_t = key_mask[t].sum() over the rows with query_mask True. For
    ``CopyTask(boundary="causal")`` these are K = offset + 1, ..., T, each with weight 1 / (T - offset)."""
    qm = np.asarray(task.query_mask, bool)
    K = np.asarray(task.key_mask, bool)[qm].sum(axis=1)
    Ks, counts = np.unique(K, return_counts=True)
    return Ks.astype(int), counts / counts.sum()


@functools.partial(jax.jit, static_argnames=("nl", "nc", "ny"))
def _build_row_tables(z0, Tm1, sigma_A2, h, g, nl, nc, ny):
    """Per row type k (key count Tm1[k] + 1; z0[k] its padded standard draws): Lambda, m, q, Cov on the common
    (h, g) grid, and the row moments. lax.map bounds the memory."""

    def one(args):
        z, tm1 = args
        c_min = jnp.min(g) * 1.0001 - 1e-9
        x_extra = jnp.log1p(jnp.max(jnp.abs(h)) * sigma_A2)
        mom = row_moments(z, tm1, sigma_A2, c_min, x_extra, nl, nc, ny)
        return table_parts(h, g, mom), mom

    return jax.lax.map(one, (z0, Tm1))


@functools.lru_cache(maxsize=4)  # each holds T_q tables' row moments (~2 MB per key count)
def causal_table(Ks, weights, sigma_A2, d, beta_max, nh, ng, num_samples, seed, nl=200, nc=96, ny=800):
    """The row-averaged table Lambda_bar, (m, q) and det Cov_bar on one dual grid (the cyclic grid of the largest
    key count), with the stacked per-row-type moments and weights as ``mom`` (what ``tilted_rows`` reads).

    Ks, weights: tuples (key counts >= 2 and their shares). The draws of a row with K keys are the cyclic
    table's draws for T = K (the same fixed ``seed``), so a causal row type and a cyclic row with as many keys
    have the same table."""
    Ks = [int(k) for k in Ks]
    if min(Ks) < 2:
        raise ValueError(f"key counts {Ks}: a query row needs its source and at least one other key")
    w = np.asarray(weights, float)
    W = max(Ks) - 1
    z0 = jnp.stack([padded_draws(seed, K, num_samples, W) for K in Ks])
    h, g = dual_grids(max(Ks), d, beta_max, nh, ng)
    (Lam, m, q, Vaa, Vab, Vbb), mom = _build_row_tables(
        z0, jnp.asarray(np.array(Ks, float) - 1), float(sigma_A2), jnp.asarray(h), jnp.asarray(g), nl, nc, ny
    )
    wj = jnp.asarray(w)[:, None, None]
    avg = [np.asarray(jnp.sum(wj * a, axis=0)) for a in (Lam, m, q, Vaa, Vab, Vbb)]
    Lam, m, q, Vaa, Vab, Vbb = avg
    detC = Vaa * Vbb - Vab**2
    if not all(np.all(np.isfinite(a)) for a in (Lam, m, q, detC)):
        raise FloatingPointError("causal softmax table: non-finite entries (dual grid too wide for the row moments)")
    return SoftmaxTable(h, g, Lam, m, q, tuple(mom) + (jnp.asarray(w),), detC)


def causal_softmax_table(
    task, prior, beta_max: float, *, nh: int = 241, ng: int = 121, num_samples: int = 20000, seed: int = 0
) -> SoftmaxTable:
    """The row-averaged cumulant generating function Lambda_bar(h, g) of a causal (or any per-row key count)
    softmax task and its gradient (m, q), on an (h, g) grid wide enough for every beta <= beta_max. Query rows
    with K keys use the same prior draws as a cyclic table with T = K."""
    from .common import covered, occam_d

    covered(task, "softmax", onehot=True, causal=True)
    Ks, w = row_types(task)
    return causal_table(
        tuple(int(k) for k in Ks),
        tuple(float(x) for x in w),
        float(prior.sigma_A2),
        occam_d(task),
        float(beta_max),
        nh,
        ng,
        num_samples,
        seed,
    )


@jax.jit
def tilted_rows(h, g, y, s, logM, R, R2, w, ci=None):
    """The row-averaged tilt: sum_k w_k (Lambda_k, m_k, q_k, Cov_k) at (h, g) over the row types k.

    y: (nK, ny) or, with ci, (C, nK, ny) (configuration ci), and likewise s, logM, R, R2; w: (nK,) or (C, nK)
    (zero weights pad configurations with fewer row types)."""
    if ci is None:
        y, s, logM, R, R2, w = (a[None] for a in (y, s, logM, R, R2, w))
        ci = 0
    C, nK = w.shape
    flat = lambda a: a.reshape((C * nK,) + a.shape[2:])  # noqa: E731
    y, s, logM, R, R2 = (flat(a) for a in (y, s, logM, R, R2))
    parts = jax.vmap(lambda k: jnp.stack(tilted_row(h, g, y, s, logM, R, R2, ci * nK + k)))(jnp.arange(nK))
    return tuple(jnp.tensordot(w[ci], parts, axes=1))
