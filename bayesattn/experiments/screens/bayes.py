"""The Bayesian copy head through the circuit screens (docs/results/screens.md): selectivity and PR of the single layer's
attention, averaged over posterior draws of L (NUTS on the closed-form posterior, V integrated out), across P.

For the copy task (offset 1) the screened class is previous_token; at the last query t = T - 1 the selectivity
of a draw is alpha[t, t - 1] / mean of alpha[t, s] over the other allowed keys (all of them: T is small, so no
sampling of 50), and its PR is that of the N x d matrix of outputs before the readout, sum_s alpha_ts x_s, over
N fresh probe sequences of the task's tokens. For Gaussian tokens these outputs are distributed as
||alpha_t|| z_n with z_n i.i.d. N(0, I_d) whatever alpha is, and the PR is scale-free, so its distribution does
not depend on the posterior at all (on one fixed probe it varies only by the finite-N fluctuation); it is
recorded as ``pr_gaussian`` to show this. For one-hot tokens the outputs have mean 1/d in every coordinate and
fluctuations of size ||alpha_t||, so the PR grows as the attention concentrates.

"""

from __future__ import annotations

import time

import jax
import numpy as np

from ...bayes.posterior import Posterior
from ...bayes.sampling import sample
from ...bayes.theory.common import first_crossing
from ...diagnostics.screens import THRESHOLD, participation_ratio
from .config import BayesLensConfig
from .theory import pr_onehot_limit, theory_screens


def lens(alpha: np.ndarray, task, probe_X: np.ndarray) -> dict:
    """Per draw (alpha: (S, T, T)): previous-token selectivity and PR at the last query on probe_X (N, T, d)."""
    T = task.T
    t, src = T - 1, int(task.source[T - 1])
    others = np.flatnonzero(task.key_mask[t] & (np.arange(T) != src))
    a = np.asarray(alpha, dtype=np.float64)[:, t]  # (S, T)
    sel = a[:, src] / np.maximum(a[:, others].mean(-1), 1e-12)
    outputs = np.einsum("st,ntd->snd", a, np.asarray(probe_X, dtype=np.float64))
    return {
        "selectivity": sel,
        "pr": participation_ratio(outputs),
        "mass": a[:, src],
        "pr_limit": pr_onehot_limit(np.sum(a**2, axis=-1), task.d),
    }


def bayes_point(point: dict) -> dict:
    """NUTS on the copy task's posterior at one P, every draw through the screens at the last query."""
    cfg = BayesLensConfig.load(point["bayes"], source="point")
    P = int(point["P"])
    task = cfg.task()
    key = jax.random.fold_in(jax.random.key(point["seed"]), P)
    k_data, k_mcmc, k_probe = jax.random.split(key, 3)
    post = Posterior(task.sample(k_data, P), "softmax", cfg.prior.make())
    t0 = time.perf_counter()
    s = sample(
        post,
        k_mcmc,
        num_chains=cfg.mcmc.num_chains,
        num_warmup=cfg.mcmc.num_warmup,
        num_samples=cfg.mcmc.num_samples,
        init="cold",
    )
    alpha = np.asarray(post.model.weights(jax.numpy.asarray(s.L).reshape(-1, *post.L_shape), task.key_mask))
    res = lens(alpha, task, task.sample(k_probe, cfg.probe_N).X)
    gauss = lens(alpha, task, cfg.task("gaussian").sample(k_probe, cfg.probe_N).X)["pr"]
    sel = res["selectivity"]
    return {
        "P": P,
        "selectivity_mean": float(sel.mean()),
        "selectivity_median": float(np.median(sel)),
        "log10_selectivity_mean": float(np.log10(sel).mean()),
        "frac_above_threshold": float(np.mean(sel >= THRESHOLD)),
        "pr_mean": float(res["pr"].mean()),
        "pr_sd": float(res["pr"].std()),
        "mass_mean": float(res["mass"].mean()),
        "pr_limit_mean": float(res["pr_limit"].mean()),
        "m": float(np.mean(s.order_parameters["m"])),
        "q": float(np.mean(s.order_parameters["q"])),
        "pr_gaussian_mean": float(gauss.mean()),
        "pr_gaussian_range": float(gauss.max() - gauss.min()),
        "draws": int(sel.size),
        "wall_s": time.perf_counter() - t0,
    }


def half_rise(P, y):
    """The P at which y first climbs half-way from y(P_min) to its maximum (None when it never climbs)."""
    y = np.asarray(y, float)
    return first_crossing(P, y, y[0] + 0.5 * (y.max() - y[0])) if y.max() > y[0] else None


def theory_point(point: dict) -> dict | None:
    """The theory's screens (:mod:`.theory`) on ``theory_points`` log-spaced P over [P_min, P_max]; None unless the
    theory covers the task (one-hot tokens need softmax, cyclic)."""
    cfg = BayesLensConfig.load(point["bayes"], source="point")
    n = point["theory_points"]
    if not n or cfg.tokens != "onehot" or cfg.boundary != "cyclic":
        return {"points": [], "P_selectivity_threshold": None, "P_pr_half_rise": None, "covered": False}

    P = np.geomspace(point["P_range"][0], point["P_range"][1], int(n))
    pts = theory_screens(cfg.task(), cfg.prior.make(), P)
    return {
        "points": pts,
        "P_selectivity_threshold": first_crossing(P, [p["selectivity_median"] for p in pts], THRESHOLD),
        "P_pr_half_rise": half_rise(P, [p["pr_limit_mean"] for p in pts]),
        "covered": True,
    }
