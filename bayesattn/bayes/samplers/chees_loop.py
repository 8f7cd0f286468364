"""ChEES's warm-up with the trajectory-length floor computed from the stored positions of its window.

``blackjax.chees_adaptation`` (with ``mass_matrix_estimation="diagonal"``, as :mod:`.ensemble` runs it) floors the
trajectory length at pi / 2 times the square root of the top eigenvalue of the whitened ensemble covariance of the
last half of the warm-up. To get that eigenvalue it folds every chain's position into a full dim x dim covariance
at every step of the window, although it reads the matrix only through a few power iterations every 32 steps. At
dim = T^2 with few chains that update costs more than the eigenvalue needs (``benchmarks/bench_ensemble.py --only
floor`` and ``--only warmup``).

:func:`chees_warmup_stored` is the same warm-up, step for step: the same keys, blackjax's HMC kernel with one
leapfrog count for all chains (:func:`lockstep_dynamic_hmc`, as the draws), the same ChEES update (blackjax's own
``base``), the same Welford estimate of the diagonal mass matrix and the same schedule of power iterations. Only
the covariance is never formed: the window's positions X are kept (window steps x chains rows), and each product
C u is computed as X_c^T (X_c u) / (n - 1) from the centred rows, block by block. The adapted parameters agree with
blackjax's to rounding (``tests/test_chees_loop.py`` compares them where the floor binds).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from blackjax.adaptation.chees_adaptation import base
from blackjax.adaptation.mass_matrix import welford_algorithm
from blackjax.mcmc import dynamic_hmc

# blackjax.chees_adaptation's defaults and constants (blackjax 1.7), which its run uses with the options
# .ensemble passes: the Halton jitter of the whole length, decay 0.5, the diagonal mass matrix over the last half
FLOOR_FACTOR = math.pi / 2
RECOMPUTE_EVERY = 32  # window steps between power iterations
POWER_ITERATIONS = 5
FINAL_POWER_ITERATIONS = 20
LAMBDA_EPS = 1e-6
EPS_FLOAT = 1e-20
DECAY_RATE = 0.5
WINDOW_FRACTION = 0.5
MAX_SAMPLING_STEPS = 1000  # blackjax's default: it sizes the Halton sequence's bits


def lockstep_dynamic_hmc(logdensity, params):
    """The sampling step after ChEES's warm-up: ``blackjax.dynamic_hmc(logdensity, **params).step`` for all chains
    at once, with the trajectory's number of leapfrog steps computed once per iteration instead of per chain.

    ChEES gives every chain the same jittered trajectory (its step counter starts at 0 for all chains and
    advances by one per iteration, so ``random_generator_arg`` is equal across chains). ``jax.vmap`` of the
    per-chain step cannot know that: it batches the trip count of the leapfrog loop, which turns the loop into a
    masked loop that selects every carried array at every step. Here the count is one scalar, the leapfrog loop
    stays a plain loop around the chains' batched gradient, and each chain runs blackjax's own HMC kernel (the
    one ``dynamic_hmc`` wraps) with the same key, so the draws are those of the vmapped ``dynamic_hmc`` step
    (``tests/test_ensemble.py`` compares them)."""
    from blackjax.mcmc.dynamic_hmc import DynamicHMCState
    from blackjax.mcmc.hmc import HMCState, build_kernel

    hmc = build_kernel()
    steps_fn, steps_params = params["integration_steps_fn"], params["integration_steps_params"]

    def step(keys, states):
        n = steps_fn(states.random_generator_arg[0], *steps_params)  # the same for every chain
        one = lambda k, st: hmc(k, st, logdensity, params["step_size"], params["inverse_mass_matrix"], n)  # noqa: E731
        new, info = jax.vmap(one)(keys, HMCState(states.position, states.logdensity, states.logdensity_grad))
        return DynamicHMCState(
            new.position, new.logdensity, new.logdensity_grad, params["next_random_arg_fn"](states.random_generator_arg)
        ), info

    return step


STORED_FLOOR_RATIO = 32  # stored_floor=None: stored positions from dim >= this many times the adapting chains


def use_stored_floor(option, dim: int, chains: int) -> bool:
    """Whether the ChEES warm-up of ``chains`` adapting chains in ``dim`` dimensions takes its length floor from
    stored positions: ``option`` if given (True / False), else (None) where that is the cheaper way.

    blackjax's covariance update costs about chains x dim^2 per window step; the stored positions cost a few
    dozen reads of window x chains x dim numbers over the window, so they win where dim is large against the
    chains (``benchmarks/bench_ensemble.py --stored-floor`` measures both; the memory they take is window x chains
    x dim x 8 bytes)."""
    return bool(option) if option is not None else dim >= STORED_FLOOR_RATIO * chains


def engagement_threshold(dim: int) -> int:
    """The pooled sample count at which the diagonal mass matrix (and the floor) engage."""
    return max(64, int(2 * np.sqrt(dim)))


def top_eigen(matvec, v0, iterations):
    """(top eigenvalue, eigenvector) of a symmetric PSD operator by ``iterations`` power iterations from v0."""

    def body(_, v):
        w = matvec(v)
        norm = jnp.linalg.norm(w)
        return w / jnp.where(norm > 0.0, norm, 1.0)

    v = jax.lax.fori_loop(0, iterations, body, v0)
    return jnp.maximum(jnp.dot(v, matvec(v)), LAMBDA_EPS), v


def block_rows(dim: int) -> int:
    """Rows of the stored positions read per block of a product: about 2 MB, so that each block is read from
    memory once and used twice (X u, then X^T y) from the cache."""
    return max(8, (1 << 21) // (8 * dim))


def stored_rows(count: int, dim: int) -> int:
    """Rows of a buffer for ``count`` stored positions of ``dim`` numbers: ``count`` rounded up to whole blocks
    (:func:`block_rows`), as :func:`whitened_matvec` reads it."""
    size = block_rows(dim)
    return -(-count // size) * size


def whitened_matvec(buf, total, n, inverse_mass_matrix):
    """u -> D^-1/2 C D^-1/2 u, C the covariance of the first n rows of buf (their sum: total), D the diagonal
    inverse mass matrix. buf: (:func:`stored_rows`, dim). The centring is folded into the
    products with the raw rows, and only the blocks that hold the n rows are read, each once."""
    size, dim = block_rows(buf.shape[1]), buf.shape[1]
    mean = total / jnp.maximum(n, 1)
    scale = 1.0 / jnp.sqrt(inverse_mass_matrix)

    def matvec(u):
        u = scale * u
        shift = mean @ u

        def block(b, carry):
            acc, wsum = carry
            rows = jax.lax.dynamic_slice(buf, (b * size, 0), (size, dim))
            w = jnp.where(b * size + jnp.arange(size) < n, rows @ u - shift, 0.0)
            return acc + rows.T @ w, wsum + w.sum()

        acc, wsum = jax.lax.fori_loop(0, (n + size - 1) // size, block, (jnp.zeros(dim, buf.dtype), 0.0))
        return scale * (acc - mean * wsum) / jnp.maximum(n - 1.0, 1.0)

    return matvec


def chees_warmup_stored(
    logdensity, key, positions, step_size, optim, num_steps, *, target_acceptance_rate, max_leapfrog_steps
):
    """``blackjax.chees_adaptation(logdensity, K, target_acceptance_rate=..., max_leapfrog_steps=...,
    mass_matrix_estimation="diagonal").run(key, positions, step_size, optim, num_steps)`` with the length floor from
    stored positions. positions: (K, dim). Returns ((last states, parameters), (is_divergent,
    num_integration_steps)), the last two of shape (num_steps, K): blackjax's adapted parameters and states, and the
    two fields of its per-step info that :mod:`.ensemble` keeps."""
    num_chains, dim = positions.shape
    max_bits = np.ceil(np.log2(num_steps + MAX_SAMPLING_STEPS))
    jitter = lambda i: dynamic_hmc.halton_sequence(i, max_bits) * 1.0 + (1.0 - 1.0)  # noqa: E731  (as blackjax)
    next_arg = lambda i: i + 1  # noqa: E731

    def integration_steps_fn(random_generator_arg, num_leapfrog_steps):
        return jnp.asarray(jnp.ceil(jitter(random_generator_arg) * num_leapfrog_steps), dtype=int)

    init, update = base(jitter, next_arg, optim, target_acceptance_rate, DECAY_RATE, max_leapfrog_steps)
    wc_init, wc_update, wc_final = welford_algorithm(is_diagonal_matrix=True)
    window_start = int(WINDOW_FRACTION * num_steps)
    threshold = engagement_threshold(dim)

    def mass_matrix(acc):
        enough = acc.sample_size >= threshold
        return jax.lax.cond(
            enough, lambda a: jnp.maximum(wc_final(a)[0], EPS_FLOAT), lambda a: jnp.ones(dim), acc
        ), enough

    def floored(length, lam, engaged, step):
        floor = jnp.where(engaged, FLOOR_FACTOR * jnp.sqrt(lam), 0.0)
        return jnp.minimum(jnp.maximum(length, floor), max_leapfrog_steps * step)

    def one_step(carry, xs):
        k, t = xs
        states, adapt, acc, buf, total, v, lam = carry
        imm, engaged = mass_matrix(acc)
        length = floored(adapt.trajectory_length, lam, engaged, adapt.step_size)
        params = dict(
            step_size=adapt.step_size,
            inverse_mass_matrix=imm,
            integration_steps_fn=integration_steps_fn,
            integration_steps_params=(length / adapt.step_size,),
            next_random_arg_fn=next_arg,
        )
        new, info = lockstep_dynamic_hmc(logdensity, params)(jax.random.split(k, num_chains), states)
        adapt = update(
            adapt,
            info.proposal.position,
            info.proposal.momentum,
            states.position,
            info.acceptance_rate,
            info.is_divergent,
            imm,
        )
        in_window = t >= window_start
        j = jnp.maximum(t - window_start, 0)  # before the window, row block 0 is written and later overwritten
        acc = jax.lax.cond(
            in_window,
            lambda a: jax.lax.scan(lambda c, x: (wc_update(c, x), None), a, new.position)[0],
            lambda a: a,
            acc,
        )
        buf = jax.lax.dynamic_update_slice(buf, new.position, (j * num_chains, 0))
        total = jnp.where(in_window, total + new.position.sum(0), total)
        n = jnp.where(in_window, (j + 1) * num_chains, 0)
        lam, v = jax.lax.cond(
            in_window & (t % RECOMPUTE_EVERY == 0),
            lambda v: top_eigen(whitened_matvec(buf, total, n, imm), v, POWER_ITERATIONS),
            lambda v: (lam, v),
            v,
        )
        return (new, adapt, acc, buf, total, v, lam), (info.is_divergent, info.num_integration_steps)

    window = num_steps - window_start
    carry = (
        jax.vmap(lambda p: dynamic_hmc.init(p, logdensity, 0))(positions),
        init(0, step_size),
        wc_init(dim),
        jnp.zeros((stored_rows(max(window, 1) * num_chains, dim), dim), positions.dtype),
        jnp.zeros(dim, positions.dtype),
        jnp.ones(dim) / jnp.sqrt(dim),
        jnp.ones(()),
    )
    steps = jnp.arange(num_steps)
    (states, adapt, acc, buf, total, v, _), info = jax.lax.scan(
        one_step, carry, (jax.random.split(key, num_steps), steps)
    )
    imm, engaged = mass_matrix(acc)
    lam, _ = top_eigen(whitened_matvec(buf, total, window * num_chains, imm), v, FINAL_POWER_ITERATIONS)
    step_ma = jnp.exp(adapt.log_step_size_moving_average)
    length = floored(jnp.exp(adapt.log_trajectory_length_moving_average), lam, engaged, step_ma)
    params = {
        "step_size": step_ma,
        "inverse_mass_matrix": imm,
        "next_random_arg_fn": next_arg,
        "integration_steps_fn": integration_steps_fn,
        "integration_steps_params": (length / step_ma,),
    }
    return (states, params), info
