"""The phase-diagram job's config (``RunConfig``) and its sections, shared by the other experiments where they
mean the same thing (the copy task, the prior, the MCMC settings). No JAX here: configs load at once."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_serializer, model_validator

from ..config import (
    MAX_GRID,
    Attention,
    ExperimentConfig,
    Increasing,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    Section,
    Seed,
    SeedCount,
    SeqLength,
)
from ..sections import CopyTaskSection, GridSection, MCMCSection, PriorSection, Sampler, SamplerInit

METHODS = ("theory", "mcmc", "adam")
Method = Literal["theory", "mcmc", "adam"]
TrainInit = Literal["small", "hot"]


class TheorySection(Section):
    """The order-parameter theory of each attention: its curves on a dense P grid over the grid's range, an
    optional (P, ``vary_name``) phase-diagram plane, and finite-size scaling over ``T_values``."""

    num_P: Annotated[int, Field(ge=2, le=MAX_GRID)] = 200  # dense grid for the theory curves
    vary_name: Literal["sigma_A2", "T", ""] = "T"  # also compute the (P, vary) plane ("": none)
    # the plane's values of vary_name, a grid as theory.phase_diagram checks it (common.check_grid: finite, > 0,
    # strictly increasing; integers for T, which replaces the task's T)
    vary_values: Annotated[list[PositiveFloat], Increasing] = [8.0, 16.0, 32.0, 64.0]
    # finite-size scaling (none when empty): the task at each T (theory.finite_size_scaling: an increasing grid)
    T_values: Annotated[list[SeqLength], Increasing] = []

    @model_validator(mode="after")
    def _plane(self):
        if self.vary_name and not self.vary_values:
            raise ValueError(
                f"vary_values=[]: expected at least one value of vary_name={self.vary_name!r} (vary_name='': no plane)"
            )
        if self.vary_name == "T" and any(v != int(v) or v < 2 for v in self.vary_values):
            raise ValueError(
                f"vary_values={self.vary_values}: with vary_name='T', expected integers >= 2 (sequence lengths)"
            )
        return self


class MCMCOverride(Section):
    """Per-attention overrides of :class:`MCMCSection` (``[mcmc.by_attention.softmax]``): only what is given."""

    method: Sampler | None = None
    backend: Literal["blackjax", "numpyro"] | None = None
    num_chains: PositiveInt | None = None
    num_warmup: PositiveInt | None = None
    num_samples: PositiveInt | None = None
    inits: list[SamplerInit] | None = None


class PhaseMCMCSection(MCMCSection):
    """Exact-posterior sampling at each P, one chain group per init; ``by_attention`` overrides any of these
    fields for one attention's points (``[mcmc.by_attention.softmax]``)."""

    # per-attention overrides of the fields above: [mcmc.by_attention.softmax] method = "chees", ...
    by_attention: dict[Attention, MCMCOverride] = {}

    @field_serializer("by_attention")
    def _given_only(self, value):
        return {a: o.model_dump(exclude_none=True) for a, o in value.items()}

    @model_validator(mode="after")
    def _overrides_valid(self):
        for a in self.by_attention:
            try:
                MCMCSection.load(self.effective(a))
            except ValueError as e:
                raise ValueError(f"by_attention.{a}.{e}") from None
        return self

    def effective(self, attention: str) -> dict:
        """The sampler settings of ``attention``'s points: the fields above with its overrides applied (what an
        MCMC point carries; without overrides exactly the fields, so the points keep their names)."""
        out = {k: v for k, v in self.model_dump().items() if k != "by_attention"}
        over = self.by_attention.get(attention)
        return {**out, **(over.model_dump(exclude_none=True) if over else {})}


class AdamSection(Section):
    seeds: SeedCount = 4
    steps: PositiveInt = 3000
    lr: PositiveFloat = 0.01
    inits: list[TrainInit] = ["small", "hot"]
    record_every: PositiveInt = 50
    log_records: NonNegativeInt = 0  # also record at this many log-spaced steps (resolves the fast early rise)

    @model_validator(mode="after")
    def _some_init(self):
        if not self.inits:
            raise ValueError("inits=[]: expected at least one initialisation")
        return self


class RunConfig(ExperimentConfig):
    """Everything a phase-diagram run depends on. Override from the command line with ``--set section.key=value``."""

    name: str = "default"
    attention: list[Attention] = ["softmax", "linear"]
    methods: list[Method] = ["theory", "mcmc", "adam"]
    seed: Seed = 0
    # the MCMC and Adam points are run for seeds seed, seed + 1, ..., each with its own data set, chains and runs;
    # the printed transitions and the figures are the first seed's, and from 2 seeds the summary adds statistics
    # over them (the theory's points have no seed)
    seeds: SeedCount = 1
    workers: PositiveInt = 1
    task: CopyTaskSection = CopyTaskSection()
    prior: PriorSection = PriorSection()
    P: GridSection = GridSection()
    theory: TheorySection = TheorySection()
    mcmc: PhaseMCMCSection = PhaseMCMCSection()
    adam: AdamSection = AdamSection()

    @model_validator(mode="after")
    def _non_empty(self):
        if not self.attention:
            raise ValueError("attention=[]: expected at least one of 'softmax', 'linear'")
        if not self.methods:
            raise ValueError(f"methods=[]: expected at least one of {', '.join(map(repr, METHODS))}")
        # the theory replaces the task's T by these (task.replace(T=...)): each must leave the offset inside
        plane = self.theory.vary_values if self.theory.vary_name == "T" else []
        for name, values in (("vary_values", plane), ("T_values", self.theory.T_values)):
            if any(T <= self.task.offset for T in values):
                raise ValueError(
                    f"theory.{name}={values}: expected sequence lengths T > task.offset={self.task.offset} (the "
                    "copy target is offset positions back)"
                )
        return self

    def make_task(self):
        return self.task.make()

    def make_prior(self):
        return self.prior.make()
