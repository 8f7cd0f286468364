"""The program of samplers whose chains adapt one by one (NUTS, HMC, MALA): warm-up then kept draws per chain,
all chains in one compiled program.

On a GPU/TPU the chains are ``vmap``-ed; on a CPU they run one after another inside that program (``lax.map``),
because XLA:CPU executes vmapped NUTS trees about 2x slower per chain-gradient (``chains_per_batch`` chooses; see
``bayesattn._batching.default_batch``). A family supplies only its warm-up (:func:`chain_program`'s ``warmup``).
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

from ..._batching import map_batched
from ..program import rebuild_posterior
from .base import SamplerJob


def chain_program_key(job: SamplerJob) -> tuple:
    """The static arguments of a :func:`chain_program`: (num_warmup, kept draws, thin, sorted options,
    chains_per_batch)."""
    return (
        job.num_warmup,
        job.num_samples // job.thin,
        job.thin,
        tuple(sorted(job.options.items())),
        job.chains_per_batch,
    )


def chain_program(warmup: Callable) -> Callable:
    """The program builder of a one-chain-at-a-time sampler from its warm-up.

    ``warmup(logdensity, key, position, num_warmup, options) -> (state, step_size, step, warmup_divergent,
    warmup_grads)``: adapts one chain from ``position`` (*L_shape) and returns its state, the adapted step size,
    the sampling transition ``step(key, state) -> (state, acceptance, divergent, gradient evaluations, energy)``
    and the per-step divergences and gradient evaluations of the warm-up.

    The builder ``(num_warmup, num_kept, thin, options, chains_per_batch, task, model) -> run(dynamic, keys,
    positions)`` (keys: (chains,), positions: (chains, *L_shape)) returns per chain the kept draws "L" (chains,
    num_kept, *L_shape), "logdensity", "acceptance_rate", "num_divergent", "num_divergent_warmup",
    "num_grad_evals", "step_size" and "draw_stats"."""

    def build(num_warmup, num_kept, thin, options, chains_per_batch, task, model):
        opts = dict(options)

        def run(dynamic, keys, positions):
            post = rebuild_posterior((task, model), dynamic)
            logdensity = post.log_density

            def one_chain(key, position):
                wkey, skey = jax.random.split(key)
                state, step_size, step, wdiv, wgrads = warmup(logdensity, wkey, position, num_warmup, opts)

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

                _, (draws, logdens, acc, div, grads, energy) = jax.lax.scan(
                    kept, state, jax.random.split(skey, num_kept)
                )
                return {
                    "L": draws,
                    "logdensity": logdens,
                    "acceptance_rate": acc.sum() / (num_kept * thin),
                    "num_divergent": div.sum(),
                    "num_divergent_warmup": jnp.sum(wdiv),
                    "num_grad_evals": grads.sum() + jnp.sum(wgrads),
                    "step_size": step_size,
                    "draw_stats": {
                        "acceptance_rate": acc / thin,
                        "diverging": div > 0,
                        "n_steps": grads,
                        "energy": energy,
                    },
                }

            return map_batched(lambda kp: one_chain(*kp), (keys, positions), chains_per_batch)

        return run

    build.__qualname__ = f"chain_program({getattr(warmup, '__name__', 'warmup')})"
    return build
