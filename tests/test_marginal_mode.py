"""The marginal training objective (V integrated out) and SGLD at a temperature, against independent references:
central finite differences, the direct joint density minimised over V in closed form, a scipy optimisation of
the closed form, and the exact prior-rescaling identity of tempered SGLD."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
import scipy.optimize as so

import bayesattn as ba
from bayesattn import training as tr


def small_problem(P=60, sigma2=1.0, boundary="cyclic", seed=0):
    task = ba.CopyTask(T=4, d=2, boundary=boundary)
    prior = ba.Prior(1.0, 10.0, sigma2)
    return task, prior, task.sample(jax.random.key(seed), P)


@pytest.mark.parametrize("attention", ["softmax", "linear"])
@pytest.mark.parametrize("boundary", ["cyclic", "causal"])
def test_marginal_objective_gradient_and_occam_decomposition(attention, boundary):
    task, prior, data = small_problem(P=37, sigma2=2.0, boundary=boundary)
    post = ba.Posterior(data, attention, prior)
    L = 0.7 * jax.random.normal(jax.random.key(5), (4, 4))
    g = np.asarray(jax.grad(tr.marginal_objective)(L, post))
    # central finite differences, every entry in one vmapped call
    h = 1e-5
    E = h * jnp.eye(16).reshape(16, 4, 4)
    f = jax.jit(jax.vmap(lambda L: tr.marginal_objective(L, post)))
    fd = np.asarray((f(L + E) - f(L - E)) / (2 * h)).reshape(4, 4)
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-9)
    # J_marg = min_V J(L, V) + (sigma2 d_out / 2n) log det(I + G / lam); min_V by a dense least-squares solve of
    # the direct joint density (independent of the closed form's Cholesky path)
    scale = prior.sigma2 / data.n
    negjoint = lambda V: -scale * ba.joint_log_density(L, V.reshape(2, 2), data, attention, prior)  # noqa: E731
    Hv = jax.hessian(negjoint)(jnp.zeros(4))
    V_star = -jnp.linalg.solve(Hv, jax.grad(negjoint)(jnp.zeros(4)))
    J_min = tr.training_objective(L, V_star.reshape(2, 2), post)
    G, _ = post.gram(L)
    occam = 0.5 * prior.sigma2 * 2 / data.n * np.linalg.slogdet(np.eye(2) + np.asarray(G) / prior.lam(2))[1]
    np.testing.assert_allclose(tr.marginal_objective(L, post), J_min + occam, rtol=1e-10)


def closed_form_mode(post, L0):
    """argmax_L log p(L, D) by scipy trust-region Newton on the closed form (exact Hessian)."""
    f = lambda x: -post.log_density(x.reshape(post.L_shape))  # noqa: E731
    vg, hess = jax.jit(jax.value_and_grad(f)), jax.jit(jax.hessian(f))
    res = so.minimize(
        lambda x: [np.asarray(a) for a in vg(jnp.asarray(x))],
        np.ravel(L0),
        jac=True,
        hess=lambda x: np.asarray(hess(jnp.asarray(x))),
        method="trust-exact",
        options={"gtol": 1e-10},
    )
    return res.x.reshape(post.L_shape)


@pytest.mark.parametrize("attention", ["softmax", "linear"])
def test_adam_on_the_marginal_objective_reaches_the_closed_form_mode(attention):
    task, prior, data = small_problem(P=100)
    post = ba.Posterior(data, attention, prior)
    sched = optax.exponential_decay(3e-2, 8000, 0.003)
    res = ba.train(
        data,
        prior,
        attention,
        jax.random.key(1),
        lr=sched,
        steps=8000,
        init_scale=0.3,
        record_every=1000,
        objective="marginal",
    )
    L_ref = closed_form_mode(post, 0.5 * task.target_pattern)
    L, V = res.final_params
    if attention == "linear" and np.sum(L * L_ref) < 0:  # L -> -L is an exact symmetry
        L, V = -L, -V
    np.testing.assert_allclose(L, L_ref, atol=2e-5)
    # the reported readout is E[V | L, D] at the final L; the records use it too
    np.testing.assert_allclose(V, post.readout_posterior(jnp.asarray(L))[0], atol=1e-8)
    assert res.config["objective_kind"] == "marginal"
    J_ref = tr.marginal_objective(jnp.asarray(L_ref), post)
    assert abs(res.history["objective"][-1] - J_ref) < 1e-9
    # the marginal mode differs from the joint mode (the Occam term): Adam on J ends elsewhere
    joint = ba.train(data, prior, attention, jax.random.key(1), lr=sched, steps=8000, init_scale=0.3, record_every=1000)
    assert np.max(np.abs(np.abs(joint.final_params[0]) - np.abs(L_ref))) > 1e-3


def test_marginal_sweep_equals_single_runs():
    task, prior, _ = small_problem()
    sw = ba.train_sweep(
        task, prior, "softmax", [30, 60], [0], jax.random.key(2), steps=200, record_every=100, objective="marginal"
    )
    k = jax.random.fold_in(jax.random.key(2), 0)
    data_key, run_key = jax.random.split(k)
    full = task.sample(data_key, 60)
    one = ba.train(
        ba.Dataset(full.X[:30], full.Y[:30], task),
        prior,
        "softmax",
        run_key,
        steps=200,
        record_every=100,
        objective="marginal",
    )
    np.testing.assert_allclose(sw.final_L[0, 0], one.final_params[0], atol=1e-12)
    np.testing.assert_allclose(sw.final_V[0, 0], one.final_params[1], atol=1e-12)


def test_tempered_langevin_is_the_rescaled_prior():
    """SGLD at temperature tau on J is SGLD at temperature 1 under the prior (tau sA2, tau sV2, tau s2): the same
    J and the same noise, so the same key gives the same trajectory (exact identity, checked to rounding)."""
    task, prior, data = small_problem(P=50)
    tau = 0.3
    a = ba.train(
        data, prior, "softmax", jax.random.key(4), optimizer="langevin", steps=300, temperature=tau, record_every=100
    )
    scaled = ba.Prior(tau * prior.sigma_A2, tau * prior.sigma_V2, tau * prior.sigma2)
    b = ba.train(data, scaled, "softmax", jax.random.key(4), optimizer="langevin", steps=300, record_every=100)
    np.testing.assert_allclose(a.final_params[0], b.final_params[0], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(a.history["objective"], b.history["objective"], rtol=1e-9)
    # and the marginal objective under SGLD keeps V at its conditional mean (only L moves)
    c = ba.train(
        data,
        prior,
        "softmax",
        jax.random.key(4),
        optimizer="langevin",
        steps=100,
        objective="marginal",
        record_every=100,
    )
    post = ba.Posterior(data, "softmax", prior)
    np.testing.assert_allclose(c.final_params[1], post.readout_posterior(jnp.asarray(c.final_params[0]))[0], atol=1e-10)


@pytest.mark.parametrize(
    "kw,match",
    [
        (dict(objective="foo"), "objective"),
        (dict(objective="marginal", batch_size=10), "batch_size"),
        (dict(temperature=0.5), "temperature"),
        (dict(optimizer="langevin", temperature=0.0), "temperature"),
        (dict(optimizer="langevin", temperature=-1.0), "temperature"),
    ],
)
def test_bad_objective_and_temperature(kw, match):
    task, prior, data = small_problem()
    with pytest.raises(ValueError, match=match):
        ba.train(data, prior, "softmax", jax.random.key(0), steps=10, **kw)
    with pytest.raises(ValueError, match=match):
        ba.train_sweep(task, prior, "softmax", [20, 30], [0], jax.random.key(0), steps=10, **kw)
    with pytest.raises(ValueError, match="posterior"):
        tr.marginal_objective(jnp.zeros((4, 4)), "not a posterior")
