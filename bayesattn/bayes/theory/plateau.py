"""Plateau lengths of gradient flow from a small init, predicted by the zero-temperature action (docs/theory.md
section 13).

Gradient descent with step ``lr`` on the marginal objective J_marg(L) = -(sigma2 / n) log p(L | D) + const
(``ba.train(..., optimizer="gd", objective="marginal")``) is the Euler discretisation of the gradient flow
dL/dt = -grad J_marg in time t = lr x steps. At zero temperature and large n the reduced theory
(:mod:`~bayesattn.bayes.theory.zero_temperature`) gives -log p(L | D) = T_q Phi_0(theta) + const along the path of
minimum-cost rows, with theta the logit gap Delta of every row (softmax) or the radius r = |L| along the copy
pattern (linear). On that path the flow is one-dimensional (n = P T_q):

    dtheta/dt = -(sigma2 / (P g)) dPhi_0/dtheta,    g = |dL/dtheta|^2 = T - 1 (softmax), 1 (linear),

and the plateau length, the time at which the order parameter m is half-way between its start and the copy
branch it flows to, is

    t_plateau = (P g / sigma2) int_{theta_0}^{theta_half} dtheta / (-Phi_0'(theta)),

infinite when Phi_0' >= 0 somewhere on the way (a stable point stops the flow) and, for a first-order transition,
at every P up to the spinodal P_s where the uniform branch ends (a small init stays on it; half-way is then measured
to the copy branch, which the flow never reaches). Start: every row uniform (Delta = 0, softmax); the init's overlap with the unit copy pattern, r_0 = init_scale
x 0.6745 (the median of |N(0, init_scale^2)|, linear). Two limits follow:

- softmax, just above the spinodal P_s where the uniform branch ends: with f = -Phi_0', the passage through the
  saddle-node bottleneck takes t ~ (P g / sigma2) pi sqrt(2 / (f'' f_min)), f_min ~ (P - P_s): a
  (P - P_s)^(-1/2) law (``bottleneck``);
- linear, above the mode's critical point P_c: L = 0 is unstable at rate lambda = -(2 sigma2 / (P T T_q))
  Phi_0'(q = 0) ~ (P - P_c) and the flow is a pitchfork, dr/dt ~ lambda r (1 - r^2 / r*^2), so
  t ~ log[r_half^2 (r*^2 - r_0^2) / (r_0^2 (r*^2 - r_half^2))] / (2 lambda): critical slowing down as
  1 / (P - P_c), up to the logarithm (``escape``).

Limits: cyclic boundary (T_q = T); the marginal objective (the joint one also moves V, whose growth from a
small init this does not describe); symmetric rows (the reduced theory's large-n, zero-temperature mode path);
gradient flow, not Adam (whose steps are normalised). The measured counterpart is the ``plateau`` experiment.
"""

from __future__ import annotations

import warnings

import numpy as np
from scipy.integrate import IntegrationWarning, quad
from scipy.optimize import brentq, minimize_scalar

from .common import Attention, check_grid, check_prior, covered, scales
from .zero_temperature import linear_mode_critical_P, mode_action, mode_curve, softmax_row

HALF_NORMAL_MEDIAN = 0.6744897501960817  # median of |N(0, 1)|
_TRANSITION_GRID = np.geomspace(5.0, 1e6, 400)  # P grid on which the softmax spinodals are looked for
_DELTA_MAX = 38.0  # the softmax gap grid of the mode theory ends here (a = 1 - 1e-13 at T <= 4096)


def _dphi(task, prior, attention, P, x, h=1e-5):
    """dPhi_0/dx at one P (central differences of step h; x the gap Delta or the radius q)."""
    x = np.asarray(x, np.float64)
    plus = mode_action(task, prior, attention, P, x + h)
    return (plus - mode_action(task, prior, attention, P, x - h)) / (2.0 * h)


def _dphi_linear(task, prior, P, q):
    """dPhi_0/dq of linear attention at one P. Phi_0(q) is smooth on q > -eps (eps = lam / n): central differences
    with a step well inside, accurate at q = 0 too, where near P_c the derivative is a small difference of large
    terms."""
    eps = float(scales(task, prior, np.asarray([float(P)]))[1][0])
    return _dphi(task, prior, "linear", P, q, h=min(1e-5, 1e-3 * eps))


