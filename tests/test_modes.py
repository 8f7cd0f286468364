"""Mode weights from per-branch SMC evidences (bayesattn.bayes.modes) against exact weights of a mixture whose
modes a standard-normal prior barely covers, and their input checks."""

from __future__ import annotations

import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import bayesattn as ba

W = (0.3, 0.7)
MU = 6.0  # the modes sit 6 prior standard deviations out: SMC from N(0, 1) would not find them reliably
SD = 0.5


def log_mixture(x):
    """Normalised mixture density in 3 dimensions: branch a (weight 0.3) at +6, branch b (0.7) at -6."""
    comp = lambda c: -0.5 * jnp.sum(((x - c) / SD) ** 2) - 3 * (math.log(SD) + 0.5 * math.log(2 * math.pi))  # noqa: E731
    return jnp.logaddexp(math.log(W[0]) + comp(MU), math.log(W[1]) + comp(-MU))


def test_branch_evidences_recover_exact_weights_and_evidences():
    # references fitted to draws of each branch, deliberately a bit off (shifted, widened)
    refs = {"a": (np.full(3, MU + 0.2), np.full(3, 0.8)), "b": (np.full(3, -MU - 0.1), np.full(3, 0.7))}
    mw = ba.branch_evidences(
        log_mixture, jax.random.key(1), refs, runs=3, num_particles=128, num_mcmc_steps=10, observable_fn=lambda x: x[0]
    )
    for name, w in zip("ab", W):
        # log Z_b is log w_b: each branch integrates to its weight
        assert abs(mw.log_evidence[name] - math.log(w)) < max(4 * mw.log_evidence_se[name], 0.05), mw.log_evidence
        assert abs(mw.weights[name] - w) < max(4 * mw.weights_se[name], 0.02)
    assert abs(sum(mw.weights.values()) - 1) < 1e-12
    assert mw.observable_range["a"][0] > 3 and mw.observable_range["b"][1] < -3  # no run crossed the barrier
    np.testing.assert_allclose(mw.log_odds["b"], mw.log_evidence["b"] - mw.log_evidence["a"])


def test_prior_smc_misses_the_far_branch():
    """The reason for the per-branch estimator: from the prior, the tempering path rarely reaches +6 and -6 in
    proportion (weights off by far more than the per-branch estimate's error)."""

    @jax.jit
    def run(k):
        x0 = jax.random.normal(k, (256, 3))
        logp = lambda x: -0.5 * jnp.sum(x**2) - 1.5 * math.log(2 * math.pi)  # noqa: E731
        out = ba.tempered_smc(
            logp, lambda x: log_mixture(x) - logp(x), jax.random.fold_in(k, 1), x0, num_mcmc_steps=2, target_ess=0.5
        )
        return jnp.sum(out["weights"] * (out["particles"][:, 0] > 0))

    est = [float(run(k)) for k in jax.random.split(jax.random.key(5), 3)]
    assert np.std(est) > 0.05 or abs(np.mean(est) - W[0]) > 0.1, est


@pytest.fixture(scope="module")
def post():
    data = ba.CopyTask(T=4, d=2).sample(jax.random.key(0), 20)
    return ba.Posterior(data, "softmax", ba.Prior(1.0, 10.0, 5.0))


def test_mode_weights_bad_input(post):
    low = (np.zeros((4, 4)), np.full((4, 4), 0.1))
    high = (5.0 * post.task.target_pattern, np.full((4, 4), 0.1))
    with pytest.raises(ValueError, match="at least two"):
        ba.mode_weights(post, jax.random.key(0), {"low": low})
    with pytest.raises(ValueError, match=r"branches\['high'\] .*expected \(4, 4\)"):
        ba.mode_weights(post, jax.random.key(0), {"low": low, "high": (np.zeros((3, 3)), np.ones((3, 3)))})
    with pytest.raises(ValueError, match=r"branches\['high'\] has shape \(10, 4\)"):
        ba.mode_weights(post, jax.random.key(0), {"low": low, "high": np.zeros((10, 4))})
    with pytest.raises(ValueError, match="'low' and 'again' overlap"):
        ba.mode_weights(post, jax.random.key(0), {"low": low, "again": (np.full((4, 4), 0.01), np.full((4, 4), 0.1))})
    with pytest.raises(ValueError, match="posterior="):
        ba.mode_weights("x", jax.random.key(0), {"low": low, "high": high})
    with pytest.raises(ValueError, match=r"branches\['high'\] is a list of two: ambiguous"):
        ba.mode_weights(post, jax.random.key(0), {"low": low, "high": list(high)})
    # complex draws were cut to their real part and a text array parsed as numbers (Dataset.from_arrays' check)
    draws = 5.0 * np.asarray(post.task.target_pattern) + 0.01 * np.random.default_rng(0).standard_normal((10, 4, 4))
    with pytest.raises(ValueError, match=r"branches\['high'\] has dtype complex128: expected real numbers"):
        ba.mode_weights(post, jax.random.key(0), {"low": low, "high": draws + 1j})
    with pytest.raises(ValueError, match=r"branches\['high'\] has dtype <U.*: expected real numbers"):
        ba.mode_weights(post, jax.random.key(0), {"low": low, "high": draws.astype(str)})
    # an unknown option was named as branch_evidences' (the inner function), and only after the references were fitted
    with pytest.raises(
        TypeError, match=r"mode_weights\(\) got unexpected keyword argument\(s\) 'foo': expected any of runs"
    ):
        ba.mode_weights(post, jax.random.key(0), {"low": low, "high": high}, foo=1)
    with pytest.raises(TypeError, match=r"mode_weights\(\) .*'observable_fn'.*max_steps$"):
        ba.mode_weights(post, jax.random.key(0), {"low": low, "high": high}, observable_fn=len)


