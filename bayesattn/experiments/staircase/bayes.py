"""What one point of the staircase computes (docs/results/staircase.md): in the amount of data, the exact posterior of H heads on
:class:`~bayesattn.MultiLagCopyTask`; in training time, the paper's minimal model on
:class:`~bayesattn.HighOrderMarkovTask` (:mod:`.staircase_training`); and the simplified ODE
(:mod:`bayesattn.dynamics.ode`).

A run writes, under its output folder::

    points/mcmc/*.json       one file per (attention, H, P, init): per-head and label-free lag masses, diagnostics
    points/train/*.json      one file per seed of the minimal model: records over steps, stage times
    points/ode/*.json        the ODE trajectory
    summary.json             config, transitions P_k per (attention, H, init), stage times, wall time

Every point goes through :func:`bayesattn.sweep.run_sweep` (atomic, resumable).
"""

from __future__ import annotations

from pathlib import Path

import jax
import numpy as np

from ...bayes.posterior import Posterior, Prior
from ...bayes.sampling import sample
from ...files import checksum
from ...models.attention import attention_kind, hot_logits
from ...tasks import MultiLagCopyTask
from .config import BayesConfig, TrainingConfig
from .training import stage_times, train_minimal

# named configs: phase_diagrams/staircase/NAME.toml (a subfolder: phase_diagrams/*.toml are phase-diagram configs)


# ------------------------------------------------------------------------------------------ the posterior
def hot_init(task: MultiLagCopyTask, H: int, attention: str, prior: Prior) -> np.ndarray:
    """(H, T, T): head h on span h mod K (the cooperative, solved configuration)."""
    pats = list(task.target_patterns.values())
    scale = None
    if not attention_kind(attention).normalised:  # an unnormalised map: the pattern at the prior's radius
        scale = np.sqrt(prior.sigma_A2 * int(task.key_mask.sum()))
    return np.stack([hot_logits(pats[h % len(pats)], task.key_mask, attention, scale) for h in range(H)])


# The label-free lag order parameter: softmax heads are exchangeable (the best head's mass on the lag, its stage at
# 3 |span| / T); linear heads can be mixed by any rotation of the heads' logits (with the readout rotated alike,
# prior and likelihood are unchanged), so per-head masses drift and the invariant is the fraction of the lag
# pattern in the span of the heads (diagnostics.observables.pattern_capture), its stage at 1/2.
LAG_OBSERVABLE = {"softmax": "mass_max", "linear": "capture"}
LAG_OBSERVABLE_TEXT = {"mass_max": "best head's mass on", "capture": "share in the heads' span of"}


def point_posterior(b: BayesConfig, attention: str, H: int, P: int, seed: int):
    """The data set and posterior of one sweep point, and its sampler key: (task, prior, posterior, key). The
    data key is fold_in(key(seed), P), split into data and sampler keys."""
    task = b.task(H)
    prior = b.prior.make()
    k_data, k_mcmc = jax.random.split(jax.random.fold_in(jax.random.key(seed), P))
    return task, prior, Posterior(task.sample(k_data, P), attention, prior, heads=H), k_mcmc


