"""Checks of the samplers' plumbing that a wrong number would otherwise slip through.

- The warm-up state is handed to sampling: at P = 0 the target is exactly N(0, sigma_A2 I); chains started
  30 prior standard deviations out must, after a short warm-up, keep only draws of that Gaussian.
- Every chain gets its own key: chains started from one point with one key must still differ.
- The diagnostics of each reported observable are numpyro's ESS and split R-hat of that observable's draws.
- R-hat is the *split* R-hat: chains that agree with each other but drift within themselves are flagged.

References: the exact Gaussian target, and numpyro.diagnostics recomputed here on the returned draws.
Observables are iterated from what the sampler reports, not from a fixed list.
"""

from __future__ import annotations

import math
import re

import jax
import numpy as np
import pytest
from numpyro.diagnostics import effective_sample_size, gelman_rubin, split_gelman_rubin

import bayesattn as ba
from bayesattn.bayes.samples import assemble_samples

T = 3
SIGMA_A2 = 1.0
FAR = 30.0  # start, in prior standard deviations, on every coordinate
COUNTS = dict(num_chains=4, num_warmup=100, num_samples=200)  # short warm-up: a transient would dominate


def prior_posterior(attention="softmax", sigma_A2=SIGMA_A2):
    data = ba.CopyTask(T=T, d=2).sample(jax.random.key(0), P=0)  # no data: the posterior is the prior
    return ba.Posterior(data, attention, ba.Prior(sigma_A2, 100.0, 10.0))


# blackjax NUTS and MALA (the two adaptation paths of sampling.py); numpyro's hand-off is numpyro's own and
# its run costs about 35 s here, too much for the default suite
@pytest.fixture(scope="module", params=["nuts", "mala"])
def far_start_run(request):
    post = prior_posterior()
    s = ba.sample(post, jax.random.key(7), method=request.param, init=FAR * np.ones((T, T)), **COUNTS)
    return post, s


def test_warmup_state_is_handed_to_sampling(far_start_run):
    """P = 0, start at L = 30 everywhere: the kept draws are N(0, 1) draws. If sampling restarted from the
    initial position, the first kept draws would sit near 30 and drag the mean by many standard errors."""
    _, s = far_start_run
    L = s.L.reshape(s.num_chains, s.num_draws, -1)
    assert np.all(np.isfinite(L)) and s.diagnostics["num_nan"] == 0
    # every kept draw in the target's typical set: P(max of 7200 |N(0,1)| > 6) < 1e-5
    assert np.abs(L).max() < 6 * math.sqrt(SIGMA_A2)
    # the mean over all coordinates (independent under the target, all started on the same side) within
    # 4 standard errors of 0, each coordinate's standard error from its own ESS
    ess = np.array([float(effective_sample_size(L[..., j])) for j in range(L.shape[-1])])
    assert np.all(ess > 50), ess
    se = math.sqrt(np.sum(SIGMA_A2 / ess)) / L.shape[-1]
    assert abs(L.mean()) < 4 * se, (L.mean(), se)
    # and the per-coordinate variance is sigma_A2 (a chain stuck out at 30 would blow it up)
    assert abs(np.mean(L**2) - SIGMA_A2) < 0.25


def test_chains_from_one_point_and_one_key_differ(far_start_run):
    """All chains of the far-start run share the starting point and the key passed to sample(); each chain
    must still get its own key. Independent N(0, 1) chains differ draw by draw by E|x - y| = 2/sqrt(pi)."""
    _, s = far_start_run
    L = s.L.reshape(s.num_chains, s.num_draws, -1)
    for a in range(s.num_chains):
        for b in range(a + 1, s.num_chains):
            diff = np.abs(L[a] - L[b])
            assert diff.mean() > 0.5, (a, b, diff.mean())
            assert np.mean(diff == 0) < 0.5, (a, b)  # not the same path (MALA may reject; NUTS never repeats)


