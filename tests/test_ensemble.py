"""Many chains in lockstep (method="chees" / "meads") against the same independent references as NUTS: the
prior laws at P = 0 (direct draws, the exact Beta law of u) and docs/model.md's checked number, and against
NUTS itself within 3 standard errors."""

from __future__ import annotations

import math

import jax
import numpy as np
import pytest
from numpyro.diagnostics import effective_sample_size
from scipy import stats

import bayesattn as ba

ENS = dict(num_chains=16, num_warmup=300, num_samples=250)  # one compiled program per (method, T, attention)


def ess_thin(x):
    x = np.asarray(x)
    stride = max(1, int(math.ceil(x.size / max(float(effective_sample_size(x)), 1.0))))
    return x[:, ::stride].ravel()


def copy_posterior(T, d, P, attention, sigma2):
    return ba.Posterior(ba.CopyTask(T=T, d=d).sample(jax.random.key(P), P), attention, ba.Prior(1.0, 100.0, sigma2))


def test_chees_at_p0_samples_the_prior_and_matches_the_checked_number():
    # P = 0: L ~ N(0, I); the law of m against direct prior draws (two-sample KS on ESS-thinned draws)
    post0 = copy_posterior(8, 8, 0, "softmax", 800.0)
    s0 = ba.sample(post0, jax.random.key(1), method="chees", **ENS)
    direct = post0.order_parameters(np.random.default_rng(0).standard_normal((4000, 8, 8)))["m"]
    assert stats.ks_2samp(ess_thin(s0.order_parameters["m"]), direct).pvalue > 1e-3
    flat = s0.L.reshape(-1, 64)
    assert abs(flat.mean()) < 0.05 and abs(flat.var() - 1.0) < 0.1
    # beta = P d / (2 sigma2) = 5 at T = 8: <m> = 0.243 (docs/model.md section 4), same compiled program
    post = copy_posterior(8, 8, 1000, "softmax", 800.0)
    s = ba.sample(post, jax.random.key(2), method="chees", **ENS)
    m = s.summary()["m"]
    assert abs(m["mean"] - 0.243) < max(3 * m["se"], 0.005), m
    assert s.diagnostics["m"]["r_hat"] < 1.05 and s.diagnostics["num_divergent"] == 0
    assert s.diagnostics["trajectory_length"] > 0 and s.L.shape == (16, 250, 8, 8)
    assert set(s.sample_stats) >= {"lp", "acceptance_rate", "diverging", "n_steps", "energy"}
    # all chains started cold: one superchain, so the nested R-hat (which needs two) is undefined
    assert s.diagnostics["num_superchains"] == 1 and math.isnan(s.diagnostics["m"]["nested_r_hat"])


def test_chees_linear_u_is_beta_at_p0():
    post = copy_posterior(3, 2, 0, "linear", 10.0)
    s = ba.sample(post, jax.random.key(3), method="chees", init="prior", num_superchains=4, **ENS)
    # four prior draws, each the start of a superchain of four chains: the nested R-hat compares them
    assert s.diagnostics["num_superchains"] == 4
    assert 1.0 <= s.diagnostics["u"]["nested_r_hat"] < 1.05 and "nested_r_hat" in s.summary()["u"]
    D = post.T**2
    u = ess_thin(s.order_parameters["u"])
    assert stats.kstest(u, stats.beta(0.5, (D - 1) / 2).cdf).pvalue > 1e-3
    assert stats.kstest(s.order_parameters["u"].ravel(), stats.beta(0.5, (D + 6 - 1) / 2).cdf).pvalue < 1e-3


def test_meads_matches_the_checked_number():
    """MEADS (GHMC, one leapfrog step per transition, so thinned) at the T = 8, beta = 5 reference point: <m> =
    0.243, the number NUTS and the theory agree on (docs/model.md section 4)."""
    post = copy_posterior(8, 8, 1000, "softmax", 800.0)
    s = ba.sample(post, jax.random.key(5), method="meads", num_chains=32, num_warmup=400, num_samples=200, thin=10)
    m = s.summary()["m"]
    assert abs(m["mean"] - 0.243) < max(3 * m["se"], 0.005), m
    assert s.diagnostics["m"]["r_hat"] < 1.05


@pytest.mark.parametrize("kw, match", [
    (dict(method="chees", num_chains=1), "num_chains=1"),
    (dict(method="meads", num_chains=6), "num_folds=4"),
    (dict(method="chees", num_chains=4, learning_rate=-1.0), "learning_rate"),
    (dict(method="chees", num_chains=4, num_superchains=2), "init='prior'"),
    (dict(method="chees", num_chains=6, num_superchains=4, init="prior"), "divisor"),
])
def test_ensemble_bad_input(kw, match):
    post = copy_posterior(3, 2, 5, "softmax", 10.0)
    with pytest.raises(ValueError, match=match):
        ba.sample(post, jax.random.key(0), num_warmup=10, num_samples=8, **kw)
