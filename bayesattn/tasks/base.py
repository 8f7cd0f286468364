"""Task generators: pure functions of a PRNG key that return a :class:`Dataset`.

A task fixes the sequence length ``T``, the token dimension ``d``, which query rows carry a target
(``query_mask``), which keys each query may attend to (``key_mask``) and the *target pattern*: the
(T, T) attention pattern that solves the task (for the copy task, the shift by ``offset``). The
posterior, the theory and the order parameters only see these arrays, so a new task (multi-position
copy, Markov chains, linear maps, ...) plugs in by subclassing :class:`Task`.

Conventions for ``boundary="causal"``: query t may attend to keys s <= t; the first ``offset`` rows
have no source token, so they are *marked* (``query_mask[t] = False``, their ``Y`` rows are zero) and
excluded from the likelihood and from the order parameters. ``n = P * query_mask.sum()`` rows enter
the likelihood.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

import jax
import jax.numpy as jnp
import numpy as np

from .._validate import check_array, check_int

TokenKind = Literal["gaussian", "onehot"]
Boundary = Literal["cyclic", "causal"]
TOKENS = ("gaussian", "onehot")
BOUNDARIES = ("cyclic", "causal")


@dataclass(frozen=True)
class Dataset:
    """P training sequences.

    X: (P, T, d) tokens; Y: (P, T, d_out) targets (zero on rows with ``query_mask`` False);
    task: the :class:`Task` that produced (or describes) the data.
    """

    X: jax.Array
    Y: jax.Array
    task: Task

    @classmethod
    def from_arrays(cls, X, Y, task: Task) -> Dataset:
        """Wrap user-supplied arrays, checking shapes against ``task`` and rejecting NaN / inf."""
        if not isinstance(task, Task):
            raise ValueError(f"task={task!r}: expected a bayesattn Task instance")
        X = check_array("X", np.asarray(X, dtype=np.float64), (None, task.T, task.d))
        Y = check_array("Y", np.asarray(Y, dtype=np.float64), (X.shape[0], task.T, task.d_out))
        Y = Y * task.query_mask[None, :, None]
        return cls(jnp.asarray(X), jnp.asarray(Y), task)

    @property
    def P(self) -> int:
        return int(self.X.shape[0])

    @property
    def T(self) -> int:
        return self.task.T

    @property
    def d(self) -> int:
        return self.task.d

    @property
    def d_out(self) -> int:
        return self.task.d_out

    @property
    def n(self) -> int:
        """Number of (sequence, query) rows in the likelihood."""
        return self.P * int(self.task.query_mask.sum())


@dataclass(frozen=True)
class Task:
    """Base class of tasks. Subclasses define ``d_out``, the masks, the target pattern and ``_sample``."""

    T: int
    d: int

    def __post_init__(self):
        # store the checked Python ints: numpy ints from a grid would leak into config() and break JSON records
        object.__setattr__(self, "T", check_int("T", self.T, minimum=2))
        object.__setattr__(self, "d", check_int("d", self.d, minimum=1))

    @property
    def d_out(self) -> int:
        return self.d

    @property
    def key_mask(self) -> np.ndarray:
        """(T, T) bool: key_mask[t, s] is True when query t may attend to key s."""
        return np.ones((self.T, self.T), dtype=bool)

    @property
    def query_mask(self) -> np.ndarray:
        """(T,) bool: rows that carry a target."""
        return np.ones(self.T, dtype=bool)

    @property
    def target_patterns(self) -> dict[str, np.ndarray]:
        """Named (T, T) attention patterns that solve the task, or part of it (one per lag or span); may be
        empty. Observables such as the mass on each pattern are declared from these."""
        return {}

    @property
    def target_pattern(self) -> np.ndarray:
        """(T, T) float: the single attention pattern that solves the task (rows of query_mask sum to 1).

        Only tasks solved by one pattern have it; the order parameters m, q, u are defined against it."""
        pats = self.target_patterns
        if len(pats) != 1:
            raise ValueError(
                f"{type(self).__name__} has {len(pats)} target patterns ({', '.join(pats) or 'none'}): "
                "expected exactly one for a single target pattern"
            )
        return next(iter(pats.values()))

    def sample(self, key: jax.Array, P: int) -> Dataset:
        """Draw P sequences. Pure function of ``key``: the same key gives the same data."""
        P = check_int("P", P, minimum=0)
        X, Y = self._sample(key, P)
        return Dataset(X, Y * jnp.asarray(self.query_mask, X.dtype)[None, :, None], self)

    def _sample(self, key, P):
        raise NotImplementedError

    def replace(self, **changes) -> Task:
        return dataclasses.replace(self, **changes)

    def config(self) -> dict:
        return {"name": type(self).__name__, **dataclasses.asdict(self)}


TASKS: dict[str, type[Task]] = {}


def register_task(cls: type[Task]) -> type[Task]:
    """Class decorator: make ``cls`` known by its class name to :func:`task_from_config`."""
    if not (isinstance(cls, type) and issubclass(cls, Task)):
        raise ValueError(f"register_task({cls!r}): expected a subclass of bayesattn.Task")
    TASKS[cls.__name__] = cls
    return cls


def task_from_config(config: dict) -> Task:
    """The task a ``Task.config()`` dict describes: {"name": class name, **fields}."""
    if not isinstance(config, dict) or "name" not in config:
        raise ValueError(
            f"task config={config!r}: expected a dict with a 'name' key (one of {', '.join(sorted(TASKS))})"
        )
    fields = dict(config)
    name = fields.pop("name")
    if name not in TASKS:
        raise ValueError(f"task name={name!r}: expected one of {', '.join(map(repr, sorted(TASKS)))}")
    cls = TASKS[name]
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(fields) - known)
    if unknown:
        raise ValueError(f"task {name}: unknown field(s) {unknown}: expected some of {sorted(known)}")
    return cls(**fields)


def _draw_rows(n: int) -> int:
    """Leading size to draw for ``n`` rows: ``n`` itself up to 256, else the next power of two.

    A jitted draw compiles once per shape (jax.random.normal: ~0.45 s at (P, 32, 8) on a 2-core CPU), so a
    sweep over 16 values of P paid 16 compilations; with power-of-two sizes, P = 250..4000 pays 5. Slicing the
    first ``n`` rows is bit for bit the draw of ``n`` rows under threefry with ``jax_threefry_partitionable``
    (JAX's default): each element's bits depend only on its flat index (``tests/test_tasks.py``). Inside a
    traced function (a jitted training step) the draw is compiled once anyway, and is not rounded up."""
    if n <= 256 or not jax.config.jax_threefry_partitionable:
        return n
    return 1 << (n - 1).bit_length()


def draw_tokens(key: jax.Array, shape: tuple[int, ...], d: int, tokens: str) -> jax.Array:
    """Tokens of shape (*shape, d): i.i.d. N(0, I_d) or uniform one-hot over d symbols."""
    rows = shape[0] if shape else None
    if rows is not None and not isinstance(key, jax.core.Tracer) and str(jax.random.key_impl(key)) == "threefry2x32":
        shape = (_draw_rows(rows), *shape[1:])  # drawn rounded up, the first `rows` kept: the same bits
    if tokens == "gaussian":
        out = jax.random.normal(key, (*shape, d), dtype=jnp.float64)
    else:
        out = jax.nn.one_hot(jax.random.randint(key, shape, 0, d), d, dtype=jnp.float64)
    return out if rows is None or out.shape[0] == rows else out[:rows]
