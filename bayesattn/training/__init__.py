"""Training: optax loops over the trainable networks, their results and their comparison with the theory."""

from .analysis import emergence_vs_P, final_vs_P, training_curves
from .loop import OPTIMIZERS, TRAIN_INITS, train, train_sweep
from .objective import training_objective
from .results import SweepResult, TrainResult, emergence

__all__ = [
    "TrainResult", "SweepResult", "train", "train_sweep", "training_objective", "emergence",
    "final_vs_P", "training_curves", "emergence_vs_P", "OPTIMIZERS", "TRAIN_INITS",
]
