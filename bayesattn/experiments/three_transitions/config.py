"""The three-transitions figure's config: the copy task's d, the prior, and the Adam, SGLD and MCMC settings of
its points (the T values and attention kinds are the figure's axes)."""

from __future__ import annotations

from ..config import Attention, ExperimentConfig, PositiveFloat, PositiveInt, Section, Seed, SeqLength
from ..sections import PriorSection


class AdamRounds(Section):
    """Adam's transition P: ``grid_points`` P values per round (two rounds), ``steps`` steps at lr 1e-2."""

    steps: PositiveInt = 5000
    grid_points: PositiveInt = 7
    # runs of one round advanced together by vmap up to this T (XLA:CPU runs small vmapped programs faster, larger
    # ones slower than one run at a time)
    vmap_T_max: PositiveInt = 16


class TauSection(Section):
    """SGLD at temperature tau at one T: the tempered theory over ``values``, SGLD runs at the ``sgld`` taus."""

    T: SeqLength = 32
    values: list[PositiveFloat] = [0.1, 0.15, 0.2, 0.3, 0.5, 0.7, 1.0]
    sgld: list[PositiveFloat] = [0.1, 1.0]
    sgld_steps: PositiveInt = 10000
    # P range of the tempered theory: wide enough for the posterior's binodal at tau = 1 (738 at T = 32), narrow
    # enough that the dual grid (its width follows the largest beta ~ P / tau) resolves tau down to 0.1
    P_max: PositiveFloat = 900.0


class CrossingMCMC(Section):
    """NUTS per start (cold and hot): chains, warm-up, draws; round-1 P values in [P_c / span, P_c * span] and
    round-2 P values inside each start's bracket."""

    num_chains: PositiveInt = 1
    num_warmup: PositiveInt = 200
    num_samples: PositiveInt = 200
    grid: PositiveInt = 4
    refine: PositiveInt = 2
    span: PositiveFloat = 1.15


class ThreeTransitionsConfig(ExperimentConfig):
    """The figure's settings (configs/three_transitions.toml)."""

    name: str = "three_transitions"
    T_values: list[PositiveInt] = [8, 16, 32, 64]
    attentions: list[Attention] = ["softmax", "linear"]
    d: PositiveInt = 8
    seed: Seed = 0  # data and init seed of every Adam / SGLD run
    theory_P_max: PositiveFloat = 2500.0
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
