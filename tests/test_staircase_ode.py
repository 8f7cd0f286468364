"""The staircase ODE (diffrax): its fixed points against the solved model, and its plateaus against the
misspecified models' losses sum_{j >= k} strengths_j^2."""

import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip("diffrax")

from bayesattn.dynamics.ode import ODEConfig, solve, solved_model, stage_times, vector_field  # noqa: E402


def test_solved_model_is_a_fixed_point_with_zero_loss():
    cfg = ODEConfig(N=7, R=5, m=2.0)
    S, D = solved_model(cfg)
    np.testing.assert_allclose(D @ S.T, cfg.delta(), atol=0)
    dS, dD = vector_field(0.0, (jnp.asarray(S), jnp.asarray(D)), (jnp.asarray(cfg.delta()), True))
    assert float(jnp.max(jnp.abs(dS))) == 0.0 and float(jnp.max(jnp.abs(dD))) == 0.0
    # a one-hot head on an uncovered position is a fixed point too (a misspecified model): the stage plateaus
    S2, D2 = S.copy(), D.copy()
    S2[:, 2], D2[:, 2] = S[:, 0], 0.0  # head 3 copies head 1's position, carries nothing
    dS, dD = vector_field(0.0, (jnp.asarray(S2), jnp.asarray(D2)), (jnp.asarray(cfg.delta()), True))
    assert float(jnp.max(jnp.abs(dS))) < 1e-12  # H(e_j) = 0: the softmax geometry freezes one-hot columns


def test_flow_reaches_the_solved_model_through_the_plateaus():
    cfg = ODEConfig(N=8, R=6, m=2.5, t_final=3e4, num_times=300, rtol=1e-6, atol=1e-8, seed=4)
    sol = solve(cfg)
    # ends at a zero-loss fixed point: D S^T = Delta, the solved model's product, and the field vanishes there
    S, D = sol["S"][-1], sol["D"][-1]
    np.testing.assert_allclose(D @ S.T, cfg.delta(), atol=0.05)
    assert sol["loss"][-1] < 1e-2 * sol["plateaus"][-2]
    dS, dD = vector_field(0.0, (jnp.asarray(S), jnp.asarray(D)), (jnp.asarray(cfg.delta()), True))
    assert float(jnp.max(jnp.abs(dD))) < 1e-2
    # every position of Delta is covered by some head (the strongest by one with weight near 1)
    assert S[0].max() > 0.95 and S[1].max() > 0.5 and S[2].max() > 0.2
    # the loss passes through each misspecified model's loss in order, strongest position first
    p = sol["plateaus"]
    for k in (1, 2):
        assert np.min(np.abs(sol["loss"] / p[k] - 1)) < 0.02, (k, p[k])
    t = stage_times(sol)
    assert t[0] < t[1] < t[2]
