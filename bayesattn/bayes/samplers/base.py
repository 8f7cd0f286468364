"""What the samplers of the registry share: the registry entry (:class:`Sampler`), one checked call
(:class:`SamplerJob`), the options check, the run of a compiled program and the assembly of chain draws.

A sampler family lives in one module of this package and registers one :class:`Sampler` per (method, backend)
in :data:`bayesattn.bayes.samplers.SAMPLERS`; ``sample`` and ``sample_many`` look it up and know no method name.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jax
import numpy as np

from ..._validate import check_between, check_int, check_positive
from ..posterior import Posterior
from ..program import compiled_program, split_posterior
from ..samples import Samples, assemble_samples, key_data, problem_config
from .starts import chain_starts

# method_options with these names are checked as ints >= 1, positive numbers, or numbers in (0, 1)
INT_OPTIONS = (
    "max_num_doublings",
    "num_integration_steps",
    "num_mcmc_steps",
    "max_steps",
    "num_folds",
    "max_leapfrog_steps",
)
POSITIVE_OPTIONS = ("initial_step_size", "learning_rate", "step_size_multiplier")
FRACTION_OPTIONS = ("target_acceptance_rate", "target_ess")
SWITCH_OPTIONS = ("stored_floor",)  # and these as True, False or None (the sampler chooses)


@dataclass(frozen=True)
class SamplerJob:
    """One call of a sampler after the public checks: the posterior, the run key (the second half of the user's
    key; the first half chose the starts), the chains' starting points (num_chains, *L_shape) or None, their
    superchain labels (num_chains,) or None, the counts, the checked options, the config recorded in the result
    and whether to report progress."""

    posterior: Posterior
    run_key: jax.Array
    positions: Any
    superchains: Any
    num_chains: int
    num_warmup: int
    num_samples: int
    thin: int
    chains_per_batch: int
    options: dict
    config: dict
    progress: bool = False


def prepare_job(
    sampler: Sampler,
    posterior: Posterior,
    key: jax.Array,
    *,
    init: Any,
    num_chains: int,
    num_warmup: int,
    num_samples: int,
    thin: int,
    chains_per_batch: int,
    options: dict,
    progress: bool = False,
) -> SamplerJob:
    """The job of one checked call: ``key`` split into the starts' key and the run key, the starting points
    (``sampler.starts``) and the config recorded with the result (everything needed to rerun it, the key
    included). The counts and options must already be checked; ``init`` None is the sampler's default."""
    init = sampler.default_init if init is None else init
    init_key, run_key = jax.random.split(key)
    positions, superchains = sampler.starts(posterior, init_key, init, num_chains, options)
    config = {
        "method": sampler.method,
        "backend": sampler.backend,
        "num_chains": num_chains,
        "num_warmup": num_warmup,
        "num_samples": num_samples,
        "thin": thin,
        "init": init if isinstance(init, str) else "array",
        "method_options": options,
        "key": key_data(key),
        **problem_config(posterior),
    }
    return SamplerJob(
        posterior,
        run_key,
        positions,
        superchains,
        num_chains,
        num_warmup,
        num_samples,
        thin,
        chains_per_batch,
        options,
        config,
        progress,
    )


def chain_keys(run_key: jax.Array, num_chains: int) -> jax.Array:
    """One key per chain (num_chains,): the key argument of a program whose chains draw their own numbers."""
    return jax.random.split(run_key, num_chains)


def assemble_chains(post: Posterior, out: dict, diag: dict, options: dict, config: dict, superchains) -> Samples:
    """:class:`Samples` from the output of a chain program: ``out`` holds per chain "L" (chains, draws, *L_shape),
    "logdensity", "acceptance_rate", "num_divergent", "num_divergent_warmup", "num_grad_evals", "step_size",
    "draw_stats" (per-draw statistics, ArviZ's names) and, for the ensemble, "trajectory_length"; ``diag`` the
    common diagnostics (:func:`program_diagnostics`), completed here."""
    diag.update(
        {
            "num_divergent": int(out["num_divergent"].sum()),
            "num_divergent_warmup": int(out["num_divergent_warmup"].sum()),
            "step_size": out["step_size"],
        }
    )
    if "trajectory_length" in out:
        diag["trajectory_length"] = float(out["trajectory_length"])
    return assemble_samples(
        post,
        out["L"],
        out["logdensity"],
        diag,
        config["method"],
        config,
        sample_stats={"lp": out["logdensity"], **out["draw_stats"]},
        superchains=superchains,
    )


