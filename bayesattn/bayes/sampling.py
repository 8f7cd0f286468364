"""Exact-posterior sampling of the attention matrix L (docs/model.md section 2) with blackjax and numpyro.

``sample(posterior, key, ...)`` runs NUTS / HMC / MALA (blackjax) or NUTS (numpyro) on the closed-form
log density over L (the readout V integrated out), or adaptive tempered SMC (blackjax) from the prior to
the posterior, and returns a :class:`Samples` with the draws, the order parameters m, q, u and the
diagnostics (numpyro's ESS and split R-hat, divergences, acceptance, step size, gradient evaluations,
wall time, NaN count).

Design:

- One module per sampler family in :mod:`bayesattn.bayes.samplers`, each registering its options and its
  program in ``SAMPLERS``, keyed by (method, backend); ``sample`` checks the call and runs the entry it looks up.
- All chains run in one ``jax.jit`` program (warmup + sampling). On a GPU/TPU the chains are ``vmap``-ed; on
  a CPU they run one after another inside that program (``lax.map``), because XLA:CPU executes vmapped NUTS
  trees about 2x slower per chain-gradient (``chains_per_batch`` chooses; see ``bayesattn._batching.default_batch``).
- The program takes the posterior's sufficient statistics *and the prior's three variances* as
  arguments, so posteriors that differ only in P or in the prior (a sweep over P at fixed beta changes
  sigma2) share one compilation. Compiled programs are cached per (method, counts, options, task,
  attention; at most ``bayes.program.MAX_COMPILED``, least recently used dropped first); the first call reports
  its compile time separately (``diagnostics["compile_time_s"]``).
- NUTS/HMC use ``blackjax.window_adaptation`` (Stan's windows, diagonal mass matrix). blackjax's MALA
  kernel has no mass matrix, so MALA adapts only its step size, with blackjax's
  ``dual_averaging_adaptation`` (target acceptance 0.574) over the warmup.
- NaN: a draw is *non-finite* if L or log p(L|D) is not finite. Such draws are counted
  (``diagnostics["num_nan"]``), excluded from the means / stds / chain means in :meth:`Samples.summary`,
  and left in ``Samples.L`` as they are; ESS and R-hat are computed on all draws, so any NaN makes them
  NaN (a visible flag, not a silent average). Divergences are counted per phase.
- ``ess_bulk`` is ``numpyro.diagnostics.effective_sample_size`` (Geyer / Stan ESS) on split chains (ArviZ's
  ``ess(method="mean")``) and ``r_hat`` is ``numpyro.diagnostics.split_gelman_rubin``; ``Samples.to_arviz()``
  hands the draws and the per-draw sampler statistics to ArviZ.

>>> import jax, bayesattn as ba
>>> data = ba.CopyTask(T=4, d=2).sample(jax.random.key(0), P=20)
>>> post = ba.Posterior(data, "softmax", ba.Prior(1.0, 100.0, 20.0))
>>> s = ba.sample(post, jax.random.key(1), num_chains=2, num_warmup=50, num_samples=20)
>>> s.L.shape, s.order_parameters["m"].shape
((2, 20, 4, 4), (2, 20))
"""

from __future__ import annotations

import math
from typing import Any, Literal

import jax

from .._batching import default_batch
from .._validate import check_bool, check_int, check_key
from ..tasks.base import MAX_ARRAY_NUMBERS
from .posterior import Posterior, check_posterior
from .samplers import (
    BACKENDS,
    METHODS,
    SAMPLER_INITS,
    SAMPLERS,
    branch_starts,
    get_sampler,
    hot_pattern,
    initial_positions,
)
from .samplers.base import prepare_job
from .samples import Samples, check_counts

Method = Literal["nuts", "hmc", "mala", "smc", "chees", "meads"]
Backend = Literal["blackjax", "numpyro"]

__all__ = [
    "sample",
    "initial_positions",
    "branch_starts",
    "hot_pattern",
    "METHODS",
    "BACKENDS",
    "SAMPLER_INITS",
    "SAMPLERS",
]


