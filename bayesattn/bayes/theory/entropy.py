"""Softmax: the posterior-mean attention entropy predicted by the reduced theory (docs/theory.md section 11).

One row of the cyclic softmax head has the source logit x and the T-1 other logits l_j. With S1 = sum_j e^{l_j},
y = x - log S1, a = sigmoid(y) and w_j = e^{l_j} / S1 the other keys' normalised weights, the row's entropy is

    H = h2(a) + (1 - a) H_o,   h2(a) = -a log a - (1 - a) log(1 - a),
    H_o = -sum_j w_j log w_j = log S1 - sum_j w_j l_j.

Under the theory every row is drawn from the prior tilted by exp(h a + g b) (b = a^2 + (1 - a)^2 r, r = S2 / S1^2),
with (h, g) the dual point of the order parameters (m, q); the posterior over (m, q) is the saddle-point density
integrated on the dual grid (docs/theory.md section 2). The tilted mean of H needs one more conditional moment
than the table of Lambda: Hbar(y, c) = E[phi(y + log S1) e^{c r} H_o] / E[phi(y + log S1) e^{c r}], from the same
prior draws and the same binning in log S1 as the table (``softmax_table.row_moments``).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ..._validate import check_finite, check_positive
from .common import check_grid, check_prior, covered, occam_d, scales
from .softmax_minima import cell_log_weights
from .softmax_table import cached_table, check_table_numerics, interp_c, row_bins, std_draws, unphysical


@jax.jit
def _other_entropy_moment(z0, sigma_A2, y, s):
    """Hbar(y, c) on the table's (y, c) grid (c = -expm1(s)): the conditional mean of the other keys' entropy
    H_o given y = x - log S1, under the tilt exp(c r). Same draws, bins (200 in log S1, cloud-in-cell) and
    source-logit density as ``row_moments``, so it is consistent with the table's log M(y, c)."""
    z, l1, r, lgrid, hist = row_bins(z0, sigma_A2, 200)
    w = jnp.exp(z - l1[:, None])
    H_o = l1 - jnp.sum(w * z, axis=1)
    r_ref = 1.0 / z0.shape[1]
    c = -jnp.expm1(s)
    E = jnp.exp(c[None, :] * (r[:, None] - r_ref))

    logphi = -0.5 * (y[:, None] + lgrid[None, :]) ** 2 / sigma_A2
    W = jnp.exp(logphi - jnp.max(logphi, axis=1, keepdims=True))
    M, MH = W @ hist(E), W @ hist(E * H_o[:, None])
    return MH / (M + 1e-300)


def _h2(a, one_a):
    return -(a * jnp.log(jnp.maximum(a, 1e-300)) + one_a * jnp.log(jnp.maximum(one_a, 1e-300)))


@jax.jit
def _tilted_entropy(h, g, y, s, logM, Hbar):
    """E[H] for one row under the prior tilted by exp(h a + g b) (h, g scalars; exact off the grid)."""
    a, one_a = jax.nn.sigmoid(y), jax.nn.sigmoid(-y)
    lm, hb, _ = interp_c(g, y, s, logM, Hbar, Hbar)
    p = jax.nn.softmax(h * a + g * a**2 + lm)
    return jnp.sum(p * (_h2(a, one_a) + one_a * hb))


@jax.jit
def _entropy_table(h, g, y, s, logM, Hbar):
    """E[H] of the tilted row on the whole (h, g) grid. Normalised in the log domain per cell (one h row at a
    time): the matrix-product form of ``_table_from_moments`` underflows to 0/0 where the h and g factors peak
    at different y (|h| of a few hundred and more)."""
    a, one_a = jax.nn.sigmoid(y), jax.nn.sigmoid(-y)
    lm, hb, _ = jax.vmap(lambda gg: interp_c(gg, y, s, logM, Hbar, Hbar))(g)  # (Ng, ny)
    B = g[:, None] * a[None, :] ** 2 + lm
    Hrow = _h2(a, one_a)[None, :] + one_a[None, :] * hb

    def row(hh):
        return jnp.sum(jax.nn.softmax(hh * a[None, :] + B, axis=1) * Hrow, axis=1)

    return jax.lax.map(row, h)


