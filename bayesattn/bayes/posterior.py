"""The closed-form posterior over the attention logits L (docs/model.md section 2), for one or H heads.

Model: alpha^h = a(L^h) for heads h = 1..H, z_{mu,t} = [z^1; ...; z^H] with z^h_{mu,t} = sum_s alpha^h_ts x_{mu,s},
y_{mu,t} ~ N(V z_{mu,t}, sigma2 I), priors L^h_ts ~ N(0, sigma_A2), V_ij ~ N(0, sigma_V2 / d) (V: (d_out, H d), each
entry with the one-head variance, so lam is the same for every H). Integrating V out exactly,

    log p(L, D) = log N(L; 0, sigma_A2) + tr(C^T (G + lam I)^{-1} C) / (2 sigma2)
                  - (d_out/2) log det(I + G/lam) - (n d_out/2) log(2 pi sigma2) - |Y|^2 / (2 sigma2),

with G = Z^T Z (H d x H d, blocks G^{hh'} = sum_t sum_{s,s'} alpha^h_ts alpha^h'_ts' Sxx_ss'), C = Z^T Y (H d x
d_out, blocks C^h = sum_t sum_s alpha^h_ts Sxy_{s,t}) and lam = d sigma2 / sigma_V2. G and C are contractions of
alpha with sufficient statistics computed once from the data (:class:`SufficientStats`), so one evaluation costs
O(H^2 T^3 + H^2 T^2 d^2 + H^3 d^3), independent of P. The targets Y may be anything (not only a copy).
``log_density`` returns this *normalised* joint log density of (L, data), so it equals the log Gaussian-process
evidence plus the log prior exactly (no dropped constant).

:class:`Posterior`, :class:`Prior` and :class:`SufficientStats` are JAX pytrees, so a posterior can be passed
through ``jit``, ``grad`` (in the prior's variances too) and ``vmap``: posteriors of different P but the same task
shape stack into one batch.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np

from .._validate import check_positive, check_real_array, is_traced
from ..diagnostics.observables import declared, evaluate, order_parameters
from ..models.attention import AttentionKind, AttentionModel, AttentionName
from ..tasks import Dataset, check_dataset
from .statistics import SufficientStats

LOG_2PI = float(np.log(2 * np.pi))


@jax.tree_util.register_pytree_node_class
@dataclass(frozen=True)
class Prior:
    """Prior and noise variances: L_ts ~ N(0, sigma_A2), V_ij ~ N(0, sigma_V2 / d), noise N(0, sigma2).

    sigma2 is also the temperature of the equivalent Langevin training. A pytree with the three variances as
    leaves (so a compiled sampler takes them as arguments and ``jax.grad`` reaches them); concrete values are
    validated when built, traced ones are not.
    """

    sigma_A2: float = 1.0
    sigma_V2: float = 100.0
    sigma2: float = 400.0

    def __post_init__(self):
        for name in ("sigma_A2", "sigma_V2", "sigma2"):
            v = getattr(self, name)
            if not is_traced(v):
                v = check_positive(name, v)
                if not 1e-100 <= v <= 1e100:  # beyond, products of the variances under- or overflow in float64
                    raise ValueError(
                        f"{name}={v!r}: expected a variance in [1e-100, 1e100] (the log density is NaN further out)"
                    )
                object.__setattr__(self, name, v)

    def tree_flatten(self):
        return (self.sigma_A2, self.sigma_V2, self.sigma2), None

    @classmethod
    def tree_unflatten(cls, aux, leaves):
        obj = object.__new__(cls)  # leaves may be tracers or placeholders: no validation here
        for name, v in zip(("sigma_A2", "sigma_V2", "sigma2"), leaves):
            object.__setattr__(obj, name, v)
        return obj

    def lam(self, d: int) -> float:
        """Ridge of the readout, lam = d sigma2 / sigma_V2."""
        return d * self.sigma2 / self.sigma_V2

    def replace(self, **changes) -> Prior:
        return dataclasses.replace(self, **changes)

    def config(self) -> dict:
        return {name: float(getattr(self, name)) for name in ("sigma_A2", "sigma_V2", "sigma2")}


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
    """Posterior over the attention logits L given a dataset, with the readout V integrated out.

    attention: "softmax" | "linear" or a :class:`~bayesattn.models.AttentionModel`; heads: H (default 1). L has
    shape (T, T) for one head and (H, T, T) for H heads (``L_shape``).

    >>> import jax, jax.numpy as jnp, bayesattn as ba
    >>> data = ba.CopyTask(T=8, d=8).sample(jax.random.key(0), P=1000)
    >>> post = ba.Posterior(data, attention="softmax", prior=ba.Prior(1.0, 100.0, 800.0))
    >>> L = 1.0 * post.task.target_pattern  # a weak copy head; beta = P d / (2 sigma2) = 5, where <m> ~ 0.24
    >>> bool(post.log_density(L) > post.log_density(jnp.zeros((8, 8))))
    True
    >>> round(float(post.order_parameters(L)["m"]), 2)
    0.28
    >>> ba.Posterior(data, "softmax", heads=2).L_shape
    (2, 8, 8)
    """

    def __init__(
        self,
        dataset: Dataset,
        attention: AttentionName | AttentionKind | AttentionModel = "softmax",
        prior: Prior | None = None,
        heads: int | None = None,
    ):
        dataset = check_dataset("dataset", dataset)
        if not jax.config.jax_enable_x64:  # switched off after import: float32 loses the phases' O(1) differences
            raise ValueError(
                "jax_enable_x64=False: the posterior needs float64 (import bayesattn switches it on; leave it on)"
            )
        model = AttentionModel.coerce(attention, heads)
        prior = Prior() if prior is None else prior
        if not isinstance(prior, Prior):
            raise ValueError(f"prior={prior!r}: expected a bayesattn Prior")
        # rows without a target never enter the likelihood, even in a Dataset built directly with junk there
        stats = SufficientStats.from_data(dataset.X, dataset.Y, dataset.task.query_mask)
        self._init(dataset.task, model, stats, prior)

    def _init(self, task, model, stats, prior):
        self.task, self.model, self.stats, self.prior = task, model, stats, prior

    # --- pytree protocol: statistics and the prior's variances are leaves; task and attention model static ---
    def tree_flatten(self):
        return (self.stats, self.prior), (self.task, self.model)

    @classmethod
    def tree_unflatten(cls, aux, children):
        obj = object.__new__(cls)
        obj._init(aux[0], aux[1], *children)
        return obj

    def with_prior(self, prior: Prior) -> Posterior:
        """The same data under another prior (statistics reused)."""
        if not isinstance(prior, Prior):
            raise ValueError(f"prior={type(prior).__name__}: expected a bayesattn Prior")
        return Posterior.tree_unflatten((self.task, self.model), (self.stats, prior))

    # --- shapes and views ---
    @property
    def attention(self) -> str:
        """The attention kind's name, "softmax" or "linear" (the model is :attr:`model`)."""
        return self.model.kind

    @property
    def attention_kind(self) -> AttentionKind:
        """The attention kind (:class:`~bayesattn.models.attention.AttentionKind`): its map, order parameter and
        symmetries."""
        return self.model.attention_kind

    @property
    def heads(self) -> int:
        return self.model.heads

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
    def L_shape(self) -> tuple[int, ...]:
        """(T, T) for one head, (H, T, T) for H heads."""
        return self.model.logit_shape(self.T)

    @property
    def key_mask(self) -> np.ndarray:
        return self.model.key_mask(self.task.key_mask)

    @property
    def Sxx(self) -> jax.Array:
        return self.stats.Sxx

    @property
    def Syx(self) -> jax.Array:
        return self.stats.Syx

    @property
    def Sxy(self) -> jax.Array:
        """Sxy[s, t] = sum_mu x_s y_t^T: (T, T, d, d_out), as returned by :func:`sufficient_statistics`."""
        return self.stats.Sxy

    @property
    def yy(self) -> jax.Array:
        return self.stats.yy

    @property
    def n(self) -> jax.Array:
        return self.stats.n

    def __repr__(self):
        return f"Posterior(task={self.task!r}, model={self.model!r}, prior={self.prior!r}, n={self.n})"

    def _check_L_shape(self, L) -> None:
        """L of exactly ``L_shape`` (shapes only: L may be traced, inside ``log_density``)."""
        if tuple(np.shape(L)) != self.L_shape:
            raise ValueError(
                f"L has shape {tuple(np.shape(L))}: expected {self.L_shape} for heads={self.heads}, "
                f"T={self.T} (no broadcasting)"
            )

    def _check_L(self, L):
        self._check_L_shape(L)
        return jnp.asarray(check_real_array("L", L, self.L_shape), jnp.float64)

    def _check_batch_L(self, L):
        shape, want = tuple(np.shape(L)), self.L_shape
        if len(shape) < len(want) or shape[len(shape) - len(want) :] != want:
            raise ValueError(
                f"L has shape {shape}: expected (..., {', '.join(map(str, want))}) for heads={self.heads}, T={self.T}"
            )
        L = check_real_array("L", L, (None,) * (len(shape) - len(want)) + want)  # complex, NaN / inf
        return jnp.asarray(L, jnp.float64)

    # --- attention and observables ---
    def attention_weights(self, L: jax.Array) -> jax.Array:
        """alpha = a(L), the shape of L."""
        return self.model.weights(self._check_L(L), self.task.key_mask)

    def observables(self, L: jax.Array) -> dict:
        """Every observable the task and the attention model declare
        (:func:`bayesattn.diagnostics.observables.declared`); L: (..., *L_shape) gives arrays of shape (...)."""
        alpha = self.model.weights(self._check_batch_L(L), self.task.key_mask)
        return evaluate(declared(self.task, self.model), alpha)

    def order_parameters(self, L: jax.Array) -> dict:
        """{"m", "q", "u"} of a(L) (for H heads: m and u of the best head, q averaged over heads);
        L: (..., *L_shape) gives arrays of shape (...)."""
        if self.heads == 1:
            alpha = self.model.weights(self._check_batch_L(L), self.task.key_mask)
            return order_parameters(alpha, self.task.target_pattern, self.task.query_mask)
        obs = self.observables(L)
        if not {"m", "q", "u"} <= set(obs):
            raise ValueError(
                f"order_parameters: {type(self.task).__name__} with {self.heads} heads has no single m, q, u; its "
                f"observables are {', '.join(sorted(obs))} (observables(L))"
            )
        return {k: obs[k] for k in ("m", "q", "u")}

    # --- the closed form ---
    def gram(self, L: jax.Array) -> tuple[jax.Array, jax.Array]:
        """G = Z^T Z: (H d, H d) and C = Z^T Y: (H d, d_out) from the sufficient statistics (H = 1: (d, d), (d, d_out))."""
        return self._gram(self._check_L(L))

    def _gram(self, L):
        """:meth:`gram` of an L already checked (by the caller's ``_check_L``)."""
        T, d, H = self.T, self.d, self.heads
        alpha = self.model.weights(L, self.task.key_mask).reshape(H, T, T)
        aw = alpha * jnp.asarray(self.task.query_mask, alpha.dtype)[:, None]
        # (aw^T alpha) over t for every head pair, as one (T, H T)^T (T, H T) product: [(h, s), (h', s')]
        flat = lambda a: jnp.transpose(a, (1, 0, 2)).reshape(T, H * T)  # noqa: E731
        A2 = _crossprod(flat(aw), flat(alpha)).reshape(H, T, H, T).transpose(0, 2, 1, 3)
        # flat mat-vec products: XLA's CPU dot with two contracting axes is ~10x slower than one plain GEMV
        G = (A2.reshape(H * H, T * T) @ self.Sxx.reshape(T * T, d * d)).reshape(H, H, d, d)
        G = G.transpose(0, 2, 1, 3).reshape(H * d, H * d)
        # Syx is Sxy stored (t, s)-major, so that aw enters untransposed: a transpose of aw here (and
        # its adjoint in the gradient) cost 20 us of 65 in a jitted value-and-grad at T = 32, d = 8
        C = (aw.reshape(H, T * T) @ self.Syx.reshape(T * T, -1)).reshape(H * d, -1)
        return G, C

    def _readout(self, L):
        """Cholesky factor of G + lam I and C (L checked by the caller)."""
        G, C = self._gram(L)
        lam = self.prior.lam(self.d)
        chol = jnp.linalg.cholesky(G + lam * jnp.eye(G.shape[0]))
        return chol, C

    def log_prior(self, L: jax.Array) -> jax.Array:
        """log N(L; 0, sigma_A2 I), normalised over all H T^2 entries."""
        # jnp.log (not np.log) here and below: the samplers may pass the prior's variances as traced jit arguments
        L = self._check_L(L)
        sA2 = self.prior.sigma_A2
        return -0.5 * jnp.sum(L**2) / sA2 - 0.5 * L.size * (LOG_2PI + jnp.log(sA2))

    def log_likelihood(self, L: jax.Array) -> jax.Array:
        """log p(D | L) with V integrated out: the log Gaussian-process evidence (normalised)."""
        L = self._check_L(L)
        s2, lam = self.prior.sigma2, self.prior.lam(self.d)
        G, C = self._gram(L)
        k = G.shape[0]
        fit, logdet_K = _ridge_terms(G + lam * jnp.eye(k), C)
        logdet = logdet_K - k * jnp.log(lam)  # log det(I + G / lam)
        return (
            (fit - self.yy) / (2 * s2) - 0.5 * self.d_out * logdet - 0.5 * self.n * self.d_out * (LOG_2PI + jnp.log(s2))
        )

    def log_density(self, L: jax.Array) -> jax.Array:
        """log p(L, D) = log prior + log evidence; equals log p(L | D) up to the L-independent log p(D).

        L: ``L_shape``. Jit-, grad- and vmap-able (vmap over L or over stacked posteriors).
        """
        return self.log_prior(L) + self.log_likelihood(L)

    # --- the readout given L ---
    def readout_posterior(self, L: jax.Array) -> tuple[jax.Array, jax.Array]:
        """Conditional posterior of V given L: mean (d_out, H d) and the covariance (H d, H d) shared by
        every row of V (rows are independent): V_k | L, D ~ N(mean[k], cov)."""
        chol, C = self._readout(self._check_L(L))
        mean = jsl.cho_solve((chol, True), C).T
        cov = self.prior.sigma2 * jsl.cho_solve((chol, True), jnp.eye(chol.shape[0]))
        return mean, cov

    def features(self, L: jax.Array, X: jax.Array) -> jax.Array:
        """The readout's inputs z = [z^1, ..., z^H]: (P', T, H d) for sequences X: (P', T, d)."""
        X = check_real_array("X", X, (None, self.T, self.d))
        alpha = self.attention_weights(L).reshape(self.heads, self.T, self.T)
        Z = jnp.einsum("hts,psi->pthi", alpha, X)
        return Z.reshape(Z.shape[0], self.T, self.heads * self.d)  # explicit sizes: -1 cannot be inferred at P' = 0

    def predict(self, L: jax.Array, X: jax.Array) -> tuple[jax.Array, jax.Array]:
        """Posterior predictive of the outputs for new sequences X: (P', T, d) at fixed L.

        Returns mean (P', T, d_out) and variance (P', T) of each output coordinate (noise included).
        """
        X = check_real_array("X", X, (None, self.T, self.d))
        mean_V, cov_V = self.readout_posterior(L)
        Z = self.features(L, X)
        return Z @ mean_V.T, jnp.einsum("pti,ij,ptj->pt", Z, cov_V, Z) + self.prior.sigma2


