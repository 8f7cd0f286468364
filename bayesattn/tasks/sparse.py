"""Sparse attention patterns (docs/results/sparse.md section 1): a sparse linear map mod 2, cellular automata, and the
Gaussian regression surrogate of the linear map that the closed-form posterior works on.

All three are next-token / regression tasks whose solution is a *sparse attention pattern*: each query row must
attend to a small set of keys (its *support*), s of them.

- :class:`SparseLinearMapTask`: A in {0,1}^{S x S} with exactly s ones per row (drawn from ``seed``); x0 uniform
  in {0,1}^S, x1 = A x0 mod 2; the sequence is [x0, x1] (2 S binary tokens). The model reads tokens 0..2S-2 and
  predicts tokens 1..2S-1; only the predictions of x1 count, so query row S-1+i (which predicts x1[i]) must
  attend to the s keys {j : A_ij = 1} of the first half.
- :class:`CellularAutomatonTask`: a pool of rule tables {0..3}^3 -> {0..3}; a sequence is the trajectory
  [x_0, x_1, ..., x_k] of one table (drawn from the pool per sequence) applied k times to 16 cells (periodic
  boundary); the query that predicts cell j of state t+1 must attend to cells j-1, j, j+1 of state t.
- :class:`SparseRegressionTask`: real tokens x_j in R^d at S positions, y_i = sum_{j : A_ij = 1} x_j for every
  row i (all S keys visible). s = 1 with ``support="shift"`` is the cyclic copy task.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import jax
import jax.numpy as jnp
import numpy as np

from .._validate import check_choice, check_int
from .base import TOKENS, Task, TokenKind, draw_tokens, register_task


def sparse_support(key: jax.Array, S: int, s: int) -> np.ndarray:
    """(S, S) 0/1 int matrix with exactly ``s`` ones in every row, at positions drawn uniformly without
    replacement (independently per row) from ``key``."""
    S = check_int("S", S, minimum=1)
    s = check_int("s", s, minimum=1, maximum=S)
    with jax.ensure_compile_time_eval():  # concrete even when called inside a traced function
        perms = np.asarray(jax.vmap(lambda k: jax.random.permutation(k, S))(jax.random.split(key, S)))
    A = np.zeros((S, S), dtype=np.int64)
    np.put_along_axis(A, perms[:, :s], 1, axis=1)
    return A


def shift_support(S: int, s: int) -> np.ndarray:
    """(S, S) 0/1: row i has ones at i-1, ..., i-s (mod S), the cyclic copy task's shift for s = 1."""
    A = np.zeros((S, S), dtype=np.int64)
    for lag in range(1, s + 1):
        A[np.arange(S), (np.arange(S) - lag) % S] = 1
    return A


def _check_S_s(S, s, name_S="S"):
    S = check_int(name_S, S, minimum=1)
    if isinstance(s, bool) or not isinstance(s, (int, np.integer)):
        raise ValueError(f"s={s!r}: expected an integer")
    if not 1 <= s <= S:
        raise ValueError(f"s={s}: expected 1 <= s <= {name_S}={S} (ones per row of the S x S map)")
    return S, int(s)


class _DerivedShape:
    """Mixin: T and d follow from the task's own fields (not init arguments), so config() leaves them out."""

    def config(self) -> dict:
        d = dataclasses.asdict(self)
        d.pop("T"), d.pop("d")
        return {"name": type(self).__name__, **d}


class _NextTokenTask(_DerivedShape):
    """Mixin of the token tasks: causal keys, the loss on :attr:`query_rows` only, and one-hot next-token data
    made from the subclass's ``sample_tokens(key, B)`` over ``vocab`` symbols."""

    @property
    def key_mask(self) -> np.ndarray:
        return np.tril(np.ones((self.T, self.T), dtype=bool))

    @property
    def query_mask(self) -> np.ndarray:
        qm = np.zeros(self.T, dtype=bool)
        qm[self.query_rows] = True
        return qm

    def _sample(self, key, P):
        return _next_token_onehot(self.sample_tokens(key, P), self.vocab)


