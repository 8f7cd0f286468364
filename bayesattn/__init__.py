"""bayesattn: a Bayesian theory of copy-head emergence in attention.

Data flows one way: tasks -> attention -> posterior -> {sampling | theory | training} -> sweep -> plots -> cli.
"""

import jax

jax.config.update("jax_enable_x64", True)  # posterior energies are O(n d / sigma^2): float32 loses the O(1) differences

from . import theory  # noqa: E402
from .attention import attention_weights, linear_attention, order_parameters, softmax_attention  # noqa: E402
from .posterior import Posterior, Prior, gp_log_evidence, joint_log_density, sufficient_statistics  # noqa: E402
from .sampling import *  # noqa: E402,F401,F403
from .sampling import __all__ as _sampling_all  # noqa: E402
from .tasks import CopyTask, Dataset, Task  # noqa: E402
from .training import *  # noqa: E402,F401,F403
from .training import __all__ as _training_all  # noqa: E402

__version__ = "0.1.0"

__all__ = [
    "CopyTask", "Dataset", "Task", "Posterior", "Prior", "theory",
    "attention_weights", "softmax_attention", "linear_attention", "order_parameters",
    "sufficient_statistics", "joint_log_density", "gp_log_evidence",
    *_sampling_all, *_training_all,
]
