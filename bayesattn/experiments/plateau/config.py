"""The plateau experiment's config: the cases (attention, T, the P values relative to the transition, the
optimisers' steps and learning rates), the prior, the seeds. No JAX here."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from ..config import Attention, ExperimentConfig, NonEmpty, PositiveFloat, PositiveInt, Section, SeedCount
from ..sections import PriorSection

Method = Literal["gd", "sgld", "adam", "flow", "flow_joint"]
METHODS = ("gd", "sgld", "adam", "flow", "flow_joint")
# timed in flow time lr x steps (gd_lr, gd_steps); adam in steps. flow / flow_joint: gradient flow integrated by
# diffrax (the dynamics extra) on the marginal / joint objective, up to flow time gd_lr x gd_steps
FLOW_METHODS = ("gd", "sgld", "flow", "flow_joint")
DIFFRAX_METHODS = ("flow", "flow_joint")


# the transition a small init feels, as the results name it (bayesattn.theory.small_init_transition): the spinodal
# where the uniform branch ends (softmax), or the mode's critical point (linear)
TRANSITION_NAME = {"softmax": "P_s", "linear": "P_c"}


class CaseSection(Section):
    """One (attention, T): P = ``P_over`` x P_star, where P_star is the transition a small init feels (softmax:
    the spinodal where the uniform branch ends; linear: the mode's critical point; a softmax crossover, which has
    neither: ``P_ref``). ``gd``: gradient descent with step ``gd_lr`` for ``gd_steps`` steps (flow time up to
    gd_lr x gd_steps); ``sgld``: the same steps with Langevin noise at the config's ``sgld_temperature``; ``adam``:
    Adam with ``adam_lr`` for ``adam_steps`` steps. All on the marginal objective (the readout integrated out), from
    the small init."""

    attention: Attention = "softmax"
    T: Annotated[int, Field(ge=2, le=256)] = 32
    P_over: Annotated[list[PositiveFloat], Field(min_length=1, max_length=64)] = [1.02, 1.05, 1.1, 1.25, 1.5, 2.0, 4.0]
    P_ref: PositiveFloat = 400.0
    gd_lr: PositiveFloat = 0.5
    gd_steps: Annotated[int, Field(ge=10, le=10_000_000)] = 4000
    adam_lr: PositiveFloat = 1e-2
    adam_steps: Annotated[int, Field(ge=10, le=10_000_000)] = 3000
    records: Annotated[int, Field(ge=10, le=20_000)] = 400  # records per run (the crossing's resolution)

    @model_validator(mode="after")
    def _sizes(self):
        if any(f <= 1.0 for f in self.P_over) and TRANSITION_NAME[self.attention] == "P_c":
            raise ValueError(
                f"P_over={self.P_over}: expected factors > 1 with attention={self.attention!r} (below its critical"
                " point P_c the small init stays at L = 0)"
            )
        if sorted(set(self.P_over)) != list(self.P_over):
            raise ValueError(f"P_over={self.P_over}: expected increasing distinct factors")
        return self


class PlateauConfig(ExperimentConfig):
    """Plateau lengths of gradient descent and Adam from a small init against P, beside the zero-temperature
    theory's prediction (configs/plateau.toml)."""

    name: str = "plateau"
    d: PositiveInt = 8
    seeds: SeedCount = 8
    init_scale: PositiveFloat = 1e-2
    methods: NonEmpty[Method] = ["gd", "sgld", "adam"]
    # SGLD's temperature tau, in units of sigma2 / n (1: the posterior itself): small, the finite-temperature side
    sgld_temperature: Annotated[float, Field(gt=0, le=10)] = 0.05
    theory_points: Annotated[int, Field(ge=8, le=2000)] = 120  # dense P grid of the predicted curve, per case
    prior: PriorSection = PriorSection()
    cases: Annotated[list[CaseSection], Field(min_length=1, max_length=32)] = [
        CaseSection(attention="softmax", T=8, P_over=[0.5, 0.75, 1.0, 1.5, 2.0, 4.0, 8.0], gd_lr=0.05, gd_steps=1000),
        CaseSection(attention="softmax", T=32),
        CaseSection(attention="linear", T=16, gd_lr=0.01, gd_steps=4000, P_over=[1.05, 1.1, 1.25, 1.5, 2.0, 4.0]),
    ]

    @model_validator(mode="after")
    def _distinct_cases(self):
        """The summary names a case by (attention, T) (summary.case_key): two cases with the same would merge."""
        keys = [(c.attention, c.T) for c in self.cases]
        for i, key in enumerate(keys):
            if key in keys[:i]:
                raise ValueError(
                    f"cases[{i}]: attention={key[0]!r}, T={key[1]} is also cases[{keys.index(key)}]'s; expected one "
                    "case per (attention, T)"
                )
        return self
