"""Phase diagrams over (P, sigma_A2) or (P, T), the critical exponent and finite-size scaling."""

from __future__ import annotations

from dataclasses import dataclass, field

import jax
import jax.numpy as jnp
import numpy as np

from ..._validate import check_int, check_keywords, check_positive, keyword_only
from ...models.attention import ORDER_PARAMETER
from .common import Attention, check_grid, check_prior, covered, scales
from .curves import PHASE_CURVES, PhaseCurve, check_noise_fit, linear_critical_P, phase_curve
from .linear import linear_cosine_log_density, linear_dims

# ----------------------------------------------------------------------------------------------------
# phase diagrams, critical exponent, finite-size scaling
# ----------------------------------------------------------------------------------------------------


def _half_way(pc: PhaseCurve) -> float:
    """The P where <u> reaches 1/2 (linear interpolation in P), NaN if it does not on the grid."""
    P, u = pc.P, pc.mean["u"]
    k = np.flatnonzero((u[:-1] < 0.5) & (u[1:] >= 0.5))
    if k.size == 0:
        return float("nan")
    k = k[0]
    return float(P[k] + (0.5 - u[k]) / (u[k + 1] - u[k]) * (P[k + 1] - P[k]))


def _steepest_rise(pc: PhaseCurve) -> float:
    """The P of steepest rise of <m> in log P (for a first-order transition this sits at the jump)."""
    P = pc.P
    if len(P) < 3:
        return float("nan")
    slope = np.gradient(pc.mean["m"], np.log(P))
    return float(P[int(np.nanargmax(slope))])


# the crossover marker of each attention kind's phase curve
CROSSOVERS = {"softmax": _steepest_rise, "linear": _half_way}


def _crossover(pc: PhaseCurve) -> float:
    """Crossover marker (:data:`CROSSOVERS`): linear -> the P where <u> reaches 1/2; softmax -> the P of steepest
    rise of <m> in log P."""
    return CROSSOVERS[pc.attention](pc)


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
    mean: np.ndarray = None  # (len(vary_values), len(P)): the posterior mean of the order parameter (m or u)

    def to_dict(self) -> dict:
        def lst(a):
            return [None if not np.isfinite(v) else float(v) for v in np.asarray(a, float)]

        return {
            "attention": self.attention,
            "vary_name": self.vary_name,
            "vary_values": lst(self.vary_values),
            "P_c": lst(self.P_c),
            "spinodal_low": lst(self.spinodal_low),
            "spinodal_high": lst(self.spinodal_high),
            "order": list(self.order),
            "crossover": lst(self.crossover),
            "P": None if self.P is None else lst(self.P),
            "config": self.config,
            "mean": None if self.mean is None else [lst(row) for row in self.mean],
        }

    @classmethod
    def from_dict(cls, d: dict) -> PhaseDiagram:
        def arr(v):
            return np.array([np.nan if x is None else x for x in v], dtype=np.float64)

        return cls(
            d["attention"],
            d["vary_name"],
            arr(d["vary_values"]),
            arr(d["P_c"]),
            arr(d["spinodal_low"]),
            arr(d["spinodal_high"]),
            list(d["order"]),
            arr(d["crossover"]),
            None if d.get("P") is None else arr(d["P"]),
            dict(d.get("config", {})),
            None if d.get("mean") is None else np.stack([arr(row) for row in d["mean"]]),
        )


