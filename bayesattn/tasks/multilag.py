"""Multi-lag copy (regression): the target mixes the tokens of several spans of past positions
(docs/results/staircase.md section 1).

    y_t = sum_k w_k U_k xbar_{t,k},   xbar_{t,k} = mean (or sum) of x_{t-l} over the lags l of span k,

with U_k orthogonal (drawn from ``seed``) or the identity. H >= K softmax heads solve it exactly (head k puts
equal weight on span k); with fewer heads, or fewer data, the posterior picks the spans that pay most.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import jax
import jax.numpy as jnp
import numpy as np

from .._validate import check_choice, check_finite, check_int
from .base import BOUNDARIES, TOKENS, Boundary, Task, TokenKind, draw_tokens, register_task


def check_spans(name: str, spans, T: int) -> tuple[tuple[int, ...], ...]:
    """Spans as a tuple of tuples of lags: every span non-empty, lags integers in 1..T-1, no lag in two spans."""
    try:
        spans = tuple(
            tuple(int(l) if isinstance(l, (int, np.integer)) and not isinstance(l, bool) else l for l in span)
            for span in spans
        )
    except TypeError:
        raise ValueError(f"{name}={spans!r}: expected a sequence of spans, each a sequence of lags") from None
    if not spans:
        raise ValueError(f"{name}={spans!r}: expected at least one span")
    seen: set[int] = set()
    for k, span in enumerate(spans):
        if not span:
            raise ValueError(f"{name}={spans!r}: span {k} is empty; expected at least one lag per span")
        for lag in span:
            check_int(f"{name}[{k}] lag", lag, minimum=1, maximum=T - 1)
            if lag in seen:
                raise ValueError(f"{name}={spans!r}: lag {lag} is in two spans; expected disjoint spans")
            seen.add(lag)
    return spans


def span_name(span: tuple[int, ...]) -> str:
    """'lag3' for one lag, 'lags3-4' for several (the observables are named 'mass_h0:lag3', ...)."""
    return f"lag{span[0]}" if len(span) == 1 else "lags" + "-".join(map(str, span))


def random_orthogonal(key: jax.Array, K: int, d: int) -> jax.Array:
    """(K, d, d) independent orthogonal matrices: the SVD of a Gaussian matrix with its singular values set to 1
    (U Vh, Haar distributed), as the paper's teacher draws them."""
    A = jax.random.normal(key, (K, d, d), dtype=jnp.float64)
    U, _, Vh = jnp.linalg.svd(A)
    return U @ Vh


