"""The closed-form posterior over the attention matrix L (docs/model.md section 2).

Model: alpha = a(L), z_{mu,t} = sum_s alpha_ts x_{mu,s}, y_{mu,t} ~ N(V z_{mu,t}, sigma2 I),
priors L_ts ~ N(0, sigma_A2), V_ij ~ N(0, sigma_V2 / d). Integrating V out exactly,

    log p(L, D) = log N(L; 0, sigma_A2) + tr(C^T (G + lam I)^{-1} C) / (2 sigma2)
                  - (d_out/2) log det(I + G/lam) - (n d_out/2) log(2 pi sigma2) - |Y|^2 / (2 sigma2),

with G = Z^T Z, C = Z^T Y, lam = d sigma2 / sigma_V2. G and C are contractions of alpha with
sufficient statistics computed once from the data, so one evaluation costs O(T^3 + T^2 d^2 + d^3),
independent of P. ``log_density`` returns this *normalised* joint log density of (L, data), so it
equals the log Gaussian-process evidence plus the log prior exactly (no dropped constant).

:class:`Posterior` is a JAX pytree (the statistics are leaves), so it can be passed through ``jit``
and ``vmap``: posteriors of different P but the same task shape stack into one batch.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np

from .._validate import check_array, check_choice, check_positive
from ..models.attention import ATTENTIONS, AttentionKind, attention_weights
from ..diagnostics.observables import order_parameters
from ..tasks import Dataset

LOG_2PI = float(np.log(2 * np.pi))


@dataclass(frozen=True)
class Prior:
    """Prior and noise variances: L_ts ~ N(0, sigma_A2), V_ij ~ N(0, sigma_V2 / d), noise N(0, sigma2).

    sigma2 is also the temperature of the equivalent Langevin training.
    """

    sigma_A2: float = 1.0
    sigma_V2: float = 100.0
    sigma2: float = 400.0

    def __post_init__(self):
        for name in ("sigma_A2", "sigma_V2", "sigma2"):
            object.__setattr__(self, name, check_positive(name, getattr(self, name)))

    def lam(self, d: int) -> float:
        """Ridge of the readout, lam = d sigma2 / sigma_V2."""
        return d * self.sigma2 / self.sigma_V2

    def replace(self, **changes) -> "Prior":
        return dataclasses.replace(self, **changes)

    def config(self) -> dict:
        return dataclasses.asdict(self)


def sufficient_statistics(X: jax.Array, Y: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Sxx[s, s'] = sum_mu x_s x_s'^T: (T, T, d, d); Sxy[s, t] = sum_mu x_s y_t^T: (T, T, d, d_out);
    yy = |Y|^2. X: (P, T, d), Y: (P, T, d_out)."""
    P, T, d = X.shape
    d_out = Y.shape[-1]
    Xf = X.reshape(P, T * d)
    # explicit sizes, not -1: reshape cannot infer an axis when P = 0 (the no-data posterior)
    Sxx = (Xf.T @ Xf).reshape(T, d, T, d).transpose(0, 2, 1, 3)
    Sxy = (Xf.T @ Y.reshape(P, T * d_out)).reshape(T, d, T, d_out).transpose(0, 2, 1, 3)
    return Sxx, Sxy, jnp.sum(Y**2)


@jax.custom_vjp
def _crossprod(a: jax.Array, b: jax.Array) -> jax.Array:
    """a^T b for (n, k) matrices, arranged so that every product XLA:CPU runs is a plain or a B^T product.

    ``a.T @ b`` contracts the leading axis of both operands; XLA folds any transpose into that contraction
    and runs it through a generic path: 11 us for 32 x 32 inside the value-and-grad at T = 32, against 2.4 us
    for the same product in plain form. Here the forward pass transposes ``a`` behind an optimisation barrier
    and the backward pass is written as b g^T and a g, both plain forms.
    """
    return _crossprod_fwd(a, b)[0]


def _crossprod_fwd(a, b):
    return jax.lax.optimization_barrier(a.T) @ b, (a, b)


