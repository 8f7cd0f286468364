"""Phase curves in P: branches of minima, the transition (order, P_c, spinodals) and posterior means."""

from __future__ import annotations

import warnings

import numpy as np

from ..._validate import check_bool
from .common import Attention, check_grid, check_prior, covered, occam_d, prediction_error, scales
from .linear import linear_curves, linear_dims, linear_energy, radius_quadrature
from .linear_onehot import onehot_linear_phase_curve
from .phase_curve import PhaseCurve
from .softmax_minima import softmax_action_minima
from .softmax_table import cached_table, check_table_numerics, softmax_tables

# ----------------------------------------------------------------------------------------------------
# phase curves
# ----------------------------------------------------------------------------------------------------


def track_branches(P, minima, tol):
    """Link the local minima at successive P into branches (nearest m, within tol)."""
    branches = []  # each: dict of lists
    active = []
    for i, mins in enumerate(minima):
        new_active = []
        used = set()
        for m, q, F in sorted(mins):
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


def _softmax_curve(P, minima, edge_hit, means, edge_mass, Tq, eps=None):
    """Assemble a PhaseCurve from the minima (per P) and the posterior means (NP, 3) of one configuration."""
    if np.any(edge_hit):
        at = np.asarray(P, float)[np.asarray(edge_hit, bool)]
        warnings.warn(
            f"theory (T_q = {Tq:g}): at P = {at.min():.0f}..{at.max():.0f} a candidate minimum of the action lies on "
            "the edge of the dual (h, g) grid, so a minimum beyond the grid may be missed there (a larger grid, nh "
            "and ng, would show it)",
            stacklevel=4,
        )
    if np.any(edge_mass > 2e-2):
        warnings.warn(
            "theory: the posterior density reaches the edge of the dual (h, g) grid; the means may be biased",
            stacklevel=4,
        )
    branches = track_branches(P, [[t[:3] for t in mins] for mins in minima], tol=0.05)
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
    mean = {"m": means[:, 0].copy(), "q": means[:, 1].copy(), "u": means[:, 2].copy(), "test_error": means[:, 3].copy()}
    # Where one cell of the dual grid holds most of the density, the grid does not resolve its width (large
    # beta: the density narrows as 1/sqrt(T_q beta)) and the grid average is that cell's value. The density is
    # then close to its Laplace limit: the mean is the Newton-refined stable minimum (seen at sigma2 = 10, T = 8
    # one-hot, P >= 8000, where the grid average stuck at m = 0.947 for a range of P).
    narrow = (means[:, 4] > PEAK_SHARE) & np.isfinite(stable["m"])
    if np.any(narrow):
        mean["m"][narrow], mean["q"][narrow], mean["u"][narrow] = (stable[k][narrow] for k in ("m", "q", "u"))
        if eps is not None:
            mean["test_error"][narrow] = np.asarray(
                prediction_error(stable["m"][narrow], stable["q"][narrow], np.asarray(eps)[narrow])
            )
    missing = [float(P[i]) for i, mins in enumerate(minima) if not mins]
    if missing:
        warnings.warn(
            f"theory: no minimum of the action found at {len(missing)} of {len(P)} P values (first "
            f"P = {missing[0]:g}); the dual (h, g) grid or its Monte Carlo table does not resolve this "
            "prior (very small sigma_A2 with a wide P range); the transition reported may be wrong",
            stacklevel=4,
        )
    trans = _first_order(P, branches)
    if trans is None:
        trans = {"order": "crossover", "P_c": None, "spinodals": []}
    return PhaseCurve("softmax", np.asarray(P), branches, stable, mean, trans)


def check_noise_fit(task, noise_fit) -> None:
    """ValueError if ``noise_fit`` is not True or False, or is asked for one-hot tokens (the term is derived for
    Gaussian tokens)."""
    if check_bool("noise_fit", noise_fit) and getattr(task, "tokens", "gaussian") == "onehot":
        raise ValueError(
            "noise_fit=True with task.tokens='onehot': the noise-fit term is derived for Gaussian "
            "tokens only; use noise_fit=False"
        )


def softmax_phase_curves(tasks, priors, P, nf_flag, numerics):
    """Phase curves of several (task, prior) configurations over one P grid, in a few compiled calls."""
    num_samples, seed = numerics.get("num_samples", 20000), numerics.get("seed", 0)
    nh, ng = numerics.get("nh", 241), numerics.get("ng", 121)
    betas, epss, Tqs = [], [], []
    for task, prior in zip(tasks, priors):
        beta, eps, Tq = scales(task, prior, P)
        # the noise-fit term only shifts beta: beta_eff = beta - d^2 / (2 sigma2 T_q)
        betas.append(beta - nf_flag * task.d_out**2 / (2.0 * prior.sigma2 * Tq))
        epss.append(eps)
        Tqs.append(Tq)
    beta, eps = np.stack(betas), np.stack(epss)
    d = occam_d(tasks[0])
    if tasks[0].boundary == "causal":
        return _causal_phase_curves(tasks, priors, P, beta, eps, Tqs, d, numerics)

    def tables(beta_max):
        if len(tasks) == 1:
            return [
                cached_table(
                    tasks[0].T, float(priors[0].sigma_A2), d, beta_max, nh, ng, num_samples, seed, 200, 96, 800
                )
            ]
        return softmax_tables(
            [t.T for t in tasks], [p.sigma_A2 for p in priors], d, beta_max, nh, ng, num_samples, seed, 200, 96, 800
        )

    minima, edge_hit, means, edge_mass = _banded_minima(tables, beta, eps, Tqs, d)
    return [
        _softmax_curve(P, minima[c], edge_hit[c], means[c], edge_mass[c], Tqs[c], eps[c]) for c in range(len(tasks))
    ]


