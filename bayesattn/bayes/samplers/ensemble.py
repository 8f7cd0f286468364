"""Many chains in lockstep: ChEES-HMC and MEADS (blackjax's ensemble adaptations) on the closed form.

NUTS runs each chain's own tree of trajectories, so on a CPU its chains run one after another
(``bayesattn._batching.default_batch``) and every gradient rereads the sufficient statistics. Here all K chains
take a step of the same (jittered) trajectory length together, in one ``vmap``-ed program: the closed form's
contractions of K attention patterns with the statistics become matrix-matrix products that read the statistics
once per step for all chains, and the adaptation pools information across chains.

- ``method="chees"``: ``blackjax.chees_adaptation`` (step size by dual averaging, trajectory length by the ChEES
  criterion, optax Adam on its log, a diagonal mass matrix from the ensemble) then ``blackjax.dynamic_hmc`` with
  the adapted Halton-jittered trajectory length. Where the dimension is large against the adapting chains
  (``stored_floor=None``, the default; True / False force it) the warm-up is the same one with the length floor's
  eigenvalue from stored positions (:mod:`.chees_loop`), which is cheaper there.
- ``method="meads"``: ``blackjax.meads_adaptation`` (step size, damping and momentum scale from the ensemble
  over K folds) then ``blackjax.ghmc`` (one leapfrog step per transition with a persistent momentum: give it
  ``thin`` of tens).

Both return :class:`~bayesattn.bayes.samples.Samples` like NUTS, with per-draw statistics, ESS and split R-hat
per observable (many short chains: ESS pools them; R-hat compares them), and the nested R-hat
(:func:`~bayesattn.bayes.samples.nested_r_hat`) over superchains, the groups of chains with one starting point:
``init="prior", num_superchains=G`` starts G superchains of K / G chains each (with cold / hot starts all chains
form one superchain and the nested R-hat is NaN: it needs two).
"""

from __future__ import annotations

import functools
import math

import blackjax
import jax
import jax.numpy as jnp
import numpy as np
import optax
from blackjax.adaptation.base import get_filter_adapt_info_fn

from ..._validate import check_int
from ..program import rebuild_posterior
from .base import Sampler, SamplerJob
from .chees_loop import chees_warmup_stored, lockstep_dynamic_hmc, use_stored_floor
from .starts import initial_positions

ENSEMBLE_METHODS = ("chees", "meads")
ENSEMBLE_JITTER = 0.1  # chains started at one point are spread by this many prior standard deviations
ENSEMBLE_OPTIONS = {
    "chees": {
        "target_acceptance_rate": 0.651,
        "initial_step_size": 0.1,
        "learning_rate": 0.025,
        "max_leapfrog_steps": 1000,
        "num_superchains": None,
        "warmup_chains": None,
        "spread_steps": 0,
        "stored_floor": None,
    },
    "meads": {"num_folds": 4, "step_size_multiplier": 0.5, "num_superchains": None},
}


def run_options(opts: dict) -> tuple:
    """The options the compiled program depends on, sorted (the superchains only choose the starting points)."""
    return tuple(sorted((k, v) for k, v in opts.items() if k != "num_superchains"))


