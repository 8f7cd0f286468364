"""bayesattn: a Bayesian theory of copy-head emergence in attention.

Data flows one way (docs/architecture.md): tasks -> models -> diagnostics -> bayes | training -> experiments
-> sweep -> cli. The public names below are imported on first use, so that ``import bayesattn`` (and the
command line's ``--help``) does not import JAX.
"""

import importlib
import os
import sys

# float64 for the posterior, the theory and the samplers: posterior energies are O(n d / sigma^2), and float32
# loses the O(1) differences between phases. The one place it is switched on: JAX reads JAX_ENABLE_X64 when it
# is imported, and a JAX imported before bayesattn is switched over here.
os.environ["JAX_ENABLE_X64"] = "1"
if "jax" in sys.modules:
    sys.modules["jax"].config.update("jax_enable_x64", True)

__version__ = "0.1.0"

# public name -> the subpackage that defines it (tests/test_api.py checks this against each subpackage's __all__)
_WHERE = {
    **dict.fromkeys(
        [
            "CopyTask",
            "MultiLagCopyTask",
            "HighOrderMarkovTask",
            "Dataset",
            "Task",
            "TASKS",
            "register_task",
            "task_from_config",
            "SparseLinearMapTask",
            "CellularAutomatonTask",
            "SparseRegressionTask",
        ],
        "tasks",
    ),
    **dict.fromkeys(["AttentionModel", "attention_weights", "softmax_attention", "linear_attention"], "models"),
    "order_parameters": "diagnostics",
    **dict.fromkeys(
        [
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
        ],
        "bayes",
    ),
    **dict.fromkeys(
        [
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
            "StepProgress",
            "sgld",
            "marginal_objective",
            "OBJECTIVES",
        ],
        "training",
    ),
}

__all__ = list(_WHERE)


def __getattr__(name: str):
    if name in _WHERE:
        value = getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
        globals()[name] = value  # later lookups skip this function
        return value
    raise AttributeError(f"module 'bayesattn' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