def _crossprod_bwd(res, g):
    a, b = res
    return b @ jax.lax.optimization_barrier(g.T), a @ g  # b g^T as a plain product too (6.8 -> 3.4 us)


_crossprod.defvjp(_crossprod_fwd, _crossprod_bwd)


@jax.custom_vjp
def _ridge_terms(K: jax.Array, C: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(tr(C^T K^{-1} C), log det K) for a symmetric positive-definite K: (d, d) and C: (d, d_out).

    Written with its adjoint, dK = -g_fit M M^T + g_logdet K^{-1}, dC = 2 g_fit M (M = K^{-1} C): one
    Cholesky and one solve, instead of differentiating through the Cholesky factorisation (about 4 us less
    per value-and-grad at d = 8 on XLA:CPU).
    """
    return _ridge_terms_fwd(K, C)[0]


def _ridge_terms_fwd(K, C):
    chol = jnp.linalg.cholesky(K)
    Kinv = jsl.cho_solve((chol, True), jnp.eye(K.shape[0], dtype=K.dtype))
    M = Kinv @ C
    return (jnp.sum(C * M), 2.0 * jnp.sum(jnp.log(jnp.diag(chol)))), (Kinv, M)


def _ridge_terms_bwd(res, g):
    Kinv, M = res
    g_fit, g_logdet = g
    return -g_fit * (M @ M.T) + g_logdet * Kinv, 2.0 * g_fit * M


_ridge_terms.defvjp(_ridge_terms_fwd, _ridge_terms_bwd)


@jax.tree_util.register_pytree_node_class
class Posterior:
    """Posterior over the attention matrix L: (T, T) given a dataset, with the readout V integrated out.

    >>> import jax, jax.numpy as jnp, bayesattn as ba
    >>> data = ba.CopyTask(T=8, d=8).sample(jax.random.key(0), P=1000)
    >>> post = ba.Posterior(data, attention="softmax", prior=ba.Prior(1.0, 100.0, 800.0))
    >>> L = 1.0 * post.task.target_pattern  # a weak copy head; beta = P d / (2 sigma2) = 5, where <m> ~ 0.24
    >>> bool(post.log_density(L) > post.log_density(jnp.zeros((8, 8))))
    True
    >>> round(float(post.order_parameters(L)["m"]), 2)
    0.28
    """

    def __init__(self, dataset: Dataset, attention: AttentionKind = "softmax", prior: Prior | None = None):
        if not isinstance(dataset, Dataset):
            raise ValueError(f"dataset={type(dataset).__name__}: expected a bayesattn Dataset (task.sample(key, P))")
        check_choice("attention", attention, ATTENTIONS)
        prior = Prior() if prior is None else prior
        if not isinstance(prior, Prior):
            raise ValueError(f"prior={prior!r}: expected a bayesattn Prior")
        check_array("dataset.X", dataset.X, (None, dataset.T, dataset.d))
        check_array("dataset.Y", dataset.Y, (dataset.P, dataset.T, dataset.d_out))
        # rows without a target never enter the likelihood, even in a Dataset built directly with junk there
        Y = jnp.asarray(dataset.Y, jnp.float64) * jnp.asarray(dataset.task.query_mask, jnp.float64)[None, :, None]
        Sxx, Sxy, yy = sufficient_statistics(jnp.asarray(dataset.X, jnp.float64), Y)
        Syx = jnp.swapaxes(Sxy, 0, 1)
        self._init(dataset.task, attention, prior, Sxx, Syx, yy, jnp.asarray(dataset.n, jnp.float64))

    def _init(self, task, attention, prior, Sxx, Syx, yy, n):
        self.task, self.attention, self.prior = task, attention, prior
        self.Sxx, self.Syx, self.yy, self.n = Sxx, Syx, yy, n

    @property
    def Sxy(self) -> jax.Array:
        """Sxy[s, t] = sum_mu x_s y_t^T: (T, T, d, d_out), as returned by :func:`sufficient_statistics`."""
        return jnp.swapaxes(self.Syx, 0, 1)

    # --- pytree protocol: statistics are leaves, configuration is static ---
    def tree_flatten(self):
        """Leaves (Sxx, Syx, yy, n); Syx[t, s] = Sxy[s, t] is the layout the closed form reads."""
        return (self.Sxx, self.Syx, self.yy, self.n), (self.task, self.attention, self.prior)

    @classmethod
    def tree_unflatten(cls, aux, leaves):
        obj = object.__new__(cls)
        obj._init(*aux, *leaves)
        return obj

    def with_prior(self, prior: Prior) -> "Posterior":
        """The same data under another prior (statistics reused)."""
        return Posterior.tree_unflatten((self.task, self.attention, prior), self.tree_flatten()[0])

    @property
    def T(self) -> int:
        return self.task.T

    @property
    def d(self) -> int:
        return self.task.d

    @property
    def d_out(self) -> int:
        return self.task.d_out

    def __repr__(self):
        return f"Posterior(task={self.task!r}, attention={self.attention!r}, prior={self.prior!r}, n={self.n})"

    def _check_L(self, L):
        return jnp.asarray(check_array("L", L, (self.T, self.T)), jnp.float64)

    # --- attention and order parameters ---
    def attention_weights(self, L: jax.Array) -> jax.Array:
        """alpha = a(L): (T, T)."""
        return attention_weights(self._check_L(L), self.attention, self.task.key_mask)

    def order_parameters(self, L: jax.Array) -> dict:
        """{"m", "q", "u"} of a(L); L: (..., T, T) gives arrays of shape L.shape[:-2]."""
        shape = tuple(np.shape(L))
        if len(shape) < 2 or shape[-2:] != (self.T, self.T):
            raise ValueError(f"L has shape {shape}: expected (..., {self.T}, {self.T})")
        check_array("L", L, (None,) * (len(shape) - 2) + (self.T, self.T))  # NaN / inf
        alpha = attention_weights(jnp.asarray(L, jnp.float64), self.attention, self.task.key_mask)
        return order_parameters(alpha, self.task.target_pattern, self.task.query_mask)

    # --- the closed form ---
    def gram(self, L: jax.Array) -> tuple[jax.Array, jax.Array]:
        """G = Z^T Z: (d, d) and C = Z^T Y: (d, d_out) from the sufficient statistics."""
        alpha = attention_weights(L, self.attention, self.task.key_mask)
        aw = alpha * jnp.asarray(self.task.query_mask, alpha.dtype)[:, None]
        A2 = _crossprod(aw, alpha)  # (alpha^T W alpha)_{ss'}
        T, d = self.T, self.d
        # flat mat-vec products: XLA's CPU dot with two contracting axes is ~10x slower than one plain GEMV
        G = (A2.reshape(1, T * T) @ self.Sxx.reshape(T * T, d * d)).reshape(d, d)
        # Syx is Sxy stored (t, s)-major, so that aw enters untransposed: a transpose of aw here (and
        # its adjoint in the gradient) cost 20 us of 65 in a jitted value-and-grad at T = 32, d = 8
        C = (aw.reshape(1, T * T) @ self.Syx.reshape(T * T, -1)).reshape(d, -1)
        return G, C

    def _readout(self, L):
        """Cholesky factor of G + lam I and C."""
        G, C = self.gram(L)
        lam = self.prior.lam(self.d)
        chol = jnp.linalg.cholesky(G + lam * jnp.eye(self.d))
        return chol, C

    def log_prior(self, L: jax.Array) -> jax.Array:
        """log N(L; 0, sigma_A2 I), normalised over all T^2 entries."""
        # jnp.log (not np.log) here and below: the samplers may pass the prior's variances as traced jit arguments
        L = self._check_L(L)
        sA2 = self.prior.sigma_A2
        return -0.5 * jnp.sum(L**2) / sA2 - 0.5 * L.size * (LOG_2PI + jnp.log(sA2))

    def log_likelihood(self, L: jax.Array) -> jax.Array:
        """log p(D | L) with V integrated out: the log Gaussian-process evidence (normalised)."""
        L = self._check_L(L)
        s2, lam = self.prior.sigma2, self.prior.lam(self.d)
        G, C = self.gram(L)
        fit, logdet_K = _ridge_terms(G + lam * jnp.eye(self.d), C)
        logdet = logdet_K - self.d * jnp.log(lam)  # log det(I + G / lam)
        return (fit - self.yy) / (2 * s2) - 0.5 * self.d_out * logdet - 0.5 * self.n * self.d_out * (LOG_2PI + jnp.log(s2))

    def log_density(self, L: jax.Array) -> jax.Array:
        """log p(L, D) = log prior + log evidence; equals log p(L | D) up to the L-independent log p(D).

        L: (T, T). Jit-, grad- and vmap-able (vmap over L or over stacked posteriors).
        """
        return self.log_prior(L) + self.log_likelihood(L)

    # --- the readout given L ---
    def readout_posterior(self, L: jax.Array) -> tuple[jax.Array, jax.Array]:
        """Conditional posterior of V given L: mean (d_out, d) and the covariance (d, d) shared by
        every row of V (rows are independent): V_k | L, D ~ N(mean[k], cov)."""
        chol, C = self._readout(self._check_L(L))
        mean = jsl.cho_solve((chol, True), C).T
        cov = self.prior.sigma2 * jsl.cho_solve((chol, True), jnp.eye(self.d))
        return mean, cov

    def predict(self, L: jax.Array, X: jax.Array) -> tuple[jax.Array, jax.Array]:
        """Posterior predictive of the outputs for new sequences X: (P', T, d) at fixed L.

        Returns mean (P', T, d_out) and variance (P', T) of each output coordinate (noise included).
        """
        X = check_array("X", X, (None, self.T, self.d))
        mean_V, cov_V = self.readout_posterior(L)
        Z = jnp.einsum("ts,psi->pti", self.attention_weights(L), X)
        return Z @ mean_V.T, jnp.einsum("pti,ij,ptj->pt", Z, cov_V, Z) + self.prior.sigma2


def joint_log_density(L: jax.Array, V: jax.Array, dataset: Dataset, attention: AttentionKind, prior: Prior) -> jax.Array:
    """Reference: log p(L, V, D) computed directly from the data (cost grows with P).

    L: (T, T), V: (d_out, d). Integrating exp of this over V gives ``Posterior.log_density``.
    """
    task = dataset.task
    T, d = task.T, task.d
    alpha = attention_weights(L, attention, task.key_mask)
    F = jnp.einsum("ts,psi,ki->ptk", alpha, dataset.X, V)
    qm = jnp.asarray(task.query_mask, F.dtype)[None, :, None]
    r2 = jnp.sum(((dataset.Y - F) * qm) ** 2)
    s2, sA2, sV = prior.sigma2, prior.sigma_A2, prior.sigma_V2 / d
    return (
        -0.5 * jnp.sum(L**2) / sA2 - 0.5 * T * T * (LOG_2PI + np.log(sA2))
        - 0.5 * jnp.sum(V**2) / sV - 0.5 * V.size * (LOG_2PI + np.log(sV))
        - 0.5 * r2 / s2 - 0.5 * dataset.n * task.d_out * (LOG_2PI + np.log(s2))
    )


def gp_log_evidence(L: jax.Array, dataset: Dataset, attention: AttentionKind, prior: Prior) -> jax.Array:
    """Baseline: the n x n Gaussian-process evidence log p(D | L) by a dense Cholesky (cost O(n^3)).

    Used by the benchmarks as the brute-force path the closed form replaces.
    """
    task = dataset.task
    alpha = attention_weights(L, attention, task.key_mask)
    rows = np.flatnonzero(task.query_mask)
    Z = jnp.einsum("ts,psi->pti", alpha, dataset.X)[:, rows].reshape(-1, task.d)
    Y = dataset.Y[:, rows].reshape(-1, task.d_out)
    n = Z.shape[0]
    K = (prior.sigma_V2 / task.d) * Z @ Z.T + prior.sigma2 * jnp.eye(n)
    chol = jnp.linalg.cholesky(K)
    w = jsl.solve_triangular(chol, Y, lower=True)
    return -0.5 * jnp.sum(w**2) - task.d_out * jnp.sum(jnp.log(jnp.diag(chol))) - 0.5 * n * task.d_out * LOG_2PI
