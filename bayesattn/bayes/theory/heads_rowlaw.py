"""Row laws of H independent heads tilted by their lag masses and overlaps (docs/theory.md section 12).

One query row t of H heads has the statistics s = (a_hk, c_hh'): a_hk = alpha_h[t, t - k] (k = 1..K) and
c_hh' = sum_s alpha_h[t, s] alpha_h'[t, s] (h <= h'; c_hh = b_h). Under the prior the H rows of logits are
independent N(0, sigma_A2 I_T); the cumulant generating function of the tilted row law is

    Lambda(lam) = log E_prior exp(lam . s),

and its gradient / Hessian are the tilted means / covariance of s. The overlap tilts (h != h') couple the heads
within a row, so the row law does not factorise over heads.

- linear (alpha = l / sqrt(T)): the tilted law is Gaussian, position by position, with the H x H precision
  sigma_A2^{-1} I - (2 / T) G (G_hh = lam_hh, G_hh' = lam_hh' / 2) and a mean shift on the K source positions,
  so Lambda is closed form (:func:`linear_cgf`).
- softmax: Lambda by importance sampling over whole rows with fixed random numbers (so Lambda is a smooth,
  deterministic function of lam, and minimisation works on it). Per head the proposal is a mixture over which
  lag the head copies (none, or lag k with its source logit from a Gaussian fitted to the tilted law's copying
  rows); the other logits come from the prior. The estimator is unbiased for any proposal, the proposal only
  sets its variance (the effective sample size is reported).
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import logsumexp

from ..._batching import map_batched
from ...models.attention import LINEAR, SOFTMAX


def n_stats(H: int, K: int) -> int:
    """The number of row statistics of H heads on K lags: H K lag masses and H (H + 1) / 2 overlaps."""
    return H * K + H * (H + 1) // 2


def unpack(x, H: int, K: int, xp=jnp):
    """x = (m_hk row-major, upper triangle of Q incl. the diagonal, row-major) -> m (..., H, K), Q (..., H, H)."""
    x = xp.asarray(x)
    m = x[..., : H * K].reshape(*x.shape[:-1], H, K)
    iu = np.triu_indices(H)
    up = x[..., H * K :]
    Q = xp.zeros((*x.shape[:-1], H, H), dtype=x.dtype)
    if xp is jnp:
        Q = Q.at[..., iu[0], iu[1]].set(up).at[..., iu[1], iu[0]].set(up)
    else:
        Q[..., iu[0], iu[1]] = up
        Q[..., iu[1], iu[0]] = up
    return m, Q


def pack(m, Q):
    """m (..., H, K), Q (..., H, H) -> x (..., n_stats): the inverse of :func:`unpack` (numpy)."""
    m, Q = np.asarray(m, np.float64), np.asarray(Q, np.float64)
    H = m.shape[-2]
    iu = np.triu_indices(H)
    return np.concatenate([m.reshape(*m.shape[:-2], -1), Q[..., iu[0], iu[1]]], axis=-1)


# ---------------------------------------------------------------------------------------------- linear
def linear_cgf(lam, H: int, K: int, T: int, sigma_A2: float):
    """Lambda(lam) of the Gaussian row law of H linear heads (alpha = l / sqrt(T)); +inf where the tilted
    precision is not positive definite. jax-differentiable (gradient = tilted means, Hessian = covariance)."""
    theta, G = unpack(lam, H, K)
    Gs = 0.5 * (G + jnp.diag(jnp.diag(G)))  # lam . c = sum_{h<=h'} lam_hh' l_h.l_h' / T = l^T Gs l / T
    Pm = jnp.eye(H) / sigma_A2 - 2.0 * Gs / T
    ev = jnp.linalg.eigvalsh(Pm)
    chol = jnp.linalg.cholesky(jnp.where(jnp.all(ev > 0), Pm, jnp.eye(H)))
    logdet = 2.0 * jnp.sum(jnp.log(jnp.diag(chol))) + H * jnp.log(sigma_A2)
    sol = jax.scipy.linalg.cho_solve((chol, True), theta)  # (H, K): Pm^{-1} theta_k per lag
    val = -0.5 * T * logdet + 0.5 * jnp.sum(theta * sol) / T
    return jnp.where(jnp.all(ev > 0), val, jnp.inf)


# --------------------------------------------------------------------------------------------- softmax
def default_proposal(H: int, K: int):
    """(p (H, K + 1), mu (H, K), sd (H, K)): per head, probability 0.4 of not copying and 0.6 / K of copying each
    lag, the copying source logit ~ N(3.5, 1.5^2) (its softmax weight then spans ~0.05 to ~0.95 at T = 16)."""
    p = np.concatenate([np.full((H, 1), 0.4), np.full((H, K), 0.6 / K)], axis=1)
    return p, np.full((H, K), 3.5), np.full((H, K), 1.5)


def _log_normal(x, mu, s2):
    return -0.5 * (x - mu) ** 2 / s2 - 0.5 * jnp.log(2 * jnp.pi * s2)


@functools.partial(jax.jit, static_argnames=("H", "K", "T", "n"))
def softmax_row_samples(key, p, mu, sd, *, H: int, K: int, T: int, n: int, sigma_A2: float):
    """Importance samples of whole rows: (S (n, D) statistics, log w (n,) prior / proposal, x (n, H, K) source
    logits). The first K positions are the sources (lags 1..K: the rows are exchangeable in the positions). The
    proposal draws, per head independently, a pattern j with probability p[h, j] (0: copies nothing, all logits
    from the prior; k + 1: copies lag k, its source logit ~ N(mu[h, k], sd[h, k]^2), the rest from the prior)."""
    kz, ku = jax.random.split(key)
    z = jax.random.normal(kz, (n, H, T))
    u = jax.random.uniform(ku, (n, H))
    sA = jnp.sqrt(sigma_A2)
    j = jnp.sum(u[:, :, None] > jnp.cumsum(p, axis=1)[None, :, :-1], axis=2)  # (n, H) pattern index
    copy = j[:, :, None] == jnp.arange(1, K + 1)[None, None, :]
    zs = z[:, :, :K]
    x = jnp.where(copy, mu + sd * zs, sA * zs)
    ratio = jnp.log(p[:, 1:]) + _log_normal(x, mu, sd**2) - _log_normal(x, 0.0, sigma_A2)  # (n, H, K)
    lq = jnp.logaddexp(jnp.log(p[:, 0]), logsumexp(ratio, axis=2))  # log q_h / prior_h
    logw = -jnp.sum(lq, axis=1)
    logits = jnp.concatenate([x, sA * z[:, :, K:]], axis=2)
    alpha = jax.nn.softmax(logits, axis=-1)
    a = alpha[:, :, :K].reshape(n, H * K)
    iu = np.triu_indices(H)
    c = jnp.einsum("nhs,ngs->nhg", alpha, alpha)[:, iu[0], iu[1]]
    return jnp.concatenate([a, c], axis=1), logw, x


@jax.jit
def is_moments(lam, S, logw):
    """(Lambda, tilted mean (D,), tilted covariance (D, D), effective sample size) of importance samples."""
    lw = logw + S @ lam
    lse = logsumexp(lw)
    p = jnp.exp(lw - lse)
    mean = p @ S
    dS = S - mean
    cov = (dS * p[:, None]).T @ dS
    return lse - jnp.log(S.shape[0]), mean, cov, 1.0 / jnp.sum(p**2)


def adapt_proposal(lam, S, logw, x, sigma_A2: float, floor: float = 0.02):
    """A proposal fitted to the tilted law at lam: per head, the tilted probability of each pattern (a sample
    copies lag k when its source logit k is the largest one above 2 sigma_A), each at least ``floor``, and per
    (head, lag) the tilted mean and std of the copying source logit (std x 1.2, at least 0.3); where the tilted
    law barely copies a lag, the default copying component is kept."""
    lw = np.asarray(logw + S @ lam)
    w = np.exp(lw - lw.max())
    w /= w.sum()
    x = np.asarray(x)
    n, H, K = x.shape
    p0, mu0, sd0 = default_proposal(H, K)
    hi = np.where(x > 2.0 * np.sqrt(sigma_A2), x, -np.inf)
    pat = np.where(np.isfinite(hi.max(axis=2)), 1 + np.argmax(hi, axis=2), 0)  # (n, H)
    onehot = pat[:, :, None] == np.arange(K + 1)[None, None, :]
    p = np.einsum("n,nhj->hj", w, onehot)
    on = onehot[:, :, 1:]
    with np.errstate(invalid="ignore", divide="ignore"):
        mu = np.einsum("n,nhk->hk", w, on * x) / p[:, 1:]
        var = np.einsum("n,nhk->hk", w, on * x**2) / p[:, 1:] - mu**2
    ok = p[:, 1:] > 1e-3
    mu = np.where(ok, mu, mu0)
    sd = np.where(ok, 1.2 * np.sqrt(np.clip(var, 0.0625, None)), sd0)
    p = np.clip(p, floor, None)
    return p / p.sum(axis=1, keepdims=True), mu, sd


LEGENDRE_BLOCK = 256  # rows vmapped together in linear_legendre


@functools.partial(jax.jit, static_argnames=("H", "K", "T", "iters", "block"))
def linear_legendre(x, lam0, *, H: int, K: int, T: int, sigma_A2: float, iters: int = 30, block: int = LEGENDRE_BLOCK):
    """The dual point lam(x) with grad Lambda(lam) = x for the linear row law, by damped Newton from lam0 (the
    step halved until the tilted precision stays positive definite), over the rows of x (n, D). Returns lam (n, D),
    Lambda (n,), log det Cov (n,) and the residual max |grad Lambda - x| (n,) (large: x is not a row mean).

    The rows are vmapped ``block`` at a time, the blocks looped inside the program
    (:func:`~bayesattn._batching.map_batched`): one vmap over all of them wedged XLA's CPU thread pool (800 rows of
    15 statistics never returned; 400 took 5 s)."""
    cgf = lambda v: linear_cgf(v, H, K, T, sigma_A2)  # noqa: E731
    ts = 2.0 ** -jnp.arange(16)

    def one(xi):
        def body(_, lam):
            g, Hs = jax.grad(cgf)(lam), jax.hessian(cgf)(lam)
            step = jnp.linalg.solve(Hs, g - xi)
            cand = lam[None, :] - ts[:, None] * step[None, :]
            ok = jnp.isfinite(jax.vmap(cgf)(cand))
            return jnp.where(jnp.any(ok), cand[jnp.argmax(ok)], lam)

        lam = jax.lax.fori_loop(0, iters, body, lam0)
        return (lam, cgf(lam), jnp.linalg.slogdet(jax.hessian(cgf)(lam))[1], jnp.max(jnp.abs(jax.grad(cgf)(lam) - xi)))

    return map_batched(one, x, block)


# ------------------------------------------------------------------------------------ the row laws as objects
class RowLaw:
    """Lambda, the tilted mean and covariance of the row statistics, and Psi(lam) = Phi_E(grad Lambda) +
    lam . grad Lambda - Lambda with its gradient, for the per-row energy ``phi(x, beta, eps)`` of the H-head
    theory (:mod:`.heads`); one subclass per attention kind (:data:`ROW_LAWS`).

    kind: the attention kind; adaptive: whether its Lambda rests on a proposal that is refitted between rounds
    of the minimisation (softmax's importance sampling)."""

    kind = None
    adaptive = False

    def __init__(self, phi, H, K, T, sigma_A2, num_samples, key):
        self.H, self.K, self.T, self.sA2 = H, K, T, sigma_A2
        self.n, self.key = num_samples, key
        # the jitted programs, shared by every law of this kind with the same phi (one object per energy:
        # heads.row_energy) and sizes, so that a second curve of a task compiles nothing; the same programs, so the
        # same numbers
        for name, fn in _programs(type(self), phi, H, K, T, sigma_A2).items():
            setattr(self, name, fn)

    @staticmethod
    def programs(phi, H, K, T, sigma_A2) -> dict:
        """The jitted functions of a law with energy phi: phi, its gradient dphi and Hessian hphi, and the
        subclass's own (``_psi``, ...)."""
        return {"phi": jax.jit(phi), "dphi": jax.jit(jax.grad(phi)), "hphi": jax.jit(jax.hessian(phi))}

    def set_proposal(self, rho, mu, sd):
        """Draw the importance samples of the proposal (rho, mu, sd) (:func:`softmax_row_samples`); no-op for a
        closed-form law."""

    def adapt(self, lam):
        """Refit the proposal to the tilted law at lam; no-op for a closed-form law."""

    def psi(self, lam, b, e):
        """(Psi, its gradient) at lam for beta = b, eps = e; (1e30, 0) where Lambda is not finite."""
        val, grad, L = self._psi(jnp.asarray(lam), b, e, *self._psi_args())
        if not np.isfinite(float(L)):
            return 1e30, np.zeros_like(lam)
        return float(val), np.asarray(grad)

    def _psi_args(self):
        return ()


class LinearRowLaw(RowLaw):
    """Linear heads: the closed-form Gaussian row law (:func:`linear_cgf`)."""

    kind = LINEAR

    @staticmethod
    def programs(phi, H, K, T, sigma_A2) -> dict:
        cgf = lambda lam: linear_cgf(lam, H, K, T, sigma_A2)  # noqa: E731

        def psi(lam, b, e):
            L, x, C = cgf(lam), jax.grad(cgf)(lam), jax.hessian(cgf)(lam)
            return phi(x, b, e) + lam @ x - L, C @ (jax.grad(phi)(x, b, e) + lam), L

        return {
            **RowLaw.programs(phi, H, K, T, sigma_A2),
            "_lin": jax.jit(lambda lam: (cgf(lam), jax.grad(cgf)(lam), jax.hessian(cgf)(lam))),
            "_psi": jax.jit(psi),
        }

    def moments(self, lam):
        """(Lambda, tilted mean, tilted covariance, effective sample size = inf) at lam."""
        L, x, C = self._lin(jnp.asarray(lam))
        return float(L), np.asarray(x), np.asarray(C), math.inf

    def named_starts(self):
        """Starting points in x: "hot" (head h on lag h) and "competitive" (all heads on lag 1), mass 1, from the
        prior's overlaps sigma_A2 I."""
        H, K = self.H, self.K

        def x_of(pairs):
            m = np.full((H, K), 0.0)
            for h, k in pairs:
                m[h, k] = 1.0
            return pack(m, self.sA2 * np.eye(H) + m @ m.T)

        return {"hot": x_of([(h, h) for h in range(min(H, K))]), "competitive": x_of([(h, 0) for h in range(H)])}


class SoftmaxRowLaw(RowLaw):
    """Softmax heads: Lambda by importance sampling of whole rows (:func:`softmax_row_samples`, :func:`is_moments`)."""

    kind = SOFTMAX
    adaptive = True

    @staticmethod
    def programs(phi, H, K, T, sigma_A2) -> dict:
        def psi(lam, b, e, S, logw):
            # Psi and its gradient Cov (grad Phi_E + lam) without forming Cov: O(n D) per evaluation
            lw = logw + S @ lam
            lse = logsumexp(lw)
            p = jnp.exp(lw - lse)
            x = p @ S
            dS = S - x
            v = jax.grad(phi)(x, b, e) + lam
            L = lse - jnp.log(S.shape[0])
            return phi(x, b, e) + lam @ x - L, (p * (dS @ v)) @ dS, L

        return {**RowLaw.programs(phi, H, K, T, sigma_A2), "_psi": jax.jit(psi)}

    def set_proposal(self, rho, mu, sd):
        self.prop = (rho, mu, sd)
        self.S, self.logw, self.xs = softmax_row_samples(
            self.key,
            jnp.asarray(rho),
            jnp.asarray(mu),
            jnp.asarray(sd),
            H=self.H,
            K=self.K,
            T=self.T,
            n=self.n,
            sigma_A2=self.sA2,
        )

    def adapt(self, lam):
        self.set_proposal(*adapt_proposal(jnp.asarray(lam), self.S, self.logw, self.xs, self.sA2))

    def moments(self, lam):
        """(Lambda, tilted mean, tilted covariance, effective sample size) at lam, from the importance samples."""
        L, x, C, ess = is_moments(jnp.asarray(lam), self.S, self.logw)
        return float(L), np.asarray(x), np.asarray(C), float(ess)

    def named_starts(self):
        """Starting points in x: "hot" (head h on lag h) and "competitive" (all heads on lag 1), mass 0.7, the
        other masses 0.02 and overlaps 0.02 (self-overlaps 0.05) above the copying part."""
        H, K = self.H, self.K

        def x_of(pairs):
            m = np.full((H, K), 0.02)
            for h, k in pairs:
                m[h, k] = 0.7
            Q = np.full((H, H), 0.02) + m @ m.T
            Q[np.diag_indices(H)] = 0.05 + np.sum(m**2, axis=1)
            return pack(m, Q)

        return {"hot": x_of([(h, h) for h in range(min(H, K))]), "competitive": x_of([(h, 0) for h in range(H)])}

    def _psi_args(self):
        return (self.S, self.logw)


@functools.lru_cache(maxsize=32)
def _programs(law: type, phi, H: int, K: int, T: int, sigma_A2: float) -> dict:
    """``law.programs(...)``, built once per (law, phi, sizes): phi by identity, the same object for the same
    energy (:func:`heads.row_energy`)."""
    return law.programs(phi, H, K, T, sigma_A2)


ROW_LAWS = {law.kind.name: law for law in (SoftmaxRowLaw, LinearRowLaw)}  # the row law of each attention kind
