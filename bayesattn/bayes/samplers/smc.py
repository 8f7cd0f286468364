"""Adaptive tempered SMC (blackjax) from the prior to the posterior, and the mode weights it gives.

``sample(method="smc")`` runs ``num_chains`` independent SMC runs of ``num_samples`` particles each in one compiled
program; a "chain" of the returned :class:`~bayesattn.bayes.samples.Samples` is one run and its draws are its
particles resampled to equal weight. ``init``, ``num_warmup`` and ``thin`` are not used: the particles start from
the prior.
"""

from __future__ import annotations

import functools
import math

import blackjax
import jax
import jax.numpy as jnp
import numpy as np
from blackjax.smc.tuning.from_kernel_info import update_scale_from_acceptance_rate
from blackjax.smc.tuning.from_particles import particles_stds

from ..._validate import brief, check_array, check_between, check_callable, check_int, check_key, check_positive
from ..program import rebuild_posterior
from ..samples import Samples, assemble_samples, draw_observables
from .base import Sampler, SamplerJob
from .starts import no_starts

SMC_OPTIONS = {
    "target_ess": 0.5,
    "num_mcmc_steps": 10,
    "num_integration_steps": 8,
    "initial_step_size": 0.1,
    "max_steps": 500,
    "mode_threshold": None,
}


def tempered_smc(
    logprior_fn,
    loglikelihood_fn,
    key: jax.Array,
    particles: jax.Array,
    *,
    target_ess: float = 0.5,
    num_mcmc_steps: int = 10,
    num_integration_steps: int = 8,
    initial_step_size: float = 0.1,
    max_steps: int = 500,
) -> dict:
    """blackjax adaptive tempered SMC from the prior (``particles`` drawn from it) to prior x likelihood.

    The mutation kernel is HMC with a diagonal inverse mass matrix set to the particles' variances and
    per-particle step sizes tuned from the acceptance rate after every tempering step (blackjax.smc.tuning's
    ``particles_stds`` and ``update_scale_from_acceptance_rate``, target 0.65).
    Pure jax (jit/vmap-able). particles: (N, ...) pytree leaves.

    Returns {"particles" (N, ...), "weights" (N,) normalised, "log_evidence" (sum of the log-likelihood
    increments, an unbiased-in-Z estimate of log int prior x likelihood), "tempering_steps",
    "tempering_param" (1.0 unless max_steps was hit), "acceptance_rate" (mean of the last step),
    "num_grad_evals"}.
    """
    check_key("key", key)
    target_ess = check_between("target_ess", target_ess, 0, 1)
    for name, count in (
        ("num_mcmc_steps", num_mcmc_steps),
        ("num_integration_steps", num_integration_steps),
        ("max_steps", max_steps),
    ):
        check_int(name, count, minimum=1)
    initial_step_size = check_positive("initial_step_size", initial_step_size)
    n = _check_particles(particles)
    check_callable("logprior_fn", logprior_fn, "a function of one particle")
    check_callable("loglikelihood_fn", loglikelihood_fn, "a function of one particle")
    step_fn = functools.partial(blackjax.hmc.build_kernel(), num_integration_steps=num_integration_steps)

    # the kernel is built once and takes the tuned parameters at every step (as blackjax's tempered.py does);
    # blackjax.inner_kernel_tuning would do the tuning too, but its update hook cannot see the previous step sizes
    kernel = blackjax.smc.adaptive_tempered.build_kernel(
        logprior_fn, loglikelihood_fn, step_fn, blackjax.hmc.init, blackjax.smc.resampling.systematic, target_ess
    )

    def smc_step(k, st, params):
        st, info = kernel(k, st, num_mcmc_steps, params)
        acc = jnp.mean(info.update_info.acceptance_rate, axis=-1)
        acc = jnp.where(jnp.isfinite(acc), acc, 0.0)
        params = {
            "step_size": update_scale_from_acceptance_rate(params["step_size"], acc, 0.65),
            "inverse_mass_matrix": particles_stds(st.particles)[None] ** 2,
        }
        return st, params, info

    def cond(carry):
        _, st, _, _, steps, _ = carry
        return (st.tempering_param < 1.0) & (steps < max_steps)

    def body(carry):
        k, st, params, logz, steps, _ = carry
        k, sub = jax.random.split(k)
        st, params, info = smc_step(sub, st, params)
        return (
            k,
            st,
            params,
            logz + info.log_likelihood_increment,
            steps + 1,
            jnp.mean(info.update_info.acceptance_rate),
        )

    params = {
        "step_size": jnp.full((n,), initial_step_size),
        "inverse_mass_matrix": particles_stds(particles)[None] ** 2,
    }
    init = (
        key,
        blackjax.adaptive_tempered_smc.init(particles),
        params,
        jnp.zeros(()),
        jnp.zeros((), jnp.int64),
        jnp.zeros(()),
    )
    _, st, _, logz, steps, acc = jax.lax.while_loop(cond, body, init)
    return {
        "particles": st.particles,
        "weights": st.weights,
        "log_evidence": logz,
        "tempering_steps": steps,
        "tempering_param": st.tempering_param,
        "acceptance_rate": acc,
        "num_grad_evals": steps * n * num_mcmc_steps * num_integration_steps,
    }