def _direct_features(model: AttentionModel, task, L, X) -> jax.Array:
    """z = [z^1, ..., z^H]: (P, T, H d) straight from the data (the references below; cost grows with P)."""
    alpha = model.weights(L, task.key_mask).reshape(model.heads, task.T, task.T)
    Z = jnp.einsum("hts,psi->pthi", alpha, X)
    return Z.reshape(Z.shape[0], task.T, model.heads * task.d)  # explicit sizes, as in Posterior.features


def _reference_inputs(model: AttentionModel, dataset, prior, L, V=None) -> Dataset:
    """The references' arguments: a Dataset, a Prior, L of the model's logit shape and V: (d_out, H d), both real
    and, when concrete, finite; ValueError naming the first that is not (a V of another shape broadcasts). Static
    checks only for traced values, so that the references stay jit-able. Returns the dataset (arrays given as
    lists as arrays)."""
    dataset = check_dataset("dataset", dataset)
    if not isinstance(prior, Prior):
        raise ValueError(f"prior={type(prior).__name__}: expected a bayesattn Prior")
    task = dataset.task
    want = model.logit_shape(task.T)
    if tuple(np.shape(L)) != want:
        raise ValueError(f"L has shape {tuple(np.shape(L))}: expected {want} (no broadcasting)")
    if V is not None and tuple(np.shape(V)) != (task.d_out, model.heads * task.d):
        raise ValueError(
            f"V has shape {tuple(np.shape(V))}: expected {(task.d_out, model.heads * task.d)} (d_out, H d)"
        )
    check_real_array("L", L, want)  # complex, NaN / inf (when concrete)
    if V is not None:
        check_real_array("V", V, (task.d_out, model.heads * task.d))
    return dataset