def test_diagnostics_are_each_observables_own_ess_and_split_rhat(far_start_run):
    """For each reported observable, the reported ESS and R-hat equal numpyro's effective_sample_size on the
    split chains (first and last halves as separate chains) and split_gelman_rubin of that observable's returned
    draws; the summary's se uses that ESS."""
    _, s = far_start_run
    names = list(s.order_parameters)
    assert len(names) >= 3
    summ = s.summary()
    for name in names:
        x = np.asarray(s.order_parameters[name])
        assert x.shape == (s.num_chains, s.num_draws)
        half = x.shape[1] // 2
        ess = float(effective_sample_size(np.concatenate([x[:, :half], x[:, -half:]], axis=0)))
        rhat = float(split_gelman_rubin(x))
        assert s.diagnostics[name]["ess_bulk"] == pytest.approx(ess, rel=1e-10), name
        assert s.diagnostics[name]["r_hat"] == pytest.approx(rhat, rel=1e-10), name
        # the summary reports every observable, never silently drops one
        assert summ[name]["ess_bulk"] == pytest.approx(ess, rel=1e-10), name
        assert summ[name]["r_hat"] == pytest.approx(rhat, rel=1e-10), name
        assert summ[name]["se"] == pytest.approx(np.std(x) / math.sqrt(ess), rel=1e-10), name
    # the observables' ESS differ, so an ESS computed on another observable's draws cannot match by chance
    values = [s.diagnostics[n]["ess_bulk"] for n in names]
    assert len(set(np.round(values, 6))) == len(values), values