def _softmax_plateau(task, prior, P, P_s):
    """(t_plateau, m_half, bottleneck law) at one P; P_s: where the uniform branch ends (None: a crossover)."""
    T = task.T
    g = T - 1.0
    if P_s is not None and P <= P_s:
        return np.inf, np.nan, np.nan  # the uniform branch is a stable point: a small init stays on it
    grid = np.linspace(0.0, _DELTA_MAX, 20001)
    f = -_dphi(task, prior, "softmax", P, grid)
    # the branch the flow reaches: the first local minimum of Phi_0 (f crosses from + to -)
    down = np.nonzero((f[:-1] > 0) & (f[1:] <= 0))[0]
    if len(down) == 0:
        return np.inf, np.nan, np.nan
    i = down[0]
    d_copy = brentq(lambda x: -_dphi(task, prior, "softmax", P, x), grid[i], grid[i + 1])
    a_half = 0.5 * (1.0 / T + softmax_row(d_copy, T)[0])
    d_half = np.log(a_half * (T - 1) / (1.0 - a_half))  # a(Delta) = 1 / (1 + (T - 1) e^-Delta)
    scale = P * g / prior.sigma2
    # the integrand peaks where f is smallest on the way (the bottleneck): tell quad where
    res = minimize_scalar(
        lambda x: -float(_dphi(task, prior, "softmax", P, x)),
        bounds=(0.0, d_half),
        method="bounded",
        options={"xatol": 1e-10},
    )
    x_b, f_min = float(res.x), float(res.fun)
    if f_min <= 0:
        return np.inf, a_half, np.nan
    inner = [x_b] if 0.0 < x_b < d_half else None
    with warnings.catch_warnings():  # the finite-difference integrand's roundoff near a tight bottleneck; the
        warnings.simplefilter("ignore", IntegrationWarning)  # result is checked against an ODE solver in the tests
        val, _ = quad(lambda x: 1.0 / -_dphi(task, prior, "softmax", P, x), 0.0, d_half, points=inner, limit=400)
    bottleneck = np.nan
    if P_s is not None and inner:
        h = 1e-3
        f2 = (-_dphi(task, prior, "softmax", P, x_b + h) - 2 * f_min - _dphi(task, prior, "softmax", P, x_b - h)) / h**2
        if f2 > 0:
            bottleneck = scale * np.pi * np.sqrt(2.0 / (float(f2) * f_min))
    return float(scale * val), float(a_half), float(bottleneck)


def _linear_rate(task, prior, P, r):
    """-dPhi_0/dr along the copy pattern's radius r (linear, cyclic: q = r^2 / (T T_q)); r a number or an array."""
    T, Tq = task.T, task.T
    return -_dphi_linear(task, prior, P, r * r / (T * Tq)) * 2.0 * r / (T * Tq)


def _linear_plateau(task, prior, P, init_scale, m_star):
    """(t_plateau, m_half) at one P; m_star: the mode's copy weight there."""
    T, Tq = task.T, task.T  # cyclic
    if m_star <= 0:
        return np.inf, 0.0
    r_half = 0.5 * m_star * np.sqrt(T * Tq)  # m = sqrt(q), q = r^2 / (T T_q)
    r0 = HALF_NORMAL_MEDIAN * init_scale
    if r0 >= r_half:
        return 0.0, 0.5 * m_star

    # log-spaced substitution r = e^s: the escape from r_0 is exponential, so dt/ds is smooth
    val, _ = quad(lambda s: np.exp(s) / _linear_rate(task, prior, P, np.exp(s)), np.log(r0), np.log(r_half), limit=400)
    return float(P / prior.sigma2 * val), 0.5 * m_star


def _linear_escape(task, prior, P, init_scale, m_star):
    """The pitchfork normal form's time from r_0 to r_half, dr/dt = lambda r (1 - r^2 / r*^2):
    t = log[r_half^2 (r*^2 - r_0^2) / (r_0^2 (r*^2 - r_half^2))] / (2 lambda), with the instability rate
    lambda = -(2 sigma2 / (P T T_q)) Phi_0'(0) ~ (P - P_c) (NaN where L = 0 is stable); m_star: the mode's copy
    weight at each P."""
    T, Tq = task.T, task.T
    out = np.full(len(P), np.nan)
    r0 = HALF_NORMAL_MEDIAN * init_scale
    for k, p in enumerate(P):
        lam = -2.0 * prior.sigma2 / (p * T * Tq) * float(_dphi_linear(task, prior, p, 0.0))
        r_star = float(m_star[k]) * np.sqrt(T * Tq)
        r_half = 0.5 * r_star
        if lam > 0 and r_half > r0:
            out[k] = np.log(r_half**2 * (r_star**2 - r0**2) / (r0**2 * (r_star**2 - r_half**2))) / (2.0 * lam)
    return out


def _softmax_spinodal(task, prior) -> float | None:
    """Where the uniform branch of the softmax marginal mode ends (None: a crossover, which has none)."""
    curve = mode_curve(task, prior, "softmax", _TRANSITION_GRID, objective="marginal")
    spin = curve.transition.get("spinodals") or []
    return float(spin[1]) if len(spin) == 2 else None


def _linear_critical(task, prior) -> float:
    """The linear marginal mode's critical point P_c."""
    return float(linear_mode_critical_P(task, prior, "marginal"))


