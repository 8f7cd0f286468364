"""Three transitions: the joint mode (Adam on the network), the marginal mode (Adam with the readout
integrated out) and the posterior, across T, for softmax and linear attention; and SGLD at temperature tau.

Points (each one JSON file through :func:`bayesattn.sweep.run_sweep`, so a run resumes where it stopped):

- ``{"kind": "theory", "attention", "T"}``: the posterior's phase curve (``theory.phase_curve``) and the two
  zero-temperature curves (``theory.mode_curve``, joint and marginal): binodals, spinodals, crossover points.
- ``{"kind": "adam", "attention", "T", "objective", "init"}``: Adam's measured transition P (see
  :func:`adam_transition`).
- ``{"kind": "mcmc", "attention", "T"}``: the posterior's transition P from NUTS, cold and hot starts
  (:mod:`bayesattn.experiments.three_transitions_mcmc`).
- ``{"kind": "tau_theory"}`` / ``{"kind": "sgld", "tau", "init"}``: the transition of SGLD at temperature tau
  at one T: theory = the posterior of the prior rescaled by tau (exact, docs/theory.md section 7), points = SGLD
  runs from small and hot inits.

What Adam's transition means, by case (the theory's counterpart in brackets):
- softmax, first order: small init, the smallest P at which the run ends on the copy branch [upper spinodal];
  hot init, the smallest P above which it stays there [lower spinodal]. Two rounds of a P grid: the first
  brackets the jump, the second refines it (resolution ~ 1% of P).
- softmax crossover: the P of steepest dm/dP of the final m [the theory's P of steepest dm/dP].
- linear (second order): q* = x* - lam / (T_q P) above P_c, so the final q is fitted linearly in 1/P on a grid
  above the transition and extrapolated to q = 0 [P_c].
"""

from __future__ import annotations

import time
import warnings

import jax
import numpy as np

from ...bayes import theory as th
from ...models.attention import attention_kind
from ...tasks import CopyTask
from ...training import train_sweep
from .config import TAU_P_MIN, THEORY_P_MIN, ThreeTransitionsConfig
from .mcmc import mcmc_transition


# ----------------------------------------------------------------------------------------------- theory
def _P_grid(cfg, T, attention):
    if attention_kind(attention).normalised:  # softmax: step 2 in P: the posterior's window at T = 32 is 12 wide
        return np.arange(THEORY_P_MIN, cfg.theory_P_max, 2.0)
    return np.unique(np.round(np.geomspace(10.0, max(2.5 * cfg.prior.sigma2 * T / cfg.d, 200.0), 400)))


def _summary(pc) -> dict:
    tr = dict(pc.transition)
    out = {"order": tr.get("order"), "P_c": tr.get("P_c"), "spinodals": [float(s) for s in tr.get("spinodals", [])]}
    if tr.get("P_c_exact") is not None:
        out["P_c"] = tr["P_c_exact"]
    if tr.get("order") == "crossover":
        out["P_c"] = tr.get("P_steepest") if "P_steepest" in tr else _steepest(pc.P, pc.mean["m"])
    return out


def _steepest(P, m):
    """The P of steepest dm/dP (parabola through the largest finite difference and its neighbours)."""
    P, m = np.asarray(P, float), np.asarray(m, float)
    s = np.diff(m) / np.diff(P)
    Pm = 0.5 * (P[1:] + P[:-1])
    j = int(np.nanargmax(s))
    if 0 < j < len(s) - 1:
        y0, y1, y2 = s[j - 1], s[j], s[j + 1]
        den = y0 - 2 * y1 + y2
        if den < 0:
            t = 0.5 * (y0 - y2) / den
            return float(Pm[j] + t * 0.5 * (Pm[j + 1] - Pm[j - 1]))
    return float(Pm[j])


def theory_point(cfg, attention, T) -> dict:
    task, prior = CopyTask(T=T, d=cfg.d), cfg.tempered_prior()
    P = _P_grid(cfg, T, attention)
    post = th.phase_curve(task, prior, attention, P)
    out = {"posterior": _summary(post), "P": P.tolist(), "posterior_mean_m": post.mean["m"].tolist()}
    for obj in ("joint", "marginal"):
        mc = th.mode_curve(task, prior, attention, P, objective=obj)
        out[obj] = _summary(mc)
        out[f"{obj}_m"] = mc.stable["m"].tolist()
        out[f"{obj}_q"] = mc.stable["q"].tolist()
    return out