# --------------------------------------------------------------------------------------------------------------
# the sparse linear map mod 2
# --------------------------------------------------------------------------------------------------------------


@register_task
@dataclass(frozen=True)
class SparseLinearMapTask(_NextTokenTask, Task):
    """A sparse linear map mod 2: the sequence [x0, x1] with x1 = A x0 mod 2 (docs/results/sparse.md section 1).

    A in {0,1}^{S x S} has exactly s ones per row (drawn from ``seed``); x0 is uniform in {0,1}^S; the sequence
    is [x0, x1] (2 S binary tokens). The model reads tokens 0..2S-2 and predicts tokens 1..2S-1; only the
    predictions of x1 count, so query row S-1+i (which predicts x1[i]) must attend to the s keys
    {j : A_ij = 1} of the first half. T = 2 S and d = 2 (the vocabulary) follow from S; they are not
    arguments.

    As a :class:`Task` (one-hot X: (P, 2S, 2), Y the one-hot next token on the query rows S-1..2S-2), the
    posterior and the observables see its ``target_patterns`` ("support": 1/s on each key of row i's support, on
    query row S-1+i). Training uses :meth:`sample_tokens` (ints).

    Parameters
    ----------
    S : int, default 16
        The length of each half (>= 1).
    s : int, default 3
        Ones per row of A, in 1..S.
    seed : int, default 0
        Draws A (:attr:`support`), >= 0.

    Attributes
    ----------
    support : numpy.ndarray
        A: (S, S) 0/1 with s ones per row.
    query_rows : numpy.ndarray
        The rows whose next-token prediction counts: S-1 .. 2S-2.
    row_supports : numpy.ndarray
        (T, T) 0/1: row t holds the keys query t must attend to.
    vocab : int
        2.

    Raises
    ------
    ValueError
        If S, s or seed is not an integer, S < 1, s is not in 1..S, or seed < 0.

    Examples
    --------
    >>> import jax, numpy as np, bayesattn as ba
    >>> task = ba.SparseLinearMapTask(S=4, s=2, seed=0)
    >>> x = np.asarray(task.sample_tokens(jax.random.key(1), 3))
    >>> x.shape, task.support.sum(axis=1).tolist(), bool(((task.support @ x[:, :4].T) % 2 == x[:, 4:].T).all())
    ((3, 8), [2, 2, 2, 2], True)
    """

    S: int = 16
    s: int = 3
    seed: int = 0
    T: int = field(init=False, default=0)
    d: int = field(init=False, default=2)

    def __post_init__(self):
        S, s = _check_S_s(self.S, self.s)
        object.__setattr__(self, "S", S)
        object.__setattr__(self, "s", s)
        object.__setattr__(self, "seed", check_int("seed", self.seed, minimum=0))
        object.__setattr__(self, "T", 2 * S)
        object.__setattr__(self, "d", 2)
        super().__post_init__()

    @property
    def vocab(self) -> int:
        return 2

    @property
    def support(self) -> np.ndarray:
        """A: (S, S) 0/1 with s ones per row."""
        with jax.ensure_compile_time_eval():
            return sparse_support(jax.random.key(self.seed), self.S, self.s)

    @property
    def query_rows(self) -> np.ndarray:
        """The rows whose next-token prediction counts: S-1 .. 2S-2 (row S-1+i predicts x1[i])."""
        return np.arange(self.S - 1, 2 * self.S - 1)

    @property
    def row_supports(self) -> np.ndarray:
        """(T, T) 0/1: row t holds the keys query t must attend to (zero outside the query rows)."""
        pat = np.zeros((self.T, self.T), dtype=np.int64)
        pat[self.query_rows, : self.S] = self.support
        return pat

    @property
    def target_patterns(self) -> dict[str, np.ndarray]:
        return {"support": self.row_supports / self.s}

    def sample_tokens(self, key: jax.Array, B: int) -> jax.Array:
        """(B, 2S) int tokens [x0, x1], x1 = A x0 mod 2."""
        return linear_map_tokens(key, B, jnp.asarray(self.support, jnp.int32))