# A dual grid sized for beta_max resolves beta down to about beta_max / 20 (the checked P ranges span 20 in P);
# a wider P range is cut into bands of at most this ratio in beta, each with its own table (one table for
# P = 30..30000 gave a constant m = 0.947 below P = 17000).
BAND_RATIO = 24.0
PEAK_SHARE = 0.5  # above this share of the density in one dual-grid cell, the mean is the Laplace limit


def _beta_bands(beta):
    """Slices of consecutive P (beta ascending with P) whose largest beta is at most BAND_RATIO x the smallest."""
    beta = np.asarray(beta, float)
    out, start = [], 0
    for i in range(1, len(beta) + 1):
        if i == len(beta) or beta[i] > BAND_RATIO * max(beta[start], 1e-300):
            out.append(slice(start, i))
            start = i
    return out


def _banded_minima(tables, beta, eps, Tqs, d, **minima_kw):
    """``softmax_action_minima`` band by band of beta (``_beta_bands`` of the largest beta per P), each band on the
    tables ``tables(beta_max)`` sized for it, joined along P. beta, eps: (C, NP)."""
    parts = [
        softmax_action_minima(tables(float(beta[:, sl].max())), beta[:, sl], eps[:, sl], Tqs, d, **minima_kw)
        for sl in _beta_bands(beta.max(axis=0))
    ]
    minima = [sum((list(pt[0][c]) for pt in parts), []) for c in range(beta.shape[0])]
    edge_hit = np.concatenate([pt[1] for pt in parts], axis=1)
    means = np.concatenate([pt[2] for pt in parts], axis=1)
    edge_mass = np.concatenate([pt[3] for pt in parts], axis=1)
    return minima, edge_hit, means, edge_mass


def _causal_phase_curves(tasks, priors, P, beta, eps, Tqs, d, numerics):
    """Causal softmax (docs/theory.md section 10): one row-averaged table per configuration (and band of beta),
    minima by Newton on the row-averaged tilt; one configuration at a time (the stacked per-row-type moments are
    T_q times a cyclic table's)."""
    from .causal import causal_table, row_types, tilted_rows

    out = []
    for c, (task, prior) in enumerate(zip(tasks, priors)):
        Ks, w = row_types(task)

        def tables(beta_max, Ks=Ks, w=w, prior=prior):
            return [
                causal_table(
                    tuple(int(k) for k in Ks),
                    tuple(float(x) for x in w),
                    float(prior.sigma_A2),
                    d,
                    beta_max,
                    numerics.get("nh", 241),
                    numerics.get("ng", 121),
                    numerics.get("num_samples", 20000),
                    numerics.get("seed", 0),
                )
            ]

        minima, edge_hit, means, edge_mass = _banded_minima(
            tables, beta[c : c + 1], eps[c : c + 1], [Tqs[c]], d, tilt=tilted_rows
        )
        out.append(_softmax_curve(P, minima[0], edge_hit[0], means[0], edge_mass[0], Tqs[c], eps[c]))
    return out


def linear_critical_P(task, prior, nf_flag):
    """P where the curvature of the c-action at c = 0 changes sign: (D - 3) = 2 T_q beta_eff <q/(q+eps)>_{c=0}."""
    from scipy.optimize import brentq

    D, Tq = linear_dims(task)

    def curv(P):
        beta, eps, _ = scales(task, prior, P)
        nf = nf_flag * task.d_out**2 / (2.0 * prior.sigma2 * Tq)
        _, _, log_pt, q = radius_quadrature(D, prior.sigma_A2, task.T, Tq, xp=np)
        lw = log_pt - np.asarray(linear_energy(0.0, q, beta - nf, eps, Tq, task.d_out))  # at c = 0
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


def linear_phase_curves(tasks, priors, P, nf_flag, numerics=None):
    """Linear phase curves of several (task, prior) configurations over one P grid (one-hot tokens: the exact
    four-variable reduction). ``numerics`` is not used (the linear theory is closed form up to quadrature)."""
    return [
        onehot_linear_phase_curve(t, p, P) if t.tokens == "onehot" else _linear_phase_curve(t, p, P, nf_flag)
        for t, p in zip(tasks, priors)
    ]