def program_diagnostics(out: dict, wall_s: float, compile_s: float) -> dict:
    """The diagnostics every compiled program reports: run and compile seconds, gradient evaluations (summed over
    chains or runs) and the mean acceptance rate."""
    return {
        "wall_time_s": wall_s,
        "compile_time_s": compile_s,
        "num_grad_evals": int(out["num_grad_evals"].sum()),
        "acceptance_rate": float(np.mean(out["acceptance_rate"])),
    }


def run_program(sampler: Sampler, job: SamplerJob) -> Samples:
    """Run a sampler's compiled program on one posterior: build (or fetch from the cache) the program of
    ``sampler.program`` for its static key, call it on (statistics and prior, keys, starting points), then
    ``sampler.assemble``."""
    post = job.posterior
    dynamic, static = split_posterior(post)
    static_key = (*sampler.program_key(job), *static)
    args = (dynamic, sampler.chain_keys(job.run_key, job.num_chains), job.positions)
    if job.progress:
        print(f"bayesattn.sample: compiling {sampler.method} ({job.num_chains} chains)", flush=True)
    compiled, compile_s = compiled_program(sampler.program, static_key, *args)
    if job.progress:
        print(f"bayesattn.sample: running ({compile_s:.1f} s compile)", flush=True)
    t0 = time.perf_counter()
    out = jax.block_until_ready(compiled(*args))
    wall = time.perf_counter() - t0
    out = jax.tree.map(np.asarray, out)
    diag = program_diagnostics(out, wall, compile_s)
    return sampler.assemble(post, out, diag, job.options, job.config, job.superchains)


@dataclass(frozen=True, eq=False)
class Sampler:
    """One entry of the sampler registry: a method on a backend, its options and how it runs.

    method, backend: its key in :data:`~bayesattn.bayes.samplers.SAMPLERS`; options: the ``method_options`` it
    accepts, with their defaults; starts: ``(posterior, init_key, init, num_chains, options) -> (positions,
    superchains)``, the chains' starting points (num_chains, *L_shape) or None and their superchain labels
    (num_chains,) or None; program: the builder of its compiled program, ``program(*program_key(job), task,
    model) -> run(dynamic, keys, positions) -> out`` (a module-level function: the program cache keys on it);
    program_key: ``job -> tuple``, the hashable static arguments of the program besides the task and the
    attention model; chain_keys: ``(run_key, num_chains) -> keys``, the program's key argument; assemble:
    ``(posterior, out, diagnostics, options, config, superchains) -> Samples``; run: ``(sampler, job) ->
    Samples`` (default :func:`run_program`; a sampler outside one compiled program, numpyro's NUTS, has its
    own); batched: whether ``sample_many`` may stack posteriors into its program (the program's outputs then
    gain a leading axis of posteriors); default_init: the ``init`` of a call that gives none ("cold"; SMC,
    which draws its particles from the prior: "prior")."""

    method: str
    backend: str
    options: dict
    starts: Callable = chain_starts
    program: Callable | None = None
    program_key: Callable | None = None
    chain_keys: Callable = chain_keys
    assemble: Callable = assemble_chains
    run: Callable = run_program
    batched: bool = False
    default_init: str = "cold"

    def check_options(self, method_options: dict) -> dict:
        """The defaults updated by ``method_options``, checked: ValueError for an option this sampler does not
        take, or a value out of range (counts are ints >= 1, step sizes and rates positive, targets in (0, 1),
        switches True, False or None)."""
        unknown = sorted(set(method_options) - set(self.options))
        if unknown:
            raise ValueError(
                f"method_options {unknown} not understood by method={self.method!r}, backend={self.backend!r}: "
                f"expected some of {sorted(self.options)}"
            )
        opts = {**self.options, **method_options}
        for name in INT_OPTIONS:
            if name in opts:
                opts[name] = check_int(name, opts[name], minimum=1)
        for name in POSITIVE_OPTIONS:
            if name in opts:
                opts[name] = check_positive(name, opts[name])
        for name in FRACTION_OPTIONS:
            if name in opts:
                opts[name] = check_between(name, opts[name], 0, 1)
        for name in SWITCH_OPTIONS:
            if name in opts and not (opts[name] is None or isinstance(opts[name], bool)):
                raise ValueError(f"{name}={opts[name]!r}: expected True, False or None (the sampler chooses)")
        if opts.get("mode_threshold") is not None:  # None: the attention kind's own threshold
            opts["mode_threshold"] = check_between("mode_threshold", opts["mode_threshold"], -math.inf, math.inf)
        return opts

    def sample(self, job: SamplerJob) -> Samples:
        """Run this sampler on one checked call."""
        return self.run(self, job)
