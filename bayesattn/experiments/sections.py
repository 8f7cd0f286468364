"""Config sections that several experiments share: the copy task, the prior, the sampler's chains and the MCMC
settings. Each builds its library object on demand (``make``), importing JAX only then."""

from __future__ import annotations

import typing
from typing import Annotated, Literal

from pydantic import Field, model_validator

from .config import GridCount, PositiveFloat, PositiveInt, Section

Sampler = Literal["nuts", "hmc", "mala", "smc", "chees", "meads"]  # bayesattn.bayes.sampling.METHODS
Backend = Literal["blackjax", "numpyro"]
# the methods each backend has (the sampler registry, bayesattn.bayes.samplers.SAMPLERS: tests/test_cli.py checks)
BACKEND_METHODS = {"blackjax": typing.get_args(Sampler), "numpyro": ("nuts",)}
MIN_KEPT_DRAWS = 4  # draws per chain that split R-hat needs (bayesattn.bayes.samples.check_counts)
SamplerInit = Literal["cold", "hot", "prior"]
# the methods that draw their own starts from the prior (the registry's default_init: tests/test_user_cli.py checks)
PRIOR_ONLY_METHODS = ("smc",)


# the held-out measure of one-hot copy tasks (CopyTaskSection.held_out_target)
CENTRED_TARGET = "centred target"


class CopyTaskSection(Section):
    """The copy task (:class:`bayesattn.CopyTask`): T positions, tokens in R^d, target ``offset`` back."""

    T: Annotated[int, Field(ge=2)] = 32
    d: PositiveInt = 8
    offset: PositiveInt = 1  # at most T - 1
    tokens: Literal["gaussian", "onehot"] = "gaussian"
    boundary: Literal["cyclic", "causal"] = "cyclic"

    @model_validator(mode="after")
    def _sizes(self):
        if not 1 <= self.offset <= self.T - 1:
            raise ValueError(f"offset={self.offset}: expected an integer in 1..{self.T - 1} (T - 1)")
        return self

    @property
    def held_out_target(self) -> str | None:
        """What the theory's loss prediction and MCMC's held-out error measure, when not the plain target:
        ``"centred target"`` for one-hot tokens (the part orthogonal to the all-ones vector, whose prediction does
        not depend on the attention), None for Gaussian tokens. Grid points carry it as ``held_out``."""
        return CENTRED_TARGET if self.tokens == "onehot" else None

    def make(self):
        from ..tasks import CopyTask

        return CopyTask(**self.model_dump())


class PriorSection(Section):
    """L_ts ~ N(0, sigma_A2), V_ij ~ N(0, sigma_V2 / d), noise N(0, sigma2) (:class:`bayesattn.Prior`)."""

    sigma_A2: PositiveFloat = 1.0
    sigma_V2: PositiveFloat = 100.0
    sigma2: PositiveFloat = 400.0

    def make(self):
        from ..bayes.posterior import Prior

        return Prior(self.sigma_A2, self.sigma_V2, self.sigma2)


class GridSection(Section):
    """P values: explicit ``values``, or ``num`` points from ``start`` to ``stop`` (log- or linearly spaced)."""

    start: PositiveFloat = 200.0
    stop: PositiveFloat = 4000.0
    num: GridCount = 12
    spacing: Literal["log", "linear"] = "log"
    values: list[int] = []

    @model_validator(mode="after")
    def _grid_is_valid(self):
        if not self.values and self.start > self.stop:
            raise ValueError(f"start={self.start}, stop={self.stop}: expected 0 < start <= stop")
        self.grid()
        return self

    def grid(self):
        """The P values: an increasing int array (numpy, imported here only)."""
        import numpy as np

        if self.values:
            P = np.asarray(self.values, dtype=int)
        else:
            f = np.geomspace if self.spacing == "log" else np.linspace
            with np.errstate(invalid="ignore", over="ignore"):  # a huge stop gives no integers: refused below
                P = np.unique(np.round(f(self.start, self.stop, self.num)).astype(int))
            if 0 < P.size < self.num and np.all(P >= 1):  # neighbours rounded to one integer: fewer points than asked
                raise ValueError(
                    f"start={self.start:g}, stop={self.stop:g}, num={self.num}: only {P.size} distinct integers on "
                    f"this {self.spacing} grid; expected fewer points or a wider range (or P.values)"
                )

        if P.size == 0 or np.any(P < 1) or np.any(np.diff(P) <= 0):
            raise ValueError(f"grid={P.tolist()}: expected a non-empty increasing list of positive integers")
        return P


class ChainsSection(Section):
    """How long an exact-posterior sampler runs: ``num_chains`` chains of ``num_warmup`` + ``num_samples`` steps."""

    num_chains: PositiveInt = 2
    num_warmup: PositiveInt = 300
    num_samples: PositiveInt = 500

    @model_validator(mode="after")
    def _enough_draws(self):
        if self.num_samples < MIN_KEPT_DRAWS:
            raise ValueError(
                f"num_samples={self.num_samples}: expected >= {MIN_KEPT_DRAWS} (split R-hat needs {MIN_KEPT_DRAWS} "
                "draws per chain)"
            )
        return self


class MCMCSection(ChainsSection):
    """Exact-posterior sampling at each P (``bayesattn.sample``), one chain group per init."""

    method: Sampler = "nuts"
    backend: Backend = "blackjax"
    inits: list[SamplerInit] = ["cold", "hot"]

    @model_validator(mode="after")
    def _some_init(self):
        if not self.inits:
            raise ValueError("inits=[]: expected at least one initialisation")
        if self.method not in BACKEND_METHODS[self.backend]:
            raise ValueError(
                f"method={self.method!r} with backend={self.backend!r}: {self.backend} has only "
                f"{', '.join(BACKEND_METHODS[self.backend])}"
            )
        if self.method in PRIOR_ONLY_METHODS and self.inits != ["prior"]:  # a cold or hot run would not be one
            raise ValueError(
                f"inits={self.inits}: method={self.method!r} draws its particles from the prior; expected "
                "inits=['prior']"
            )
        return self
