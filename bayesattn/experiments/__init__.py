"""Experiments: one subpackage per published system, each an :class:`~bayesattn.experiments.contract.Experiment`
(config class, points, compute, summarize, figures, description, shipped configs), registered below by one line.
The command line, the sweep, ``list`` and ``figures`` know only the contract. Importing this package imports
no JAX: each experiment imports its science when it first computes."""

from .config import ConfigError
from .contract import Experiment, registry
from .copy_head import PhaseDiagram
from .dynlab import Dynlab
from .plateau import Plateau
from .screens import Screens
from .sparse import Sparse
from .staircase import Staircase
from .three_transitions import ThreeTransitions

EXPERIMENTS = registry(
    PhaseDiagram,
    ThreeTransitions,
    Staircase,
    Sparse,
    Dynlab,
    Screens,
    Plateau,
)


def get_experiment(name: str) -> type[Experiment]:
    """The experiment registered as ``name``; ConfigError listing the experiments when there is none."""
    if name not in EXPERIMENTS:
        raise ConfigError(f"experiment={name!r}: expected one of {', '.join(EXPERIMENTS)}")
    return EXPERIMENTS[name]


__all__ = ["EXPERIMENTS", "ConfigError", "Experiment", "get_experiment"]
