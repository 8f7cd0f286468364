"""The simplified staircase ODE of Yueksel, Alvarez Lucendo & Flammarion (arXiv 2602.19143; their ``ode.py``),
solved with diffrax (docs/results/staircase.md section 4).

S: (N, H), column h the attention weights of head h over N positions (on the simplex); D: (R, H) its value
directions. Gradient flow of |Delta - D S^T|_F^2 / 2 with the softmax geometry on S:

    dS_h = H(s_h)^2 [(Delta - D S^T)^T D]_h,   dD = (Delta - D S^T) S,   H(s) = diag(s) - s s^T,

(H(s) once is the softmax Jacobian; the paper's default applies it twice, ``squared=True``). Delta: (R, N) has
G one-entry blocks of strengths ``strengths`` (the paper: [m^2, m, 1], m = 2.5) on the first G positions.
Stage-wise convergence: the loss falls through the plateaus sum_{j > k} strengths_j^2 as heads take the
positions one at a time, strongest first.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import jax
import jax.numpy as jnp
import numpy as np

from .._validate import check_int, check_positive


@dataclass(frozen=True)
class ODEConfig:
    """The paper's defaults: H = G = 3 heads and groups, N = 40 positions, R = 50 directions, m = 2.5,
    near-uniform S (noise eps = 1e-3, drawn from ``seed``), D = 0, t in [0, 1e5]."""

    heads: int = 3
    N: int = 40
    R: int = 50
    m: float = 2.5
    groups: int = 3
    eps: float = 1e-3
    t_final: float = 1e5
    num_times: int = 400
    squared: bool = True
    rtol: float = 1e-8
    atol: float = 1e-10
    seed: int = 4

    def __post_init__(self):
        for f in ("heads", "N", "R", "groups", "num_times"):
            check_int(f, getattr(self, f), minimum=1)
        check_int("seed", self.seed, minimum=0)
        if self.groups > min(self.N, self.R):
            raise ValueError(f"groups={self.groups}: expected at most min(N, R) = {min(self.N, self.R)}")
        for f in ("m", "eps", "t_final", "rtol", "atol"):
            check_positive(f, getattr(self, f))

    @property
    def strengths(self) -> np.ndarray:
        """(G,): m^(G-1), ..., m, 1 (strongest first)."""
        return self.m ** np.arange(self.groups - 1, -1, -1, dtype=np.float64)

    def delta(self) -> np.ndarray:
        """(R, N): Delta_jj = strengths_j for j < G, zero elsewhere."""
        out = np.zeros((self.R, self.N))
        out[np.arange(self.groups), np.arange(self.groups)] = self.strengths
        return out

    def initial(self) -> tuple[np.ndarray, np.ndarray]:
        """S0 (N, H): 1/N + eps U(0, 1), columns normalised; D0 = 0 (the paper's "random" init)."""
        rng = np.random.default_rng(self.seed)
        S = 1.0 / self.N + self.eps * rng.random((self.N, self.heads))
        return S / S.sum(axis=0, keepdims=True), np.zeros((self.R, self.heads))

    def config(self) -> dict:
        return asdict(self)


def vector_field(t, y, args):
    """d(S, D)/dt; y = (S (N, H), D (R, H)); args = (Delta (R, N), squared)."""
    S, D = y
    Delta, squared = args
    E = Delta - D @ S.T  # (R, N)
    G = E.T @ D  # (N, H): -dLoss/dS
    Hs = jax.vmap(lambda s: jnp.diag(s) - jnp.outer(s, s), in_axes=1)(S)  # (H, N, N)
    if squared:
        Hs = Hs @ Hs
    dS = jnp.einsum("hij,jh->ih", Hs, G)
    return dS, E @ S


def solve(cfg: ODEConfig) -> dict:
    """Integrate with diffrax (Dopri5, adaptive PID steps). Returns {"t": (n,), "S": (n, N, H), "D": (n, R, H),
    "loss": (n,) |Delta - D S^T|_F^2, "plateaus": (G + 1,) the misspecified losses sum_{j >= k} strengths_j^2,
    "num_steps": int}; times are 0 and ``num_times - 1`` log-spaced points in [1e-2, t_final]."""
    import diffrax

    Delta = jnp.asarray(cfg.delta())
    S0, D0 = map(jnp.asarray, cfg.initial())
    ts = np.concatenate([[0.0], np.geomspace(1e-2, cfg.t_final, cfg.num_times - 1)])
    ts = jnp.asarray(np.minimum(ts, cfg.t_final))  # geomspace may round its end point past t1
    sol = diffrax.diffeqsolve(
        diffrax.ODETerm(vector_field),
        diffrax.Dopri5(),
        t0=0.0,
        t1=cfg.t_final,
        dt0=1e-3,
        y0=(S0, D0),
        args=(Delta, cfg.squared),
        saveat=diffrax.SaveAt(ts=ts),
        stepsize_controller=diffrax.PIDController(rtol=cfg.rtol, atol=cfg.atol),
        max_steps=2_000_000,
    )
    S, D = sol.ys
    loss = jnp.sum((Delta[None] - jnp.einsum("nrh,nsh->nrs", D, S)) ** 2, axis=(1, 2))
    s2 = cfg.strengths**2
    plateaus = np.array([s2[k:].sum() for k in range(cfg.groups + 1)])
    return {
        "t": np.asarray(sol.ts),
        "S": np.asarray(S),
        "D": np.asarray(D),
        "loss": np.asarray(loss),
        "plateaus": plateaus,
        "num_steps": int(sol.stats["num_steps"]),
    }


def solved_model(cfg: ODEConfig) -> tuple[np.ndarray, np.ndarray]:
    """A fixed point with zero loss when heads >= groups: head h on position h (h < G) with D_h = Delta e_h;
    extra heads (h >= G) copy position G - 1... up to the label symmetry, the model the flow should reach."""
    S = np.zeros((cfg.N, cfg.heads))
    D = np.zeros((cfg.R, cfg.heads))
    for h in range(min(cfg.heads, cfg.groups)):
        S[h, h] = 1.0
        D[:, h] = cfg.delta()[:, h]
    return S, D


def stage_times(sol: dict, rel: float = 0.5) -> list:
    """Time at which the loss first falls below the midpoint (in log) between consecutive plateaus k and k+1,
    k = 0..G-1: the end of stage k + 1 (None if never)."""
    out = []
    p = sol["plateaus"]
    for k in range(len(p) - 1):
        lo = p[k + 1] if p[k + 1] > 0 else p[k] * 1e-3
        thr = np.exp((1 - rel) * np.log(p[k]) + rel * np.log(lo))
        below = sol["loss"] < thr
        out.append(float(sol["t"][np.argmax(below)]) if below.any() else None)
    return out