def linear_map_tokens(key: jax.Array, B: int, A: jax.Array) -> jax.Array:
    """(B, 2S) int tokens [x0, x1] of the map ``A`` ((S, S) 0/1, may be traced: one map per vmapped seed),
    x0 uniform in {0,1}^S, x1 = A x0 mod 2. :meth:`SparseLinearMapTask.sample_tokens` is this with its own A."""
    S = A.shape[-1]
    x0 = jax.random.bernoulli(key, 0.5, (B, S)).astype(jnp.int32)
    x1 = (x0 @ A.astype(jnp.int32).T) % 2
    return jnp.concatenate([x0, x1], axis=1)


def _next_token_onehot(tokens: jax.Array, vocab: int):
    """X: one-hot of tokens 0..T-1; Y: one-hot of tokens 1..T (the last row zero): (P, T, vocab) each."""
    X = jax.nn.one_hot(tokens, vocab, dtype=jnp.float64)
    Y = jnp.concatenate([X[:, 1:], jnp.zeros_like(X[:, :1])], axis=1)
    return X, Y


# --------------------------------------------------------------------------------------------------------------
# cellular automata
# --------------------------------------------------------------------------------------------------------------


def check_rule_tables(tables, states: int = 4) -> np.ndarray:
    """Rule tables as an int array (n, states, states, states) with entries in 0..states-1; one table
    (states, states, states) or a flat one (states^3,) is accepted too. Anything else: ValueError."""
    arr = np.asarray(tables)
    if arr.dtype.kind not in "iu":
        raise ValueError(f"rule tables of dtype {arr.dtype}: expected integers in 0..{states - 1}")
    shp = arr.shape
    if shp == (states**3,):
        arr = arr.reshape(1, states, states, states)
    elif shp == (states,) * 3:
        arr = arr[None]
    elif len(shp) == 2 and shp[1] == states**3:
        arr = arr.reshape(-1, states, states, states)
    elif not (len(shp) == 4 and shp[1:] == (states,) * 3):
        raise ValueError(
            f"rule tables have shape {shp}: expected ({states}, {states}, {states}) or ({states**3},) "
            f"for one table, (n, {states}, {states}, {states}) or (n, {states**3}) for n tables "
            f"(entry [l, c, r] = new state of a cell with left, centre, right neighbours l, c, r)"
        )
    if arr.shape[0] == 0:
        raise ValueError("rule tables: got none; expected at least one table")
    if arr.min() < 0 or arr.max() >= states:
        raise ValueError(f"rule tables have entries in {arr.min()}..{arr.max()}: expected 0..{states - 1}")
    return arr.astype(np.int32)


def ca_step(table: jax.Array, state: jax.Array) -> jax.Array:
    """One synchronous update of a periodic 1-D automaton: new[j] = table[state[j-1], state[j], state[j+1]].
    table: (4, 4, 4) ints; state: (..., cells) ints."""
    return table[jnp.roll(state, 1, axis=-1), state, jnp.roll(state, -1, axis=-1)].astype(state.dtype)


def ca_trajectory(table: jax.Array, state: jax.Array, k: int) -> jax.Array:
    """(k + 1, cells): state, then the table applied 1..k times."""

    def step(x, _):
        y = ca_step(table, x)
        return y, y

    _, traj = jax.lax.scan(step, state, None, length=k)
    return jnp.concatenate([state[None], traj], axis=0)


