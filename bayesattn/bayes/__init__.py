"""The Bayesian core: sufficient statistics, the closed-form posterior over attention logits, the samplers
and the order-parameter theory. It knows no network and no command line."""

from . import theory
from .joint import joint_model, sample_joint
from .modes import ModeWeights, branch_evidences, mode_weights
from .posterior import Posterior, Prior, gp_log_evidence, joint_log_density
from .samplers import tempered_smc
from .samples import Samples
from .sampling import BACKENDS, METHODS, SAMPLER_INITS, branch_starts, initial_positions, sample
from .statistics import SufficientStats, sufficient_statistics

__all__ = [
    "theory",
    "Posterior",
    "Prior",
    "SufficientStats",
    "gp_log_evidence",
    "joint_log_density",
    "sufficient_statistics",
    "Samples",
    "sample",
    "sample_joint",
    "initial_positions",
    "branch_starts",
    "joint_model",
    "tempered_smc",
    "METHODS",
    "BACKENDS",
    "SAMPLER_INITS",
    "ModeWeights",
    "branch_evidences",
    "mode_weights",
]
