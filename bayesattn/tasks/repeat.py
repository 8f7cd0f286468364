"""In-context repetition: a random segment repeated within the context (the induction task; docs/results/screens.md)."""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from .._validate import check_int
from .base import Task, register_task


@register_task
@dataclass(frozen=True)
class RepeatedSequenceTask(Task):
    """Each sequence repeats a segment of n distinct random tokens (n uniform in min_period..max_period, a
    different n per sequence, so that no fixed positional shift solves it): token t = segment[t mod n].

    X: (P, T, d) one-hot tokens 0..T-1 (d: the vocabulary, >= max_period); Y: (P, T, d) one-hot next tokens.
    Query rows: max_period <= t <= T - 2, where every sequence's next token already occurred after an earlier
    occurrence of the current token (predictable by induction only). No fixed target pattern.

    >>> import jax
    >>> task = RepeatedSequenceTask(T=12, d=8, min_period=3, max_period=5)
    >>> ds = task.sample(jax.random.key(0), 2)
    >>> ds.X.shape, int(task.query_mask.sum())
    ((2, 12, 8), 6)
    """

    T: int = 64
    d: int = 64
    min_period: int = 8
    max_period: int = 32

    def __post_init__(self):
        super().__post_init__()
        lo = check_int("min_period", self.min_period, minimum=2)
        hi = check_int("max_period", self.max_period, minimum=lo)
        if hi > self.d:
            raise ValueError(f"max_period={hi}: the segment's tokens are distinct, so it must be <= d={self.d}")
        if hi > self.T - 2:
            raise ValueError(f"max_period={hi}: leaves no query row; expected max_period <= T - 2 = {self.T - 2}")

    @property
    def key_mask(self) -> np.ndarray:
        return np.tril(np.ones((self.T, self.T), dtype=bool))

    @property
    def query_mask(self) -> np.ndarray:
        t = np.arange(self.T)
        return (t >= self.max_period) & (t <= self.T - 2)

    def tokens(self, key, P: int) -> jax.Array:
        """(P, T + 1) int tokens (the inputs and the next token after the last)."""
        kp, kn = jax.random.split(key)
        perms = jax.vmap(lambda k: jax.random.permutation(k, self.d)[: self.max_period])(jax.random.split(kp, P))
        n = jax.random.randint(kn, (P, 1), self.min_period, self.max_period + 1)
        idx = jnp.arange(self.T + 1)[None, :] % n
        return jnp.take_along_axis(perms, idx, axis=1)

    def _sample(self, key, P):
        seq = self.tokens(key, P)
        onehot = jax.nn.one_hot(seq, self.d, dtype=jnp.float64)
        return onehot[:, :-1], onehot[:, 1:]
