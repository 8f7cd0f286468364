"""The theory's loss predictions (docs/theory.md section 9), against held-out errors of the exact readout."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import bayesattn as ba
from bayesattn import theory as th
from bayesattn.bayes.theory.common import prediction_error, scales


def _held_out_error(post, task, L, key, P_test=2000):
    test = task.sample(key, P_test)
    rows = np.flatnonzero(task.query_mask)
    mean, _ = post.predict(jnp.asarray(L), jnp.asarray(test.X))
    return float(jnp.mean((mean[:, rows] - jnp.asarray(test.Y)[:, rows]) ** 2))


@pytest.mark.parametrize("attention", ["softmax", "linear"])
def test_prediction_error_matches_held_out_error_of_the_exact_readout(attention):
    """At fixed L, the readout's posterior mean (closed form, trained on P sequences) is scored on fresh
    sequences: its error is 1 - m^2 (q + 2 eps)/(q + eps)^2 up to O(d/n) and sampling noise."""
    T, d, P = 8, 8, 4000
    task, prior = ba.CopyTask(T=T, d=d), ba.Prior(1.0, 100.0, 400.0)
    post = ba.Posterior(task.sample(jax.random.key(3), P), attention, prior)
    _, eps, _ = scales(task, prior, np.array([float(P)]))
    rng = np.random.default_rng(1)
    shift = np.roll(np.eye(T), -1, axis=1)
    for c, s in [(0.0, 0.3), (2.0, 0.5), (4.0, 0.3)]:
        L = c * shift + s * rng.normal(size=(T, T))
        op = post.order_parameters(jnp.asarray(L))
        pred = float(prediction_error(float(op["m"]), float(op["q"]), eps[0]))
        meas = _held_out_error(post, task, L, jax.random.key(7))
        assert abs(meas - pred) < 0.02 * pred + 0.005, (c, s, pred, meas)


def test_loss_curve_levels():
    task, prior = ba.CopyTask(T=16, d=8), ba.Prior(1.0, 100.0, 400.0)
    P = np.array([200.0, 400.0, 800.0, 1600.0, 3200.0])
    lc = th.loss_curve(task, prior, "softmax", P)
    post, plateau, joint = (np.asarray(lc[k]) for k in ("posterior", "plateau", "joint_mode"))
    np.testing.assert_allclose(plateau, 1 - 1 / 16, atol=0.01)  # uniform attention explains 1/T
    assert np.all(np.diff(post) < 0)  # more data, smaller error
    # the posterior's random logits explain less than exactly uniform attention below the transition
    assert post[0] > plateau[0] and post[-1] < 0.5 * plateau[-1]
    assert np.all(joint <= post + 1e-9)  # the joint mode learns the copy pattern earlier than the posterior
    lin = th.loss_curve(task, prior, "linear", P)
    np.testing.assert_allclose(lin["plateau"], 1.0)
    assert lin["joint_mode"][-1] < 0.1 < lin["posterior"][0]
    with pytest.raises(ValueError, match="curve"):
        th.loss_curve(task, prior, "linear", P, curve=th.phase_curve(task, prior, "linear", P[:3]))
    with pytest.raises(
        ValueError, match="curve of attention='softmax': expected the phase_curve of attention='linear'"
    ):
        th.loss_curve(task, prior, "linear", P, curve=th.phase_curve(task, prior, "softmax", P))
    with pytest.raises(ValueError, match="curve=str: expected a PhaseCurve"):
        th.loss_curve(task, prior, "linear", P, curve="x")


@pytest.mark.slow
def test_loss_curve_matches_mcmc_held_out_error():
    """Softmax T = 8, P = 500 (beta = 5): the theory's posterior-mean test error against NUTS draws scored on
    held-out sequences (measured: theory 0.681, MCMC 0.678 +- 0.011)."""
    T, P = 8, 500
    task, prior = ba.CopyTask(T=T, d=8), ba.Prior(1.0, 100.0, 400.0)
    pred = th.loss_curve(task, prior, "softmax", [490.0, 500.0, 510.0])["posterior"][1]
    post = ba.Posterior(task.sample(jax.random.key(P), P), "softmax", prior)
    s = ba.sample(post, jax.random.key(1), num_chains=2, num_warmup=300, num_samples=300)
    Ls = np.asarray(s.L).reshape(-1, T, T)[::10]
    errs = [_held_out_error(post, task, L, jax.random.key(999), P_test=400) for L in Ls]
    assert abs(np.mean(errs) - pred) < 0.05 * pred


def _phase_config(tokens):
    from bayesattn.experiments import get_experiment

    return get_experiment("phase-diagram").load_config(None, [f"task.tokens={tokens}", "task.T=8", "task.d=4"])


@pytest.mark.parametrize("tokens", ["gaussian", "onehot"])
def test_phase_diagram_held_out_error_is_the_theorys_measure(tokens):
    """The phase diagram's MCMC held-out error, against the same error written with an explicit projection: the
    plain squared error per coordinate for Gaussian tokens; for one-hot tokens that of the target's part
    orthogonal to the all-ones vector, over that part's variance (d - 1)/d, which is what the theory predicts
    (tests/test_onehot_linear_theory.py)."""
    from bayesattn.experiments.copy_head.compute import TEST, held_out_error, point_data, point_keys

    cfg = _phase_config(tokens)
    task, P, d = cfg.make_task(), 300, 4
    post = ba.Posterior(point_data(task, cfg.seed, P), "softmax", cfg.make_prior())
    rng = np.random.default_rng(0)
    Ls = np.stack([2.0 * np.roll(np.eye(8), -1, axis=1) + rng.normal(size=(8, 8)) for _ in range(3)])
    got = np.asarray(held_out_error(cfg, post, P)(jnp.asarray(Ls)))
    test = task.sample(point_keys(cfg.seed, TEST, P), 256)
    rows = np.flatnonzero(task.query_mask)
    proj, var = (np.eye(d) - np.ones((d, d)) / d, (d - 1) / d) if tokens == "onehot" else (np.eye(d), d)
    for L, g in zip(Ls, got):
        mean, _ = post.predict(jnp.asarray(L), jnp.asarray(test.X))
        r = (np.asarray(mean)[:, rows] - np.asarray(test.Y)[:, rows]) @ proj
        np.testing.assert_allclose(g, np.mean(np.sum(r**2, -1)) / var, rtol=1e-10)


def test_one_hot_points_say_their_held_out_error_is_the_centred_targets():
    """One-hot theory and MCMC points carry the measure (a changed measure is a new point, never a stale file);
    Gaussian points are as before, so their files stay valid."""
    from bayesattn.experiments.copy_head import build_points

    for tokens, want in (("onehot", "centred target"), ("gaussian", None)):
        pts = build_points(_phase_config(tokens))
        assert {p.get("held_out") for p in pts["theory"] + pts["mcmc"]} == {want}
        assert {p.get("held_out") for p in pts["adam"]} == {None}


@pytest.mark.slow
def test_loss_curve_matches_mcmc_centred_held_out_error_one_hot():
    """One-hot tokens, softmax and linear, T = 8, d = 8, P = 7000 (on both copy rises): the theory's posterior
    test error of the centred target against the phase diagram's MCMC point (NUTS draws scored on held-out
    sequences with its centred measure)."""
    from bayesattn.experiments import get_experiment
    from bayesattn.experiments.copy_head import build_points
    from bayesattn.experiments.copy_head.compute import mcmc_point

    for attention in ("softmax", "linear"):
        cfg = get_experiment("phase-diagram").load_config(
            None, ["task.tokens=onehot", "task.T=8", f"attention={attention}", "P.values=[7000]", "mcmc.inits=[hot]"]
        )
        pred = th.loss_curve(cfg.make_task(), cfg.make_prior(), attention, [6900.0, 7000.0, 7100.0])["posterior"][1]
        te = mcmc_point(build_points(cfg)["mcmc"][0])["inits"]["hot"]["test_error"]
        assert te["target"] == "centred"
        assert abs(te["mean"] - pred) < 0.04 * pred + 3 * te["sem"], (attention, pred, te)
