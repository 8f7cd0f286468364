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

from .._validate import brief, check_array, check_int, check_key, check_real_array

# the largest array of data a task draws (P x T x d numbers): past it the allocation fails inside XLA, and may take
# the interpreter down with it, so a larger P is refused first
MAX_ARRAY_NUMBERS = 2**31

TokenKind = Literal["gaussian", "onehot"]
Boundary = Literal["cyclic", "causal"]
TOKENS = ("gaussian", "onehot")
BOUNDARIES = ("cyclic", "causal")


@dataclass(frozen=True)
class Dataset:
    """P training sequences of one task: tokens, targets and the task that describes them.

    Built by :meth:`Task.sample`, or from your own arrays by :meth:`from_arrays` (which checks them); the
    constructor itself checks nothing.

    Parameters
    ----------
    X : jax.Array
        (P, T, d) tokens.
    Y : jax.Array
        (P, T, d_out) targets, zero on the rows where ``task.query_mask`` is False.
    task : Task
        The :class:`Task` that produced (or describes) the data.

    Attributes
    ----------
    P : int
        Number of sequences.
    T, d, d_out : int
        The task's sequence length, token dimension and target dimension.
    n : int
        Number of (sequence, query) rows in the likelihood: ``P * task.query_mask.sum()``.

    Examples
    --------
    >>> import jax, numpy as np, bayesattn as ba
    >>> ds = ba.CopyTask(T=4, d=2).sample(jax.random.key(0), P=3)
    >>> ds.X.shape, ds.Y.shape, ds.P, ds.n
    ((3, 4, 2), (3, 4, 2), 3, 12)
    >>> own = ba.Dataset.from_arrays(np.zeros((5, 4, 2)), np.ones((5, 4, 2)), ds.task)
    >>> own.P, float(own.Y.sum())
    (5, 40.0)
    """

    X: jax.Array
    Y: jax.Array
    task: Task

    @classmethod
    def from_arrays(cls, X, Y, task: Task) -> Dataset:
        """Wrap user-supplied arrays, checking shapes against ``task`` and rejecting NaN / inf.

        Parameters
        ----------
        X : array_like
            (P, T, d) tokens.
        Y : array_like
            (P, T, d_out) targets; rows outside ``task.query_mask`` are set to zero.
        task : Task
            The task whose T, d, d_out and masks the arrays follow.

        Returns
        -------
        Dataset
            The arrays as float64 JAX arrays.

        Raises
        ------
        ValueError
            If ``task`` is not a :class:`Task`, if X or Y does not have the shape above, holds anything but real
            numbers (complex numbers are refused, not cut to their real part), or contains NaN or inf.
        """
        if not isinstance(task, Task):
            raise ValueError(f"task={brief(task)}: expected a bayesattn Task instance")
        X = np.asarray(check_real_array("X", X, (None, task.T, task.d)), dtype=np.float64)
        Y = np.asarray(check_real_array("Y", Y, (X.shape[0], task.T, task.d_out)), dtype=np.float64)
        Y = Y * task.query_mask[None, :, None]
        return cls(jnp.asarray(X), jnp.asarray(Y), task)

    @property
    def P(self) -> int:
        """Number of sequences."""
        return int(self.X.shape[0])

    @property
    def T(self) -> int:
        """Sequence length (the task's)."""
        return self.task.T

    @property
    def d(self) -> int:
        """Token dimension (the task's)."""
        return self.task.d

    @property
    def d_out(self) -> int:
        """Target dimension (the task's)."""
        return self.task.d_out

    @property
    def n(self) -> int:
        """Number of (sequence, query) rows in the likelihood."""
        return self.P * int(self.task.query_mask.sum())


def check_dataset(name: str, value, *, any_d_out: bool = False, like: Task | None = None) -> Dataset:
    """``value`` as it is when it is a :class:`Dataset` of a :class:`Task` whose X: (P, T, d) and Y: (P, T, d_out)
    hold real numbers, finite when concrete (``any_d_out``: Y's last axis of any size, for a network that predicts
    its own outputs); arrays given as lists come back as arrays. ``like``: a test set's training task, whose T, d
    and d_out the arrays must have too. ValueError naming ``name`` and the part that is not: the constructor checks
    nothing, so a Dataset built directly reaches its consumers as it was given."""
    if not isinstance(value, Dataset):
        raise ValueError(f"{name}={type(value).__name__}: expected a bayesattn Dataset (task.sample(key, P))")
    task = value.task
    if not isinstance(task, Task):
        raise ValueError(f"{name}.task={brief(task)}: expected a bayesattn Task instance")
    X = check_real_array(f"{name}.X", value.X, (None, task.T, task.d))
    Y = check_real_array(f"{name}.Y", value.Y, (X.shape[0], task.T, None if any_d_out else task.d_out))
    if like is not None:
        check_array(f"{name}.X", X, (None, like.T, like.d), finite=False)
        check_array(f"{name}.Y", Y, (X.shape[0], like.T, like.d_out), finite=False)
    return value if X is value.X and Y is value.Y else Dataset(jnp.asarray(X), jnp.asarray(Y), task)


