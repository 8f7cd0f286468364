"""The samplers of the closed-form posterior, one module per family, and their registry.

- :mod:`.window_hmc`: NUTS and HMC (blackjax) with Stan's window adaptation;
- :mod:`.mala`: MALA (blackjax) with its step size by dual averaging;
- :mod:`.smc`: adaptive tempered SMC (blackjax) from the prior;
- :mod:`.ensemble`: ChEES-HMC and MEADS, many chains in lockstep;
- :mod:`.numpyro_nuts`: NUTS (numpyro).

Each registers one :class:`~.base.Sampler` per (method, backend) in :data:`SAMPLERS`, which
:func:`bayesattn.bayes.sampling.sample` and :func:`bayesattn.bayes.batched.sample_many` look up. A new sampler is
a module with its options, its warm-up or program builder and one registry line here.
"""

from __future__ import annotations

from ..._validate import check_choice
from .base import Sampler, SamplerJob
from .ensemble import CHEES, ENSEMBLE_METHODS, MEADS
from .mala import MALA
from .numpyro_nuts import NUMPYRO_NUTS
from .smc import SMC, tempered_smc
from .starts import SAMPLER_INITS, branch_starts, hot_pattern, initial_positions
from .window_hmc import HMC, NUTS

SAMPLERS: dict[tuple[str, str], Sampler] = {
    (s.method, s.backend): s for s in (NUTS, HMC, MALA, SMC, CHEES, MEADS, NUMPYRO_NUTS)
}

METHODS = tuple(dict.fromkeys(method for method, _ in SAMPLERS))  # nuts, hmc, mala, smc, chees, meads
BACKENDS = tuple(dict.fromkeys(backend for _, backend in SAMPLERS))  # blackjax, numpyro


def get_sampler(method: str, backend: str = "blackjax") -> Sampler:
    """The registry entry of ``method`` on ``backend``; ValueError naming the method, the backend or the pair
    when there is none."""
    check_choice("method", method, METHODS)
    check_choice("backend", backend, BACKENDS)
    sampler = SAMPLERS.get((method, backend))
    if sampler is None:
        supported = " or ".join(f"method={m!r}" for m, b in SAMPLERS if b == backend)
        raise ValueError(f"method={method!r} with backend={backend!r}: {backend} supports only {supported}")
    return sampler


__all__ = [
    "SAMPLERS",
    "METHODS",
    "BACKENDS",
    "SAMPLER_INITS",
    "ENSEMBLE_METHODS",
    "Sampler",
    "SamplerJob",
    "get_sampler",
    "hot_pattern",
    "branch_starts",
    "initial_positions",
    "tempered_smc",
]
