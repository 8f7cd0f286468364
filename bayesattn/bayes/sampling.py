"""Exact-posterior sampling of the attention matrix L (docs/model.md section 2) with blackjax and numpyro.

``sample(posterior, key, ...)`` runs NUTS / HMC / MALA (blackjax) or NUTS (numpyro) on the closed-form
log density over L (the readout V integrated out), or adaptive tempered SMC (blackjax) from the prior to
the posterior, and returns a :class:`Samples` with the draws, the order parameters m, q, u and the
diagnostics (numpyro's ESS and split R-hat, divergences, acceptance, step size, gradient evaluations,
wall time, NaN count).

Design:

- All chains run in one ``jax.jit`` program (warmup + sampling). On a GPU/TPU the chains are ``vmap``-ed; on
  a CPU they run one after another inside that program (``lax.map``), because XLA:CPU executes vmapped NUTS
  trees about 2x slower per chain-gradient (``chains_per_batch`` chooses; see ``bayesattn._batching.default_batch``).
- The program takes the posterior's sufficient statistics *and the prior's three variances* as
  arguments, so posteriors that differ only in P or in the prior (a sweep over P at fixed beta changes
  sigma2) share one compilation. Compiled programs are cached per (method, counts, options, task,
  attention); the first call reports its compile time separately (``diagnostics["compile_time_s"]``).
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
import time
from typing import Any, Literal

import blackjax
import jax
import jax.numpy as jnp
import numpy as np
import numpyro
from blackjax.adaptation.base import get_filter_adapt_info_fn
from blackjax.adaptation.step_size import dual_averaging_adaptation

from .._batching import default_batch, map_batched
from .._validate import check_choice, check_int, check_positive
from ..models.attention import hot_logits
from ._program import _compiled, _rebuild, _split
from .ensemble import ENSEMBLE_METHODS, ENSEMBLE_OPTIONS, _ensemble_program, _ensemble_starts, _run_options
from .joint import _numpyro_nuts
from .posterior import Posterior
from .samples import Samples, _assemble, _check_counts, _key_data, _problem_config
from .smc import _assemble_smc, _smc_program

Method = Literal["nuts", "hmc", "mala", "smc", "chees", "meads"]
Backend = Literal["blackjax", "numpyro"]
METHODS = ("nuts", "hmc", "mala", "smc", *ENSEMBLE_METHODS)
BACKENDS = ("blackjax", "numpyro")
SAMPLER_INITS = ("cold", "hot", "prior")

# method_options each method accepts, with defaults
_OPTIONS = {
    **ENSEMBLE_OPTIONS,
    "nuts": {"target_acceptance_rate": 0.8, "max_num_doublings": 10, "initial_step_size": 0.1},
    "hmc": {"target_acceptance_rate": 0.8, "num_integration_steps": 16, "initial_step_size": 0.1},
    "mala": {"target_acceptance_rate": 0.574, "initial_step_size": 1e-3},
    "smc": {
        "target_ess": 0.5,
        "num_mcmc_steps": 10,
        "num_integration_steps": 8,
        "initial_step_size": 0.1,
        "max_steps": 500,
        "mode_threshold": None,
    },
}
_NUMPYRO_OPTIONS = {"target_acceptance_rate": 0.8, "max_num_doublings": 10}


# ---------------------------------------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------------------------------------


# ---------------------------------------------------------------------------------------------------------
# Initial positions
# ---------------------------------------------------------------------------------------------------------
def hot_pattern(posterior: Posterior) -> np.ndarray:
    """A strong copy pattern L: ``posterior.L_shape`` (:func:`bayesattn.models.attention.hot_logits`), the same
    in every head.

    softmax: 0.9 on the source in every query row; linear: the target direction scaled to the prior's typical
    radius sqrt(sigma_A2 * D) (D = allowed entries), i.e. u = 1 at the radius where the posterior mass sits for
    q >> eps.
    """
    task, mask = posterior.task, posterior.key_mask
    pat = np.asarray(task.target_pattern, np.float64)
    scale = None
    if posterior.attention == "linear":
        scale = np.sqrt(float(posterior.prior.sigma_A2) * int(mask.sum())) / max(np.sqrt(pat.sum()), 1e-300)
    return np.broadcast_to(hot_logits(pat, mask, posterior.attention, scale), posterior.L_shape).copy()


def initial_positions(posterior: Posterior, key: jax.Array, init: Any, num_chains: int) -> jax.Array:
    """Starting points (num_chains, *L_shape): "cold" (L = 0, uniform softmax attention), "hot"
    (:func:`hot_pattern`), "prior" (an independent prior draw per chain), or an array of shape L_shape
    (same for every chain) or (num_chains, *L_shape). L_shape is (T, T) for one head, (H, T, T) for H."""
    shape = posterior.L_shape
    num_chains = check_int("num_chains", num_chains, minimum=1)
    if isinstance(init, str):
        check_choice("init", init, SAMPLER_INITS)
        if init == "cold":
            return jnp.zeros((num_chains, *shape))
        if init == "hot":
            return jnp.broadcast_to(jnp.asarray(hot_pattern(posterior)), (num_chains, *shape))
        return math.sqrt(posterior.prior.sigma_A2) * jax.random.normal(key, (num_chains, *shape), jnp.float64)
    try:
        arr = np.asarray(init, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"init={init!r}: expected one of {', '.join(map(repr, SAMPLER_INITS))} or an array") from None
    if arr.shape == shape:
        arr = np.broadcast_to(arr, (num_chains, *shape))
    if arr.shape != (num_chains, *shape):
        raise ValueError(
            f"init has shape {arr.shape}: expected {shape} or {(num_chains, *shape)} "
            f"(heads={posterior.heads}, T={posterior.T})"
        )
    if not np.all(np.isfinite(arr)):
        raise ValueError("init contains NaN or inf: expected finite numbers")
    return jnp.asarray(arr)


# ---------------------------------------------------------------------------------------------------------
# blackjax NUTS / HMC / MALA: warmup + sampling of all chains in one jitted, vmapped program
# ---------------------------------------------------------------------------------------------------------
def _mcmc_program(method, num_warmup, num_kept, thin, options, chains_per_batch, task, model):
    opts = dict(options)

    def run(dynamic, keys, positions):
        post = _rebuild((task, model), dynamic)
        logdensity = post.log_density

        def one_chain(key, position):
            wkey, skey = jax.random.split(key)
            if method == "mala":
                kernel = blackjax.mala.build_kernel()
                da_init, da_update, da_final = dual_averaging_adaptation(opts["target_acceptance_rate"])
                state = blackjax.mala.init(position, logdensity)

                def warm(carry, k):
                    st, da = carry
                    st, info = kernel(k, st, logdensity, jnp.exp(da.log_step_size))
                    acc = jnp.where(jnp.isfinite(info.acceptance_rate), info.acceptance_rate, 0.0)
                    return (st, da_update(da, acc)), (jnp.zeros((), bool), jnp.ones((), jnp.int64))

                (state, da), (wdiv, wgrads) = jax.lax.scan(
                    warm, (state, da_init(opts["initial_step_size"])), jax.random.split(wkey, num_warmup)
                )
                step_size = da_final(da)

                def step(k, st):
                    st, info = kernel(k, st, logdensity, step_size)
                    # MALA has no Hamiltonian: its energy is reported as NaN
                    return st, info.acceptance_rate, jnp.zeros((), bool), jnp.ones((), jnp.int64), jnp.nan
            else:
                algo = blackjax.nuts if method == "nuts" else blackjax.hmc
                extra = (
                    {"max_num_doublings": opts["max_num_doublings"]}
                    if method == "nuts"
                    else {"num_integration_steps": opts["num_integration_steps"]}
                )
                warmup = blackjax.window_adaptation(
                    algo,
                    logdensity,
                    initial_step_size=opts["initial_step_size"],
                    target_acceptance_rate=opts["target_acceptance_rate"],
                    adaptation_info_fn=get_filter_adapt_info_fn(info_keys={"is_divergent", "num_integration_steps"}),
                    **extra,
                )
                (state, params), winfo = warmup.run(wkey, position, num_warmup)
                wdiv, wgrads = winfo.info.is_divergent, winfo.info.num_integration_steps
                step_size = params["step_size"]
                sampler = algo(logdensity, **params)

                def step(k, st):
                    st, info = sampler.step(k, st)
                    return st, info.acceptance_rate, info.is_divergent, info.num_integration_steps, info.energy

            def kept(st, k):
                # per kept draw: acceptance and gradient evaluations summed over the thinning block, the
                # divergences in it, and the energy of its last transition
                def inner(carry, kk):
                    st, acc, div, grads, _ = carry
                    st, a, dv, g, e = step(kk, st)
                    return (st, acc + a, div + dv, grads + g, jnp.asarray(e, jnp.float64)), None

                zero = (st, jnp.zeros(()), jnp.zeros((), jnp.int64), jnp.zeros((), jnp.int64), jnp.zeros(()))
                (st, acc, div, grads, energy), _ = jax.lax.scan(inner, zero, jax.random.split(k, thin))
                return st, (st.position, st.logdensity, acc, div, grads, energy)

            _, (draws, logdens, acc, div, grads, energy) = jax.lax.scan(kept, state, jax.random.split(skey, num_kept))
            return {
                "L": draws,
                "logdensity": logdens,
                "acceptance_rate": acc.sum() / (num_kept * thin),
                "num_divergent": div.sum(),
                "num_divergent_warmup": jnp.sum(wdiv),
                "num_grad_evals": grads.sum() + jnp.sum(wgrads),
                "step_size": step_size,
                "draw_stats": {"acceptance_rate": acc / thin, "diverging": div > 0, "n_steps": grads, "energy": energy},
            }

        return map_batched(lambda kp: one_chain(*kp), (keys, positions), chains_per_batch)

    return run


# ---------------------------------------------------------------------------------------------------------
# numpyro NUTS through a potential function (and the joint (L, V) reference model)
# ---------------------------------------------------------------------------------------------------------


# ---------------------------------------------------------------------------------------------------------
# Adaptive tempered SMC (blackjax) from the prior to the posterior
# ---------------------------------------------------------------------------------------------------------


# ---------------------------------------------------------------------------------------------------------
# The public entry point
# ---------------------------------------------------------------------------------------------------------


def _check_options(method, backend, method_options):
    allowed = _NUMPYRO_OPTIONS if backend == "numpyro" else _OPTIONS[method]
    unknown = sorted(set(method_options) - set(allowed))
    if unknown:
        raise ValueError(
            f"method_options {unknown} not understood by method={method!r}, backend={backend!r}: "
            f"expected some of {sorted(allowed)}"
        )
    opts = {**allowed, **method_options}
    for name in (
        "max_num_doublings",
        "num_integration_steps",
        "num_mcmc_steps",
        "max_steps",
        "num_folds",
        "max_leapfrog_steps",
    ):
        if name in opts:
            opts[name] = check_int(name, opts[name], minimum=1)
    for name in ("initial_step_size", "learning_rate", "step_size_multiplier"):
        if name in opts:
            opts[name] = check_positive(name, opts[name])
    for name in ("target_acceptance_rate", "target_ess"):
        if name in opts:
            v = check_positive(name, opts[name])
            if v >= 1:
                raise ValueError(f"{name}={v}: expected a number in (0, 1)")
            opts[name] = v
    return opts


def sample(
    posterior: Posterior,
    key: jax.Array,
    *,
    method: Method = "nuts",
    backend: Backend = "blackjax",
    num_chains: int = 4,
    num_warmup: int = 500,
    num_samples: int = 1000,
    init: Any = "cold",
    thin: int = 1,
    chains_per_batch: int | None = None,
    progress: bool = False,
    **method_options,
) -> Samples:
    """Sample the posterior over L with the closed form (V integrated out).

    posterior: a :class:`~bayesattn.Posterior`; key: a PRNG key (the same key gives the same draws).
    method: "nuts" | "hmc" | "mala" (MCMC, ``num_chains`` chains of ``num_warmup`` adaptation steps then
    ``num_samples`` steps, every ``thin``-th kept) or "smc" (``num_chains`` independent adaptive tempered SMC
    runs of ``num_samples`` particles each; ``num_warmup``, ``init`` and ``thin`` are not used), or "chees" |
    "meads" (many chains in lockstep: ``num_chains`` of 16..256 advanced together, adapted across chains;
    :mod:`bayesattn.bayes.ensemble`).
    backend: "blackjax" (all methods) or "numpyro" (NUTS only).
    init: "cold" | "hot" | "prior" | array (T, T) or (num_chains, T, T); see :func:`initial_positions`.
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
    trajectory length), max_leapfrog_steps (1000); meads: num_folds (4), step_size_multiplier (0.5); both:
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
    if not isinstance(posterior, Posterior):
        raise ValueError(f"posterior={type(posterior).__name__}: expected a bayesattn Posterior")
    check_choice("method", method, METHODS)
    check_choice("backend", backend, BACKENDS)
    if backend == "numpyro" and method != "nuts":
        raise ValueError(f"method={method!r} with backend='numpyro': numpyro supports only method='nuts'")
    num_chains, num_warmup, num_samples, thin = _check_counts(num_chains, num_warmup, num_samples, thin)
    if chains_per_batch is None:
        chains_per_batch = default_batch(num_chains)
    chains_per_batch = min(check_int("chains_per_batch", chains_per_batch, minimum=1), num_chains)
    opts = _check_options(method, backend, method_options)
    init_key, run_key = jax.random.split(key)
    positions = initial_positions(posterior, init_key, init, num_chains) if method != "smc" else None
    config = {
        "method": method,
        "backend": backend,
        "num_chains": num_chains,
        "num_warmup": num_warmup,
        "num_samples": num_samples,
        "thin": thin,
        "init": init if isinstance(init, str) else "array",
        "method_options": opts,
        "key": _key_data(key),
        **_problem_config(posterior),
    }
    dynamic, static = _split(posterior)
    keys = jax.random.split(run_key, num_chains)

    if backend == "numpyro":
        kernel = numpyro.infer.NUTS(
            potential_fn=lambda L: -posterior.log_density(L),
            target_accept_prob=opts["target_acceptance_rate"],
            max_tree_depth=opts["max_num_doublings"],
        )
        samples, diag, stats = _numpyro_nuts(
            kernel,
            run_key,
            positions,
            num_chains=num_chains,
            num_warmup=num_warmup,
            num_samples=num_samples,
            thin=thin,
            progress=progress,
            model_kwargs={},
        )
        L = np.asarray(samples)
        logdens = np.asarray(jax.vmap(jax.vmap(posterior.log_density))(jnp.asarray(L)))
        return _assemble(posterior, L, logdens, diag, method, config, sample_stats={"lp": logdens, **stats})

    if method == "smc":
        static_key = (
            "smc",
            num_samples,
            tuple(sorted((k, v) for k, v in opts.items() if k != "mode_threshold")),
            *static,
        )
        builder = lambda _m, n, o, task, att: _smc_program(n, o, task, att)  # noqa: E731
        args = (dynamic, keys)
    elif method in ENSEMBLE_METHODS:
        positions, superchains = _ensemble_starts(method, posterior, init_key, init, positions, opts)
        static_key = (method, num_warmup, num_samples // thin, thin, _run_options(opts), num_chains, *static)
        builder = _ensemble_program
        args = (dynamic, run_key, positions)
    else:
        static_key = (
            method,
            num_warmup,
            num_samples // thin,
            thin,
            tuple(sorted(opts.items())),
            chains_per_batch,
            *static,
        )
        builder = _mcmc_program
        args = (dynamic, keys, positions)
    if progress:
        print(f"bayesattn.sample: compiling {method} ({num_chains} chains)", flush=True)
    compiled, compile_s = _compiled(builder, static_key, *args)
    if progress:
        print(f"bayesattn.sample: running ({compile_s:.1f} s compile)", flush=True)
    t0 = time.perf_counter()
    out = jax.block_until_ready(compiled(*args))
    wall = time.perf_counter() - t0
    out = jax.tree.map(np.asarray, out)
    diag = {
        "wall_time_s": wall,
        "compile_time_s": compile_s,
        "num_grad_evals": int(out["num_grad_evals"].sum()),
        "acceptance_rate": float(np.mean(out["acceptance_rate"])),
    }
    if method == "smc":
        return _assemble_smc(posterior, out, diag, opts, config)
    diag.update(
        {
            "num_divergent": int(out["num_divergent"].sum()),
            "num_divergent_warmup": int(out["num_divergent_warmup"].sum()),
            "step_size": out["step_size"],
        }
    )
    if "trajectory_length" in out:
        diag["trajectory_length"] = float(out["trajectory_length"])
    return _assemble(
        posterior,
        out["L"],
        out["logdensity"],
        diag,
        method,
        config,
        sample_stats={"lp": out["logdensity"], **out["draw_stats"]},
        superchains=superchains if method in ENSEMBLE_METHODS else None,
    )
