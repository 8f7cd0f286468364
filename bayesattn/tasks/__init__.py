"""Tasks: pure functions of a PRNG key that return a :class:`Dataset`, one module per family.

A config names a task by its class name; :func:`task_from_config` turns it back into the task.
"""

from .base import TASKS, Dataset, Task, check_dataset, draw_tokens, register_task, task_from_config
from .copy import CopyTask
from .markov import HighOrderMarkovTask
from .multilag import MultiLagCopyTask
from .repeat import RepeatedSequenceTask
from .sparse import CellularAutomatonTask, SparseLinearMapTask, SparseRegressionTask

__all__ = [
    "TASKS",
    "Dataset",
    "Task",
    "check_dataset",
    "CopyTask",
    "HighOrderMarkovTask",
    "MultiLagCopyTask",
    "RepeatedSequenceTask",
    "SparseLinearMapTask",
    "CellularAutomatonTask",
    "SparseRegressionTask",
    "draw_tokens",
    "register_task",
    "task_from_config",
]
