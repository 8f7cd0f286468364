"""Training: one optax loop (core.run_loop) for every network of the zoo, its results, and the single layer's
runs compared with the theory."""

from .analysis import emergence_vs_P, final_vs_P, training_curves
from .checkpoints import load_checkpoint, save_checkpoint
from .core import OptimizerConfig, Plan, StepProgress, loop_steps, run_loop, run_loop_in_parts, sgld
from .fitting import fit, fit_sweep, sequence_loss
from .loop import train, train_sweep
from .objective import marginal_objective, training_objective
from .results import FitResult, FitSweepResult, SweepResult, TrainResult, emergence
from .run_config import OBJECTIVES, OPTIMIZERS, TRAIN_INITS

__all__ = [
    "TrainResult",
    "SweepResult",
    "train",
    "train_sweep",
    "training_objective",
    "emergence",
    "final_vs_P",
    "training_curves",
    "emergence_vs_P",
    "OPTIMIZERS",
    "TRAIN_INITS",
    "fit",
    "fit_sweep",
    "FitResult",
    "FitSweepResult",
    "OptimizerConfig",
    "sequence_loss",
    "save_checkpoint",
    "load_checkpoint",
    "Plan",
    "run_loop",
    "run_loop_in_parts",
    "loop_steps",
    "StepProgress",
    "sgld",
    "marginal_objective",
    "OBJECTIVES",
]
