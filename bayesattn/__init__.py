"""bayesattn: a Bayesian theory of copy-head emergence in attention.

Data flows one way (docs/architecture.md): tasks -> models -> diagnostics -> bayes | training -> experiments
-> sweep -> plots -> cli.
"""

import jax

# the one place float64 is switched on: posterior energies are O(n d / sigma^2), and float32 loses the O(1)
# differences between phases (importing any bayesattn module runs this first)
jax.config.update("jax_enable_x64", True)

from .bayes import *  # noqa: E402,F401,F403
from .bayes import __all__ as _bayes_all  # noqa: E402
from .diagnostics import order_parameters  # noqa: E402
from .models import AttentionModel, attention_weights, linear_attention, softmax_attention  # noqa: E402
from .tasks import (  # noqa: E402  # noqa: E402
    TASKS,
    CellularAutomatonTask,
    CopyTask,
    Dataset,
    HighOrderMarkovTask,
    MultiLagCopyTask,
    SparseLinearMapTask,
    SparseRegressionTask,
    Task,
    register_task,
    task_from_config,
)
from .training import *  # noqa: E402,F401,F403
from .training import __all__ as _training_all  # noqa: E402

__version__ = "0.1.0"

__all__ = [
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
    "AttentionModel",
    "attention_weights",
    "softmax_attention",
    "linear_attention",
    "order_parameters",
    *_bayes_all,
    *_training_all,
]