def mcmc_point(point: dict) -> dict:
    """One (attention, H, P, init): NUTS on the closed-form posterior. Returns per chain the mean of every
    declared observable, its ESS and R-hat, and the fraction of draws in a "competitive" state (two heads with
    mass > 3 |span| / T on the same span)."""
    b = BayesConfig.load({**point["bayes"], "heads": [point["heads"]], "attention": [point["attention"]]})
    H = point["heads"]
    kind = attention_kind(point["attention"])
    task, prior, post, k_mcmc = point_posterior(b, point["attention"], H, point["P"], point["seed"])

    init = "cold" if point["init"] == "cold" else hot_init(task, H, point["attention"], prior)
    s = sample(
        post,
        k_mcmc,
        num_chains=b.mcmc.num_chains,
        num_warmup=b.mcmc.num_warmup,
        num_samples=b.mcmc.num_samples,
        init=init,
    )
    op = s.order_parameters
    alpha = np.asarray(post.model.weights(jax.numpy.asarray(s.L).reshape(-1, *post.L_shape), task.key_mask))
    comp = {}
    for name, pat in task.target_patterns.items():
        thr = 3.0 * pat[task.query_mask].sum(1).mean() / task.T
        per_head = np.einsum("nhts,ts->nh", alpha, pat) / task.query_mask.sum()
        # linear heads can be mixed by any rotation (LAG_OBSERVABLE): "two heads on one lag" has no meaning there
        comp[name] = float(np.mean(np.sum(per_head > thr, axis=1) >= 2)) if not kind.sign_symmetric else None
    summ = s.summary()
    names = tuple(op)
    return {
        "means": {k: summ[k]["mean"] for k in names},
        "observables": {
            k: {f: summ[k][f] for f in ("mean", "std", "se", "ess_bulk", "r_hat", "chain_means")} for k in names
        },
        "diagnostics": summ["diagnostics"],
        "competitive": comp,
        "threshold": {
            n: kind.copy_threshold(task.T) * (len(sp) if kind.normalised else 1)
            for n, sp in zip(task.target_patterns, task.spans)
        },
    }


# ----------------------------------------------------------------------------------------- training, ODE
def train_point(point: dict, progress: bool = False, artifacts=None) -> dict:
    """One training run. ``artifacts``: a folder where the run keeps its state between parts (``train-<checksum of
    the point>.npz``), so that a killed run goes on from its last finished part. ``train_wall_s``: the run's time
    over all its parts, whichever processes ran them."""
    cfg = TrainingConfig.from_point(point["train"])
    resume = None
    if artifacts is not None:
        resume = Path(artifacts) / f"train-{checksum(point)[:12]}.npz"
    rec = train_minimal(cfg, point["seed"], progress=progress, resume=resume)
    rec["stages"] = stage_times(rec["step"], rec["mass_last"])
    rec["train_wall_s"] = rec.pop("wall_s")
    return rec


def ode_point(point: dict) -> dict:
    from ...dynamics.ode import ODEConfig, solve
    from ...dynamics.ode import stage_times as ode_stages

    sol = solve(ODEConfig(**point["ode"]))
    return {
        "t": sol["t"],
        "loss": sol["loss"],
        "S": sol["S"][:, : max(point["ode"].get("groups", 3) + 1, 4)],
        "plateaus": sol["plateaus"],
        "stages": ode_stages(sol),
        "num_steps": sol["num_steps"],
    }


def theory_point(point: dict) -> dict:
    """The H-head theory (docs/theory.md section 12) on one curve's P grid: per lag the posterior mean of the
    attention's label-free lag order parameter (:data:`LAG_OBSERVABLE`: the best head's mass for softmax, the
    lag's share in the heads' span for linear), the P_k where it crosses the MCMC points' threshold, and the
    coexistence and binodals the theory finds."""
    from ...bayes.theory import heads_curve
    from ...bayes.theory.common import first_crossing

    b = BayesConfig.load({**point["bayes"], "heads": [point["heads"]], "attention": [point["attention"]]})
    H = point["heads"]
    task = b.task(H)
    c = heads_curve(
        np.asarray(point["P_grid"], float),
        task=task,
        heads=H,
        attention=point["attention"],
        prior=b.prior.make(),
        num_samples=point["num_samples"],
        seed=point["seed"],
    )
    lags = list(task.target_patterns)
    obs = LAG_OBSERVABLE[point["attention"]]
    curve = np.asarray(c.mean[obs])
    thr = attention_kind(point["attention"]).copy_threshold(task.T)  # the MCMC points' (single-lag spans)
    P_k = {lag: first_crossing(c.P, curve[:, k], thr) for k, lag in enumerate(lags)}
    return {
        "P": [float(x) for x in c.P],
        obs: {lag: curve[:, k].tolist() for k, lag in enumerate(lags)},
        "P_k": P_k,
        "coexistence_P": c.transitions.get("coexistence_P", []),
        "binodals": c.transitions.get("binodals", []),
    }
