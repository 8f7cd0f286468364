"""High-order Markov chain over a one-hot vocabulary, as Yueksel, Alvarez Lucendo & Flammarion (arXiv 2602.19143)
build it in their code (tml-epfl/hmm-attention, ``LinearARTeacher`` and ``ARDataset``; docs/results/staircase.md).

The next token is drawn from softmax(sum_k c_k U_k sum_{s in span k} x_s) over the vocabulary, where the K spans
of lags tile the ``burn_in = sum(span_lengths)`` tokens before it, ordered oldest to newest, c_k = scale m^k
(k = 0 oldest, so the newest span weighs m^(K-1)), and U_k are independent random orthogonal matrices. A
sequence is ``burn_in`` uniform tokens followed by ``T + 1 - burn_in`` tokens of the chain; the model reads
tokens 0..T-1 and predicts tokens 1..T, and only the predictions of chain tokens (rows t >= burn_in - 1) count.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from .._validate import check_int, check_positive
from .base import Task, register_task
from .multilag import random_orthogonal


@register_task
@dataclass(frozen=True)
class HighOrderMarkovTask(Task):
    """High-order Markov chain over a one-hot vocabulary, as Yueksel, Alvarez Lucendo & Flammarion build it.

    The next token is drawn from softmax(sum_k c_k U_k sum_{s in span k} x_s) over the vocabulary, where the K
    spans of lags tile the ``burn_in = sum(span_lengths)`` tokens before it, ordered oldest to newest,
    c_k = scale m^k (k = 0 oldest, so the newest span weighs m^(K-1)), and U_k are independent random
    orthogonal matrices (arXiv 2602.19143; their code tml-epfl/hmm-attention, ``LinearARTeacher`` and
    ``ARDataset``; docs/results/staircase.md). A sequence is ``burn_in`` uniform tokens followed by
    ``T + 1 - burn_in`` tokens of the chain; the model reads tokens 0..T-1 and predicts tokens 1..T, and only
    the predictions of chain tokens (rows t >= burn_in - 1) count.

    X: (P, T, d) one-hot tokens 0..T-1; Y: (P, T, d) one-hot next tokens (zero on rows t < burn_in - 1).
    target_patterns "span1".."spanK" (span1 oldest): indicators of each span's keys relative to the query.

    Parameters
    ----------
    T : int, default 25
        Model input length: burn-in + generated - 1 (the paper: 6 + 20 - 1 = 25 for spans (2, 2, 2),
        12 + 20 - 1 = 31 for (4, 4, 4)).
    d : int, default 50
        Vocabulary size (>= 2).
    span_lengths : tuple of int, default (2, 2, 2)
        Lengths of the spans, oldest to newest; positive, with sum <= T.
    m : float, default 1.7
        The multiplicative constant between the spans' weights (> 0).
    scale : float, default 1.0
        The inverse temperature (> 0).
    seed : int, default 0
        Draws U_k (>= 0).

    Attributes
    ----------
    K : int
        Number of spans.
    burn_in : int
        sum(span_lengths), the uniform tokens before the chain.
    generated : int
        Tokens drawn from the chain per sequence, T + 1 - burn_in (the paper's ``length``).

    Raises
    ------
    ValueError
        If d < 2, span_lengths is empty, not a sequence of positive integers or sums to more than T, m or
        scale is not a positive finite number, or seed is not an integer >= 0.

    Examples
    --------
    >>> import jax, bayesattn as ba
    >>> task = ba.HighOrderMarkovTask(T=9, d=5, span_lengths=(1, 2))
    >>> ds = task.sample(jax.random.key(0), P=2)
    >>> ds.X.shape, int(task.query_mask.sum()), task.generated
    ((2, 9, 5), 7, 7)
    """

    T: int = 25
    d: int = 50
    span_lengths: tuple = (2, 2, 2)
    m: float = 1.7
    scale: float = 1.0
    seed: int = 0

    def __post_init__(self):
        super().__post_init__()
        check_int("d (vocabulary)", self.d, minimum=2)
        try:
            spans = tuple(self.span_lengths)
        except TypeError:
            raise ValueError(f"span_lengths={self.span_lengths!r}: expected a sequence of positive integers") from None
        if not spans:
            raise ValueError(f"span_lengths={self.span_lengths!r}: expected at least one span")
        spans = tuple(check_int(f"span_lengths[{k}]", s, minimum=1) for k, s in enumerate(spans))
        object.__setattr__(self, "span_lengths", spans)
        if sum(spans) > self.T:
            raise ValueError(
                f"span_lengths={spans}: the spans cover lags 1..{sum(spans)}, beyond T={self.T}; "
                f"expected sum(span_lengths) <= T"
            )
        object.__setattr__(self, "m", check_positive("m", self.m))
        object.__setattr__(self, "scale", check_positive("scale", self.scale))
        object.__setattr__(self, "seed", check_int("seed", self.seed, minimum=0))

    @property
    def K(self) -> int:
        return len(self.span_lengths)

    @property
    def burn_in(self) -> int:
        return sum(self.span_lengths)

    @property
    def generated(self) -> int:
        """Tokens drawn from the chain per sequence (the paper's ``length``)."""
        return self.T + 1 - self.burn_in

    def span_lags(self, k: int) -> tuple[int, ...]:
        """Lags (query position t predicts token t + 1 from tokens t + 1 - lag) of span k (0 = oldest)."""
        newer = sum(self.span_lengths[k + 1 :])
        return tuple(range(newer + 1, newer + self.span_lengths[k] + 1))

    @property
    def key_mask(self) -> np.ndarray:
        return np.tril(np.ones((self.T, self.T), dtype=bool))

    @property
    def query_mask(self) -> np.ndarray:
        return np.arange(self.T) >= self.burn_in - 1

    @property
    def target_patterns(self) -> dict[str, np.ndarray]:
        t = np.arange(self.T)
        out = {}
        for k in range(self.K):
            pat = np.zeros((self.T, self.T))
            for lag in self.span_lags(k):
                s = t + 1 - lag
                ok = self.query_mask & (s >= 0)
                pat[t[ok], s[ok]] = 1.0
            out[f"span{k + 1}"] = pat
        return out

    def teacher_matrices(self) -> jax.Array:
        """(K, d, d): c_k U_k with c_k = scale m^k (k = 0 oldest)."""
        U = random_orthogonal(jax.random.key(self.seed), self.K, self.d)
        c = self.scale * self.m ** jnp.arange(self.K, dtype=jnp.float64)
        return c[:, None, None] * U

    def teacher_logits(self, tokens: jax.Array, newest: int | None = None) -> jax.Array:
        """Teacher logits of the next token after every position. tokens: (..., T', d) one-hot (or any vectors)
        -> (..., T', d); row t uses tokens t + 1 - lag for the lags of the spans (rows with lags before the
        start are partial: only rows t >= burn_in - 1 are the chain's). newest: keep only the ``newest`` newest
        spans (the paper's lag-restricted teacher, same constants), None = all."""
        K = self.K if newest is None else check_int("newest", newest, minimum=1, maximum=self.K)
        A = self.teacher_matrices()
        Tp = tokens.shape[-2]
        out = jnp.zeros(tokens.shape, tokens.dtype)
        for k in range(self.K - K, self.K):
            agg = jnp.zeros_like(tokens)
            for lag in self.span_lags(k):
                shift = lag - 1  # row t reads token t - shift
                agg = agg + jnp.pad(tokens, [(0, 0)] * (tokens.ndim - 2) + [(shift, 0), (0, 0)])[..., :Tp, :]
            out = out + agg @ A[k].T
        return out

    def _sample(self, key, P):
        kb, kc = jax.random.split(key)
        b, V = self.burn_in, self.d
        first = jax.random.randint(kb, (P, b), 0, V)
        A = self.teacher_matrices()
        span_of_slot = np.repeat(np.arange(self.K), self.span_lengths)  # the window's slots, oldest first

        def step(window, k):  # window: (P, b) int, oldest first
            onehot = jax.nn.one_hot(window, V, dtype=jnp.float64)
            agg = jax.ops.segment_sum(jnp.moveaxis(onehot, 1, 0), span_of_slot, self.K)  # (K, P, V)
            logits = jnp.einsum("kpv,kwv->pw", agg, A)
            nxt = jax.random.categorical(k, logits, axis=-1)
            return jnp.concatenate([window[:, 1:], nxt[:, None]], axis=1), nxt

        _, chain = jax.lax.scan(step, first, jax.random.split(kc, self.generated))
        seq = jnp.concatenate([first, chain.T], axis=1)  # (P, T + 1)
        onehot = jax.nn.one_hot(seq, V, dtype=jnp.float64)
        return onehot[:, :-1], onehot[:, 1:]