def _check_particles(particles) -> int:
    """The number N of particles: every leaf of ``particles`` a float array (N, ...), with N >= 2 the same for all
    and finite values when concrete; ValueError naming the leaf otherwise (a list, a scalar or None failed inside
    blackjax, integers in its gradient, and NaN came back as a NaN evidence)."""
    leaves = jax.tree.leaves(particles)
    if not leaves or not all(hasattr(leaf, "shape") and hasattr(leaf, "dtype") for leaf in leaves):
        raise ValueError(
            f"particles={brief(particles)}: expected arrays (N, ...) of N >= 2 particles drawn from the prior"
        )
    n = leaves[0].shape[0] if leaves[0].ndim else 0
    for i, leaf in enumerate(leaves):
        name = "particles" if len(leaves) == 1 else f"particles leaf {i}"
        if leaf.ndim == 0 or leaf.shape[0] != n or n < 2:
            raise ValueError(
                f"{name} has shape {tuple(leaf.shape)}: expected (N, ...) with the same N >= 2 for every leaf"
            )
        if not jnp.issubdtype(leaf.dtype, jnp.floating):
            raise ValueError(f"{name} has dtype {leaf.dtype}: expected floating-point numbers")
        check_array(name, leaf, (n,) + (None,) * (leaf.ndim - 1))
    return n


def smc_program_key(job: SamplerJob) -> tuple:
    """The static arguments of :func:`smc_program`: (particles per run, sorted options but the mode threshold)."""
    return (job.num_samples, tuple(sorted((k, v) for k, v in job.options.items() if k != "mode_threshold")))


def smc_program(num_particles, options, task, model):
    """The program builder of ``method="smc"``: ``run(dynamic, keys, positions=None)`` runs one adaptive tempered
    SMC of ``num_particles`` particles from the prior per key (keys: (runs,)) and returns per run its particles,
    weights, log evidence and tempering diagnostics (:func:`tempered_smc`), "L" (the particles resampled to equal
    weight, (runs, num_particles, *L_shape)) and their "logdensity"."""
    opts = dict(options)

    def run(dynamic, keys, positions=None):
        post = rebuild_posterior((task, model), dynamic)
        sA = jnp.sqrt(post.prior.sigma_A2)

        def one_run(key):
            pkey, skey, rkey = jax.random.split(key, 3)
            particles = sA * jax.random.normal(pkey, (num_particles, *model.logit_shape(task.T)), jnp.float64)
            out = tempered_smc(
                post.log_prior,
                post.log_likelihood,
                skey,
                particles,
                target_ess=opts["target_ess"],
                num_mcmc_steps=opts["num_mcmc_steps"],
                num_integration_steps=opts["num_integration_steps"],
                initial_step_size=opts["initial_step_size"],
                max_steps=opts["max_steps"],
            )
            # equal-weight draws for the returned samples; the mode weights use the exact weights
            idx = blackjax.smc.resampling.systematic(rkey, out["weights"], num_particles)
            out["L"] = out["particles"][idx]
            out["logdensity"] = jax.vmap(post.log_density)(out["L"])
            return out

        # runs one after another (lax.map): particles are already vectorised within a run, and vmapping the
        # runs' adaptive while-loops made the batched program stall (seen with 4 runs x 500 particles)
        return jax.lax.map(one_run, keys)

    return run


def assemble_smc(post, out: dict, diag: dict, opts: dict, config: dict, superchains=None) -> Samples:
    """:class:`Samples` from :func:`smc_program`'s output, with the log evidence per run and the mode weights: the
    weighted share of particles whose order parameter exceeds ``mode_threshold`` (default: the attention kind's
    :meth:`~bayesattn.models.attention.AttentionKind.copy_threshold`)."""
    kind = post.attention_kind
    thr = opts["mode_threshold"]
    if thr is None:
        thr = kind.copy_threshold(post.T)
    by = kind.order_parameter
    obs = draw_observables(post, out["particles"])  # (runs, N), weighted particles
    w = out["weights"]
    high = np.sum(w * (obs[by] > thr), axis=1) if by in obs else np.full(w.shape[0], np.nan)
    logz = out["log_evidence"]
    diag.update(
        {
            "num_divergent": 0,
            "num_divergent_warmup": 0,
            "step_size": None,
            "tempering_steps": out["tempering_steps"],
            "tempering_param": out["tempering_param"],
        }
    )
    extra = {
        "log_evidence": {
            "mean": float(np.mean(logz)),
            "std": float(np.std(logz, ddof=1)) if logz.size > 1 else math.nan,
            "runs": logz,
        },
        "mode_weights": {
            "low": float(np.mean(1 - high)),
            "high": float(np.mean(high)),
            "high_runs": high,
            "std_high": float(np.std(high, ddof=1)) if high.size > 1 else math.nan,
            "by": by,
            "threshold": float(thr),
        },
        "complete": bool(np.all(out["tempering_param"] >= 1.0)),
    }
    return assemble_samples(post, out["L"], out["logdensity"], diag, "smc", config, extra)


SMC = Sampler(
    "smc",
    "blackjax",
    SMC_OPTIONS,
    starts=no_starts,
    default_init="prior",
    program=smc_program,
    program_key=smc_program_key,
    assemble=assemble_smc,
)