# ----------------------------------------------------------------------------------------------- Adam
def _final(cfg, task, attention, Ps, objective, init, key, **kw):
    rpb = len(Ps) if task.T <= cfg.adam.vmap_T_max else 1
    sw = train_sweep(
        task,
        cfg.tempered_prior(kw.pop("tau", 1.0)),
        attention,
        [int(p) for p in Ps],
        [cfg.seed],
        key,
        objective=objective,
        init=init,
        record_every=max(kw.get("steps", cfg.adam.steps) // 10, 1),
        runs_per_batch=rpb,
        **{"steps": cfg.adam.steps, **kw},
    )
    fo = sw.final_order_parameters
    return {k: fo[k][:, 0].tolist() for k in ("m", "q", "u")}, sw


def _jump(Ps, m, thr, init):
    """Bracket of the jump: small init, (last P below thr, first P above); hot init, (last P below, first P
    above which every larger P stays above)."""
    above = np.asarray(m) > thr
    if init == "small":
        idx = np.flatnonzero(above)
        if idx.size == 0:
            return None, "no run reached the copy branch"
        i = idx[0]
    else:
        stays = [i for i in range(len(above)) if above[i:].all()]
        if not stays:
            return None, "no run stayed on the copy branch"
        i = stays[0]
    if i == 0:
        return None, "every run above threshold: the jump is below the grid"
    return (float(Ps[i - 1]), float(Ps[i])), None


def adam_transition(cfg, attention, T, objective, init) -> dict:
    task = CopyTask(T=T, d=cfg.d)
    prior = cfg.tempered_prior()
    key = jax.random.key(cfg.seed)
    Pth = _P_grid(cfg, T, attention)
    mc = th.mode_curve(task, prior, attention, Pth, objective=objective)
    tr = mc.transition
    n = cfg.adam.grid_points
    rounds = []
    if not attention_kind(attention).normalised:  # linear: second order
        Pc = tr["P_c_exact"]
        Ps = np.round(np.geomspace(1.5 * Pc, 4.0 * Pc, n))
        fin, _ = _final(cfg, task, attention, Ps, objective, init, key)
        q = np.asarray(fin["q"])
        A = np.stack([np.ones_like(Ps), -1.0 / Ps], 1)  # q = a - b / P
        (a, b), *_ = np.linalg.lstsq(A, q, rcond=None)
        return {
            "P": float(b / a),
            "theory": Pc,
            "method": "fit of q = a - b/P above P_c, extrapolated to q = 0",
            "rounds": [{"P": Ps.tolist(), **fin}],
            "theory_q": np.interp(Ps, Pth, mc.stable["q"]).tolist(),
        }
    if tr["order"] == "crossover":
        P0 = tr["P_steepest"]
        if init == "hot":
            return {"P": None, "theory": P0, "note": "crossover: no hysteresis, hot init not run", "rounds": []}
        Ps = np.round(np.geomspace(0.5 * P0, 2.0 * P0, 2 * n + 1))
        fin, _ = _final(cfg, task, attention, Ps, objective, init, key)
        return {
            "P": _steepest(Ps, fin["m"]),
            "theory": P0,
            "method": "P of steepest dm/dP of the final m",
            "rounds": [{"P": Ps.tolist(), **fin}],
        }
    lo_s, hi_s = tr["spinodals"]
    target = hi_s if init == "small" else lo_s
    # threshold: half-way between the branches at the binodal
    ms = sorted(
        float(np.interp(tr["P_c"], b["P"], b["m"])) for b in mc.branches if b["P"][0] <= tr["P_c"] <= b["P"][-1]
    )
    thr = 0.5 * (ms[0] + ms[-1]) if len(ms) >= 2 else 2.0 / T
    # n P values in both rounds (repeats allowed), so that round 2 reuses round 1's compiled program
    Ps = np.round(np.linspace(0.8 * target, 1.2 * target, n))
    note = None
    for r in range(2):
        fin, _ = _final(cfg, task, attention, Ps, objective, init, key)
        rounds.append({"P": Ps.tolist(), **fin})
        # the jump on every P run so far: round 2's P lie inside round 1's bracket, whose two ends count too (when
        # round 2's runs all lie on one side, the jump is between them and the bracket's end on the other)
        P_all = np.concatenate([rd["P"] for rd in rounds])
        order = np.argsort(P_all, kind="stable")
        br, note = _jump(P_all[order], np.concatenate([rd["m"] for rd in rounds])[order], thr, init)
        if br is None:
            break
        if r == 0:
            Ps = np.round(np.linspace(br[0], br[1], n + 2)[1:-1])
    P = None if br is None else 0.5 * (br[0] + br[1])
    return {
        "P": P,
        "bracket": br,
        "theory": target,
        "threshold": thr,
        "note": note,
        "rounds": rounds,
        "method": "jump of the final m across a threshold half-way between the branches, two P-grid rounds",
    }


# ----------------------------------------------------------------------------------------------- tau
def _tau_P_grid(cfg) -> np.ndarray:
    """The tempered theory's P grid (the config keeps tau.P_max above its first value)."""
    return np.arange(TAU_P_MIN, cfg.tau.P_max, 2.0)


def tau_theory_point(cfg) -> dict:
    task = CopyTask(T=cfg.tau.T, d=cfg.d)
    P = _tau_P_grid(cfg)
    out = {"tau": [], "order": [], "P_c": [], "spinodals": [], "warnings": []}
    for tau in cfg.tau.values:
        pc, warned = _tempered_curve(task, cfg.tempered_prior(tau), P)
        s = _summary(pc)
        if any("no minimum" in w for w in warned):  # the theory does not resolve this tau: no number
            s = {"order": "unresolved", "P_c": None, "spinodals": []}
        out["tau"].append(tau)
        out["order"].append(s["order"])
        out["P_c"].append(s["P_c"])
        out["spinodals"].append(s["spinodals"])
        out["warnings"].append(warned)
    for obj in ("joint", "marginal"):
        out[obj] = _summary(th.mode_curve(task, cfg.tempered_prior(), "softmax", P, objective=obj))
    return out


def _tempered_curve(task, prior, P):
    """The softmax phase curve and the theory's warnings (as strings), recorded instead of printed."""
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        pc = th.phase_curve(task, prior, "softmax", P)
    return pc, sorted({str(x.message) for x in w})


def sgld_point(cfg, tau, init) -> dict:
    """SGLD at temperature tau from one init on a P grid around the tempered theory's binodal: the mean of m
    over the second half of the run, per P."""
    task = CopyTask(T=cfg.tau.T, d=cfg.d)
    P = _tau_P_grid(cfg)
    pc, warned = _tempered_curve(task, cfg.tempered_prior(tau), P)
    Pc = _summary(pc)["P_c"]
    if Pc is None or any("no minimum" in w for w in warned):
        raise ValueError(
            f"sgld_taus: tau={tau} is not resolved by the tempered theory at T={cfg.tau.T} "
            f"(P up to tau_P_max={cfg.tau.P_max:g}), so there is no P grid to centre SGLD on: {warned}"
        )
    Ps = np.unique(np.round(np.linspace(0.6 * Pc, 1.4 * Pc, cfg.adam.grid_points)))
    _, sw = _final(
        cfg,
        task,
        "softmax",
        Ps,
        "joint",
        init,
        jax.random.key(cfg.seed),
        optimizer="langevin",
        temperature=tau,
        steps=cfg.tau.sgld_steps,
    )
    m = sw.history["m"][:, 0]
    mean = m[:, m.shape[1] // 2 :].mean(1)
    return {
        "P": Ps.tolist(),
        "m_mean": mean.tolist(),
        "theory_P_c": Pc,
        "theory_mean_m": np.interp(Ps, P, pc.mean["m"]).tolist(),
    }


# ----------------------------------------------------------------------------------------------- driver
def compute_point(point: dict) -> dict:
    """One point's result, with the CPU seconds of its process ("cpu_s": under load a better measure of its
    cost than its wall time)."""
    c0 = time.process_time()
    res = _compute(point)
    res["cpu_s"] = time.process_time() - c0
    return res


def _compute(point: dict) -> dict:
    cfg = ThreeTransitionsConfig.load(point["config"], source="point")  # what it does not depend on: defaults
    k = point["kind"]
    if k == "theory":
        return theory_point(cfg, point["attention"], point["T"])
    if k == "adam":
        return adam_transition(cfg, point["attention"], point["T"], point["objective"], point["init"])
    if k == "mcmc":
        return mcmc_transition(
            cfg, point["attention"], point["T"], _P_grid(cfg, point["T"], point["attention"]), _summary
        )
    if k == "tau_theory":
        return tau_theory_point(cfg)
    if k == "sgld":
        return sgld_point(cfg, point["tau"], point["init"])
    raise ValueError(f"point kind={k!r}: expected theory, adam, mcmc, tau_theory or sgld")