@jax.jit
def _posterior_mean(h, g, Lam, m, q, detC, EH, ok, beta, eps, Tq, d):
    """Posterior means of (entropy, m) at one P: the Daniels density on the dual grid (as ``_softmax_scan``),
    restricted to the cells ``ok`` (those a softmax row can have, ``softmax_table.unphysical``, with a finite
    entropy). Also dropped: isolated cells whose log weight exceeds every valid neighbour's by more than
    20 nats. The density is smooth on the grid (neighbours differ by < 1 nat at the peaks checked); such a cell
    is a tail of the table that its prior draws do not resolve (T = 16, P = 65536: one cell 312 nats above its
    neighbours, at m = 0.935, where NUTS and the neighbouring well give m = 0.81).
    Returns (entropy, m, number of masked cells)."""
    lw = cell_log_weights(h, g, Lam, m, q, detC, ok, beta, eps, Tq, d)
    ok = jnp.isfinite(lw)
    for _ in range(3):  # isolated spikes: a cell above all its valid neighbours by > 20 nats (see the docstring)
        pad = jnp.pad(lw, 1, constant_values=-jnp.inf)
        nb = jnp.max(
            jnp.stack(
                [
                    pad[1 + di : pad.shape[0] - 1 + di, 1 + dj : pad.shape[1] - 1 + dj]
                    for di in (-1, 0, 1)
                    for dj in (-1, 0, 1)
                    if di or dj
                ]
            ),
            axis=0,
        )
        ok = ok & ~(lw > nb + 20.0)
        lw = jnp.where(ok, lw, -jnp.inf)
    w = jnp.exp(lw - jnp.max(lw))
    Z = jnp.sum(w)
    return jnp.sum(jnp.where(ok, w * EH, 0.0)) / Z, jnp.sum(jnp.where(ok, w * m, 0.0)) / Z, jnp.sum(~ok)


def _table_and_moment(task, prior, beta_max, num_samples, seed, nh, ng):
    """The phase curve's table for this beta_max (shared through its cache) and the matching Hbar(y, c)."""
    check_table_numerics(num_samples=num_samples, seed=seed, nh=nh, ng=ng)
    tab = cached_table(
        task.T, float(prior.sigma_A2), occam_d(task), float(beta_max), nh, ng, num_samples, seed, 200, 96, 800
    )
    Hbar = _other_entropy_moment(std_draws(seed, task.T, num_samples), float(prior.sigma_A2), tab.mom[0], tab.mom[1])
    return tab, Hbar


def tilted_row_entropy(
    task, prior, h, g, *, beta_max: float = 10.0, num_samples: int = 20000, seed: int = 0, nh: int = 241, ng: int = 121
) -> float:
    """Mean attention entropy (nats) of one softmax row whose logits are drawn from the prior N(0, sigma_A2)
    tilted by exp(h a + g b) (a: weight on the source key, b: sum of squared weights), from the theory's table
    (``beta_max`` sets the table's grids, as in ``softmax_action_table``)."""
    covered(task, "softmax", onehot=True)
    prior = check_prior(prior)
    h, g = check_finite("h", h), check_finite("g", g)
    tab, Hbar = _table_and_moment(task, prior, check_positive("beta_max", beta_max), num_samples, seed, nh, ng)
    return float(_tilted_entropy(h, g, tab.mom[0], tab.mom[1], tab.mom[2], Hbar))


def entropy_curve(
    task, prior, P_values, *, num_samples: int = 20000, seed: int = 0, nh: int = 241, ng: int = 121
) -> dict:
    """The theory's posterior-mean attention entropy (mean over query rows of -sum_s alpha_ts log alpha_ts, nats)
    of the one-head cyclic softmax copy task against P, with the posterior mean of m from the same weights (equal
    to ``phase_curve(...).mean["m"]`` of the same single P where no table cell is masked), the number of masked
    cells per P and the uniform value log T. Each P gets its own dual table (a few tenths of a second each once
    compiled).

    Examples
    --------
    >>> import bayesattn as ba
    >>> ec = ba.theory.entropy_curve(ba.CopyTask(T=8, d=4), ba.Prior(1, 100, 400), [16, 65536])
    >>> ec["posterior"][0] > ec["posterior"][1]
    True
    """
    covered(task, "softmax", onehot=True)
    prior = check_prior(prior)
    P = check_grid("P_values", P_values)
    beta, eps, Tq = scales(task, prior, P)
    d = occam_d(task)
    H, m, masked = [], [], []
    for be, ep in zip(beta, eps):
        # one table per P, its grid fitted to that beta: a table for the largest beta of a wide P range is too
        # coarse at small P (T = 8, d = 4: one table for P = 16..65536 puts P = 16's posterior inside a few cells)
        tab, Hbar = _table_and_moment(task, prior, float(be), num_samples, seed, nh, ng)
        h, g = jnp.asarray(tab.h), jnp.asarray(tab.g)
        EH = _entropy_table(h, g, tab.mom[0], tab.mom[1], tab.mom[2], Hbar)
        ok = ~unphysical(task.T, tab.Lam, tab.m, tab.q, tab.detC) & np.isfinite(np.asarray(EH))
        Hi, mi, ki = _posterior_mean(
            h,
            g,
            jnp.asarray(tab.Lam),
            jnp.asarray(tab.m),
            jnp.asarray(tab.q),
            jnp.asarray(tab.detC),
            EH,
            jnp.asarray(ok),
            float(be),
            float(ep),
            float(Tq),
            float(d),
        )
        H.append(float(Hi))
        m.append(float(mi))
        masked.append(int(ki))
    return {
        "P": P.tolist(),
        "posterior": H,
        "m": m,
        "masked_cells": masked,
        "uniform": float(np.log(task.T)),
        "config": {
            "task": task.config(),
            "prior": prior.config(),
            "num_samples": num_samples,
            "seed": seed,
            "nh": nh,
            "ng": ng,
        },
    }
