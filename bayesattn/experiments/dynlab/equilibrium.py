"""The equilibrium counterpart of the training-dynamics laboratory: the posterior-mean attention entropy of the
one-head softmax copy-task posterior against P, by NUTS (:func:`equilibrium_point`) and by the order-parameter
theory (:func:`theory_point`); and the same posterior's Langevin dynamics along time (:func:`langevin_point`)."""

from __future__ import annotations

import jax
import numpy as np


def equilibrium_point(point: dict) -> dict:
    """Posterior-mean attention entropy (and m) of the one-head softmax copy-task posterior at one P (NUTS)."""

    from ...bayes.posterior import Posterior, Prior
    from ...bayes.sampling import sample
    from ...tasks import CopyTask

    task = CopyTask(T=int(point.get("T", 8)), d=int(point.get("d", 4)))
    prior = Prior(point.get("sigma_A2", 1.0), point.get("sigma_V2", 100.0), point.get("sigma2", 400.0))
    k_data, k_mcmc = jax.random.split(jax.random.fold_in(jax.random.key(point["seed"]), point["P"]))
    post = Posterior(task.sample(k_data, point["P"]), "softmax", prior)
    s = sample(
        post,
        k_mcmc,
        num_chains=int(point.get("num_chains", 2)),
        num_warmup=int(point.get("num_warmup", 300)),
        num_samples=int(point.get("num_samples", 300)),
    )
    summ = s.summary()
    return {
        "entropy": {f: summ["entropy"][f] for f in ("mean", "se", "r_hat")},
        "m": {f: summ["m"][f] for f in ("mean", "se", "r_hat")},
        "T": task.T,
        "uniform_entropy": float(np.log(task.T)),
    }


def theory_point(point: dict) -> dict:
    """The reduced theory's posterior-mean attention entropy against P (``bayesattn.bayes.theory.entropy_curve``)."""
    from ...bayes.posterior import Prior
    from ...bayes.theory import entropy_curve
    from ...tasks import CopyTask

    prior = Prior(point.get("sigma_A2", 1.0), point.get("sigma_V2", 100.0), point.get("sigma2", 400.0))
    ec = entropy_curve(CopyTask(T=int(point["T"]), d=int(point["d"])), prior, point["P"])
    return {k: ec[k] for k in ("P", "posterior", "m", "masked_cells", "uniform")}


def langevin_point(point: dict) -> dict:
    """One seed of the posterior's Langevin dynamics: SGLD at temperature 1 (stationary law: the posterior p(L | D)
    with the readout integrated out) on the one-head softmax copy task, from a small init, at every P of the point
    (nested data sets of the seed, as :func:`bayesattn.train_sweep` draws them from key(0)). Returns the time axis
    (lr x steps) and, per P, the attention entropy over positions and m at ``records`` evenly spaced steps."""
    from ...bayes.posterior import Prior
    from ...tasks import CopyTask
    from ...training import train_sweep

    task = CopyTask(T=int(point["T"]), d=int(point["d"]))
    prior = Prior(point["sigma_A2"], point["sigma_V2"], point["sigma2"])
    steps, lr = int(point["steps"]), float(point["lr"])
    sw = train_sweep(
        task,
        prior,
        "softmax",
        point["P"],
        [point["seed"]],
        jax.random.key(0),
        optimizer="langevin",
        temperature=1.0,
        lr=lr,
        steps=steps,
        init="small",
        init_scale=point["init_scale"],
        record_every=max(1, steps // int(point["records"])),
        objective="marginal",
    )
    step = np.asarray(sw.history["step"], float)[0, 0]
    return {
        "t": (step * lr).tolist(),
        "P": list(point["P"]),
        "entropy": np.asarray(sw.history["entropy"], float)[:, 0].tolist(),
        "m": np.asarray(sw.history["m"], float)[:, 0].tolist(),
        "failures": list(sw.failures),
        "uniform_entropy": float(np.log(task.T)),
    }