def _softmax_curve(task, prior, P, init_scale) -> tuple[list, dict]:
    """The softmax rows (t_plateau, m_half, bottleneck law) and the curve's own fields (P_s, bottleneck)."""
    P_s = _softmax_spinodal(task, prior)
    rows = [_softmax_plateau(task, prior, float(p), P_s) for p in P]
    return rows, {"P_s": P_s, "bottleneck": [r[2] for r in rows]}


def _linear_curve(task, prior, P, init_scale) -> tuple[list, dict]:
    """The linear rows (t_plateau, m_half) and the curve's own fields (P_c, the linear-instability escape)."""
    m_star = np.asarray(mode_curve(task, prior, "linear", P, objective="marginal").stable["m"], float)
    rows = [_linear_plateau(task, prior, float(p), init_scale, m) for p, m in zip(P, m_star)]
    return rows, {
        "P_c": _linear_critical(task, prior),
        "escape": _linear_escape(task, prior, P, init_scale, m_star).tolist(),
    }


# per attention: where a small init first leaves the plateau, and the plateau curve's rows and own fields
SMALL_INIT_TRANSITION = {"softmax": _softmax_spinodal, "linear": _linear_critical}
LANGEVIN_DERIVED = ("linear",)  # the attention kinds whose finite-temperature plateau is derived here
PLATEAU_CURVES = {"softmax": _softmax_curve, "linear": _linear_curve}


def small_init_transition(task, prior, attention: Attention) -> float | None:
    """The P where a small init first leaves the plateau for good: the spinodal where the uniform branch of the
    marginal mode ends (softmax; None for a crossover, which has none) or the mode's critical point P_c (linear).
    Found on a P grid of its own (5 to 10^6), so that it does not depend on the P values a caller asks about.
    ValueError for a task, prior or attention the theory does not cover."""
    attention = covered(task, attention)
    return SMALL_INIT_TRANSITION[attention](task, check_prior(prior))


def plateau_curve(task, prior, attention: Attention, P_values, *, init_scale: float = 1e-2) -> dict:
    """The predicted plateau length of gradient flow on the marginal objective from a small init, against P
    (module docstring), in units of flow time t = lr x steps of ``ba.train(..., optimizer="gd",
    objective="marginal")``.

    Parameters
    ----------
    task : CopyTask
        A cyclic copy task (the reduced theory's coverage for the mode).
    prior : Prior
    attention : {"softmax", "linear"}
    P_values : array_like
        Increasing numbers of training sequences.
    init_scale : float
        The small init's scale (L entries ~ init_scale N(0, 1)); sets the linear escape's start.

    Returns
    -------
    dict
        ``P``; ``t_plateau`` (inf where the flow never gets half-way); ``m_half`` (the half-way copy weight);
        ``P_s`` (softmax: where the uniform branch ends, the small-init spinodal; None for a crossover) or
        ``P_c`` (linear: the mode's critical point); ``bottleneck`` (softmax: the saddle-node law, NaN below
        P_s) or ``escape`` (linear: the linear-instability law, NaN below P_c).

    Raises
    ------
    ValueError
        A causal task, a bad prior, attention or grid.

    Examples
    --------
    >>> import bayesattn as ba
    >>> c = ba.theory.plateau_curve(ba.CopyTask(T=16, d=8), ba.Prior(1, 100, 400), "linear", [200, 400])
    >>> bool(c["t_plateau"][0] > c["t_plateau"][1])
    True
    """
    attention = covered(task, attention)
    if getattr(task, "boundary", "cyclic") != "cyclic":
        raise ValueError(f"task.boundary={task.boundary!r}: the plateau theory covers the cyclic boundary only")
    prior = check_prior(prior)
    P = check_grid("P_values", P_values)
    if not (isinstance(init_scale, (int, float)) and np.isfinite(init_scale) and init_scale > 0):
        raise ValueError(f"init_scale={init_scale!r}: expected a positive number")
    scales(task, prior, P)  # checks the grid against the task's scales
    rows, own = PLATEAU_CURVES[attention](task, prior, P, float(init_scale))
    out = {
        "attention": attention,
        "P": P.tolist(),
        "t_plateau": [r[0] for r in rows],
        "m_half": [r[1] for r in rows],
        "init_scale": float(init_scale),
        "T": task.T,
    }
    out.update(own)
    return out


