"""NUTS and HMC (blackjax) with Stan's window adaptation: step size and a diagonal mass matrix, chain by chain.

``blackjax.window_adaptation`` runs the warm-up (fast, slow and fast windows; dual averaging of the step size
to ``target_acceptance_rate``), then the adapted kernel samples; :mod:`.chains` runs the kept draws.
"""

from __future__ import annotations

import blackjax
from blackjax.adaptation.base import get_filter_adapt_info_fn

from .base import Sampler
from .chains import chain_program, chain_program_key

NUTS_OPTIONS = {"target_acceptance_rate": 0.8, "max_num_doublings": 10, "initial_step_size": 0.1}
HMC_OPTIONS = {"target_acceptance_rate": 0.8, "num_integration_steps": 16, "initial_step_size": 0.1}


def window_warmup(name: str, algorithm, kernel_options: tuple[str, ...]):
    """The warm-up of :func:`~.chains.chain_program` for a blackjax HMC-family ``algorithm`` (``blackjax.nuts``,
    ``blackjax.hmc``; ``name`` names it), whose kernel takes the options named in ``kernel_options`` besides the
    adapted step size and inverse mass matrix."""

    def warmup(logdensity, key, position, num_warmup, opts):
        extra = {name: opts[name] for name in kernel_options}
        adaptation = blackjax.window_adaptation(
            algorithm,
            logdensity,
            initial_step_size=opts["initial_step_size"],
            target_acceptance_rate=opts["target_acceptance_rate"],
            adaptation_info_fn=get_filter_adapt_info_fn(info_keys={"is_divergent", "num_integration_steps"}),
            **extra,
        )
        (state, params), winfo = adaptation.run(key, position, num_warmup)
        sampler = algorithm(logdensity, **params)

        def step(k, st):
            st, info = sampler.step(k, st)
            return st, info.acceptance_rate, info.is_divergent, info.num_integration_steps, info.energy

        return state, params["step_size"], step, winfo.info.is_divergent, winfo.info.num_integration_steps

    warmup.__name__ = f"{name}_window_warmup"
    return warmup


nuts_program = chain_program(window_warmup("nuts", blackjax.nuts, ("max_num_doublings",)))
hmc_program = chain_program(window_warmup("hmc", blackjax.hmc, ("num_integration_steps",)))

NUTS = Sampler("nuts", "blackjax", NUTS_OPTIONS, program=nuts_program, program_key=chain_program_key, batched=True)
HMC = Sampler("hmc", "blackjax", HMC_OPTIONS, program=hmc_program, program_key=chain_program_key, batched=True)