def ensemble_starts(method, posterior, init_key, init, positions, opts):
    """(positions, superchain label per chain): checks the chain count; with ``num_superchains`` (init="prior"
    only) that many prior draws, each repeated for num_chains / num_superchains consecutive chains; the labels
    group chains with the same starting point. The ensemble adaptations estimate scales from the spread of the
    chains, so chains that share a starting point (cold / hot / one array / one superchain's prior draw) are
    spread by ENSEMBLE_JITTER prior standard deviations. positions: (num_chains, *L_shape), the
    :func:`~.starts.initial_positions` of ``init``."""
    num_chains = positions.shape[0]
    if num_chains < 2:
        raise ValueError(f"num_chains={num_chains}: method={method!r} adapts across chains; expected >= 2")
    if "num_folds" in opts and num_chains % opts["num_folds"]:
        raise ValueError(
            f"num_chains={num_chains}: method={method!r} splits the chains into num_folds="
            f"{opts['num_folds']} folds; expected a multiple of it"
        )
    if opts.get("warmup_chains") is not None:  # the chains that adapt: 2 .. num_chains
        check_int("warmup_chains", opts["warmup_chains"], minimum=2, maximum=num_chains)
    if "spread_steps" in opts:
        check_int("spread_steps", opts["spread_steps"], minimum=0)
        if opts["spread_steps"] and opts.get("warmup_chains") in (None, num_chains):
            raise ValueError(
                f"spread_steps={opts['spread_steps']} with warmup_chains={opts.get('warmup_chains')}: the spread "
                f"steps follow the copy of a few adapted chains to all {num_chains}; expected warmup_chains < "
                "num_chains too (or spread_steps=0)"
            )
    G = opts["num_superchains"]
    if G is not None:
        if init != "prior":
            raise ValueError(
                f"num_superchains={G} with init={init!r}: superchains start from distinct prior "
                "draws; expected init='prior'"
            )
        G = check_int("num_superchains", G, minimum=2)
        if num_chains % G:
            raise ValueError(f"num_superchains={G}: expected a divisor of num_chains={num_chains}")
        positions = jnp.repeat(positions[:G], num_chains // G, axis=0)
    superchains = np.unique(np.asarray(positions).reshape(num_chains, -1), axis=0, return_inverse=True)[1].ravel()
    if np.unique(superchains).size < num_chains:
        jkey = jax.random.fold_in(init_key, 1)
        positions = positions + ENSEMBLE_JITTER * math.sqrt(posterior.prior.sigma_A2) * jax.random.normal(
            jkey, positions.shape, jnp.float64
        )
    return positions, superchains


def lockstep_starts(method, posterior, init_key, init, num_chains, opts):
    """The :class:`~.base.Sampler` starts of ``method``: :func:`ensemble_starts` of the initial positions."""
    return ensemble_starts(
        method, posterior, init_key, init, initial_positions(posterior, init_key, init, num_chains), opts
    )


def step_counts(is_divergent, num_integration_steps):
    """(divergences, gradient evaluations) per chain from per-step arrays (steps, chains)."""
    return (
        jnp.sum(is_divergent, axis=0, dtype=jnp.int64),
        jnp.sum(num_integration_steps, axis=0, dtype=jnp.int64),
    )


def warmup_counts(winfo):
    """(divergences, gradient evaluations) per chain over a blackjax ensemble warm-up, from its info."""
    return step_counts(winfo.info.is_divergent, winfo.info.num_integration_steps)


def chees_warmup(logdensity, key, positions, num_chains, num_warmup, opts):
    """ChEES warm-up (positions: (num_chains, dim)); returns (states, params, :func:`warmup_counts` (per chain),
    the lockstep sampling step, the adapted trajectory length).

    By default every chain adapts. With ``opts["warmup_chains"] = w < num_chains`` only the first w chains
    adapt (the warm-up then costs about w / num_chains of the full one); their final states are copied to all
    num_chains chains in turn (chain i takes warm chain i mod w), and every chain then takes
    ``opts["spread_steps"]`` steps of the adapted kernel with its own keys, discarded, before the draws, so that
    copies of one warm chain part before they are kept (the diagnostics count the copies as separate chains:
    ``scripts/ensemble_calibration.py`` checks what that does to the standard errors).

    With ``opts["stored_floor"]`` True (or None, the default, where :func:`~.chees_loop.use_stored_floor` finds
    it cheaper) the warm-up is :func:`~.chees_loop.chees_warmup_stored`: blackjax's, step for step, with the
    trajectory-length floor's eigenvalue from the window's stored positions instead of a full covariance updated at
    every step (the same adapted parameters, to rounding)."""
    w = opts.get("warmup_chains") or num_chains
    wkey, skey = jax.random.split(key)
    run_key = key if w == num_chains else wkey
    settings = dict(
        target_acceptance_rate=opts["target_acceptance_rate"], max_leapfrog_steps=opts["max_leapfrog_steps"]
    )
    optim = optax.adam(opts["learning_rate"])
    if use_stored_floor(opts.get("stored_floor"), positions.shape[1], w):
        (states, params), (wdiv, wsteps) = chees_warmup_stored(
            logdensity, run_key, positions[:w], opts["initial_step_size"], optim, num_warmup, **settings
        )
        div, grads = step_counts(wdiv, wsteps)
    else:
        warmup = blackjax.chees_adaptation(
            logdensity,
            w,
            **settings,
            mass_matrix_estimation="diagonal",
            adaptation_info_fn=get_filter_adapt_info_fn(info_keys={"is_divergent", "num_integration_steps"}),
        )
        (states, params), winfo = warmup.run(run_key, positions[:w], opts["initial_step_size"], optim, num_warmup)
        div, grads = warmup_counts(winfo)
    step = lockstep_dynamic_hmc(logdensity, params)
    trajectory = params["integration_steps_params"][0] * params["step_size"]
    if w < num_chains:
        copy = jnp.arange(num_chains) % w
        states = jax.tree.map(lambda x: x[copy], states)
        # the counts per chain: each adapting chain's warm-up is counted once, on the chain of the same index
        zeros = jnp.zeros((num_chains - w,), jnp.int64)
        div, grads = jnp.concatenate([div, zeros]), jnp.concatenate([grads, zeros])

        def spread(st, k):
            st, info = step(jax.random.split(k, num_chains), st)
            return st, (info.is_divergent, info.num_integration_steps)

        states, (sdiv, sgrads) = jax.lax.scan(spread, states, jax.random.split(skey, opts["spread_steps"]))
        div, grads = div + sdiv.sum(0), grads + sgrads.sum(0)
    return states, params, (div, grads), step, trajectory


def meads_warmup(logdensity, key, positions, num_chains, num_warmup, opts):
    """MEADS warm-up of all chains (positions: (num_chains, dim)); returns (states, params, :func:`warmup_counts`,
    the vmapped GHMC step, the step size as the trajectory length of its one leapfrog step)."""
    warmup = blackjax.meads_adaptation(
        logdensity,
        num_chains,
        num_folds=opts["num_folds"],
        step_size_multiplier=opts["step_size_multiplier"],
        adaptation_info_fn=get_filter_adapt_info_fn(info_keys={"is_divergent", "num_integration_steps"}),
    )
    (states, params), winfo = warmup.run(key, positions, num_warmup)
    step = jax.vmap(blackjax.ghmc(logdensity, **params).step)
    return states, params, warmup_counts(winfo), step, params["step_size"]


def lockstep_program_key(job: SamplerJob) -> tuple:
    """The static arguments of a :func:`lockstep_program`: (num_warmup, kept draws, thin, run options, chains)."""
    return (job.num_warmup, job.num_samples // job.thin, job.thin, run_options(job.options), job.num_chains)


def lockstep_program(warmup):
    """The program builder of a many-chain sampler from its warm-up ``warmup(logdensity, key, positions,
    num_chains, num_warmup, options) -> (states, params, (divergences, gradient evaluations) per chain, step,
    trajectory length)``: ``(num_warmup,
    num_kept, thin, options, num_chains, task, model) -> run(dynamic, key, positions)``, one key for all chains,
    positions: (num_chains, *L_shape); outputs as :func:`~.chains.chain_program`'s, plus "trajectory_length"."""

    def build(num_warmup, num_kept, thin, options, num_chains, task, model):
        opts = dict(options)

        def run(dynamic, key, positions):
            post = rebuild_posterior((task, model), dynamic)
            shape = model.logit_shape(task.T)
            # blackjax's ensemble adaptations take flat positions (chains, dim)
            logdensity = lambda x: post.log_density(x.reshape(shape))  # noqa: E731
            positions = positions.reshape(num_chains, -1)
            wkey, skey = jax.random.split(key)
            states, params, (wdiv, wgrads), step, trajectory = warmup(
                logdensity, wkey, positions, num_chains, num_warmup, opts
            )

            def kept(states, k):
                def inner(carry, kk):
                    st, acc, div, grads, _ = carry
                    st, info = step(jax.random.split(kk, num_chains), st)
                    return (
                        st,
                        acc + info.acceptance_rate,
                        div + info.is_divergent,
                        grads + info.num_integration_steps,
                        info.energy,
                    ), None

                zc = jnp.zeros((num_chains,))
                zero = (states, zc, jnp.zeros((num_chains,), jnp.int64), jnp.zeros((num_chains,), jnp.int64), zc)
                (states, acc, div, grads, energy), _ = jax.lax.scan(inner, zero, jax.random.split(k, thin))
                return states, (states.position, states.logdensity, acc, div, grads, energy)

            _, (draws, logdens, acc, div, grads, energy) = jax.lax.scan(kept, states, jax.random.split(skey, num_kept))
            chain_first = lambda x: jnp.swapaxes(x, 0, 1)  # noqa: E731  (kept, chains, ...) -> (chains, kept, ...)
            return {
                "L": chain_first(draws).reshape(num_chains, num_kept, *shape),
                "logdensity": chain_first(logdens),
                "acceptance_rate": acc.sum(0) / (num_kept * thin),
                "num_divergent": div.sum(0),
                "num_divergent_warmup": wdiv,
                "num_grad_evals": grads.sum(0) + wgrads,
                "step_size": jnp.broadcast_to(params["step_size"], (num_chains,)),
                "trajectory_length": trajectory,
                "draw_stats": {
                    "acceptance_rate": chain_first(acc) / thin,
                    "diverging": chain_first(div) > 0,
                    "n_steps": chain_first(grads),
                    "energy": chain_first(energy),
                },
            }

        return run

    build.__qualname__ = f"lockstep_program({warmup.__name__})"
    return build


chees_program = lockstep_program(chees_warmup)
meads_program = lockstep_program(meads_warmup)


def lockstep_keys(run_key, num_chains):
    """The program's key argument: the run key itself, one for all chains (they move in lockstep)."""
    return run_key


def _entry(method, program):
    return Sampler(
        method,
        "blackjax",
        ENSEMBLE_OPTIONS[method],
        starts=functools.partial(lockstep_starts, method),
        program=program,
        program_key=lockstep_program_key,
        chain_keys=lockstep_keys,
        batched=True,
    )


CHEES = _entry("chees", chees_program)
MEADS = _entry("meads", meads_program)
