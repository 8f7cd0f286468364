"""Order-parameter theory of softmax attention on the sparse regression surrogate (s sources per row;
docs/results/sparse.md section 4). Cyclic-like rows: every query row sees all S keys, s of them its support.

Per row, with M the attention mass on the support and q = sum alpha^2 (both averaged over rows),

    Phi(M, q) = Phi_E(M, q) + I_s(M, q),
    Phi_E = beta [c - M^2 / (k (q + eps))] + (d^2 / (2 S)) log(1 + q / eps),

beta = P d / (2 sigma2), eps = lam / (P S), k = 1 (summed targets, c = s) or s (normalised targets, c = 1), and
I_s the rate function of one row's (a, b) = (mass on s keys, sum of squared weights) under the prior
N(0, sigma_A2) of its S logits. The row cumulant generating function Lambda(h, g) = log E exp(h a + g b) is
estimated by importance sampling: the s support logits are drawn from an equal mixture of N(mu, sigma_A2) with
mu on a grid (the tilt pushes them up), the others from the prior, weights prior / mixture. A stationary point
is a fixed point of (h, g) = -grad Phi_E(M, q), (M, q) = grad Lambda(h, g) (the tilted row's means), iterated
with damping from a cold (uniform) and a hot (support) start; the lower Phi is the stable branch.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import logsumexp


@dataclass(frozen=True)
class RowSamples:
    """Importance-weighted prior draws of one row: a, b and log weights (all (N,))."""

    a: np.ndarray
    b: np.ndarray
    logw: np.ndarray

    @classmethod
    def draw(
        cls, S: int, s: int, sigma_A2: float = 1.0, n_per_shift: int = 4000, shifts=None, seed: int = 0
    ) -> RowSamples:
        rng = np.random.default_rng(seed)
        sd = np.sqrt(sigma_A2)
        shifts = np.linspace(0.0, 10.0, 41) if shifts is None else np.asarray(shifts, float)
        sup = np.concatenate([mu + sd * rng.standard_normal((n_per_shift, s)) for mu in shifts])
        rest = sd * rng.standard_normal((sup.shape[0], S - s))
        # log prior / log mixture of the support logits (the rest is drawn from the prior)
        lp = -0.5 * np.sum(sup**2, 1) / sigma_A2
        lq = logsumexp(-0.5 * np.sum((sup[:, None, :] - shifts[None, :, None]) ** 2, -1) / sigma_A2, axis=1) - np.log(
            len(shifts)
        )
        logits = np.concatenate([sup, rest], axis=1)
        alpha = np.exp(logits - logits.max(1, keepdims=True))
        alpha /= alpha.sum(1, keepdims=True)
        return cls(alpha[:, :s].sum(1), np.sum(alpha**2, 1), lp - lq - np.log(sup.shape[0]))

    def tilt(self, h: float, g: float) -> tuple[float, float, float]:
        """(Lambda(h, g), E_tilted a, E_tilted b)."""
        lw = self.logw + h * self.a + g * self.b
        lam = logsumexp(lw)
        w = np.exp(lw - lam)
        return float(lam), float(w @ self.a), float(w @ self.b)


def stationary_points(
    rows: RowSamples,
    *,
    S: int,
    s: int,
    P: float,
    d: int = 8,
    sigma2: float = 400.0,
    sigma_V2: float = 100.0,
    normalize: bool = False,
    iters: int = 2000,
    damping: float = 0.3,
    tol: float = 1e-7,
) -> dict:
    """Stationary points from the cold and hot starts: {"cold": (M, q, Phi), "hot": (...), "stable": M}."""
    beta = P * d / (2 * sigma2)
    eps = (d * sigma2 / sigma_V2) / (P * S)
    k, c = (s, 1.0) if normalize else (1.0, float(s))

    def grad_E(M, q):
        dM = -2 * beta * M / (k * (q + eps))
        dq = beta * M**2 / (k * (q + eps) ** 2) + (d**2 / (2 * S)) / (q + eps)
        return dM, dq

    def phi_E(M, q):
        return beta * (c - M**2 / (k * (q + eps))) + (d**2 / (2 * S)) * np.log1p(q / eps)

    out = {}
    for name, (M, q) in (("cold", (s / S, 1.0 / S)), ("hot", (0.95, 0.95**2 / s))):
        for _ in range(iters):
            dM, dq = grad_E(M, q)
            _, M1, q1 = rows.tilt(-dM, -dq)
            dmax = max(abs(M1 - M), abs(q1 - q))
            M, q = (1 - damping) * M + damping * M1, (1 - damping) * q + damping * q1
            if dmax < tol:
                break
        dM, dq = grad_E(M, q)
        h, g = -dM, -dq
        lam, _, _ = rows.tilt(h, g)
        out[name] = (float(M), float(q), float(phi_E(M, q) + h * M + g * q - lam))
    out["stable"] = min((out["cold"], out["hot"]), key=lambda t: t[2])[0]
    return out


def excess_curve(
    S: int, s: int, P_values, *, normalize: bool = False, sigma_A2: float = 1.0, seed: int = 0, **kw
) -> dict:
    """The stable branch's excess mass (M - s/S) / (1 - s/S) over ``P_values`` and whether the cold and hot
    starts ended on different branches (coexistence) at each P."""
    rows = RowSamples.draw(S, s, sigma_A2, seed=seed)
    base = s / S
    ex, both = [], []
    for P in P_values:
        r = stationary_points(rows, S=S, s=s, P=float(P), normalize=normalize, **kw)
        ex.append((r["stable"] - base) / (1 - base))
        both.append(abs(r["cold"][0] - r["hot"][0]) > 1e-3)
    return {"P": [float(p) for p in P_values], "excess": ex, "coexistence": both}