@register_task
@dataclass(frozen=True)
class CellularAutomatonTask(_NextTokenTask, Task):
    """Trajectories of 1-D cellular automata with 4 states and radius 1 (docs/results/sparse.md section 1).

    A rule table maps {0..3}^3 -> {0..3}; a sequence is the trajectory [x_0, ..., x_k] of one table applied k
    times to ``cells`` cells (periodic boundary): T = cells (k + 1) tokens, vocabulary 4 (T and d = 4 follow
    from the fields; they are not arguments), each sequence with a table drawn uniformly from the pool. The
    model predicts every token of x_1..x_k; the query predicting cell j of x_{t+1} (row cells (t+1) + j - 1)
    must attend to cells j-1, j, j+1 (mod cells) of x_t: target pattern "neighbourhood" (1/3 on each).

    Parameters
    ----------
    k : int, default 1
        Applications of the table per sequence (>= 1).
    n_rules : int, default 256
        Size of the pool of rule tables, drawn uniformly from {0..3}^64 with ``seed`` (the paper's 256).
    cells : int, default 16
        Cells per state (>= 3).
    seed : int, default 0
        Draws the pool (>= 0).

    Attributes
    ----------
    rule_tables : numpy.ndarray
        (n_rules, 4, 4, 4) the pool: entry [l, c, r] is the new state of a cell with neighbours l, c, r.
    query_rows : numpy.ndarray
        The rows whose prediction counts: cells-1 .. T-2.
    vocab : int
        4.

    Raises
    ------
    ValueError
        If a field is not an integer or is below its minimum.

    Examples
    --------
    >>> import jax, numpy as np, bayesattn as ba
    >>> task = ba.CellularAutomatonTask(k=2, n_rules=4, cells=5)
    >>> x = np.asarray(task.sample_tokens(jax.random.key(0), 3))
    >>> task.T, x.shape, task.rule_tables.shape, task.target_patterns["neighbourhood"].sum(axis=1)[4:6].tolist()
    (15, (3, 15), (4, 4, 4, 4), [1.0, 1.0])
    """

    k: int = 1
    n_rules: int = 256
    cells: int = 16
    seed: int = 0
    T: int = field(init=False, default=0)
    d: int = field(init=False, default=4)

    def __post_init__(self):
        for f, lo in (("k", 1), ("n_rules", 1), ("cells", 3), ("seed", 0)):
            object.__setattr__(self, f, check_int(f, getattr(self, f), minimum=lo))
        object.__setattr__(self, "T", self.cells * (self.k + 1))
        object.__setattr__(self, "d", 4)
        super().__post_init__()

    @property
    def vocab(self) -> int:
        return 4

    @property
    def rule_tables(self) -> np.ndarray:
        """(n_rules, 4, 4, 4) the pool, drawn from ``seed``."""
        return self.draw_rule_tables(jax.random.key(self.seed))

    @property
    def query_rows(self) -> np.ndarray:
        return np.arange(self.cells - 1, self.T - 1)

    @property
    def row_supports(self) -> np.ndarray:
        C = self.cells
        pat = np.zeros((self.T, self.T), dtype=np.int64)
        for t in range(self.k):
            for j in range(C):
                row = C * (t + 1) + j - 1
                pat[row, C * t + (np.arange(j - 1, j + 2) % C)] = 1
        return pat

    @property
    def target_patterns(self) -> dict[str, np.ndarray]:
        return {"neighbourhood": self.row_supports / 3.0}

    def sample_tokens(self, key: jax.Array, B: int, tables=None) -> jax.Array:
        """(B, T) int tokens; ``tables`` (optional): a pool to use instead of :attr:`rule_tables`."""
        with jax.ensure_compile_time_eval():
            pool = jnp.asarray(self.rule_tables if tables is None else check_rule_tables(tables))
        return ca_tokens(key, B, pool, self.cells, self.k)

    def draw_rule_tables(self, key: jax.Array) -> np.ndarray:
        """A pool of ``n_rules`` tables drawn from ``key`` (as :attr:`rule_tables` draws its pool from ``seed``)."""
        with jax.ensure_compile_time_eval():
            t = np.asarray(jax.random.randint(key, (self.n_rules, 4, 4, 4), 0, 4))
        return check_rule_tables(t)


def ca_tokens(key: jax.Array, B: int, pool: jax.Array, cells: int, k: int) -> jax.Array:
    """(B, cells (k + 1)) int tokens: trajectories of tables drawn uniformly from ``pool`` ((n, 4, 4, 4) ints, may
    be traced: one pool per vmapped seed), started from uniform states. :meth:`CellularAutomatonTask.sample_tokens`
    is this with its own pool."""
    kr, kx = jax.random.split(key)
    which = jax.random.randint(kr, (B,), 0, pool.shape[0])
    x0 = jax.random.randint(kx, (B, cells), 0, 4, dtype=jnp.int32)
    traj = jax.vmap(lambda i, x: ca_trajectory(pool[i], x, k))(which, x0)
    return traj.reshape(B, cells * (k + 1)).astype(jnp.int32)


