"""The copy task: each query must output the token ``offset`` positions back (docs/model.md section 1)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._validate import check_choice, check_int
from .base import BOUNDARIES, TOKENS, Boundary, Task, TokenKind, draw_tokens, register_task


@register_task
@dataclass(frozen=True)
class CopyTask(Task):
    """Copy task: the target at query t is the token ``offset`` positions back.

    y_t = x_{t - offset}, with d_out = d. Its one target pattern, "copy", is the shift by ``offset``: 1 at
    [t, t - offset] on every query row. Cyclic: t - offset is taken mod T and every row is a query; causal:
    query t may attend to keys s <= t, and the first ``offset`` rows have no source, so they are not queries
    (``query_mask`` False, zero targets).

    Parameters
    ----------
    T : int
        Sequence length (>= 2).
    d : int
        Token dimension (>= 1); for one-hot tokens the number of symbols.
    offset : int, default 1
        How far back the copied token is, in 1..T-1.
    tokens : {"gaussian", "onehot"}, default "gaussian"
        i.i.d. N(0, I_d) tokens or uniform one-hot tokens over d symbols.
    boundary : {"cyclic", "causal"}, default "cyclic"
        Which keys each query sees (above).

    Attributes
    ----------
    source : numpy.ndarray
        (T,) int: the source key t - offset (mod T) of each query.

    Raises
    ------
    ValueError
        If T or d is out of range, offset is not in 1..T-1, or tokens / boundary is not one of the choices.

    Examples
    --------
    >>> import jax, bayesattn as ba
    >>> ds = ba.CopyTask(T=4, d=3).sample(jax.random.key(0), P=2)
    >>> ds.X.shape, ds.Y.shape, bool((ds.Y[:, 1] == ds.X[:, 0]).all())
    ((2, 4, 3), (2, 4, 3), True)
    >>> ba.CopyTask(T=4, d=3, boundary="causal").query_mask.tolist()
    [False, True, True, True]
    """

    offset: int = 1
    tokens: TokenKind = "gaussian"
    boundary: Boundary = "cyclic"

    def __post_init__(self):
        super().__post_init__()
        object.__setattr__(self, "offset", check_int("offset", self.offset, minimum=1, maximum=self.T - 1))
        check_choice("tokens", self.tokens, TOKENS)
        check_choice("boundary", self.boundary, BOUNDARIES)

    @property
    def key_mask(self) -> np.ndarray:
        if self.boundary == "cyclic":
            return np.ones((self.T, self.T), dtype=bool)
        return np.tril(np.ones((self.T, self.T), dtype=bool))

    @property
    def query_mask(self) -> np.ndarray:
        qm = np.ones(self.T, dtype=bool)
        if self.boundary == "causal":
            qm[: self.offset] = False
        return qm

    @property
    def source(self) -> np.ndarray:
        """(T,) int: the source key of each query (t - offset mod T; meaningless where query_mask is False)."""
        return (np.arange(self.T) - self.offset) % self.T

    @property
    def target_patterns(self) -> dict[str, np.ndarray]:
        pat = np.zeros((self.T, self.T))
        pat[np.arange(self.T), self.source] = 1.0
        return {"copy": pat * self.query_mask[:, None]}

    def _sample(self, key, P):
        X = draw_tokens(key, (P, self.T), self.d, self.tokens)
        return X, X[:, self.source, :]
