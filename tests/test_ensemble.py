"""Many chains in lockstep (method="chees" / "meads") against the same independent references as NUTS: the
prior laws at P = 0 (direct draws, the exact Beta law of u) and docs/model.md's checked number, and against
NUTS itself within 3 standard errors."""

from __future__ import annotations

import math

import jax
import numpy as np
import pytest
from conftest import strip_timings
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
    assert s.summary()["m"]["nested_r_hat"] is None  # undefined, written as null, not as a NaN


def test_chees_few_chain_warmup_matches_the_checked_number():
    """warmup_chains: 4 of 16 chains adapt, then are copied to all 16 and spread by 10 discarded steps. The same
    reference as the full warm-up: <m> = 0.243 at beta = 5, T = 8 (docs/model.md section 4)."""
    few = dict(ENS, warmup_chains=4, spread_steps=10)
    post = copy_posterior(8, 8, 1000, "softmax", 800.0)
    s = ba.sample(post, jax.random.key(2), method="chees", **few)
    m = s.summary()["m"]
    assert abs(m["mean"] - 0.243) < max(3 * m["se"], 0.005), m
    assert s.diagnostics["m"]["r_hat"] < 1.05 and s.L.shape == (16, 250, 8, 8)
    assert s.config["method_options"]["warmup_chains"] == 4


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


@pytest.mark.parametrize(
    "kw, match",
    [
        (dict(method="chees", num_chains=1), "num_chains=1"),
        (dict(method="meads", num_chains=6), "num_folds=4"),
        (dict(method="chees", num_chains=4, learning_rate=-1.0), "learning_rate"),
        (dict(method="chees", num_chains=4, warmup_chains=1), "warmup_chains=1"),
        (dict(method="chees", num_chains=4, warmup_chains=8), "warmup_chains=8"),
        (dict(method="chees", num_chains=4, warmup_chains=2, spread_steps=-1), "spread_steps=-1"),
        (dict(method="chees", num_chains=4, spread_steps=5), "spread_steps=5 with warmup_chains=None"),
        (dict(method="chees", num_chains=4, warmup_chains=4, spread_steps=5), "expected warmup_chains < num_chains"),
        (dict(method="chees", num_chains=4, num_superchains=2), "init='prior'"),
        (dict(method="chees", num_chains=6, num_superchains=4, init="prior"), "divisor"),
    ],
)
def test_ensemble_bad_input(kw, match):
    post = copy_posterior(3, 2, 5, "softmax", 10.0)
    with pytest.raises(ValueError, match=match):
        ba.sample(post, jax.random.key(0), num_warmup=10, num_samples=8, **kw)


def t64_posterior(P):
    return copy_posterior(64, 8, P, "softmax", 400.0)


@pytest.mark.slow  # validation against an independent reference (run with -m slow)
def test_chees_at_t64_away_from_the_window_matches_the_theory():
    """T = 64, one point below (P = 600) and one above (P = 1400) the coexistence window [890, 1120]
    (docs/theory.md): ChEES against the theory's integrated mean, which NUTS matches there within 0.0015
    (docs/theory.md, 'Softmax T = 64, across the window'); the comparison with NUTS itself is the slow test
    below. Short runs, so each starts near its posterior: cold below the window, hot above (from a cold start
    a short warm-up leaves a trace of the climb to the copy branch at P = 1400: docs/ensemble.md). One compiled
    program for both."""
    from bayesattn.bayes import theory as th

    P = np.array([600, 1400])
    task, prior = ba.CopyTask(T=64, d=8), ba.Prior(1.0, 100.0, 400.0)
    expected = np.asarray(th.phase_curve(task, prior, "softmax", P).mean["m"])
    for p, ref, init in zip(P, expected, ("cold", "hot")):
        s = ba.sample(
            t64_posterior(int(p)),
            jax.random.key(7),
            method="chees",
            num_chains=16,
            num_warmup=100,
            num_samples=50,
            init=init,
        )
        m = s.summary()["m"]
        assert abs(m["mean"] - ref) < max(3 * m["se"], 0.002), (int(p), m["mean"], m["se"], ref)
        assert m["r_hat"] < 1.05 and s.diagnostics["num_divergent"] == 0