@register_task
@dataclass(frozen=True)
class MultiLagCopyTask(Task):
    """Multi-lag copy: y_t = sum_k weights[k] U_k xbar_{t,k}, xbar_{t,k} the tokens of span k aggregated.

    xbar_{t,k} is the mean (or sum) of x_{t-l} over the lags l of span k, and U_k is orthogonal (drawn from
    ``seed``) or the identity. H >= K softmax heads solve it exactly (head k puts equal weight on span k); with
    fewer heads, or fewer data, the posterior picks the spans that pay most (docs/results/staircase.md section 1).
    Cyclic: t - l mod T; causal: rows t < max lag have no target (query_mask False).
    target_patterns: one indicator pattern per span (1 on every key of the span), named "lag3" for one lag and
    "lags3-4" for several, so "mass" is the attention mass a head puts on the span.

    Parameters
    ----------
    T : int
        Sequence length (>= 2).
    d : int
        Token dimension (>= 1).
    spans : tuple of tuple of int, default ((1,), (2,))
        Lags of each span, e.g. ((1,), (2,)) (two single lags) or ((1, 2), (3, 4)); lags in 1..T-1, every span
        non-empty, no lag in two spans.
    weights : tuple of float, default (1.0, 0.5)
        One finite weight per span.
    aggregate : {"mean", "sum"}, default "mean"
        Mean or sum of the span's tokens.
    rotations : {"identity", "orthogonal"}, default "identity"
        U_k = I, or independent Haar-orthogonal matrices drawn from ``seed``.
    seed : int, default 0
        Seed of the rotations (>= 0).
    tokens : {"gaussian", "onehot"}, default "gaussian"
        Token distribution, as in :class:`CopyTask`.
    boundary : {"cyclic", "causal"}, default "cyclic"
        Which keys each query sees, as in :class:`CopyTask`.

    Attributes
    ----------
    K : int
        Number of spans.
    max_lag : int
        The largest lag of any span.

    Raises
    ------
    ValueError
        If the spans are not as above, weights do not give one finite number per span, or any other field
        is out of range or not one of its choices.

    Examples
    --------
    >>> import jax, bayesattn as ba
    >>> task = ba.MultiLagCopyTask(T=5, d=2, spans=((1,), (2,)), weights=(1.0, 0.5))
    >>> ds = task.sample(jax.random.key(0), P=3)
    >>> bool(jax.numpy.allclose(ds.Y[:, 2], ds.X[:, 1] + 0.5 * ds.X[:, 0]))
    True
    """

    spans: tuple = ((1,), (2,))
    weights: tuple = (1.0, 0.5)
    aggregate: Literal["mean", "sum"] = "mean"
    rotations: Literal["identity", "orthogonal"] = "identity"
    seed: int = 0
    tokens: TokenKind = "gaussian"
    boundary: Boundary = "cyclic"

    def __post_init__(self):
        super().__post_init__()
        object.__setattr__(self, "spans", check_spans("spans", self.spans, self.T))
        if isinstance(self.weights, (str, bytes)) or not np.iterable(self.weights):  # "12" was read as (1.0, 2.0)
            raise ValueError(f"weights={self.weights!r}: expected a sequence of numbers, one per span")
        w = tuple(check_finite(f"weights[{k}]", x) for k, x in enumerate(self.weights))  # no text, no bool
        if len(w) != len(self.spans):
            raise ValueError(
                f"weights={self.weights!r}: has {len(w)} entries; expected {len(self.spans)} "
                f"(one per span of spans={self.spans})"
            )
        object.__setattr__(self, "weights", w)
        check_choice("aggregate", self.aggregate, ("mean", "sum"))
        check_choice("rotations", self.rotations, ("identity", "orthogonal"))
        object.__setattr__(self, "seed", check_int("seed", self.seed, minimum=0))
        check_choice("tokens", self.tokens, TOKENS)
        check_choice("boundary", self.boundary, BOUNDARIES)

    @property
    def K(self) -> int:
        return len(self.spans)

    @property
    def max_lag(self) -> int:
        return max(max(s) for s in self.spans)

    @property
    def key_mask(self) -> np.ndarray:
        full = np.ones((self.T, self.T), dtype=bool)
        return full if self.boundary == "cyclic" else np.tril(full)

    @property
    def query_mask(self) -> np.ndarray:
        qm = np.ones(self.T, dtype=bool)
        if self.boundary == "causal":
            qm[: self.max_lag] = False
        return qm

    def span_matrix(self, k: int) -> np.ndarray:
        """(T, T) indicator of span k: [t, s] = 1 where t - s (mod T when cyclic) is a lag of span k."""
        t = np.arange(self.T)
        pat = np.zeros((self.T, self.T))
        for lag in self.spans[k]:
            pat[t, (t - lag) % self.T] = 1.0
        return pat * self.query_mask[:, None]

    @property
    def target_patterns(self) -> dict[str, np.ndarray]:
        return {span_name(s): self.span_matrix(k) for k, s in enumerate(self.spans)}

    def rotation_matrices(self) -> jax.Array:
        """(K, d, d): U_k (the identity, or orthogonal matrices drawn from ``seed``)."""
        if self.rotations == "identity":
            return jnp.broadcast_to(jnp.eye(self.d), (self.K, self.d, self.d))
        return random_orthogonal(jax.random.key(self.seed), self.K, self.d)

    def readout(self) -> jax.Array:
        """(d, K d): the readout [w_1 U_1, ..., w_K U_K] that, with head k on span k (mean aggregate), gives Y."""
        U = self.rotation_matrices()
        return jnp.concatenate([w * U[k] for k, w in enumerate(self.weights)], axis=1)

    def _sample(self, key, P):
        X = draw_tokens(key, (P, self.T), self.d, self.tokens)
        U = self.rotation_matrices()
        Y = jnp.zeros_like(X)
        for k, span in enumerate(self.spans):
            A = jnp.asarray(self.span_matrix(k))
            if self.aggregate == "mean":
                A = A / len(span)
            Y = Y + self.weights[k] * jnp.einsum("ts,psi,ji->ptj", A, X, U[k])
        return X, Y
