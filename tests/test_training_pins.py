"""Adam's first step, pinned: with bias correction, Adam's first update is
-lr * g / (|g| + eps), so each coordinate of (L, V) moves by lr times minus the sign of its gradient.
Checked at two learning rates (neither the default), on both attention maps.

Reference gradient: central finite differences of J(L, V) written here in numpy from docs/model.md
section 1 (the explicit design matrix of conftest.np_design, not the package's sufficient statistics).
"""

from __future__ import annotations

import jax
import numpy as np
import pytest
from conftest import np_design

import bayesattn as ba
from bayesattn.training.objective import training_objective

T, D = 3, 2


def np_objective(L, V, data, attention, prior):
    """J = |Y - Z V^T|^2 / 2n + (sigma2 / 2n) (|L|^2 / sigma_A2 + d |V|^2 / sigma_V2), n = query rows."""
    Z, Y = np_design(L, data, attention)
    n, d = Z.shape
    sq = np.sum((Y - Z @ V.T) ** 2)
    return 0.5 * sq / n + 0.5 * prior.sigma2 / n * (np.sum(L**2) / prior.sigma_A2 + d * np.sum(V**2) / prior.sigma_V2)


def fd_grad(f, x, h=1e-6):
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = h
        g[i] = (f(x + e) - f(x - e)) / (2 * h)
    return g


@pytest.mark.parametrize("attention", ["softmax", "linear"])
@pytest.mark.parametrize("lr", [3e-3, 0.05])
def test_first_adam_step_moves_each_coordinate_by_lr(attention, lr):
    data = ba.CopyTask(T=T, d=D).sample(jax.random.key(0), P=20)
    prior = ba.Prior(1.0, 10.0, 1.0)
    rng = np.random.default_rng(1)
    L0 = rng.standard_normal((T, T))
    V0 = rng.standard_normal((data.task.d_out, D))
    gL = fd_grad(lambda L: np_objective(L, V0, data, attention, prior), L0)
    gV = fd_grad(lambda V: np_objective(L0, V, data, attention, prior), V0)
    # every gradient coordinate well away from 0, so its sign is sure and Adam's eps (1e-8) is negligible
    assert min(np.abs(gL).min(), np.abs(gV).min()) > 1e-4

    res = ba.train(
        data, prior, attention, jax.random.key(2), optimizer="adam", lr=lr, steps=1, init=(L0, V0), record_every=1
    )
    assert res.failure is None
    L1, V1 = (np.asarray(p) for p in res.final_params)
    for step, g in ((L1 - L0, gL), (V1 - V0, gV)):
        np.testing.assert_allclose(step, -lr * np.sign(g), rtol=1e-3, atol=0)


@pytest.mark.parametrize("attention", ["softmax", "linear"])
def test_objective_value_equals_numpy_reference_with_unequal_variances(attention):
    """J itself (not only its differences) against the numpy J, with sigma_A2, sigma_V2, sigma2 all different
    from 1 and from each other, so that a swapped or dropped variance changes the value."""
    data = ba.CopyTask(T=T, d=D).sample(jax.random.key(3), P=11)
    prior = ba.Prior(2.5, 7.0, 0.3)
    post = ba.Posterior(data, attention, prior)
    rng = np.random.default_rng(4)
    for _ in range(3):
        L, V = rng.standard_normal((T, T)), rng.standard_normal((data.task.d_out, D))
        np.testing.assert_allclose(
            float(training_objective(L, V, post)), np_objective(L, V, data, attention, prior), rtol=1e-11
        )