def _linear_phase_curve(task, prior, P, nf_flag):
    c, logp, mean_u, Tq, D = linear_curves(task, prior, P, nf_flag)
    Pc = linear_critical_P(task, prior, nf_flag)
    S = -logp  # total action in nats on the cosine grid
    beta, eps, _ = scales(task, prior, P)
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
    mean = {
        "u": mean_u,
        "q": qbar,
        "m": np.sqrt(mean_u * qbar),
        "test_error": _linear_mean_test_error(
            task, prior, beta - nf_flag * task.d_out**2 / (2.0 * prior.sigma2 * Tq), eps, c, logp, D, Tq
        ),
    }
    inside = P[0] <= Pc <= P[-1]
    trans = {"order": "second", "P_c": float(Pc) if inside else None, "spinodals": [], "P_c_exact": float(Pc)}
    return PhaseCurve("linear", np.asarray(P), [branch], stable, mean, trans)


def _linear_mean_test_error(task, prior, beta, eps, c, logp, D, Tq, n_sub=65):
    """Posterior mean of test_error(m, q, eps) = 1 - u g(q), g(q) = q (q + 2 eps)/(q + eps)^2: the cosine density
    (logp on the grid c) times the conditional mean of g(q) given c, computed on n_sub cosines and interpolated
    (it is smooth in c)."""
    _, _, log_pt, qv = radius_quadrature(D, prior.sigma_A2, task.T, Tq, xp=np)
    cs = np.linspace(0.0, float(c[-1]), n_sub)
    g_given_c = np.empty((len(beta), n_sub))
    for i, (be, ep) in enumerate(zip(np.asarray(beta, float), np.asarray(eps, float))):
        lw = log_pt[None, :] - np.asarray(linear_energy(cs[:, None] ** 2, qv[None, :], be, ep, Tq, task.d_out))
        w = np.exp(lw - lw.max(axis=1, keepdims=True))
        g = qv * (qv + 2 * ep) / (qv + ep) ** 2
        g_given_c[i] = (w @ g) / w.sum(axis=1)
    wc = np.gradient(c)
    lw = logp + np.log(wc)[None, :]
    w = np.exp(lw - lw.max(axis=1, keepdims=True))
    w /= w.sum(axis=1, keepdims=True)
    g_on_c = np.stack([np.interp(c, cs, row) for row in g_given_c])
    return 1.0 - np.sum(w * c[None, :] ** 2 * g_on_c, axis=1)


def _linear_q_given_c(task, prior, beta, eps, c, D, Tq):
    """Conditional mean of q given the cosine c (beta, eps, c: scalars or arrays of one shape)."""
    _, _, log_pt, q = radius_quadrature(D, prior.sigma_A2, task.T, Tq, xp=np)
    beta, eps, c = (np.asarray(x, float)[..., None] for x in (beta, eps, c))
    lw = log_pt - np.asarray(linear_energy(c**2, q, beta, eps, Tq, task.d_out))
    w = np.exp(lw - lw.max(axis=-1, keepdims=True))
    out = np.sum(w * q, axis=-1) / np.sum(w, axis=-1)
    return float(out) if out.ndim == 0 else out


# per attention kind: (tasks, priors, P, noise-fit flag, numerics) -> one PhaseCurve per (task, prior)
PHASE_CURVES = {"softmax": softmax_phase_curves, "linear": linear_phase_curves}


def phase_curve(
    task,
    prior,
    attention: Attention,
    P_values,
    *,
    noise_fit: bool = False,
    num_samples: int = 20000,
    seed: int = 0,
    nh: int = 241,
    ng: int = 121,
) -> PhaseCurve:
    """Branches of local minima of the reduced action over P, the stable branch, the posterior means from
    the reduced density and the transition.

    task: CopyTask (Gaussian or one-hot tokens; softmax with boundary='cyclic' or 'causal', docs/theory.md
    section 10; linear with one-hot tokens needs boundary='cyclic'); prior: Prior (sigma2 fixed, so beta = P d /
    (2 sigma2) grows with P); P_values: increasing positive grid. ``noise_fit`` adds the O(d^2/sigma^2) noise-fit
    term; ``num_samples``/``seed``: prior draws of the non-source logits (softmax);
    ``nh``, ``ng``: dual grid sizes (softmax).

    >>> import bayesattn as ba
    >>> pc = ba.theory.phase_curve(ba.CopyTask(T=16, d=8), ba.Prior(1, 100, 400), "linear", [100, 400, 1000])
    >>> pc.transition["order"]
    'second'
    """
    attention = covered(task, attention, onehot=True, causal=True)
    prior = check_prior(prior)
    P = check_grid("P_values", P_values)
    check_table_numerics(num_samples=num_samples, seed=seed, nh=nh, ng=ng)
    check_noise_fit(task, noise_fit)
    numerics = dict(num_samples=num_samples, seed=seed, nh=nh, ng=ng)
    pc = PHASE_CURVES[attention]([task], [prior], P, float(noise_fit), numerics)[0]
    pc.config = {
        "task": task.config(),
        "prior": prior.config(),
        "attention": attention,
        "noise_fit": bool(noise_fit),
        "num_samples": num_samples,
        "seed": seed,
    }
    return pc