def langevin_plateau(
    task,
    prior,
    attention: Attention,
    P_values,
    *,
    temperature: float,
    init_scale: float = 1e-2,
    samples: int = 2000,
    t_max: float | None = None,
    seed: int = 0,
) -> dict:
    """The predicted plateau length of SGLD on the marginal objective at a small temperature, linear attention:
    the one-dimensional flow of :func:`plateau_curve` along the copy pattern's radius r, with the noise of
    ``ba.train(..., optimizer="langevin", objective="marginal", temperature=tau)`` projected on that direction,

        dr = (sigma2 / P) rate(r) dt + sqrt(2 tau sigma2 / n) dW,    rate = -dPhi_0/dr,  n = P T_q,

    started at r_0 ~ init_scale N(0, 1) and integrated by Euler-Maruyama for ``samples`` paths (numpy, ``seed``).
    The plateau length is the median over paths of the first time |r| reaches r_half (half-way to the copy
    branch, as for gradient flow), in flow time. Near P_c the noise, not the init, starts the escape: where
    gradient flow slows down as 1 / (P - P_c), the diffusion reaches r_half in about r_half^2 n / (2 tau sigma2).

    Limits: linear attention only (its m is the overlap with one direction, on which the other directions'
    noise does not act; softmax rows fluctuate one by one at a finite temperature, which the symmetric-row path
    does not describe); the drift is the zero-temperature one (the transverse directions' thermal spread is not
    fed back); cyclic boundary.

    Returns
    -------
    dict
        ``P``; ``t_plateau`` (the median first-passage time, inf where half or more paths have not passed by
        ``t_max``); ``t_quartiles`` ([25%, 75%] per P); ``passed`` (fraction of paths by ``t_max``); ``m_half``;
        ``temperature``, ``init_scale``, ``samples``, ``seed``, ``T``.

    Raises
    ------
    ValueError
        Softmax attention, a causal task, a bad prior, grid, temperature, init scale or sample count.
    """
    attention = covered(task, attention)
    if attention not in LANGEVIN_DERIVED:
        raise ValueError(
            f"attention={attention!r}: the finite-temperature plateau is derived for linear attention only"
        )
    if getattr(task, "boundary", "cyclic") != "cyclic":
        raise ValueError(f"task.boundary={task.boundary!r}: the plateau theory covers the cyclic boundary only")
    prior = check_prior(prior)
    P = check_grid("P_values", P_values)
    for name, v in (("temperature", temperature), ("init_scale", init_scale)):
        if not (isinstance(v, (int, float)) and np.isfinite(v) and v > 0):
            raise ValueError(f"{name}={v!r}: expected a positive number")
    if isinstance(samples, bool) or not isinstance(samples, int) or not 2 <= samples <= 10**6:
        raise ValueError(f"samples={samples!r}: expected an integer in 2..1000000")
    if t_max is not None and not (isinstance(t_max, (int, float)) and np.isfinite(t_max) and t_max > 0):
        raise ValueError(f"t_max={t_max!r}: expected a positive number or None")
    T, Tq = task.T, task.T
    zero_t = plateau_curve(task, prior, "linear", P, init_scale=init_scale)  # also checks the grid's scales
    m_star = 2.0 * np.asarray(zero_t["m_half"], float)  # the mode's copy weight (half-way is half of it)
    rng = np.random.default_rng(seed)
    t_med, quart, passed = [], [], []
    for p, m, t0 in zip(P, m_star, zero_t["t_plateau"]):
        r_half = 0.5 * m * np.sqrt(T * Tq)
        if r_half <= 0:
            t_med.append(np.inf), quart.append([np.inf, np.inf]), passed.append(0.0)
            continue
        noise = 2.0 * temperature * prior.sigma2 / (p * Tq)  # variance of r per unit flow time
        grid = np.linspace(0.0, r_half, 513)
        drift = prior.sigma2 / p * _linear_rate(task, prior, float(p), grid)
        t_diff = r_half**2 / noise  # the diffusion's time scale to r_half
        scale = min(t0, t_diff) if np.isfinite(t0) else t_diff
        horizon = t_max if t_max is not None else 20.0 * scale
        dt = scale / 2000.0
        r = init_scale * rng.standard_normal(samples)
        hit = np.full(samples, np.inf)
        alive = np.ones(samples, bool)
        t, step_sd = 0.0, np.sqrt(noise * dt)
        while t < horizon and alive.any():
            ra = r[alive]
            ra = ra + np.sign(ra) * np.interp(np.abs(ra), grid, drift) * dt + step_sd * rng.standard_normal(ra.size)
            t += dt
            r[alive] = ra
            done = np.abs(ra) >= r_half
            idx = np.flatnonzero(alive)[done]
            hit[idx] = t
            alive[idx] = False
        passed.append(float(np.isfinite(hit).mean()))
        t_med.append(float(np.median(hit)))
        quart.append([float(x) for x in np.quantile(hit, [0.25, 0.75])])
    return {
        "attention": "linear",
        "P": P.tolist(),
        "t_plateau": t_med,
        "t_quartiles": quart,
        "passed": passed,
        "m_half": (0.5 * m_star).tolist(),
        "temperature": float(temperature),
        "init_scale": float(init_scale),
        "samples": samples,
        "seed": seed,
        "T": T,
    }