def test_branch_evidences_bad_references():
    """Each reference is a (mean, std) tuple, checked before any SMC: a (2, ...) array of draws is not read as
    one, a zero std (which would give NaN weights) and shapes that differ are refused."""
    good = (np.full(3, MU), np.full(3, 0.5))
    key = jax.random.key(0)
    with pytest.raises(ValueError, match=r"branches\['b'\]=ndarray: expected a \(mean, std\) tuple"):
        ba.branch_evidences(log_mixture, key, {"a": good, "b": np.zeros((2, 3))})
    with pytest.raises(ValueError, match=r"branches\['b'\]: expected a finite mean and a positive finite std"):
        ba.branch_evidences(log_mixture, key, {"a": good, "b": (np.full(3, -MU), np.zeros(3))})
    with pytest.raises(ValueError, match=r"branches\['b'\] = \(mean, std\) of shapes \(2,\), \(2,\): expected \(3,\)"):
        ba.branch_evidences(log_mixture, key, {"a": good, "b": (np.zeros(2), np.ones(2))})


def test_mode_weights_on_a_posterior_against_a_brute_force_evidence(post):
    """Two references, cold and hot, on a small posterior with one mode: each branch's SMC ends on that whole
    posterior, so each log evidence estimates the same log Z = log E_prior[p(D | L)], here by plain Monte Carlo
    over 100 000 prior draws (an independent estimator); the weights are normalised."""
    from scipy.special import logsumexp

    rng = np.random.default_rng(1)
    low = 0.05 * rng.standard_normal((50, 4, 4))
    high = 4.0 * post.task.target_pattern + 0.05 * rng.standard_normal((50, 4, 4))
    mw = ba.mode_weights(
        post, jax.random.key(2), {"low": low, "high": high}, runs=2, num_particles=64, num_mcmc_steps=5
    )
    loglik = jax.jit(jax.vmap(post.log_likelihood))
    draws = np.sqrt(post.prior.sigma_A2) * jax.random.normal(jax.random.key(3), (100_000, 4, 4))
    ll = np.asarray(loglik(draws))
    log_z = logsumexp(ll) - np.log(ll.size)
    w = np.exp(ll - log_z)
    se_mc = np.std(w) / np.sqrt(ll.size)  # of Z / Z, i.e. of log Z to first order
    assert se_mc < 0.15, se_mc  # the brute force is precise enough to judge by
    for b in ("low", "high"):
        assert abs(mw.log_evidence[b] - log_z) < 4 * mw.log_evidence_se[b] + 4 * se_mc + 0.05, (b, mw.log_evidence)
    assert abs(sum(mw.weights.values()) - 1) < 1e-12
    assert mw.config["by"] == "m"
    assert json.loads(json.dumps(mw.to_dict()))["names"] == ["low", "high"]


def test_seed_summary_of_the_coexistence_script():
    """scripts/coexistence_seeds.py's summary: per-seed log-odds and weights, their mean and spread over seeds
    (numpy's), the theory's log-odds from its weight, and a seed without a branch reference left out."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "scripts" / "coexistence_seeds.py"
    spec = importlib.util.spec_from_file_location("coexistence_seeds", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)

    def result(lo, se_low, se_high):
        w = 1 / (1 + math.exp(-lo))
        return {
            "theory": {"predicted_high_weight": 0.6},
            "smc_branches": {
                "log_odds": {"low": 0.0, "high": lo},
                "weights": {"low": 1 - w, "high": w},
                "log_evidence_se": {"low": se_low, "high": se_high},
            },
        }

    los = [0.5, 1.5, -0.2]
    res = {s: result(lo, 0.3, 0.4) for s, lo in enumerate(los)}
    res[3] = {"theory": {"predicted_high_weight": 0.6}, "smc_branches": None}
    s = mod.summarize(res)
    assert s["seeds_used"] == 3 and s["per_seed"][3] is None
    assert s["mean_log_odds"] == pytest.approx(np.mean(los))
    assert s["sd_log_odds"] == pytest.approx(np.std(los, ddof=1))
    assert s["per_seed"][0]["log_odds_se"] == pytest.approx(0.5)
    assert s["theory_log_odds"] == pytest.approx(math.log(0.6 / 0.4))
    assert s["gap_to_theory_log_odds"] == pytest.approx(np.mean(los) - math.log(1.5))
    w = [1 / (1 + math.exp(-x)) for x in los]
    assert s["mean_weight"] == pytest.approx(np.mean(w)) and s["sd_weight"] == pytest.approx(np.std(w, ddof=1))