def joint_log_density(
    L: jax.Array,
    V: jax.Array,
    dataset: Dataset,
    attention: AttentionName | AttentionKind | AttentionModel,
    prior: Prior,
    heads: int | None = None,
) -> jax.Array:
    """Reference: log p(L, V, D) computed directly from the data (cost grows with P).

    L: (T, T) or (H, T, T), V: (d_out, H d). Integrating exp of this over V gives ``Posterior.log_density``.
    """
    model = AttentionModel.coerce(attention, heads)
    dataset = _reference_inputs(model, dataset, prior, L, V)
    L, V = jnp.asarray(L), jnp.asarray(V)
    task = dataset.task
    F = _direct_features(model, task, L, dataset.X) @ V.T
    qm = jnp.asarray(task.query_mask, F.dtype)[None, :, None]
    r2 = jnp.sum(((dataset.Y - F) * qm) ** 2)
    s2, sA2, sV = prior.sigma2, prior.sigma_A2, prior.sigma_V2 / task.d
    return (
        -0.5 * jnp.sum(L**2) / sA2
        - 0.5 * L.size * (LOG_2PI + jnp.log(sA2))
        - 0.5 * jnp.sum(V**2) / sV
        - 0.5 * V.size * (LOG_2PI + jnp.log(sV))
        - 0.5 * r2 / s2
        - 0.5 * dataset.n * task.d_out * (LOG_2PI + jnp.log(s2))
    )


