"""The posterior's transition P from MCMC (its MCMC points): NUTS on the closed form (``ba.sample``) from a
cold start (L = 0) and a hot start (the copy pattern), on a P grid around the theory's transition.

Estimator (one per start): the P at which the chain's mean order parameter (softmax m, linear u) crosses a
level, the theory's posterior mean at its own transition P_c. If the MCMC curve were the theory's curve, the
estimate would be P_c exactly; a curve shifted by dP in P gives P_c + dP. So the estimate measures how far the
exact posterior's transition sits from the theory's, in the theory's own units, for a crossover, a second-order
and a first-order transition alike.

- Round 1: ``grid`` P values, geometric in [P_c / span, P_c * span]; both starts at every P. If the crossing
  is not inside (the means are all above or all below the level), the grid is extended once by a factor span.
- Round 2: ``refine`` P values inside each start's bracket, that start only.
- The crossing: the first P above which every mean stays above the level, linearly interpolated with the P
  below it (:func:`level_crossing`).

Where chains cross the barrier within the run (crossovers, second order, softmax T <= 32), the cold and hot
crossings agree and both estimate the transition. Where they do not (softmax T = 64: barriers of several nats
near the binodal), the cold start jumps late and the hot start falls early: they bracket the binodal, and the
bracket's width is the finite chains' hysteresis. The reported P is the midpoint, and ``bracket`` the two.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import jax
import numpy as np

from ...bayes import theory as th
from ...bayes.posterior import Posterior
from ...bayes.samples import key_data
from ...bayes.sampling import sample
from ...models import ORDER_PARAMETER
from ...tasks import CopyTask, Dataset

INITS = ("cold", "hot")
MCMC_STREAM = 20_001  # fold_in(key(seed), MCMC_STREAM): the MCMC points' key, apart from Adam's (key(seed))


def level_crossing(P, x, level):
    """(P*, (P_lo, P_hi)) with P* the crossing of ``level`` by x(P), linearly interpolated between P_lo and P_hi:
    P_hi is the smallest P above which every x stays above ``level`` and P_lo the P just below it. (None, where)
    when there is none: "below" (x above the level at every P: the crossing is below the grid) or "above" (x not
    above it at the largest P: the crossing is above the grid). P must be
    sorted; repeated P values are averaged."""
    P = np.asarray(P, float)
    x = np.asarray(x, float)
    if P.size == 0 or np.any(np.diff(P) < 0):
        raise ValueError(f"P={P.tolist()}: expected a non-empty sorted grid")
    Pu = np.unique(P)
    xu = np.array([x[P == p].mean() for p in Pu])
    above = xu > level
    if not above[-1]:
        return None, "above"
    stays = np.flatnonzero(~above)
    if stays.size == 0:
        return None, "below"
    i = int(stays[-1]) + 1  # first index of the tail that stays above
    p0, p1, x0, x1 = Pu[i - 1], Pu[i], xu[i - 1], xu[i]
    return float(p0 + (level - x0) * (p1 - p0) / (x1 - x0)), (float(p0), float(p1))


def crossing_search(measure: Callable, P0: float, level: float, *, span: float, grid: int, refine: int) -> dict:
    """Both starts' level crossings around P0 (the module's docstring). ``measure(Ps, init)`` -> list of dicts
    with "mean" (the chain mean of the order parameter) and anything else to record, one per P."""
    if grid < 2 or refine < 0 or span <= 1.0:
        raise ValueError(f"grid={grid}, refine={refine}, span={span}: expected grid >= 2, refine >= 0, span > 1")
    G1 = np.unique(np.round(np.geomspace(P0 / span, P0 * span, grid)))
    runs = {init: [] for init in INITS}

    def add(init, Ps):
        new = [p for p in Ps if all(r["P"] != p for r in runs[init])]
        if new:
            runs[init] += [{"P": float(p), **r} for p, r in zip(new, measure(new, init))]
            runs[init].sort(key=lambda r: r["P"])

    def cross(init):
        rs = runs[init]
        return level_crossing([r["P"] for r in rs], [r["mean"] for r in rs], level)

    for init in INITS:
        add(init, G1)
    out = {}
    for init in INITS:
        est, br = cross(init)
        if est is None:  # extend once in the direction of the crossing
            lo, hi = runs[init][0]["P"], runs[init][-1]["P"]
            add(init, [np.round(hi * span)] if br == "above" else [np.round(lo / span)])
            est, br = cross(init)
        if est is not None and refine and br[1] - br[0] > refine + 1:
            add(init, np.round(np.linspace(br[0], br[1], refine + 2)[1:-1]))
            est, br = cross(init)
        out[init] = {
            "P": est,
            "bracket": list(br) if est is not None else None,
            "note": None if est is not None else f"the crossing is {br} the P grid",
        }
    found = [out[i]["P"] for i in INITS if out[i]["P"] is not None]
    return {
        "P": float(np.mean(found)) if len(found) == len(INITS) else None,
        "bracket": [min(found), max(found)] if found else None,
        "per_start": out,
        "level": float(level),
        "runs": runs,
    }


def mcmc_transition(cfg, attention: str, T: int, P_grid: np.ndarray, summary: Callable) -> dict:
    """The MCMC point of (attention, T): theory P_c and level from ``th.phase_curve`` on ``P_grid``
    (``summary`` extracts P_c as for the figure's theory lines), then :func:`crossing_search` with NUTS."""
    task, prior = CopyTask(T=T, d=cfg.d), cfg.tempered_prior()
    name = ORDER_PARAMETER[attention]
    pc = th.phase_curve(task, prior, attention, P_grid)
    s = summary(pc)
    Pc = s["P_c"]
    if Pc is None:
        raise ValueError(f"{attention} T={T}: the theory gives no transition P on its grid; no MCMC grid to centre")
    level = float(np.interp(Pc, pc.P, pc.mean[name]))
    key = jax.random.fold_in(jax.random.key(cfg.seed), MCMC_STREAM)
    data_key, chain_key = jax.random.split(key)
    Pmax = int(np.round(Pc * cfg.mcmc.span**2)) + 1  # the largest P one extension can reach
    full = task.sample(data_key, Pmax)  # nested data sets: the run at P uses the first P sequences
    compile_s = []

    def measure(Ps, init):
        res = []
        for P in Ps:
            P = int(P)
            post = Posterior(Dataset(full.X[:P], full.Y[:P], task), attention, prior)
            k = jax.random.fold_in(chain_key, 2 * P + INITS.index(init))
            t0 = time.time()
            smp = sample(
                post,
                k,
                num_chains=cfg.mcmc.num_chains,
                num_warmup=cfg.mcmc.num_warmup,
                num_samples=cfg.mcmc.num_samples,
                init=init,
            )
            x = np.asarray(smp.order_parameters[name], float)
            compile_s.append(float(smp.diagnostics["compile_time_s"]))
            res.append(
                {
                    "mean": float(np.nanmean(x)),
                    "chain_means": np.nanmean(x, axis=1).tolist(),
                    "ess": float(smp.diagnostics[name]["ess_bulk"]),
                    "num_divergent": int(smp.diagnostics.get("num_divergent", 0)),
                    "acceptance_rate": float(smp.diagnostics["acceptance_rate"]),
                    "key": smp.config["key"],
                    "wall_s": time.time() - t0,
                }
            )
        return res

    out = crossing_search(measure, Pc, level, span=cfg.mcmc.span, grid=cfg.mcmc.grid, refine=cfg.mcmc.refine)
    return {
        **out,
        "theory": Pc,
        "theory_order": s["order"],
        "theory_spinodals": s["spinodals"],
        "observable": name,
        "method": "level crossing of the NUTS chain mean (cold and hot starts) at the "
        "theory's posterior mean at its transition",
        "sampler": {
            "method": "nuts",
            "num_chains": cfg.mcmc.num_chains,
            "num_warmup": cfg.mcmc.num_warmup,
            "num_samples": cfg.mcmc.num_samples,
        },
        "data_key": key_data(data_key),
        "compile_s": float(sum(compile_s)),
    }
