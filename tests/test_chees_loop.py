"""ChEES's warm-up with the length floor from stored positions (bayesattn.bayes.samplers.chees_loop) against
blackjax.chees_adaptation itself, on a target where the floor binds, and the option end to end."""

from __future__ import annotations

import blackjax
import jax
import numpy as np
import optax
import pytest
from blackjax.adaptation.base import get_filter_adapt_info_fn

import bayesattn as ba
from bayesattn.bayes.samplers.chees_loop import (
    chees_warmup_stored,
    stored_rows,
    use_stored_floor,
    whitened_matvec,
)

SETTINGS = dict(target_acceptance_rate=0.651, max_leapfrog_steps=1000)
INFO = get_filter_adapt_info_fn(info_keys={"is_divergent", "num_integration_steps"})


def correlated_gaussian(dim, seed):
    """log N(x; 0, C) with a C whose whitened top eigenvalue is large: a slow direction the diagonal mass matrix
    cannot remove, so that ChEES's length floor binds."""
    a = np.random.default_rng(seed).standard_normal((dim, dim))
    prec = np.linalg.inv(a @ a.T + 0.05 * np.eye(dim))
    return lambda x: -0.5 * x @ prec @ x


@pytest.mark.parametrize("dim, chains, steps", [(6, 8, 200), (12, 4, 130)])
def test_stored_floor_warmup_is_blackjax_chees_step_for_step(dim, chains, steps):
    logdensity = correlated_gaussian(dim, dim)
    x0 = np.random.default_rng(1).standard_normal((chains, dim))
    key, optim = jax.random.key(dim), optax.adam(0.025)

    def reference(**private):
        warmup = blackjax.chees_adaptation(
            logdensity, chains, **SETTINGS, mass_matrix_estimation="diagonal", adaptation_info_fn=INFO, **private
        )
        return warmup.run(key, x0, 0.1, optim, steps)

    (ref_states, ref_params), ref_info = reference()
    (states, params), (div, n_steps) = chees_warmup_stored(logdensity, key, x0, 0.1, optim, steps, **SETTINGS)
    for name in ("step_size", "inverse_mass_matrix"):
        np.testing.assert_allclose(params[name], ref_params[name], rtol=1e-12)
    np.testing.assert_allclose(params["integration_steps_params"][0], ref_params["integration_steps_params"][0], 1e-10)
    np.testing.assert_array_equal(n_steps, ref_info.info.num_integration_steps)
    np.testing.assert_array_equal(div, ref_info.info.is_divergent)
    np.testing.assert_allclose(states.position, ref_states.position, rtol=0, atol=1e-9)
    np.testing.assert_allclose(states.logdensity, ref_states.logdensity, rtol=1e-10)
    # the floor binds here: without it blackjax adapts a shorter trajectory (its private ablation switch)
    (_, unfloored), _ = reference(_length_floor=False)
    assert params["integration_steps_params"][0] > 1.2 * unfloored["integration_steps_params"][0]


def test_stored_floor_option_samples_as_the_covariance_floor():
    """ba.sample(method="chees", stored_floor=True) draws what blackjax's warm-up (stored_floor=False) draws with
    the same key, records the option in its config, and rejects a non-bool before any work."""
    post = ba.Posterior(ba.CopyTask(T=4, d=2).sample(jax.random.key(0), 50), "softmax", ba.Prior(1.0, 100.0, 10.0))
    run = dict(method="chees", num_chains=8, num_warmup=120, num_samples=20)
    a = ba.sample(post, jax.random.key(5), **run, stored_floor=False)
    b = ba.sample(post, jax.random.key(5), **run, stored_floor=True)
    np.testing.assert_allclose(b.L, a.L, rtol=0, atol=1e-9)
    assert b.config["method_options"]["stored_floor"] is True
    assert b.diagnostics["num_grad_evals"] == a.diagnostics["num_grad_evals"] > 0
    with pytest.raises(ValueError, match=r"stored_floor=1: expected True, False or None"):
        ba.sample(post, jax.random.key(5), **run, stored_floor=1)


@pytest.mark.parametrize(
    "option, dim, chains, stored",
    [(None, 1024, 16, True), (None, 1024, 32, True), (None, 1024, 64, False), (None, 16, 8, False)]
    + [(True, 16, 8, True), (False, 4096, 2, False)],
)
def test_the_default_takes_stored_positions_where_the_dimension_is_large_against_the_chains(
    option, dim, chains, stored
):
    assert use_stored_floor(option, dim, chains) is stored


@pytest.mark.parametrize("dim, filled", [(5, 1), (5, 2), (3000, 7), (3000, 100), (3000, 175)])
def test_stored_products_are_the_whitened_covariance_times_the_vector(dim, filled):
    """whitened_matvec over the first n rows of a buffer (the others junk; at dim = 3000 over 1 to 3 blocks)
    against numpy's covariance of those rows, whitened by D^-1/2, times u; n = 1 gives the zero matrix (blackjax's
    m2 / max(n - 1, 1) with m2 = 0)."""
    rng = np.random.default_rng(dim + filled)
    buf = rng.standard_normal((stored_rows(max(filled, 160), dim), dim)) * 3.0 + 7.0  # rows past n must not count
    x, imm, u = buf[:filled], rng.uniform(0.5, 2.0, dim), rng.standard_normal(dim)
    cov = np.cov(x, rowvar=False) if filled > 1 else np.zeros((dim, dim))
    want = (cov / np.sqrt(np.outer(imm, imm))) @ u
    got = whitened_matvec(jax.numpy.asarray(buf), x.sum(0), filled, imm)(u)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
