"""NUTS (numpyro) on the closed form, through a potential function; and the numpyro MCMC driver that the joint
(L, V) reference sampler (:func:`bayesattn.bayes.joint.sample_joint`) shares.

numpyro adapts the step size and a diagonal mass matrix in its warm-up and runs the chains vectorised; it
compiles inside its timed run, so ``compile_time_s`` is NaN.
"""

from __future__ import annotations

import math
import time

import jax
import jax.numpy as jnp
import numpy as np
import numpyro

from ..._fused import fused
from ..samples import Samples, assemble_samples
from .base import Sampler, SamplerJob

NUMPYRO_NUTS_OPTIONS = {"target_acceptance_rate": 0.8, "max_num_doublings": 10}


def run_numpyro_mcmc(kernel, key, init_params, *, num_chains, num_warmup, num_samples, thin, progress, model_kwargs):
    """Run numpyro's MCMC with ``kernel`` (vectorised chains, warm-up fields collected) from ``init_params``
    (None: the kernel's own initialisation); return (draws grouped by chain, diagnostics, per-draw statistics
    (chains, draws) in ArviZ's names). The warm-up uses the first half of ``key``, the sampling the second."""
    mcmc = numpyro.infer.MCMC(
        kernel,
        num_warmup=num_warmup,
        num_samples=num_samples,
        num_chains=num_chains,
        chain_method="vectorized",
        thinning=thin,
        progress_bar=progress,
    )
    if init_params is not None and num_chains == 1:  # numpyro takes one chain's start without the chain axis
        init_params = jax.tree.map(lambda x: x[0], init_params)
    wkey, skey = jax.random.split(key)
    t0 = time.perf_counter()
    mcmc.warmup(
        wkey, init_params=init_params, extra_fields=("num_steps", "diverging"), collect_warmup=True, **model_kwargs
    )
    wf = mcmc.get_extra_fields(group_by_chain=True)
    mcmc.run(
        skey, extra_fields=("num_steps", "diverging", "accept_prob", "energy", "adapt_state.step_size"), **model_kwargs
    )
    samples = jax.block_until_ready(mcmc.get_samples(group_by_chain=True))
    wall = time.perf_counter() - t0
    f = mcmc.get_extra_fields(group_by_chain=True)
    # numpyro thins the extra fields with the draws: with thin > 1 the sampling-phase counts are estimates
    draw_stats = {
        "acceptance_rate": f["accept_prob"],
        "diverging": f["diverging"],
        "n_steps": f["num_steps"],
        "energy": f["energy"],
    }
    return (
        samples,
        {
            "num_divergent": int(np.sum(f["diverging"])),
            "num_divergent_warmup": int(np.sum(wf["diverging"])),
            "acceptance_rate": float(np.mean(f["accept_prob"])),
            "step_size": np.asarray(f["adapt_state.step_size"])[:, -1],
            "num_grad_evals": int(np.sum(f["num_steps"]) * thin + np.sum(wf["num_steps"])),
            "wall_time_s": wall,
            "compile_time_s": math.nan,  # numpyro compiles inside the timed run
        },
        {k: np.asarray(v) for k, v in draw_stats.items()},
    )


def run_numpyro_nuts(sampler: Sampler, job: SamplerJob) -> Samples:
    """The :class:`~.base.Sampler` run of numpyro's NUTS on the closed-form log density of ``job.posterior``."""
    posterior, opts = job.posterior, job.options
    kernel = numpyro.infer.NUTS(
        potential_fn=lambda L: -posterior.log_density(L),
        target_accept_prob=opts["target_acceptance_rate"],
        max_tree_depth=opts["max_num_doublings"],
    )
    samples, diag, stats = run_numpyro_mcmc(
        kernel,
        job.run_key,
        job.positions,
        num_chains=job.num_chains,
        num_warmup=job.num_warmup,
        num_samples=job.num_samples,
        thin=job.thin,
        progress=job.progress,
        model_kwargs={},
    )
    L = np.asarray(samples)
    logdens = np.asarray(_draws_log_density(posterior, jnp.asarray(L)))
    return assemble_samples(
        posterior, L, logdens, diag, sampler.method, job.config, sample_stats={"lp": logdens, **stats}
    )


_draws_log_density = fused(lambda posterior, L: jax.vmap(jax.vmap(posterior.log_density))(L))  # (chains, draws)


NUMPYRO_NUTS = Sampler("nuts", "numpyro", NUMPYRO_NUTS_OPTIONS, run=run_numpyro_nuts)