@pytest.mark.slow
@pytest.mark.parametrize("P", [600, 800, 1400, 2000])
def test_chees_matches_nuts_at_t64_away_from_the_window(P):
    """ChEES (64 chains x (500 + 250)) and the NUTS default (4 x (500 + 1000)) on the same T = 64 data set, away
    from the window [890, 1120]: means within 3 combined standard errors."""
    post = t64_posterior(P)
    nuts = ba.sample(post, jax.random.key(11), num_chains=4, num_warmup=500, num_samples=1000).summary()["m"]
    chees = ba.sample(
        post, jax.random.key(12), method="chees", num_chains=64, num_warmup=500, num_samples=250
    ).summary()["m"]
    assert abs(chees["mean"] - nuts["mean"]) < 3 * math.hypot(chees["se"], nuts["se"]), (P, chees, nuts)
    assert chees["r_hat"] < 1.05 and nuts["r_hat"] < 1.05


@pytest.mark.slow
def test_chees_phase_diagram_points_batched_and_alone(tmp_path):
    """The phase-diagram job with mcmc.method = "chees": a point computed alone (copy_head.mcmc_point, i.e.
    ba.sample) and the same points batched in one program (copy_head.compute.mcmc_points, bayes.batched.sample_many)
    give the same results (bit for bit on a CPU, timings aside), with the nested R-hat's superchain count.
    Slow: two ChEES compilations (~5 min at load 17 on the 2 shared cores)."""
    from bayesattn import sweep
    from bayesattn.experiments.copy_head import RunConfig, build_points
    from bayesattn.experiments.copy_head.compute import mcmc_group_key, mcmc_point, mcmc_points

    cfg = RunConfig.load(
        {
            "attention": ["softmax"],
            "methods": ["mcmc"],
            "task": {"T": 4, "d": 2},
            "prior": {"sigma2": 4.0, "sigma_V2": 10.0},
            "P": {"values": [20, 80]},
            "mcmc": {"method": "chees", "num_chains": 4, "num_warmup": 30, "num_samples": 8, "inits": ["cold", "hot"]},
        }
    )
    points = build_points(cfg)["mcmc"]
    assert len({mcmc_group_key(p) for p in points}) == 1
    many = mcmc_points(points)
    for got, p in zip(many, points):
        ref = mcmc_point(p)
        assert sweep.to_jsonable(strip_timings(got)) == sweep.to_jsonable(strip_timings(ref))
        assert got["inits"]["cold"]["diagnostics"]["num_superchains"] == 1
        assert got["inits"]["hot"]["diagnostics"]["trajectory_length"] > 0
    assert many[0]["inits"]["hot"]["m"]["mean"] != many[1]["inits"]["hot"]["m"]["mean"]


def test_lockstep_step_equals_blackjax_dynamic_hmc_step():
    """The ChEES sampling step with one leapfrog count for all chains (samplers.ensemble.lockstep_dynamic_hmc)
    gives the draws of blackjax's per-chain dynamic_hmc step, vmapped, from the same warm-up, states and keys."""
    import blackjax
    import optax

    from bayesattn.bayes.samplers.chees_loop import lockstep_dynamic_hmc

    data = ba.CopyTask(T=8, d=4).sample(jax.random.key(0), 200)
    post = ba.Posterior(data, "softmax", ba.Prior(1.0, 100.0, 100.0))
    logdensity = lambda x: post.log_density(x.reshape(8, 8))  # noqa: E731
    x0 = 0.1 * jax.random.normal(jax.random.key(1), (6, 64))
    (states, params), _ = blackjax.chees_adaptation(logdensity, 6, mass_matrix_estimation="diagonal").run(
        jax.random.key(2), x0, 0.1, optax.adam(0.025), 40
    )
    ref, new = (
        jax.jit(jax.vmap(blackjax.dynamic_hmc(logdensity, **params).step)),
        jax.jit(lockstep_dynamic_hmc(logdensity, params)),
    )
    a = b = states
    for k in jax.random.split(jax.random.key(3), 5):
        a, ia = ref(jax.random.split(k, 6), a)
        b, ib = new(jax.random.split(k, 6), b)
        np.testing.assert_array_equal(np.asarray(ia.num_integration_steps), np.asarray(ib.num_integration_steps))
        np.testing.assert_array_equal(np.asarray(ia.is_accepted), np.asarray(ib.is_accepted))
    np.testing.assert_allclose(np.asarray(b.position), np.asarray(a.position), rtol=0, atol=1e-10)
    np.testing.assert_array_equal(np.asarray(b.random_generator_arg), np.asarray(a.random_generator_arg))
    assert np.unique(np.asarray(ia.num_integration_steps)).size == 1  # one trajectory length for all chains


