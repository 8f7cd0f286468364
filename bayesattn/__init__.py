"""bayesattn: a Bayesian theory of copy-head emergence in attention.

Data flows one way: tasks -> attention -> posterior -> {sampling | theory | training} -> sweep -> plots -> cli.
"""

import jax

jax.config.update("jax_enable_x64", True)  # posterior energies are O(n d / sigma^2): float32 loses the O(1) differences

from .attention import attention_weights, linear_attention, order_parameters, softmax_attention  # noqa: E402
from .posterior import Posterior, Prior, gp_log_evidence, joint_log_density, sufficient_statistics  # noqa: E402
from .tasks import CopyTask, Dataset, Task  # noqa: E402

__version__ = "0.1.0"

__all__ = [
    "CopyTask", "Dataset", "Task", "Posterior", "Prior",
    "attention_weights", "softmax_attention", "linear_attention", "order_parameters",
    "sufficient_statistics", "joint_log_density", "gp_log_evidence",
]
