"""Samples.to_arviz(): the draws and sampler statistics in ArviZ, whose own ESS and R-hat (a second library)
must agree with what Samples reports."""

from __future__ import annotations

import sys

import jax
import numpy as np
import pytest

import bayesattn as ba
from bayesattn.bayes.samples import split_ess

az = pytest.importorskip("arviz")


def ar1(rho, shape, seed):
    rng = np.random.default_rng(seed)
    e = rng.standard_normal(shape)
    x = np.zeros(shape)
    for t in range(1, shape[1]):
        x[:, t] = rho * x[:, t - 1] + e[:, t]
    return x


@pytest.mark.parametrize("rho", (0.0, 0.5, 0.9))
def test_split_ess_is_arviz_mean_ess(rho):
    x = ar1(rho, (4, 1001), seed=int(10 * rho))
    ref = float(az.ess(az.from_dict(posterior={"a": x}), method="mean")["a"])
    np.testing.assert_allclose(split_ess(x), ref, rtol=1e-2)
    # and it is the split estimator: a chain that drifts has a small ESS (the unsplit one would not see it)
    drift = x + np.linspace(-3, 3, x.shape[1])[None, :]
    assert split_ess(drift) < 0.5 * split_ess(x)


def test_split_ess_is_capped_as_arviz_caps_it():
    """Short anticorrelated chains: without the cap the Geyer estimator reported several times the draws (589 for
    2 x 60 draws here); the cap N log10 N is ArviZ's, so both give the same value where it binds."""
    x = ar1(-0.3, (2, 60), seed=3)  # the raw estimate: 589 for 120 draws
    ref = float(az.ess(az.from_dict(posterior={"a": x}), method="mean")["a"])
    n = x.size
    assert split_ess(x) <= n * np.log10(n) + 1e-9
    np.testing.assert_allclose(split_ess(x), ref, rtol=1e-12)


@pytest.mark.filterwarnings("error")
def test_split_ess_of_equal_draws_is_arviz_ess():
    """Draws that are all equal, exactly or up to rounding (an observable the task fixes), have as many effective
    draws as draws, ArviZ's convention, without a division of zero by zero; one NaN draw still gives NaN."""
    for x in (np.full((2, 31), 0.25), 0.2909887304360265 + np.array([[0.0, 5.551115123125783e-17] * 15])):
        ref = float(az.ess(az.from_dict(posterior={"a": x}), method="mean")["a"])
        assert split_ess(x) == ref == 2 * (x.shape[1] // 2) * x.shape[0]
    with np.errstate(invalid="ignore"):
        assert np.isnan(split_ess(np.array([[0.25] * 9 + [np.nan]] * 2)))


@pytest.fixture(scope="module")
def runs():
    data = ba.CopyTask(T=4, d=2).sample(jax.random.key(0), 40)
    post = ba.Posterior(data, "softmax", ba.Prior(1.0, 10.0, 10.0))
    return {
        b: ba.sample(post, jax.random.key(1), num_chains=4, num_warmup=200, num_samples=500, backend=b)
        for b in ("blackjax", "numpyro")
    }


@pytest.mark.parametrize("backend", ("blackjax", "numpyro"))
def test_to_arviz_groups_and_diagnostics_agree(runs, backend):
    s = runs[backend]
    idata = s.to_arviz()
    assert set(idata.posterior.data_vars) == set(s.order_parameters) | {"L"}
    assert idata.posterior["L"].shape == s.L.shape
    ess, rhat = az.ess(idata, method="mean"), az.rhat(idata, method="split")
    for name in s.order_parameters:
        np.testing.assert_allclose(idata.posterior[name].values, s.order_parameters[name])
        np.testing.assert_allclose(float(rhat[name]), s.diagnostics[name]["r_hat"], rtol=1e-10)
        # the same Geyer estimator on split chains; the two libraries truncate the autocorrelation sum of
        # antithetic chains (ESS > draws, as NUTS gives here) slightly differently
        np.testing.assert_allclose(float(ess[name]), s.diagnostics[name]["ess_bulk"], rtol=0.15)
    st = idata.sample_stats
    for k in ("lp", "acceptance_rate", "diverging", "n_steps", "energy", "step_size"):
        assert st[k].shape == (4, 500), k
    assert int(st["diverging"].sum()) == s.diagnostics["num_divergent"]
    np.testing.assert_allclose(float(st["acceptance_rate"].mean()), s.diagnostics["acceptance_rate"], rtol=1e-10)
    np.testing.assert_allclose(st["step_size"].values[:, 0], np.asarray(s.diagnostics["step_size"]), rtol=1e-12)
    assert np.all(np.asarray(az.bfmi(idata)) > 0.3)  # the energies are a real Hamiltonian's: E-BFMI is defined
    summary = az.summary(idata, var_names=["m", "q"])
    np.testing.assert_allclose(summary.loc["m", "mean"], s.order_parameters["m"].mean(), atol=1e-3)


def test_to_arviz_two_heads_and_smc():
    data = ba.CopyTask(T=3, d=2).sample(jax.random.key(0), P=5)
    post = ba.Posterior(data, "linear", ba.Prior(), heads=2)
    s = ba.sample(post, jax.random.key(3), method="smc", num_chains=2, num_samples=100)
    idata = s.to_arviz()
    assert idata.posterior["L"].dims == ("chain", "draw", "head", "query", "key")
    assert "sample_stats" not in idata.groups()  # SMC particles have no per-draw sampler statistics


def test_to_arviz_refuses_an_include_L_that_is_not_a_bool():
    """include_L='no' was read as true: the logits were included."""
    from bayesattn.bayes.samples import Samples

    s = Samples(np.zeros((1, 2, 3, 3)), {"m": np.zeros((1, 2))}, {}, "nuts", {})
    with pytest.raises(ValueError, match="include_L='no': expected True or False"):
        s.to_arviz(include_L="no")
    assert set(s.to_arviz(include_L=False).posterior.data_vars) == {"m"}


def test_to_arviz_without_arviz_says_how_to_install(runs, monkeypatch):
    monkeypatch.setitem(sys.modules, "arviz", None)
    with pytest.raises(ImportError, match=r"bayesattn\[arviz\]"):
        runs["blackjax"].to_arviz()
