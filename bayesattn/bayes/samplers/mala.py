"""MALA (blackjax) with its step size adapted by dual averaging over the warm-up.

blackjax's MALA kernel has no mass matrix, so only the step size is adapted, with blackjax's
``dual_averaging_adaptation`` (target acceptance 0.574, the optimal rate of Roberts and Rosenthal); :mod:`.chains`
runs the kept draws. MALA has no Hamiltonian: its per-draw energy is reported as NaN.
"""

from __future__ import annotations

import blackjax
import jax
import jax.numpy as jnp
from blackjax.adaptation.step_size import dual_averaging_adaptation

from .base import Sampler
from .chains import chain_program, chain_program_key

MALA_OPTIONS = {"target_acceptance_rate": 0.574, "initial_step_size": 1e-3}


def mala_warmup(logdensity, key, position, num_warmup, opts):
    """The warm-up of :func:`~.chains.chain_program` for MALA: ``num_warmup`` MALA steps from ``position`` with the
    step size updated by dual averaging on each step's acceptance (a non-finite acceptance counts as 0); returns
    the final dual-averaging step size and the MALA transition with it."""
    kernel = blackjax.mala.build_kernel()
    da_init, da_update, da_final = dual_averaging_adaptation(opts["target_acceptance_rate"])
    state = blackjax.mala.init(position, logdensity)

    def warm(carry, k):
        st, da = carry
        st, info = kernel(k, st, logdensity, jnp.exp(da.log_step_size))
        acc = jnp.where(jnp.isfinite(info.acceptance_rate), info.acceptance_rate, 0.0)
        return (st, da_update(da, acc)), (jnp.zeros((), bool), jnp.ones((), jnp.int64))

    (state, da), (wdiv, wgrads) = jax.lax.scan(
        warm, (state, da_init(opts["initial_step_size"])), jax.random.split(key, num_warmup)
    )
    step_size = da_final(da)

    def step(k, st):
        st, info = kernel(k, st, logdensity, step_size)
        return st, info.acceptance_rate, jnp.zeros((), bool), jnp.ones((), jnp.int64), jnp.nan

    return state, step_size, step, wdiv, wgrads


mala_program = chain_program(mala_warmup)

MALA = Sampler("mala", "blackjax", MALA_OPTIONS, program=mala_program, program_key=chain_program_key, batched=True)