def gp_log_evidence(
    L: jax.Array,
    dataset: Dataset,
    attention: AttentionName | AttentionKind | AttentionModel,
    prior: Prior,
    heads: int | None = None,
) -> jax.Array:
    """Baseline: the n x n Gaussian-process evidence log p(D | L) by a dense Cholesky (cost O(n^3)), on the
    concatenated features of all heads (each readout entry with prior variance sigma_V2 / d).

    Used by the benchmarks as the brute-force path the closed form replaces.
    """
    model = AttentionModel.coerce(attention, heads)
    dataset = _reference_inputs(model, dataset, prior, L)
    L = jnp.asarray(L)
    task = dataset.task
    rows = np.flatnonzero(task.query_mask)
    Zf = _direct_features(model, task, L, dataset.X)
    n = dataset.P * rows.size  # explicit sizes: -1 cannot be inferred at P = 0
    Z = Zf[:, rows].reshape(n, Zf.shape[-1])
    Y = dataset.Y[:, rows].reshape(n, task.d_out)
    K = (prior.sigma_V2 / task.d) * Z @ Z.T + prior.sigma2 * jnp.eye(n)
    chol = jnp.linalg.cholesky(K)
    w = jsl.solve_triangular(chol, Y, lower=True)
    return -0.5 * jnp.sum(w**2) - task.d_out * jnp.sum(jnp.log(jnp.diag(chol))) - 0.5 * n * task.d_out * LOG_2PI


def check_posterior(posterior) -> Posterior:
    """``posterior`` as it is when it is a :class:`Posterior`; ValueError naming its type otherwise."""
    if not isinstance(posterior, Posterior):
        raise ValueError(f"posterior={type(posterior).__name__}: expected a bayesattn Posterior")
    return posterior
