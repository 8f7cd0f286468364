"""Gradient flow of the single layer's training objectives, integrated by diffrax (the ``dynamics`` extra).

``objective="marginal"``: dL/dt = -grad J_marg(L), the readout integrated out (the object of the plateau
theory, ``ba.theory.plateau_curve``); ``"joint"``: d(L, V)/dt = -grad J(L, V), the network's own gradient flow.
J and J_marg are :mod:`bayesattn.training.objective`'s (gradient descent with step lr is their Euler
discretisation in time lr x steps). Integrated by Tsit5 with a PID step controller, saved at given times.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from .._validate import check_choice, check_positive
from ..bayes.posterior import Posterior, check_posterior
from ..diagnostics.observables import declared, evaluate
from ..training.objective import joint_loss, marginal_loss

OBJECTIVES = ("marginal", "joint")


@functools.partial(jax.jit, static_argnames=("objective", "max_steps"))
def _solve(post, L0, V0, ts, rtol, atol, objective: str, max_steps: int):
    import diffrax

    if objective == "marginal":
        y0 = L0
        field = lambda t, L, args: -jax.grad(marginal_loss, argnums=1)(post, L)  # noqa: E731
    else:
        y0 = (L0, V0)
        field = lambda t, y, args: jax.tree.map(  # noqa: E731
            jnp.negative, jax.grad(lambda p: joint_loss(post, *p))(y)
        )
    sol = diffrax.diffeqsolve(
        diffrax.ODETerm(field),
        diffrax.Tsit5(),
        t0=ts[0],
        t1=ts[-1],
        dt0=None,
        y0=y0,
        saveat=diffrax.SaveAt(ts=ts),
        stepsize_controller=diffrax.PIDController(rtol=rtol, atol=atol),
        max_steps=max_steps,
        throw=False,
    )
    L = sol.ys if objective == "marginal" else sol.ys[0]
    obs = evaluate(declared(post.task, post.model), jax.vmap(lambda l: post.model.weights(l, post.task.key_mask))(L))
    return L, obs, sol.stats["num_steps"], sol.result == diffrax.RESULTS.successful


def gradient_flow(
    posterior: Posterior,
    L0,
    ts,
    *,
    V0=None,
    objective: str = "marginal",
    rtol: float = 1e-6,
    atol: float = 1e-9,
    max_steps: int = 1_000_000,
) -> dict:
    """Integrate the gradient flow of ``objective`` on ``posterior``'s data from L0 (and V0 for "joint"; default
    its conditional mode given L0), saving at the increasing times ``ts`` (ts[0]: the start).

    Returns {"t": (R,), "L": (R, *L_shape), every declared observable (m, q, u, ...) as (R,) arrays,
    "num_steps": int, "ok": bool (False: the solver stopped early, e.g. at ``max_steps``; the saved states after
    that point are not valid)}."""
    import importlib.util

    if importlib.util.find_spec("diffrax") is None:
        raise ImportError("gradient_flow needs diffrax: pip install 'bayesattn[dynamics]'")
    check_posterior(posterior)
    check_choice("objective", objective, OBJECTIVES)
    ts = np.asarray(ts, dtype=float)
    if ts.ndim != 1 or ts.size < 2 or not np.all(np.isfinite(ts)) or np.any(np.diff(ts) <= 0):
        raise ValueError(f"ts of shape {ts.shape}: expected at least 2 finite, increasing times")
    L0 = jnp.asarray(L0, jnp.float64)
    if L0.shape != tuple(posterior.L_shape):
        raise ValueError(f"L0 of shape {L0.shape}: expected {tuple(posterior.L_shape)}")
    if objective == "joint":
        V0 = posterior.readout_posterior(L0)[0] if V0 is None else jnp.asarray(V0, jnp.float64)
    else:
        V0 = jnp.zeros(())
    L, obs, steps, ok = _solve(
        posterior,
        L0,
        V0,
        jnp.asarray(ts),
        check_positive("rtol", rtol),
        check_positive("atol", atol),
        objective,
        int(max_steps),
    )
    return {
        "t": ts,
        "L": np.asarray(L),
        **{k: np.asarray(v, float) for k, v in obs.items()},
        "num_steps": int(steps),
        "ok": bool(ok),
    }