def test_split_rhat_flags_chains_that_drift_within_themselves():
    """Four chains with the same law: first half of each near one L, second half near another. The chains
    agree with each other (plain R-hat ~ 1), but each drifts: split R-hat must flag every observable that
    moves. Exercised through bayesattn.bayes.samples.assemble_samples (ba.sample returns its Samples through
    it; no sampler takes given draws)."""
    post = prior_posterior()
    rng = np.random.default_rng(19)
    chains, draws = 4, 200
    A = 2.0 * rng.standard_normal((T, T))
    sign = np.where(np.arange(draws) < draws // 2, 1.0, -1.0)  # +1 then -1 in every chain
    L = sign[None, :, None, None] * A + 0.1 * rng.standard_normal((chains, draws, T, T))
    s = assemble_samples(post, L, np.zeros((chains, draws)), {}, "nuts", {})
    flagged = []
    for name, x in s.order_parameters.items():
        x = np.asarray(x)
        first, second = x[:, : draws // 2], x[:, draws // 2 :]
        if abs(first.mean() - second.mean()) < 3 * max(first.std(), second.std()):
            continue  # an observable blind to this drift (m, q and u all see it: gaps of 6 to 50 stds)
        assert float(gelman_rubin(x)) < 1.1, name  # the construction: chains agree, plain R-hat is blind
        assert s.diagnostics[name]["r_hat"] > 1.1, (name, s.diagnostics[name]["r_hat"])
        assert s.diagnostics[name]["r_hat"] == pytest.approx(float(split_gelman_rubin(x)), rel=1e-10)
        flagged.append(name)
    assert len(flagged) >= min(3, len(s.order_parameters)), flagged


def test_non_finite_draws_are_counted_and_an_unusable_ess_gives_no_se():
    """num_nan counts the draws whose L or log density is not finite; se = std / sqrt(ESS) only for a
    positive, finite ESS (else NaN), through the public Samples.summary."""
    post = prior_posterior()
    rng = np.random.default_rng(3)
    L = rng.standard_normal((2, 8, T, T))
    logdens = np.zeros((2, 8))
    logdens[0, 3] = logdens[1, 0] = np.nan
    logdens[1, 5] = -np.inf
    s = assemble_samples(post, L, logdens, {}, "nuts", {})
    assert s.diagnostics["num_nan"] == 3
    for ess in (0.0, -5.0, math.inf, math.nan):
        diag = {**s.diagnostics, **{n: {"ess_bulk": ess, "r_hat": 1.0} for n in s.order_parameters}}
        summ = ba.Samples(
            L=L, order_parameters=s.order_parameters, diagnostics=diag, method="nuts", config={}
        ).summary()
        for name in s.order_parameters:
            assert math.isnan(summ[name]["se"]), (ess, name)


def test_fewest_kept_draws_is_four():
    """Split R-hat needs 4 kept draws per chain: num_samples // thin = 4 is accepted, 3 is refused."""
    post = prior_posterior()
    with pytest.raises(ValueError, match="num_samples // thin >= 4"):
        ba.sample(post, jax.random.key(0), method="mala", num_chains=1, num_warmup=1, num_samples=7, thin=2)
    s = ba.sample(post, jax.random.key(0), method="mala", num_chains=1, num_warmup=1, num_samples=8, thin=2)
    assert s.L.shape == (1, 4, T, T)


def test_summary_draws_are_the_draws_thinned_to_at_most_1000_per_chain():
    post = prior_posterior()
    rng = np.random.default_rng(5)
    for draws, stride in ((200, 1), (2500, 3)):
        L = rng.standard_normal((2, draws, T, T))
        s = assemble_samples(post, L, np.zeros((2, draws)), {}, "nuts", {})
        summ = s.summary()
        assert summ["draws_stride"] == stride
        for name, x in s.order_parameters.items():
            np.testing.assert_array_equal(np.asarray(summ["draws"][name]), np.asarray(x)[:, ::stride])
            assert (
                np.shape(summ["draws"][name]) == (2, math.ceil(draws / stride)) and len(summ["draws"][name][0]) <= 1000
            )


@pytest.mark.parametrize("method", ["nuts", "smc"])
def test_zero_chains_is_refused_for_every_method(method):
    with pytest.raises(ValueError, match="num_chains=0"):
        ba.sample(prior_posterior(), jax.random.key(0), method=method, num_chains=0)


def test_smc_options_are_checked_before_it_runs():
    """SMC's options, through sample() and through tempered_smc itself (which mode_weights and branch_evidences
    call): a target ESS outside (0, 1), a count below 1, a step size <= 0, a NaN mode threshold or an init that is
    none of the sampler inits is refused naming it."""
    import jax.numpy as jnp

    from bayesattn.bayes.samplers import tempered_smc

    task = ba.CopyTask(T=4, d=2)
    post = ba.Posterior(task.sample(jax.random.key(0), 5), "softmax", ba.Prior(1.0, 100.0, 20.0))
    kw = dict(method="smc", num_chains=4, num_warmup=1, num_samples=4)
    for options, named in [
        (dict(target_ess=1.0), "target_ess=1.0"),
        (dict(mode_threshold=float("nan")), "mode_threshold=nan"),
        (dict(initial_step_size=-1.0), "initial_step_size=-1.0"),
        (dict(max_steps=0), "max_steps=0"),
    ]:
        with pytest.raises(ValueError, match=re.escape(named)):
            ba.sample(post, jax.random.key(1), **kw, **options)
    # SMC draws its particles from the prior: any other start would be recorded with the result but not used
    for init in ("bogus", "cold", "hot", np.zeros((4, 4))):
        with pytest.raises(ValueError, match=r"init=.*: smc draws its particles from the prior; expected init='prior'"):
            ba.sample(post, jax.random.key(1), init=init, **kw)
    assert ba.sample(post, jax.random.key(1), **kw).config["init"] == "prior"  # what it did, recorded
    assert ba.sample(post, jax.random.key(1), init="prior", **kw).config["init"] == "prior"
    lp = lambda x: -0.5 * jnp.sum(x**2)  # noqa: E731
    particles = jnp.zeros((4, 2))
    for options, named in [
        (dict(target_ess=2.0), "target_ess=2.0"),
        (dict(num_mcmc_steps=1.5), "num_mcmc_steps=1.5"),
        (dict(max_steps=-1), "max_steps=-1"),
        (dict(initial_step_size=0.0), "initial_step_size=0.0"),
    ]:
        with pytest.raises(ValueError, match=re.escape(named)):
            tempered_smc(lp, lp, jax.random.key(2), particles, **options)
