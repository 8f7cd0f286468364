"""Zero-temperature limits of the reduced theory: the modes of p(L | D) (marginal) and of p(L, V | D) (joint).

Derivation: docs/theory.md section 7. The log density of L is

    log p(L | D) = -|L|^2 / (2 sigma_A2) - T_q Phi_E(m(L), q(L)) + const,
    Phi_E = beta [1 - m^2/(q + eps)] + w (d^2 / (2 T_q)) log(1 + q/eps),

with w = 1 (the readout integrated out: the marginal) or w = 0 (the readout maximised: max_V log p(L, V, D)
equals log p(L, D) minus exactly the Occam term). A mode has no entropy of L: the prior of L is an energy,
|L|^2 / (2 sigma_A2 T_q) per row. Phi_E is concave in (m, q), so its minimum over row configurations with given
per-row costs is reached with every row equal (a concave function of an average is minimised at an extreme
point), and the per-row action of a mode is

    Phi_0 = Phi_E(m, q) + c(m, q),   c = min |l|^2 / (2 sigma_A2) over the row's logits at given (m, q)  [per row].

- softmax: at given copy weight a, the logits that minimise both |l|^2 and q put the same logit on the T - 1
  non-source keys (x - lse is concave, so the minimum-norm point of {a(l) = a} is the symmetric one; equal
  non-source weights also minimise q, and Phi_E grows with q). With the gap Delta = x - y,
  a = e^Delta / (e^Delta + T - 1), q = a^2 + (1 - a)^2 / (T - 1) and c = (T - 1) Delta^2 / (2 T sigma_A2):
  a one-dimensional action Phi_0(Delta), minimised on a grid and refined; it has two local minima over a window
  of P (hysteresis of the modes), whose ends are the spinodals.
- linear: at given q the copy weight is largest along the pattern (m^2 = u q with u = 1), and
  c = T q / (2 sigma_A2) (|L|^2 = T T_q q). With C = beta eps = d^2 / (2 sigma_V2 T_q) (independent of P),
  D = w d^2 / (2 T_q) and K = T / (2 sigma_A2), Phi_0(q) = C / (q + eps) + D log(1 + q/eps) + K q + const has one
  minimum, q* = max(0, x* - eps) with K x*^2 + D x* - C = 0: a second-order transition at
  P_c = lam / (T_q x*). For the joint mode (D = 0) x* = sqrt(C/K) and P_c = sigma2 sqrt(T / T_q) / (sigma_A sigma_V),
  independent of T and d (cyclic).

``mode_curve`` returns a :class:`~bayesattn.bayes.theory.curves.PhaseCurve` (branches, the global mode and the
transition: binodal = where the global mode switches, spinodals = where a branch ends, which is where Adam from a
small / hot init jumps).
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from scipy.optimize import brentq, minimize_scalar

from ..._validate import brief, check_choice, check_positive, check_real_array
from .common import Attention, check_grid, check_prior, covered, scales
from .curves import PhaseCurve, track_branches
from .linear import linear_dims

Objective = Literal["joint", "marginal"]
MODE_OBJECTIVES = ("joint", "marginal")

# the softmax gap Delta = x - y between the source logit and the others: a from ~e^-3 / T to 1 - 1e-13 (T <= 4096)
_DELTA_GRID = np.linspace(-3.0, 38.0, 8201)


def _occam_weight(objective: str) -> float:
    return 1.0 if check_choice("objective", objective, MODE_OBJECTIVES) == "marginal" else 0.0


def softmax_row(delta, T: int):
    """(a, q, |l|^2 / Delta^2) of the minimum-norm softmax row with source-to-other logit gap ``delta``."""
    delta = np.asarray(delta, np.float64)
    a = 1.0 / (1.0 + (T - 1) * np.exp(-delta))
    q = a**2 + (1.0 - a) ** 2 / (T - 1)
    return a, q, (T - 1) / T


def _softmax_mode_action(delta, beta, eps, T, Tq, d, sigma_A2, w):
    """Per-row action Phi_0 at gap delta (broadcasting over delta, beta, eps)."""
    a, q, norm = softmax_row(delta, T)
    return (
        beta * (1.0 - a**2 / (q + eps))
        + w * d**2 / (2.0 * Tq) * np.log1p(q / eps)
        + norm * np.asarray(delta) ** 2 / (2.0 * sigma_A2)
    )


def _linear_mode_action(q, beta, eps, T, Tq, d, sigma_A2, w):
    """Per-row action Phi_0 of the linear mode at radius q (broadcasting), up to a constant."""
    return beta * eps / (q + eps) + w * d**2 / (2.0 * Tq) * np.log1p(q / eps) + T * q / (2.0 * sigma_A2)


# per attention kind: Phi_0 along the path of minimum-cost rows, (x, beta, eps, T, T_q, d, sigma_A2, w) -> Phi_0
MODE_ACTIONS = {"softmax": _softmax_mode_action, "linear": _linear_mode_action}


def mode_action(
    task, prior, attention: Attention, P: float, x, *, objective: Objective = "marginal", noise_fit: bool = False
) -> np.ndarray:
    """The zero-temperature per-row action Phi_0 (module docstring) at one P, along the path of minimum-cost rows:
    x = the logit gap Delta (softmax) or the radius q >= 0 (linear). T_q * Phi_0 is -log p of the mode's L (plus
    a constant), in nats."""
    attention = covered(task, attention)
    prior = check_prior(prior)
    P = check_positive("P", P)
    w = _occam_weight(objective)
    beta, eps, Tq = scales(task, prior, np.asarray([P]))
    beta = beta - float(noise_fit) * task.d_out**2 / (2.0 * prior.sigma2 * Tq)
    x = np.asarray(check_real_array("x", x, (None,) * np.ndim(x)), np.float64)
    if attention == "linear" and np.any(x <= -eps[0]):  # analytic down to -eps (a difference quotient at q = 0)
        raise ValueError(f"x={brief(x)}: expected radii q >= 0 for linear attention (the action ends at -eps)")
    return MODE_ACTIONS[attention](x, beta[0], eps[0], task.T, Tq, task.d_out, prior.sigma_A2, w)


def _softmax_minima(task, prior, P, nf, w):
    """Local minima (m, q, T_q Phi_0, Delta) of the softmax mode action at each P."""
    T, d = task.T, task.d_out
    beta, eps, Tq = scales(task, prior, P)
    beta = beta - nf * d**2 / (2.0 * prior.sigma2 * Tq)
    x = _DELTA_GRID
    out = []
    for b, e in zip(beta, eps):
        f = lambda t: float(_softmax_mode_action(t, b, e, T, Tq, d, prior.sigma_A2, w))  # noqa: E731
        y = _softmax_mode_action(x, b, e, T, Tq, d, prior.sigma_A2, w)
        idx = np.flatnonzero((y[1:-1] < y[:-2]) & (y[1:-1] <= y[2:])) + 1
        mins = []
        for i in idx:
            r = minimize_scalar(f, bounds=(x[i - 1], x[i + 1]), method="bounded", options={"xatol": 1e-12})
            a, q, _ = softmax_row(r.x, T)
            mins.append((float(a), float(q), float(r.fun) * Tq, float(r.x)))
        out.append(mins)
    return out, Tq


def _stationary_P(task, prior, nf, w, delta):
    """P_s(Delta): the P at which gap Delta is a stationary point of Phi_0 (dPhi_0/dDelta = 0), by bisection in
    log P on [1, 1e8] (inf where there is none: the gradient has one sign there). The stationary curve of the
    modes; its local extrema are the spinodals."""
    T, d = task.T, task.d_out
    h = 1e-6

    def grad(P):
        beta, eps, Tq = scales(task, prior, P)
        beta = beta - nf * d**2 / (2.0 * prior.sigma2 * Tq)
        f = lambda x: _softmax_mode_action(x, beta, eps, T, Tq, d, prior.sigma_A2, w)  # noqa: E731
        return (f(delta + h) - f(delta - h)) / (2 * h)

    lo, hi = np.zeros_like(delta), np.full_like(delta, np.log(1e8))
    ok = (grad(np.exp(lo)) > 0) & (grad(np.exp(hi)) < 0)
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        up = grad(np.exp(mid)) > 0  # still too small a P
        lo, hi = np.where(up, mid, lo), np.where(up, hi, mid)
    return np.where(ok, np.exp(0.5 * (lo + hi)), np.inf)


_STATIONARY_DELTA = np.linspace(1e-3, 30.0, 6001)


def _softmax_spinodals(task, prior, nf, w):
    """Local extrema of the stationary curve P_s(Delta): [lower, upper] spinodal (first order) or [] when P_s is
    monotone (a crossover); and the crossover point, the P of steepest dm/dP = (da/dDelta) / (dP_s/dDelta)."""
    x = _STATIONARY_DELTA
    Ps = _stationary_P(task, prior, nf, w, x)
    fin = np.isfinite(Ps)
    x, Ps = x[fin], Ps[fin]
    dP = np.diff(Ps)
    turn = np.flatnonzero(np.sign(dP[1:]) != np.sign(dP[:-1])) + 1
    spin = []
    for i in turn:  # refine each extremum of P_s on its grid neighbourhood
        sgn = 1.0 if dP[i - 1] > 0 else -1.0  # a maximum of P_s if it rose before
        f = lambda t: -sgn * float(_stationary_P(task, prior, nf, w, np.asarray([t]))[0])  # noqa: E731
        r = minimize_scalar(f, bounds=(x[i - 1], x[i + 1]), method="bounded", options={"xatol": 1e-10})
        spin.append(-sgn * r.fun)
    a, _, _ = softmax_row(x, task.T)
    with np.errstate(invalid="ignore", divide="ignore"):
        slope = np.where(dP > 0, np.diff(a) / dP, np.nan)
    j = int(np.nanargmax(slope)) if np.any(np.isfinite(slope)) else 0
    return sorted(spin), float(0.5 * (Ps[j] + Ps[j + 1]))


def _softmax_mode_curve(task, prior, P, nf, w):
    minima, Tq = _softmax_minima(task, prior, P, nf, w)
    branches = track_branches(P, [[t[:3] for t in mins] for mins in minima], tol=0.05)
    stable = {k: np.full(len(P), np.nan) for k in ("m", "q", "u", "free_energy", "delta")}
    for i, mins in enumerate(minima):
        m_, q_, F_, dl = min(mins, key=lambda t: t[2])
        stable["m"][i], stable["q"][i], stable["u"][i] = m_, q_, m_ * m_ / q_
        stable["free_energy"][i], stable["delta"][i] = F_, dl
    spin, steepest = _softmax_spinodals(task, prior, nf, w)
    if len(spin) == 2:
        trans = {"order": "first", "spinodals": spin, "P_c": _softmax_binodal(task, prior, spin, nf, w)}
    else:
        trans = {"order": "crossover", "P_c": None, "spinodals": [], "P_steepest": steepest}
    return PhaseCurve("softmax", np.asarray(P), branches, stable, {k: stable[k].copy() for k in ("m", "q", "u")}, trans)


def _softmax_binodal(task, prior, spin, nf, w):
    """The P where the two minima have equal action (between the spinodals), by brentq."""
    lo, hi = spin

    def diff(P):
        mins = sorted(_softmax_minima(task, prior, np.asarray([P]), nf, w)[0][0])
        return mins[-1][2] - mins[0][2] if len(mins) >= 2 else np.nan

    grid = lo + (hi - lo) * np.linspace(0.01, 0.99, 50)
    vals = np.array([diff(P) for P in grid])
    for i in range(len(grid) - 1):
        if np.isfinite(vals[i]) and np.isfinite(vals[i + 1]) and vals[i] > 0 >= vals[i + 1]:
            return float(brentq(diff, grid[i], grid[i + 1], xtol=1e-10 * hi))
    return float(0.5 * (lo + hi))  # a window too narrow to resolve both minima on the Delta grid: its middle


def linear_mode_critical_P(task, prior, objective: Objective = "marginal", noise_fit: bool = False) -> float:
    """P_c of the linear mode, lam / (T_q x*) with K x*^2 + D x* - C = 0 (module docstring)."""
    covered(task, "linear")
    prior = check_prior(prior)
    w = _occam_weight(objective)
    _, Tq = linear_dims(task)
    d = task.d_out
    lam = prior.lam(task.d)
    K = task.T / (2.0 * prior.sigma_A2)
    D = w * d**2 / (2.0 * Tq)

    # C = beta_eff eps; the noise-fit shift beta -> beta - d^2 / (2 sigma2 T_q) makes it depend on P: solve
    def root(P):
        beta, eps, _ = scales(task, prior, P)
        C = (beta - float(noise_fit) * d**2 / (2.0 * prior.sigma2 * Tq)) * eps
        x = (-D + np.sqrt(D * D + 4.0 * K * C)) / (2.0 * K)
        return eps - x

    C0 = d * lam / (2.0 * prior.sigma2 * Tq)
    x0 = (-D + np.sqrt(D * D + 4.0 * K * C0)) / (2.0 * K)
    P0 = lam / (Tq * x0)
    if not noise_fit:
        return float(P0)
    return float(brentq(root, 0.5 * P0, 4.0 * P0, xtol=1e-12 * P0))


def _linear_mode_curve(task, prior, P, nf, w):
    d = task.d_out
    beta, eps, Tq = scales(task, prior, P)
    C = (beta - nf * d**2 / (2.0 * prior.sigma2 * Tq)) * eps
    K = task.T / (2.0 * prior.sigma_A2)
    D = w * d**2 / (2.0 * Tq)
    x = (-D + np.sqrt(D * D + 4.0 * K * C)) / (2.0 * K)
    q = np.maximum(x - eps, 0.0)
    u = np.where(q > 0, 1.0, 0.0)
    F = Tq * (C / (q + eps) + D * np.log1p(q / eps) + K * q)
    stable = {"m": np.sqrt(q), "q": q, "u": u, "free_energy": F - Tq * C / eps}  # relative to L = 0
    branch = {"P": np.asarray(P, float), **{k: v.copy() for k, v in stable.items()}}
    Pc = linear_mode_critical_P(task, prior, "marginal" if w else "joint", bool(nf))
    inside = P[0] <= Pc <= P[-1]
    trans = {"order": "second", "P_c": float(Pc) if inside else None, "spinodals": [], "P_c_exact": float(Pc)}
    return PhaseCurve("linear", np.asarray(P), [branch], stable, {k: stable[k].copy() for k in ("m", "q", "u")}, trans)


# per attention kind: (task, prior, P, noise-fit flag, Occam weight) -> the PhaseCurve of the modes
MODE_CURVES = {"softmax": _softmax_mode_curve, "linear": _linear_mode_curve}


def mode_curve(
    task, prior, attention: Attention, P_values, *, objective: Objective = "marginal", noise_fit: bool = False
) -> PhaseCurve:
    """The zero-temperature theory over P: the local minima of the mode action Phi_0 (branches), the global mode
    (``stable`` = ``mean``: a mode has no fluctuations) and the transition.

    objective: "marginal" (the mode of p(L | D): Adam on ``objective="marginal"``) or "joint" (the mode of
    p(L, V | D): Adam on the network). For softmax the transition is first order: ``transition["P_c"]`` is the
    binodal (the global mode switches) and ``transition["spinodals"]`` = [where the copy branch appears (a hot
    init stays above it), where the uniform branch disappears (a small init jumps)], both refined to ~1e-6
    relative; a window without two minima gives order "crossover". For linear it is second order at
    ``P_c_exact`` (closed form). free_energy: T_q Phi_0 in nats (softmax), relative to L = 0 (linear).

    >>> import bayesattn as ba
    >>> round(ba.theory.mode_curve(ba.CopyTask(T=32, d=8), ba.Prior(1, 100, 400), "linear", [20, 80],
    ...                            objective="joint").transition["P_c"], 6)  # sigma2 / (sigma_A sigma_V)
    40.0
    """
    attention = covered(task, attention)
    prior = check_prior(prior)
    w = _occam_weight(objective)
    P = check_grid("P_values", P_values)
    nf = float(noise_fit)
    pc = MODE_CURVES[attention](task, prior, P, nf, w)
    pc.config = {
        "task": task.config(),
        "prior": prior.config(),
        "attention": attention,
        "noise_fit": bool(noise_fit),
        "objective": objective,
        "temperature": 0.0,
    }
    return pc
