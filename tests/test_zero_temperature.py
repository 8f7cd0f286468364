"""The zero-temperature theory (ba.theory.mode_curve) against a direct optimisation of the closed form, and its
closed forms (linear P_c, the reduced action)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.optimize as so

import bayesattn as ba
from bayesattn.bayes.theory.common import action

# sigma2 and P scaled together by K keep beta and eps (the whole reduced theory) fixed while the data
# self-average better (relative fluctuations of G, C ~ 1/sqrt(P))
K = 20


def direct_mode(post, L0, objective):
    """argmax_L of log p(L, D) (marginal) or of max_V log p(L, V, D) = log p(L, D) + (d_out/2) log det(I + G/lam)
    + const (joint), by L-BFGS on the closed form from L0."""
    d = post.d

    def f(x):
        L = x.reshape(post.L_shape)
        lp = post.log_density(L)
        if objective == "joint":
            G, _ = post.gram(L)
            lp = lp + 0.5 * post.d_out * jnp.linalg.slogdet(jnp.eye(d) + G / post.prior.lam(d))[1]
        return -lp

    vg = jax.jit(jax.value_and_grad(f))
    r = so.minimize(
        lambda x: [np.asarray(a, np.float64) for a in vg(jnp.asarray(x))],
        np.ravel(L0),
        jac=True,
        method="L-BFGS-B",
        options=dict(maxiter=5000, gtol=1e-9, ftol=1e-15),
    )
    L = jnp.asarray(r.x.reshape(post.L_shape))
    return {k: float(v) for k, v in post.order_parameters(L).items()}


@pytest.mark.parametrize("objective,P", [("joint", 340), ("marginal", 404)])
def test_softmax_modes_match_direct_optimisation_inside_the_window(objective, P):
    """T = 32 inside each mode's hysteresis window: the theory has two minima; L-BFGS on the closed form from a
    small and a hot start finds the low and the high one."""
    task, prior = ba.CopyTask(T=32, d=8), ba.Prior(1.0, 100.0, 400.0 * K)
    post = ba.Posterior(task.sample(jax.random.key(0), P * K), "softmax", prior)
    pc = ba.theory.mode_curve(task, prior, "softmax", [P * K], objective=objective)
    assert pc.transition["order"] == "first"
    lo, hi = pc.transition["spinodals"]
    assert lo < P * K < hi
    branches = sorted((float(b["m"][0]), float(b["q"][0])) for b in pc.branches)
    assert len(branches) == 2
    small = direct_mode(post, 0.01 * np.asarray(jax.random.normal(jax.random.key(1), (32, 32))), objective)
    hot = direct_mode(post, 3.0 * task.target_pattern, objective)
    for got, (m, q) in zip((small, hot), branches):
        assert abs(got["m"] - m) < 3e-3 and abs(got["q"] - q) < 1e-3, (got, m, q)


@pytest.mark.parametrize("objective,P", [("joint", 200), ("marginal", 600)])
def test_linear_mode_matches_direct_optimisation(objective, P):
    task, prior = ba.CopyTask(T=8, d=8), ba.Prior(1.0, 100.0, 400.0 * K)
    post = ba.Posterior(task.sample(jax.random.key(0), P * K), "linear", prior)
    pc = ba.theory.mode_curve(task, prior, "linear", [P * K], objective=objective)
    got = direct_mode(post, 0.3 * task.target_pattern, objective)
    assert got["u"] > 0.99
    assert abs(abs(got["m"]) - pc.stable["m"][0]) < 3e-3 and abs(got["q"] - pc.stable["q"][0]) < 3e-4


def test_linear_mode_critical_points_in_closed_form():
    prior = ba.Prior(1.0, 100.0, 400.0)
    for T in (8, 32):
        task = ba.CopyTask(T=T, d=8)
        # joint: P_c = sigma2 / (sigma_A sigma_V) whatever T and d
        assert ba.theory.linear_mode_critical_P(task, prior, "joint") == pytest.approx(40.0, rel=1e-12)
        Pm = ba.theory.linear_mode_critical_P(task, prior, "marginal")
        # at P_c the minimiser of C/x + D log x + K x sits at x = eps (q* = 0): check the stationarity directly
        n, lam = Pm * T, prior.lam(8)
        eps, C, D, Kc = lam / n, 8**2 / (2 * 100.0 * T), 8**2 / (2 * T), T / 2.0
        assert -C / eps**2 + D / eps + Kc == pytest.approx(0.0, abs=1e-8 * C / eps**2)
        pc = ba.theory.mode_curve(task, prior, "linear", [0.5 * Pm, 0.99 * Pm, 1.01 * Pm, 2 * Pm], objective="marginal")
        assert np.all(pc.stable["q"][:2] == 0) and np.all(pc.stable["q"][2:] > 0)
        assert pc.transition["order"] == "second" and pc.transition["P_c"] == pytest.approx(Pm)


def test_mode_action_is_the_reduced_action_with_the_prior_as_energy():
    """Phi_0 (marginal) = common.action(m, q, entropy = the row's prior cost); joint = that minus the Occam term."""
    task, prior = ba.CopyTask(T=16, d=8), ba.Prior(0.7, 100.0, 400.0)
    P, delta = 500.0, np.linspace(0.1, 6.0, 7)
    a = 1 / (1 + 15 * np.exp(-delta))
    q = a**2 + (1 - a) ** 2 / 15
    cost = (15 / 16) * delta**2 / (2 * 0.7)
    beta, eps = P * 8 / 800.0, prior.lam(8) / (P * 16)
    ref = np.asarray(action(a, q, cost, beta=beta, eps=eps, d=8, T_q=16))
    np.testing.assert_allclose(ba.theory.mode_action(task, prior, "softmax", P, delta), ref, rtol=1e-12)
    occam = 64 / 32 * np.log1p(q / eps)
    np.testing.assert_allclose(
        ba.theory.mode_action(task, prior, "softmax", P, delta, objective="joint"), ref - occam, rtol=1e-12
    )


def test_softmax_spinodals_bound_the_two_minima_window():
    task, prior = ba.CopyTask(T=64, d=8), ba.Prior(1.0, 100.0, 400.0)
    pc = ba.theory.mode_curve(task, prior, "softmax", np.arange(300.0, 800.0, 10.0), objective="joint")
    lo, hi = pc.transition["spinodals"]
    assert lo < pc.transition["P_c"] < hi
    just = lambda P: len(ba.theory.mode_curve(task, prior, "softmax", [P], objective="joint").branches)  # noqa: E731
    assert just(lo * (1 - 1e-4)) == 1 and just(lo * (1 + 1e-4)) == 2
    assert just(hi * (1 - 1e-4)) == 2 and just(hi * (1 + 1e-4)) == 1
    # the joint mode is below the marginal one, both below the posterior's binodal (order of the three)
    marg = ba.theory.mode_curve(task, prior, "softmax", np.arange(300.0, 800.0, 10.0), objective="marginal")
    assert pc.transition["P_c"] < marg.transition["P_c"]
    assert pc.transition["spinodals"][1] < marg.transition["spinodals"][1]


def test_bad_objective():
    task, prior = ba.CopyTask(T=8, d=4), ba.Prior()
    with pytest.raises(ValueError, match="objective"):
        ba.theory.mode_curve(task, prior, "softmax", [100.0], objective="foo")
    with pytest.raises(ValueError, match="not covered"):
        ba.theory.mode_curve(ba.CopyTask(T=8, d=4, boundary="causal"), prior, "softmax", [100.0])