def sample(
    posterior: Posterior,
    key: jax.Array,
    *,
    method: Method = "nuts",
    backend: Backend = "blackjax",
    num_chains: int = 4,
    num_warmup: int = 500,
    num_samples: int = 1000,
    init: Any = None,
    thin: int = 1,
    chains_per_batch: int | None = None,
    progress: bool = False,
    **method_options,
) -> Samples:
    """Sample the posterior over L with the closed form (V integrated out).

    posterior: a :class:`~bayesattn.Posterior`; key: a PRNG key (the same key gives the same draws).
    method: "nuts" | "hmc" | "mala" (MCMC, ``num_chains`` chains of ``num_warmup`` adaptation steps then
    ``num_samples`` steps, every ``thin``-th kept) or "smc" (``num_chains`` independent adaptive tempered SMC
    runs of ``num_samples`` particles each, drawn from the prior; ``num_warmup`` and ``thin`` are not used), or
    "chees" | "meads" (many chains in lockstep: ``num_chains`` of 16..256 advanced together, adapted across chains;
    :mod:`bayesattn.bayes.samplers.ensemble`).
    backend: "blackjax" (all methods) or "numpyro" (NUTS only).
    init: "cold" | "hot" | "prior" | array (T, T) or (num_chains, T, T); see :func:`initial_positions`. None
    (the default): "cold", and for SMC "prior", the only start it takes.
    method_options: nuts: target_acceptance_rate (0.8), max_num_doublings (10), initial_step_size (0.1);
    hmc: target_acceptance_rate, num_integration_steps (16), initial_step_size; mala: target_acceptance_rate
    (0.574), initial_step_size (1e-3); smc: target_ess (0.5), num_mcmc_steps (10), num_integration_steps (8),
    initial_step_size (0.1), max_steps (500), mode_threshold (softmax: m > 3/T is "high"; linear: u > 0.5).
    Near a first-order transition the tempering path from the prior crosses the transition too, and the
    particles need enough moves per stage to follow the stable branch: softmax T = 64, P = 1000 (inside the
    coexistence window) ends on the metastable branch with the defaults (m = 0.023) and on the stable one with
    num_mcmc_steps=50, target_ess=0.9 (m = 0.198; theory 0.200). At the binodal (P = 929, 6.4 nats from either
    well) even those settings give the copy branch weight 0.01 +- 0.02 against the theory's 0.52: particles from
    the prior reach a branch only through MCMC moves across the barrier (per-branch evidences:
    ``scripts/coexistence_check.py --branch-runs``);
    chees: target_acceptance_rate (0.651), initial_step_size (0.1), learning_rate (0.025, Adam on the log
    trajectory length), max_leapfrog_steps (1000), warmup_chains (None: all adapt; w: w chains adapt, then are
    copied to all), spread_steps (0: discarded steps after copying), stored_floor (None: chosen by cost; True:
    the same warm-up, its trajectory-length floor from stored positions,
    :mod:`bayesattn.bayes.samplers.chees_loop`; False: from blackjax's covariance); meads: num_folds (4),
    step_size_multiplier (0.5); both:
    num_superchains (None; G with init="prior": G prior draws, each the start of num_chains / G chains; the chains
    of one starting point form a superchain of the nested R-hat, ``diagnostics[name]["nested_r_hat"]``);
    numpyro: target_acceptance_rate, max_num_doublings.
    chains_per_batch: blackjax NUTS / HMC / MALA chains advanced together by ``vmap``; batches of chains run
    one after another (``lax.map``) in the same compiled program. Default: every chain at once on a GPU/TPU,
    one at a time on a CPU, where vmapped chains are slower (``bayesattn._batching.default_batch``). It changes
    the speed, not the distribution; batched and unbatched arithmetic round differently, so the draws of a
    chain are not bit-identical across settings (each setting is deterministic given the key).
    progress: numpyro shows its progress bar; blackjax runs as one compiled call and prints one line per phase.
    """
    check_posterior(posterior)
    check_key("key", key)
    sampler = get_sampler(method, backend)
    num_chains, num_warmup, num_samples, thin = check_counts(num_chains, num_warmup, num_samples, thin)
    kept = num_chains * (num_samples // thin) * math.prod(posterior.L_shape)
    if kept > MAX_ARRAY_NUMBERS:  # the kept draws of L are one array: refused before XLA fails to allocate it
        raise ValueError(
            f"num_chains={num_chains}, num_samples={num_samples}, thin={thin}: {kept} numbers of kept draws of L "
            f"{posterior.L_shape}; expected at most {MAX_ARRAY_NUMBERS} (fewer chains or draws, or a larger thin)"
        )
    progress = check_bool("progress", progress)
    if chains_per_batch is None:
        chains_per_batch = default_batch(num_chains)
    chains_per_batch = min(check_int("chains_per_batch", chains_per_batch, minimum=1), num_chains)
    opts = sampler.check_options(method_options)
    job = prepare_job(
        sampler,
        posterior,
        key,
        init=init,
        num_chains=num_chains,
        num_warmup=num_warmup,
        num_samples=num_samples,
        thin=thin,
        chains_per_batch=chains_per_batch,
        options=opts,
        progress=progress,
    )
    return sampler.sample(job)
