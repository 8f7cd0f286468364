"""The free-energy landscape of the order parameter at one P."""

from __future__ import annotations

import functools
import warnings

import jax
import jax.numpy as jnp
import numpy as np

from ..._validate import brief, check_int, check_positive
from ...models.attention import attention_kind
from .common import Attention, action, check_grid, check_prior, covered, energy_grads, scales
from .linear import linear_cosine_log_density, linear_dims
from .softmax_minima import energy_hessian
from .softmax_table import softmax_action_table, tilted_row

# ----------------------------------------------------------------------------------------------------
# free-energy landscape
# ----------------------------------------------------------------------------------------------------


@functools.partial(jax.jit, static_argnames=("d", "Tq"))
def _profile_softmax(mt, h0, g0, mom, be, eps, d, Tq, iters=40):
    """Phi(m) = min_q Phi(m, q) at fixed m = mt: solve m(h, g) = mt and dPhi/dq = 0 by Newton."""

    def body(carry, _):
        h, g = carry
        Lam, m, q, Vaa, Vab, Vbb = tilted_row(h, g, *mom)
        _, dq = energy_grads(mt, q, be, eps, d, Tq, 0.0)
        _, _, Hqq = energy_hessian(mt, q, be, eps, d, Tq)
        r = jnp.array([m - mt, g + dq])
        J = jnp.array([[Vaa, Vab], [Hqq * Vab, 1.0 + Hqq * Vbb]])
        dx = jnp.linalg.solve(J, -r)
        scale = jnp.minimum(
            1.0, jnp.minimum(2.0 / (jnp.abs(dx[0]) + 1e-300), (0.2 * jnp.abs(g) + 2.0) / (jnp.abs(dx[1]) + 1e-300))
        )
        return (h + scale * dx[0], jnp.minimum(g + scale * dx[1], -1e-6)), None

    (h, g), _ = jax.lax.scan(body, (h0, g0), None, length=iters)
    Lam, m, q, *_ = tilted_row(h, g, *mom)
    Phi = action(mt, q, h * mt + g * q - Lam, beta=be, eps=eps, d=d, T_q=Tq)
    ok = jnp.abs(m - mt) < 1e-6 * (1 + mt)
    return jnp.where(ok, Phi, jnp.nan)


def _softmax_landscape(task, prior, x, beta, eps, Tq, num_samples, seed):
    """T_q min_q Phi(m, q) at m = x, from the row table: Newton from the table point closest in m."""
    tab = softmax_action_table(
        task, prior, float(beta), num_samples=check_int("num_samples", num_samples, minimum=100), seed=seed
    )
    H, G = tab.h[:, None], tab.g[None, :]
    Phi = np.asarray(action(tab.m, tab.q, H * tab.m + G * tab.q - tab.Lam, beta=beta, eps=eps, d=task.d_out, T_q=Tq))
    _, dq = energy_grads(tab.m, tab.q, beta, eps, task.d_out, Tq, 0.0)
    F = np.abs(G + dq)
    # starts: the table point closest in m among those near q-stationarity, lowest Phi
    starts = []
    for mt in x:
        score = Phi + 1e4 * (tab.m - mt) ** 2 + 0.1 * F
        i, j = np.unravel_index(np.argmin(score), score.shape)
        starts.append((tab.h[i], tab.g[j]))
    h0, g0 = (jnp.asarray(a) for a in zip(*starts))
    profile = jax.vmap(lambda mt, a, b: _profile_softmax(mt, a, b, tab.mom, beta, eps, task.d_out, Tq))
    return np.asarray(profile(jnp.asarray(x), h0, g0)) * Tq


def _linear_landscape(task, prior, x, beta, eps, Tq, num_samples, seed):
    """-log p of the cosine sqrt(u) at u = x (the radius integrated exactly), up to a constant."""
    D, Tq = linear_dims(task)
    c = jnp.sqrt(jnp.asarray(x))
    return -np.asarray(linear_cosine_log_density(c, beta, eps, float(prior.sigma_A2), D, Tq, task.T, task.d_out, 0.0))


# per attention kind: the landscape S(x) of its order parameter, and the default grid of x for T keys
LANDSCAPES = {"softmax": _softmax_landscape, "linear": _linear_landscape}
DEFAULT_GRIDS = {
    "softmax": lambda T: np.linspace(0.5 / T, 0.9, 200),
    "linear": lambda T: np.linspace(0.0, 0.9, 200)[1:],
}


def landscape(
    task, prior, attention: Attention, P, grid=None, *, noise_fit: bool = False, num_samples: int = 20000, seed: int = 0
) -> dict:
    """Free-energy landscape S(x) = T_q * min over the other order parameters of Phi, in nats, shifted so
    that min S = 0 (differences are log posterior odds). x = m for softmax (double well near the
    transition), x = u for linear (a single well at u = 0 that moves away continuously; the density is
    taken with respect to du / sqrt(u), i.e. of the cosine sqrt(u), so the well at u = 0 is finite).

    Returns {"x", "x_name", "S", "P", "attention"}. grid: increasing values in (0, 1). Softmax: S is NaN at an x
    that the row table of ``num_samples`` rows does not reach (m close to 0 or 1, where the profile's solve does
    not converge), with a warning saying how many and where; a ValueError where that is every x.
    """
    attention = covered(task, attention)
    prior = check_prior(prior)
    P = check_positive("P", P)
    if grid is None:
        grid = DEFAULT_GRIDS[attention](task.T)
    x = check_grid("grid", grid)
    if x[-1] >= 1:
        raise ValueError(f"grid={grid!r}: expected values in (0, 1)")
    beta, eps, Tq = scales(task, prior, np.array([P]))
    beta = beta - float(noise_fit) * task.d_out**2 / (2.0 * prior.sigma2 * Tq)
    S = LANDSCAPES[attention](task, prior, x, beta[0], eps[0], Tq, num_samples, seed)
    if not np.all(np.isfinite(S)):
        bad = x[~np.isfinite(S)]
        if bad.size == x.size:
            raise ValueError(
                f"grid={brief(grid)}: the row table of num_samples={num_samples} reaches none of these values; "
                "expected values nearer the middle of (0, 1), or a larger num_samples"
            )
        warnings.warn(
            f"landscape: S is NaN at {bad.size} of {x.size} grid values of {attention_kind(attention).order_parameter} "
            f"(from {bad.min():.3g} to {bad.max():.3g}), which the row table of num_samples={num_samples} does not "
            "reach; narrow the grid or raise num_samples",
            RuntimeWarning,
            stacklevel=2,
        )
    S = S - np.nanmin(S)
    return {"x": x, "x_name": attention_kind(attention).order_parameter, "S": S, "P": float(P), "attention": attention}