@dataclass(frozen=True)
class Task:
    """Base class of tasks. Subclasses define ``d_out``, the masks, the target pattern and ``_sample``.

    A task is a frozen dataclass: its fields are its configuration (:meth:`config`), and :meth:`sample` is a
    pure function of a PRNG key. A subclass overrides what differs from the defaults: ``d_out`` (default
    ``d``), :attr:`key_mask` (default: every key), :attr:`query_mask` (default: every row),
    :attr:`target_patterns` (default: none) and ``_sample(key, P) -> (X, Y)``; decorate it with
    :func:`register_task` so that :func:`task_from_config` knows it. A task without ``_sample`` only
    describes user data (:meth:`Dataset.from_arrays`).

    Parameters
    ----------
    T : int
        Sequence length (>= 2).
    d : int
        Token dimension (>= 1).

    Raises
    ------
    ValueError
        If T or d is not an integer, T < 2 or d < 1.

    Examples
    --------
    >>> import jax, bayesattn as ba
    >>> from dataclasses import dataclass
    >>> @dataclass(frozen=True)
    ... class Reverse(ba.Task):
    ...     def _sample(self, key, P):
    ...         X = jax.random.normal(key, (P, self.T, self.d))
    ...         return X, X[:, ::-1]
    >>> ds = Reverse(T=4, d=2).sample(jax.random.key(0), P=3)
    >>> ds.Y.shape, bool((ds.Y[:, 0] == ds.X[:, 3]).all()), Reverse(T=4, d=2).config()
    ((3, 4, 2), True, {'name': 'Reverse', 'T': 4, 'd': 2})
    """

    T: int
    d: int

    def __post_init__(self):
        # store the checked Python ints: numpy ints from a grid would leak into config() and break JSON records
        object.__setattr__(self, "T", check_int("T", self.T, minimum=2))
        object.__setattr__(self, "d", check_int("d", self.d, minimum=1))

    @property
    def d_out(self) -> int:
        """Target dimension (``d`` unless a subclass says otherwise)."""
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
        """Draw P sequences. Pure function of ``key``: the same key gives the same data.

        Parameters
        ----------
        key : jax.Array
            A PRNG key.
        P : int
            Number of sequences (>= 0).

        Returns
        -------
        Dataset
            X: (P, T, d), Y: (P, T, d_out), zero on the rows outside :attr:`query_mask`.

        Raises
        ------
        ValueError
            If P is not an integer >= 0.
        """
        P = check_int("P", P, minimum=0)
        limit = MAX_ARRAY_NUMBERS // (self.T * max(self.d, self.d_out))
        if P > limit:
            raise ValueError(
                f"P={P}: expected at most {limit} sequences at T={self.T}, d={self.d}, d_out={self.d_out} (an array "
                f"holds at most {MAX_ARRAY_NUMBERS} numbers here, 16 GiB in float64)"
            )
        check_key("key", key)
        X, Y = self._sample(key, P)
        return Dataset(X, Y * jnp.asarray(self.query_mask, X.dtype)[None, :, None], self)

    def _sample(self, key, P):
        raise NotImplementedError(
            f"{type(self).__name__} cannot sample: a Task subclass draws its data in _sample(key, P) -> (X, Y)"
        )

    def replace(self, **changes) -> Task:
        """The same task with some fields changed (checked again)."""
        return dataclasses.replace(self, **changes)

    def config(self) -> dict:
        """Plain data {"name": class name, **fields}: what :func:`task_from_config` turns back into the task."""
        return {"name": type(self).__name__, **dataclasses.asdict(self)}


TASKS: dict[str, type[Task]] = {}
"""The registered task classes by class name, as :func:`register_task` fills it and :func:`task_from_config`
reads it.

Examples
--------
>>> import bayesattn as ba
>>> ba.TASKS["CopyTask"] is ba.CopyTask, "MultiLagCopyTask" in ba.TASKS
(True, True)
"""


def register_task(cls: type[Task]) -> type[Task]:
    """Class decorator: make ``cls`` known by its class name to :func:`task_from_config`.

    Parameters
    ----------
    cls : type
        A subclass of :class:`Task`; registered in :data:`TASKS` under ``cls.__name__`` (a later class of the
        same name replaces an earlier one).

    Returns
    -------
    type
        ``cls`` itself.

    Raises
    ------
    ValueError
        If ``cls`` is not a subclass of :class:`Task`.

    Examples
    --------
    >>> import bayesattn as ba
    >>> from dataclasses import dataclass
    >>> @ba.register_task
    ... @dataclass(frozen=True)
    ... class MyTask(ba.Task):
    ...     pass
    >>> ba.task_from_config({"name": "MyTask", "T": 4, "d": 2})
    MyTask(T=4, d=2)
    >>> del ba.TASKS["MyTask"]  # leave the registry as it was
    """
    if not (isinstance(cls, type) and issubclass(cls, Task)):
        raise ValueError(f"register_task({cls!r}): expected a subclass of bayesattn.Task")
    TASKS[cls.__name__] = cls
    return cls


def task_from_config(config: dict) -> Task:
    """The task a ``Task.config()`` dict describes: {"name": class name, **fields}.

    Parameters
    ----------
    config : dict
        {"name": a class name in :data:`TASKS`, **the fields of that class}; fields left out take their
        defaults.

    Returns
    -------
    Task
        The task, built (and checked) by its class.

    Raises
    ------
    ValueError
        If ``config`` is not a dict with a "name" key, if the name is not registered, if it has a key that
        is not a field of the class, or if the class rejects a field's value.

    Examples
    --------
    >>> import bayesattn as ba
    >>> task = ba.CopyTask(T=4, d=2, offset=2)
    >>> ba.task_from_config(task.config()) == task
    True
    >>> ba.task_from_config({"name": "CopyTask", "T": 4, "d": 2, "lag": 1})
    Traceback (most recent call last):
        ...
    ValueError: task CopyTask: unknown field(s) ['lag']: expected some of ['T', 'boundary', 'd', 'offset', 'tokens']
    """
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