def phase_diagram(
    task,
    prior,
    attention: Attention,
    P_values,
    vary: dict,
    *,
    noise_fit: bool = False,
    num_samples: int = 20000,
    seed: int = 0,
    nh: int = 241,
    ng: int = 121,
) -> PhaseDiagram:
    """The transition over the (P, vary) plane. vary: {"sigma_A2": [...]} or {"T": [...]} (increasing).

    Per value: P_c (binodal for first order, critical point for second; NaN where none in the P range),
    the spinodals (NaN where none), the order and the crossover marker (see ``_crossover``), and ``mean``:
    the theory's posterior mean of the order parameter (m for softmax, u for linear) on the (vary, P) grid.
    """
    attention = covered(task, attention, onehot=True, causal=True)
    prior = check_prior(prior)
    P = check_grid("P_values", P_values)
    check_noise_fit(task, noise_fit)
    if not isinstance(vary, dict) or len(vary) != 1 or next(iter(vary)) not in ("sigma_A2", "T"):
        raise ValueError(f"vary={vary!r}: expected a dict with one key, 'sigma_A2' or 'T', mapping to a grid")
    name, values = next(iter(vary.items()))
    vals = check_grid(f"vary[{name!r}]", values, integer=(name == "T"))
    out = {k: np.full(len(vals), np.nan) for k in ("P_c", "lo", "hi", "cross")}
    order = []
    tasks = [task.replace(T=int(v)) if name == "T" else task for v in vals]
    priors = [prior if name == "T" else prior.replace(sigma_A2=float(v)) for v in vals]
    for t in tasks:
        covered(t, attention, onehot=True, causal=True)
    num_samples = check_int("num_samples", num_samples, minimum=100)
    # every value in a few compiled calls (softmax: tables, grid scans and Newton batched over the second axis)
    curves = PHASE_CURVES[attention](
        tasks, priors, P, float(noise_fit), dict(num_samples=num_samples, seed=seed, nh=nh, ng=ng)
    )
    mean = np.full((len(vals), len(P)), np.nan)
    for k, pc in enumerate(curves):
        mean[k] = pc.mean[ORDER_PARAMETER[attention]]
        tr = pc.transition
        order.append(tr["order"])
        if tr["P_c"] is not None:
            out["P_c"][k] = tr["P_c"]
        if tr["spinodals"]:
            out["lo"][k], out["hi"][k] = tr["spinodals"]
        out["cross"][k] = _crossover(pc)
    return PhaseDiagram(
        attention,
        name,
        vals,
        out["P_c"],
        out["lo"],
        out["hi"],
        order,
        out["cross"],
        P,
        {
            "task": task.config(),
            "prior": prior.config(),
            "noise_fit": bool(noise_fit),
            "num_samples": num_samples,
            "seed": seed,
        },
        mean,
    )


def _linear_mode_u(task, prior, P):
    """Mode of the reduced density of the cosine (u* = c*^2) by bounded 1-D minimisation."""
    from scipy.optimize import minimize_scalar

    D, Tq = linear_dims(task)
    beta, eps, _ = scales(task, prior, np.array([P]))
    f = jax.jit(
        lambda c: (
            -linear_cosine_log_density(
                jnp.atleast_1d(c), beta[0], eps[0], float(prior.sigma_A2), D, Tq, task.T, task.d_out, 0.0
            )[0]
        )
    )
    grid = np.linspace(0, 0.999, 400)
    vals = np.asarray(
        -linear_cosine_log_density(
            jnp.asarray(grid), beta[0], eps[0], float(prior.sigma_A2), D, Tq, task.T, task.d_out, 0.0
        )
    )
    j = int(np.argmin(vals))
    lo, hi = grid[max(j - 1, 0)], grid[min(j + 1, len(grid) - 1)]
    if j == 0:
        return (
            0.0
            if vals[0] <= vals[1]
            else float(
                minimize_scalar(lambda c: float(f(c)), bounds=(0, hi), method="bounded", options={"xatol": 1e-12}).x
            )
            ** 2
        )
    c = minimize_scalar(lambda c: float(f(c)), bounds=(lo, hi), method="bounded", options={"xatol": 1e-12}).x
    return float(c) ** 2


