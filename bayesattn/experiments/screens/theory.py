"""The Bayesian copy head's screens from the order-parameter theory (docs/results/screens.md section 4; docs/theory.md
sections 2 and 8): the posterior law of ONE attention row, and from it the previous-token selectivity and the PR
of the screened query, across P, without MCMC.

Why one row. A draw's screen at the last query t depends on that row only: its selectivity on a_t = alpha[t, t-1]
(alpha[t, src] / mean of the other T - 1 keys = (T - 1) a_t / (1 - a_t)), and, for one-hot tokens and many probe
sequences, its PR on b_t = sum_s alpha_ts^2 alone (:func:`pr_onehot_limit`).
The order parameters m, q are the averages of (a_t, b_t) over the T rows; the screens are non-linear functions of
one row's (a_t, b_t), so they need that row's posterior law, not only its mean (m, q).

What the theory provides. Given the row averages (m, q), the rows are i.i.d. draws of the prior row law tilted
by exp(h a + g b), with (h, g) the dual point of (m, q) (docs/theory.md section 2); the posterior density of (m, q)
is Daniels' saddle-point density det Cov^{-1/2} exp(-T_q Phi(m, q)). So the posterior law of one row is

    p(a, b) = sum over the dual grid of w(h, g) * p_prior(a, b) exp(h a + g b - Lambda(h, g)),

with w the same weights as ``PhaseCurve.mean``. The prior row law is built from the theory's own prior draws of
the T - 1 other logits (same seed and count), as a joint cloud-in-cell histogram of (log S1, r = S2 / S1^2) times
the Gaussian density of the source logit on the table's nodes y = x - log S1: a = sigmoid(y),
b = a^2 + (1 - a)^2 r.

Numerics. One table per P (its dual grid sized for that P's beta): a table built for the largest beta of a wide P
range resolves small P badly. The table builder recomputes entries its fast form lost to underflow (at
sigma2 = 10 and P >= 5335 they used to be left non-physical and made ``PhaseCurve.mean`` give q = 0); entries
that are still non-physical, or whose (m, q) differ from this row law's by more than ``tol``, are dropped.
"""

from __future__ import annotations

import numpy as np

from ...bayes.theory.common import covered, occam_d, scales
from ...bayes.theory.softmax_minima import cell_log_weights
from ...bayes.theory.softmax_table import cached_table, std_draws, unphysical
from ...diagnostics.screens import THRESHOLD

NUMERICS = dict(nh=241, ng=121, num_samples=20000, seed=0, nl=200, nc=96, ny=800)


def _cic(x, lo, hi, n):
    """Cloud-in-cell indices and weights of x on n nodes spanning [lo, hi]."""
    dx = (hi - lo) / (n - 1)
    pos = (x - lo) / dx
    i0 = np.clip(np.floor(pos).astype(int), 0, n - 2)
    return i0, pos - i0, lo + dx * np.arange(n)


def prior_row_law(T: int, sigma_A2: float, y: np.ndarray, *, num_samples: int, seed: int, nl: int = 200, nr: int = 160):
    """The prior law of one softmax row on the grid (y nodes) x (nr nodes of r): (r grid, log weight (ny, nr)).

    From the theory's standard-normal draws of the T - 1 other logits (scaled by sigma_A): a joint cloud-in-cell
    histogram of (l1 = log S1, r = S2 / S1^2), times phi(y + l1), the density of the source logit x = y + l1."""
    z = np.asarray(std_draws(seed, T, num_samples)) * np.sqrt(sigma_A2)
    zmax = z.max(axis=1, keepdims=True)
    l1 = np.log(np.exp(z - zmax).sum(1)) + zmax[:, 0]
    r = np.exp(np.log(np.exp(2 * (z - zmax)).sum(1)) + 2 * zmax[:, 0] - 2 * l1)
    i, fi, lgrid = _cic(l1, l1.min() - 0.05, l1.max() + 0.05, nl)
    j, fj, rgrid = _cic(r, 1.0 / (T - 1), 1.0, nr)
    H = np.zeros((nl, nr))
    for di, wi in ((0, 1 - fi), (1, fi)):
        for dj, wj in ((0, 1 - fj), (1, fj)):
            np.add.at(H, (i + di, j + dj), wi * wj)
    logphi = -0.5 * (y[:, None] + lgrid[None, :]) ** 2 / sigma_A2
    shift = logphi.max(axis=1, keepdims=True)
    Q = np.exp(logphi - shift) @ (H / num_samples)
    with np.errstate(divide="ignore"):
        return rgrid, np.log(Q) + shift


def _tilted(h, g, a, b, logQ):
    """For each g: the law of y under the tilt exp(h a + g b) for every h, p (Ng, Nh, ny), and the conditional law
    of r given y, cond (Ng, ny, nr); E[a] and E[b] (Ng, Nh). Factorised: exp(g b) Q is shared by all h."""
    logF = logQ[None] + g[:, None, None] * b[None]  # (Ng, ny, nr)
    logF -= np.max(logF, axis=(1, 2), keepdims=True)
    F = np.exp(logF)
    f = F.sum(2)  # (Ng, ny)
    with np.errstate(divide="ignore", invalid="ignore"):
        cond = np.where(f[..., None] > 0, F / np.where(f > 0, f, 1.0)[..., None], 0.0)
        logf = np.log(f)
    Eb_y = np.einsum("gyr,yr->gy", cond, b)
    lp = h[None, :, None] * a[None, None, :] + logf[:, None, :]  # (Ng, Nh, ny)
    lp -= lp.max(axis=2, keepdims=True)
    p = np.exp(lp)
    p /= p.sum(axis=2, keepdims=True)
    return p, cond, p @ a, np.einsum("ghy,gy->gh", p, Eb_y)