# --------------------------------------------------------------------------------------------------------------
# the Gaussian regression surrogate
# --------------------------------------------------------------------------------------------------------------


@register_task
@dataclass(frozen=True)
class SparseRegressionTask(_DerivedShape, Task):
    """Gaussian surrogate of the linear map: y_i = sum_{j : A_ij = 1} x_j over S real tokens x_j ~ N(0, I_d).

    Every row i is a query, all S keys visible (T = S, d = dim; not arguments); tokens may be one-hot
    instead. Target pattern "support": A / s (the attention that, with readout s I, or sqrt(s) I when
    normalised, gives y exactly). The closed-form posterior works on this task; with s = 1 and
    ``support_kind="shift"`` it is the cyclic copy task ``CopyTask(T=S, offset=1)``.

    Parameters
    ----------
    S : int, default 16
        Number of tokens (>= 1).
    s : int, default 3
        Ones per row of A, in 1..S.
    dim : int, default 8
        Token dimension (>= 1).
    support_kind : {"random", "shift"}, default "random"
        "random": A drawn from ``seed``, s ones per row; "shift": row i has ones at i-1, ..., i-s mod S.
    seed : int, default 0
        Draws A for "random" (>= 0).
    tokens : {"gaussian", "onehot"}, default "gaussian"
        Token distribution.
    normalize : bool, default False
        Divide y by sqrt(s), so that every target has the variance of one token whatever s (the signal per row
        of the mod-2 map does not grow with s either).

    Attributes
    ----------
    support : numpy.ndarray
        A: (S, S) 0/1.

    Raises
    ------
    ValueError
        If S, s, dim or seed is out of range, support_kind or tokens is not one of its choices, or normalize is
        not a bool.

    Examples
    --------
    >>> import jax, bayesattn as ba
    >>> task = ba.SparseRegressionTask(S=6, s=2, dim=3)
    >>> ds = task.sample(jax.random.key(0), P=4)
    >>> bool(jax.numpy.allclose(ds.Y, jax.numpy.einsum("ij,pjk->pik", task.support, ds.X)))
    True
    """

    S: int = 16
    s: int = 3
    dim: int = 8
    support_kind: str = "random"
    seed: int = 0
    tokens: TokenKind = "gaussian"
    normalize: bool = False
    T: int = field(init=False, default=0)
    d: int = field(init=False, default=0)

    def __post_init__(self):
        S, s = _check_S_s(self.S, self.s)
        object.__setattr__(self, "S", S)
        object.__setattr__(self, "s", s)
        object.__setattr__(self, "dim", check_int("dim", self.dim, minimum=1))
        object.__setattr__(self, "seed", check_int("seed", self.seed, minimum=0))
        check_choice("support_kind", self.support_kind, ("random", "shift"))
        check_choice("tokens", self.tokens, TOKENS)
        if not isinstance(self.normalize, (bool, np.bool_)):
            raise ValueError(f"normalize={self.normalize!r}: expected True or False")
        object.__setattr__(self, "normalize", bool(self.normalize))
        object.__setattr__(self, "T", S)
        object.__setattr__(self, "d", self.dim)
        super().__post_init__()

    @property
    def support(self) -> np.ndarray:
        if self.support_kind == "shift":
            return shift_support(self.S, self.s)
        with jax.ensure_compile_time_eval():
            return sparse_support(jax.random.key(self.seed), self.S, self.s)

    @property
    def row_supports(self) -> np.ndarray:
        return self.support

    @property
    def target_patterns(self) -> dict[str, np.ndarray]:
        return {"support": self.support / self.s}

    def _sample(self, key, P):
        X = draw_tokens(key, (P, self.S), self.d, self.tokens)
        Y = jnp.einsum("ij,pjk->pik", jnp.asarray(self.support, X.dtype), X)
        return X, (Y / np.sqrt(self.s) if self.normalize else Y)