def critical_exponent(task, prior, *, rel_range=(1e-3, 3e-2), num: int = 8) -> dict:
    """Exponent of the linear-attention onset: fit u*(P) = A (P - P_c)^gamma just above the exact P_c.

    Returns {"P_c", "exponent", "amplitude", "P", "u"}; mean-field theory predicts exponent 1.
    """
    covered(task, "linear")
    prior = check_prior(prior)
    num = check_int("num", num, minimum=2)
    if isinstance(rel_range, str) or np.ndim(rel_range) != 1 or len(rel_range) != 2:
        raise ValueError(f"rel_range={rel_range!r}: expected (low, high) with 0 < low < high")
    low, high = (check_positive("rel_range item", r) for r in rel_range)
    if not low < high:
        raise ValueError(f"rel_range={tuple(rel_range)}: expected (low, high) with 0 < low < high")
    Pc = linear_critical_P(task, prior, 0.0)
    P = Pc * (1 + np.geomspace(low, high, num))
    u = np.array([_linear_mode_u(task, prior, p) for p in P])
    good = u > 0
    if good.sum() < 2:
        return {"P_c": Pc, "exponent": float("nan"), "amplitude": float("nan"), "P": P, "u": u}
    slope, icpt = np.polyfit(np.log(P[good] - Pc), np.log(u[good]), 1)
    return {"P_c": Pc, "exponent": float(slope), "amplitude": float(np.exp(icpt)), "P": P, "u": u}


def _jump_and_window(out, k, pc, task, prior):
    """Softmax at one T: the jump of m between the branches at the binodal and the coexistence window."""
    tr = pc.transition
    out["jump"][k] = 0.0
    if tr["order"] == "first" and tr["P_c"] is not None:
        ms = [np.interp(tr["P_c"], b["P"], b["m"]) for b in pc.branches if b["P"][0] <= tr["P_c"] <= b["P"][-1]]
        out["jump"][k] = max(ms) - min(ms) if len(ms) >= 2 else np.nan
        out["window"][k] = (tr["spinodals"][1] - tr["spinodals"][0]) / tr["P_c"]


def _onset(out, k, pc, task, prior):
    """Linear at one T: the onset exponent and slope of ``critical_exponent`` (and its P_c where the curve has none)."""
    ce = critical_exponent(task, prior)
    out["exponent"][k] = ce["exponent"]
    out["onset_slope"][k] = ce["amplitude"] * ce["P_c"] if np.isfinite(ce["exponent"]) else np.nan
    if not np.isfinite(out["P_c"][k]):
        out["P_c"][k] = ce["P_c"]


# what measures the sharpness of each attention kind's transition at one T (finite_size_scaling fills it in)
SHARPNESS = {"softmax": _jump_and_window, "linear": _onset}


def finite_size_scaling(task, prior, attention: Attention, P_values, T_values, **numerics) -> dict:
    """How the transition sharpens with T. Per T (arrays over T_values):

    - "P_c", "order", "crossover" (as in ``phase_diagram``);
    - "jump": softmax, the jump of m between the branches at the binodal (0 for a crossover);
    - "window": softmax, relative width of the coexistence window (P_high - P_low) / P_c;
    - "width": the width of the rise of the posterior mean in log P: 1 / max d<x>/dlog P (x = m or u);
    - "onset_slope": linear, du*/dP * P_c just above P_c from ``critical_exponent`` (amplitude * P_c);
    - "exponent": linear, the fitted onset exponent;
    - "curves": {T: PhaseCurve} the phase curves these were read from.

    ``numerics``: the options of :func:`phase_curve` (noise_fit, num_samples, seed, nh, ng).
    """
    check_keywords("finite_size_scaling", numerics, keyword_only(phase_curve))
    attention = covered(task, attention)
    P = check_grid("P_values", P_values)
    Ts = check_grid("T_values", T_values, integer=True).astype(int)
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
        SHARPNESS[attention](out, k, pc, t, prior)
    out["order"] = order
    out["T"] = Ts
    out["curves"] = curves
    return out
