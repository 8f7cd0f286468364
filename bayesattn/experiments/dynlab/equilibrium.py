"""The equilibrium counterpart of the training-dynamics laboratory: the posterior-mean attention entropy of the
one-head softmax copy-task posterior against P, by NUTS (:func:`equilibrium_point`) and by the order-parameter
theory (:func:`theory_point`)."""

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
