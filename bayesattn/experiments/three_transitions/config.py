"""The three-transitions figure's config: the copy task's d, the prior, and the Adam, SGLD and MCMC settings of
its points (the T values and attention kinds are the figure's axes)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from ..config import (
    MAX_GRID,
    Attention,
    Distinct,
    ExperimentConfig,
    NonEmpty,
    NonEmptyDistinct,
    PositiveFloat,
    PositiveInt,
    Section,
    Seed,
    SeedCount,
    SeqLength,
)
from ..sections import PriorSection

# the first P of the theory's grids (compute._P_grid for softmax, up to theory_P_max; compute._tau_P_grid, up to
# tau.P_max): a largest P at or below it leaves the grid empty
THEORY_P_MIN = 10.0
TAU_P_MIN = 100.0


class AdamRounds(Section):
    """Adam's transition P: ``grid_points`` P values per round (two rounds), ``steps`` steps at lr 1e-2."""

    steps: PositiveInt = 5000
    # two at least: a bracket of the jump needs a P below and one above it (compute._jump), and the linear fit
    # q = a - b / P two P values (compute.adam_transition)
    grid_points: Annotated[int, Field(ge=2, le=MAX_GRID)] = 7
    # runs of one round advanced together by vmap up to this T (XLA:CPU runs small vmapped programs faster, larger
    # ones slower than one run at a time)
    vmap_T_max: PositiveInt = 16


class TauSection(Section):
    """SGLD at temperature tau at one T: the tempered theory over ``values``, SGLD runs at the ``sgld`` taus
    (none: ``sgld = []``, the panel then shows the theory alone)."""

    T: SeqLength = 32
    values: NonEmptyDistinct[PositiveFloat] = [0.1, 0.15, 0.2, 0.3, 0.5, 0.7, 1.0]
    sgld: Annotated[list[PositiveFloat], Distinct] = [0.1, 1.0]  # one point per (tau, init): a repeat, twice
    sgld_steps: PositiveInt = 10000
    # P range of the tempered theory: wide enough for the posterior's binodal at tau = 1 (738 at T = 32), narrow
    # enough that the dual grid (its width follows the largest beta ~ P / tau) resolves tau down to 0.1
    # (its P grid runs from TAU_P_MIN up to P_max, so it must lie above it)
    P_max: Annotated[float, Field(gt=TAU_P_MIN, allow_inf_nan=False)] = 900.0


class CrossingMCMC(Section):
    """NUTS per start (cold and hot): chains, warm-up, draws; round-1 P values in [P_c / span, P_c * span] and
    round-2 P values inside each start's bracket (mcmc.crossing_search: grid >= 2, span > 1)."""

    num_chains: PositiveInt = 1
    num_warmup: PositiveInt = 200
    num_samples: PositiveInt = 200
    grid: Annotated[int, Field(ge=2, le=MAX_GRID)] = 4
    refine: PositiveInt = 2
    span: Annotated[float, Field(gt=1, allow_inf_nan=False)] = 1.15


class ThreeTransitionsConfig(ExperimentConfig):
    """The figure's settings (configs/three_transitions.toml)."""

    name: str = "three_transitions"
    T_values: NonEmptyDistinct[SeqLength] = [8, 16, 32, 64]  # one point per (kind, attention, T): no repeats
    attentions: NonEmpty[Attention] = ["softmax", "linear"]
    d: PositiveInt = 8
    seed: Seed = 0  # data and init seed of every Adam / SGLD run, and the MCMC's data seed
    # the Adam, SGLD and MCMC points are run for seeds seed, seed + 1, ... (the theory's have none); the table is
    # the first seed's, and from 2 seeds the summary adds each transition's statistics over them
    seeds: SeedCount = 1
    # the largest P of softmax's theory grid, which starts at THEORY_P_MIN
    theory_P_max: Annotated[float, Field(gt=THEORY_P_MIN, allow_inf_nan=False)] = 2500.0
    workers: PositiveInt = 2  # points computed in parallel processes (speed only)
    prior: PriorSection = PriorSection()
    adam: AdamRounds = AdamRounds()
    tau: TauSection = TauSection()
    mcmc: CrossingMCMC = CrossingMCMC()

    def tempered_prior(self, tau: float = 1.0):
        """The prior with every variance multiplied by ``tau`` (SGLD at temperature tau samples its posterior)."""
        from ...bayes.posterior import Prior

        p = self.prior
        return Prior(tau * p.sigma_A2, tau * p.sigma_V2, tau * p.sigma2)