def test_few_chain_warmup_copies_the_adapted_chains_and_spreads_them():
    """chees_warmup with warmup_chains = 2 of 6: without spreading, chain i starts where adapted chain i mod 2
    ended, and only the 2 adapting chains count warm-up gradients; spread steps move every chain apart."""
    from bayesattn.bayes.samplers.ensemble import ENSEMBLE_OPTIONS, chees_warmup

    data = ba.CopyTask(T=4, d=2).sample(jax.random.key(0), 50)
    post = ba.Posterior(data, "softmax", ba.Prior(1.0, 100.0, 10.0))
    logdensity = lambda x: post.log_density(x.reshape(4, 4))  # noqa: E731
    x0 = 0.1 * jax.random.normal(jax.random.key(1), (6, 16))
    for spread in (0, 3):
        opts = {**ENSEMBLE_OPTIONS["chees"], "warmup_chains": 2, "spread_steps": spread}
        states, _, (div, grads), _, _ = chees_warmup(logdensity, jax.random.key(2), x0, 6, 20, opts)
        pos, grads = np.asarray(states.position), np.asarray(grads)
        assert pos.shape == (6, 16) and div.shape == grads.shape == (6,)
        if spread == 0:
            np.testing.assert_array_equal(pos, pos[np.arange(6) % 2])
            assert np.all(grads[:2] > 0) and np.all(grads[2:] == 0)
        else:
            assert np.unique(pos, axis=0).shape[0] == 6 and np.all(grads > 0)


# ----------------------------------------------------------------------------------------------- branch starts
@pytest.mark.parametrize("boundary", ["cyclic", "causal"])
def test_branch_starts_put_the_copy_weight_on_every_source_and_draw_the_rest_from_the_prior(boundary):
    """Every query row of every chain puts exactly m on its source (rows with only their source as a key put 1);
    the other logits are prior draws N(0, sigma_A2) (KS against the normal), and no two chains are equal."""
    task = ba.CopyTask(T=8, d=4, boundary=boundary)
    post = ba.Posterior(task.sample(jax.random.key(0), 20), "softmax", ba.Prior(2.0, 100.0, 400.0))
    L = ba.branch_starts(post, jax.random.key(1), 300, 0.37)
    alpha = np.asarray(jax.vmap(post.attention_weights)(L))
    src = np.asarray(task.target_pattern) > 0
    keys = np.asarray(task.key_mask).sum(axis=1)
    for t in np.flatnonzero(np.asarray(task.query_mask)):
        want = 1.0 if keys[t] == 1 else 0.37
        np.testing.assert_allclose(alpha[:, t][:, src[t]], want, rtol=1e-12)
    rest = L[:, ~np.broadcast_to(src, (8, 8))].ravel()
    assert stats.kstest(rest / math.sqrt(2.0), "norm").pvalue > 1e-3
    assert np.unique(L.reshape(300, -1), axis=0).shape[0] == 300


@pytest.mark.parametrize(
    "attention, heads, m, match",
    [
        ("linear", 1, 0.3, "attention='linear'"),
        ("softmax", 2, 0.3, "heads=2"),
        ("softmax", 1, 1.0, "m=1.0"),
        ("softmax", 1, "x", "m='x'"),
    ],
)
def test_branch_starts_bad_input(attention, heads, m, match):
    data = ba.CopyTask(T=4, d=2).sample(jax.random.key(0), 5)
    post = ba.Posterior(data, attention, ba.Prior(1.0, 10.0, 10.0), heads=heads)
    with pytest.raises(ValueError, match=match):
        ba.branch_starts(post, jax.random.key(0), 4, m)


def test_chees_from_branch_starts_samples_the_law_of_a_cold_start():
    """ChEES from the theory's stable branch (phase_curve's m) and from a cold start on the same data
    (beta = 5, T = 8, the program of the tests above): the draws of m follow one law (two-sample KS on
    ESS-thinned draws), so starting on the branch leaves no trace of its starting point."""
    post = copy_posterior(8, 8, 1000, "softmax", 800.0)
    m0 = float(ba.theory.phase_curve(post.task, post.prior, "softmax", [1000.0]).stable["m"][0])
    cold = ba.sample(post, jax.random.key(2), method="chees", **ENS)
    branch = ba.sample(
        post, jax.random.key(3), method="chees", **ENS, init=ba.branch_starts(post, jax.random.key(4), 16, m0)
    )
    a, b = ess_thin(cold.order_parameters["m"]), ess_thin(branch.order_parameters["m"])
    assert stats.ks_2samp(a, b).pvalue > 1e-3, (a.mean(), b.mean(), m0)
    assert branch.diagnostics["m"]["r_hat"] < 1.05 and branch.diagnostics["num_divergent"] == 0