def row_posterior(task, prior, P: float, *, tol: float = 5e-3, numerics: dict | None = None):
    """The theory's posterior law of one attention row at P: dict with y, a (ny,), r (nr,), b (ny, nr), law
    (ny, nr) (sums to 1), the posterior means m, q of the order parameters (Daniels density over the dual grid),
    the number of table entries dropped (invalid, or whose (m, q) differ by more than ``tol`` from the mean of
    this row law at the same (h, g)) and the largest such difference among the entries kept."""
    covered(task, "softmax", onehot=True)
    num = dict(NUMERICS, **(numerics or {}))
    beta, eps, Tq = scales(task, prior, np.array([float(P)]))
    d = occam_d(task)
    tab = cached_table(
        task.T,
        float(prior.sigma_A2),
        d,
        float(beta[0]),
        num["nh"],
        num["ng"],
        num["num_samples"],
        num["seed"],
        num["nl"],
        num["nc"],
        num["ny"],
    )
    y = np.asarray(tab.mom[0])
    rgrid, logQ = prior_row_law(
        task.T, float(prior.sigma_A2), y, num_samples=num["num_samples"], seed=num["seed"], nl=num["nl"]
    )
    a = 1.0 / (1.0 + np.exp(-y))
    b = a[:, None] ** 2 + (1.0 - a[:, None]) ** 2 * rgrid[None, :]
    p, cond, Ea, Eb = _tilted(tab.h, tab.g, a, b, logQ)
    dev = np.maximum(np.abs(Ea.T - tab.m), np.abs(Eb.T - tab.q))  # (Nh, Ng)
    ok = ~unphysical(task.T, tab.Lam, tab.m, tab.q, tab.detC) & (dev <= tol)
    lw = np.asarray(
        cell_log_weights(tab.h, tab.g, tab.Lam, tab.m, tab.q, tab.detC, ok, float(beta[0]), float(eps[0]), Tq, d)
    )
    w = np.exp(lw - lw.max())
    w /= w.sum()
    m, q = np.where(ok, tab.m, 0.5), np.where(ok, tab.q, 0.5)  # w = 0 outside ok
    py = np.einsum("hg,ghy->gy", w, p)  # per g: the weighted law of y
    law = np.einsum("gy,gyr->yr", py, cond)
    border = np.zeros(w.shape, bool)
    border[0, :] = border[-1, :] = border[:, 0] = True
    return {
        "P": float(P),
        "y": y,
        "a": a,
        "r": rgrid,
        "b": b,
        "law": law / law.sum(),
        "m": float(np.sum(w * m)),
        "q": float(np.sum(w * q)),
        "dropped_entries": int((~ok).sum()),
        "max_dev": float(dev[ok & (w > 1e-12)].max()),
        "edge_mass": float(w[border].sum()),
    }


def pr_onehot_limit(q, d: int):
    """PR of the outputs sum_s alpha_s x_s of uniform one-hot tokens in the limit of many probe sequences, for an
    attention row with sum_s alpha_s^2 = q: the second-moment matrix 11^T / d^2 + q (I / d - 11^T / d^2) has
    eigenvalue 1/d along the mean and q/d on the d - 1 directions orthogonal to it."""
    q = np.asarray(q, dtype=np.float64)
    p0 = 1.0 / (1.0 + (d - 1) * q)
    p1 = q * p0
    ent = -(p0 * np.log(p0) + (d - 1) * np.where(p1 > 0, p1 * np.log(np.where(p1 > 0, p1, 1.0)), 0.0))
    return np.exp(ent)


def screens_from_law(rp: dict, T: int, d: int) -> dict:
    """The screens of the last query from a row law (:func:`row_posterior`): posterior means of a and b, of the
    many-sequence PR limit (and that limit at the mean b, for comparison), the median, geometric mean and
    share >= 30x of the previous-token selectivity (T - 1) a / (1 - a)."""

    law, a, b = rp["law"], rp["a"], rp["b"]
    pa = law.sum(1)
    Eb = float(np.sum(law * b))
    sel = (T - 1) * a / np.maximum(1.0 - a, 1e-300)
    cdf = np.cumsum(pa)
    k = int(np.searchsorted(cdf, 0.5))
    if 0 < k < len(a):  # linear in the CDF between the two nodes around the median, in log selectivity
        f = (0.5 - cdf[k - 1]) / max(cdf[k] - cdf[k - 1], 1e-300)
        med = float(np.exp(np.log(sel[k - 1]) + f * (np.log(sel[k]) - np.log(sel[k - 1]))))
    else:
        med = float(sel[min(k, len(a) - 1)])
    return {
        "P": rp["P"],
        "m": float(pa @ a),
        "q": Eb,
        "m_daniels": rp["m"],
        "q_daniels": rp["q"],
        "pr_limit_mean": float(np.sum(law * pr_onehot_limit(b, d))),
        "pr_limit_at_mean_q": float(pr_onehot_limit(Eb, d)),
        "selectivity_median": med,
        "log10_selectivity_mean": float(pa @ np.log10(np.maximum(sel, 1e-300))),
        "frac_above_threshold": float(pa[sel >= THRESHOLD].sum()),
        "max_dev": rp["max_dev"],
        "edge_mass": rp["edge_mass"],
        "dropped_entries": rp["dropped_entries"],
    }


def theory_screens(task, prior, P_values, **kw) -> list[dict]:
    """:func:`screens_from_law` of :func:`row_posterior` at every P."""
    return [screens_from_law(row_posterior(task, prior, P, **kw), task.T, task.d) for P in P_values]
