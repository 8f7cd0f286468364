"""The closed-form posterior over L against independent references (docs/model.md section 2)."""

from __future__ import annotations

import itertools
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import np_attention, np_design, np_gp_log_evidence, np_log_prior_L
from scipy import integrate, stats

import bayesattn as ba

PRIOR = ba.Prior(sigma_A2=0.7, sigma_V2=3.0, sigma2=0.4)
ATTENTIONS = ("softmax", "linear")
CASES = list(itertools.product(ATTENTIONS, ("gaussian", "onehot"), ("cyclic", "causal"), (1, 2)))


def make(attention="softmax", tokens="gaussian", boundary="cyclic", offset=1, T=5, d=3, P=4, seed=0, prior=PRIOR):
    task = ba.CopyTask(T=T, d=d, offset=offset, tokens=tokens, boundary=boundary)
    data = task.sample(jax.random.key(seed), P)
    return data, ba.Posterior(data, attention=attention, prior=prior)


def random_L(rng, T, scale=1.5):
    return scale * rng.standard_normal((T, T))


@pytest.mark.parametrize("attention,tokens,boundary,offset", CASES)
def test_closed_form_equals_bruteforce_gp_evidence(attention, tokens, boundary, offset, rng):
    data, post = make(attention, tokens, boundary, offset)
    Ls = [random_L(rng, 5), 4.0 * data.task.target_pattern, np.zeros((5, 5))]
    for L in Ls:
        ref = np_gp_log_evidence(*np_design(L, data, attention), PRIOR)
        np.testing.assert_allclose(post.log_likelihood(L), ref, rtol=1e-10, atol=1e-9)
        np.testing.assert_allclose(post.log_prior(L), np_log_prior_L(L, PRIOR.sigma_A2), rtol=1e-12, atol=1e-10)
        np.testing.assert_allclose(post.log_density(L), ref + np_log_prior_L(L, PRIOR.sigma_A2), rtol=1e-10, atol=1e-9)
        np.testing.assert_allclose(
            ba.gp_log_evidence(jnp.asarray(L), data, attention, PRIOR), ref, rtol=1e-10, atol=1e-9
        )


def test_closed_form_when_n_exceeds_d_and_priors_vary(rng):
    # more rows than features (the regime of interest) and a ridge far from 1
    for prior in (ba.Prior(1.0, 100.0, 800.0), ba.Prior(2.0, 0.5, 0.05)):
        data, post = make("softmax", T=4, d=2, P=30, seed=3, prior=prior)
        L = random_L(rng, 4)
        ref = np_gp_log_evidence(*np_design(L, data, "softmax"), prior)
        np.testing.assert_allclose(post.log_likelihood(L), ref, rtol=1e-10)


@pytest.mark.parametrize("attention", ATTENTIONS)
@pytest.mark.parametrize("boundary", ("cyclic", "causal"))
def test_marginal_equals_joint_integrated_over_V(attention, boundary, rng):
    # d = d_out = 1: V is a scalar, integrate exp(joint) over it numerically (in log space)
    data, post = make(attention, boundary=boundary, T=3, d=1, P=5, seed=1)
    L = random_L(rng, 3)
    joint = jax.jit(lambda v: ba.joint_log_density(jnp.asarray(L), jnp.reshape(v, (1, 1)), data, attention, PRIOR))
    mean, cov = post.readout_posterior(L)
    v0, sd = float(mean[0, 0]), float(np.sqrt(cov[0, 0]))
    c = float(joint(v0))
    val, err = integrate.quad(
        lambda v: np.exp(float(joint(v)) - c),
        v0 - 40 * sd,
        v0 + 40 * sd,
        points=[v0],
        epsabs=0,
        epsrel=1e-12,
        limit=200,
    )
    np.testing.assert_allclose(post.log_density(L), c + np.log(val), rtol=0, atol=1e-8)


@pytest.mark.parametrize("attention,tokens,boundary,offset", CASES[::3])
def test_bayes_identity_joint_minus_conditional_is_marginal(attention, tokens, boundary, offset, rng):
    # p(L, V, D) = p(L, D) p(V | L, D) holds for every V: checks the marginal and the readout posterior together
    data, post = make(attention, tokens, boundary, offset, d=3, P=6)
    L = random_L(rng, 5)
    mean, cov = (np.asarray(a) for a in post.readout_posterior(L))
    for _ in range(2):
        V = mean + rng.standard_normal(mean.shape)
        log_cond = sum(stats.multivariate_normal(mean[k], cov).logpdf(V[k]) for k in range(V.shape[0]))
        joint = ba.joint_log_density(jnp.asarray(L), jnp.asarray(V), data, attention, PRIOR)
        np.testing.assert_allclose(joint - log_cond, post.log_density(L), rtol=1e-11, atol=1e-9)


@pytest.mark.parametrize("boundary", ("cyclic", "causal"))
@pytest.mark.parametrize("attention", ATTENTIONS)
def test_sufficient_statistics_path_equals_direct_path(attention, boundary, rng):
    data, post = make(attention, "onehot" if boundary == "causal" else "gaussian", boundary, offset=2, P=7)
    X, Y = np.asarray(data.X), np.asarray(data.Y)
    Sxx, Sxy, yy = ba.sufficient_statistics(data.X, data.Y)
    np.testing.assert_allclose(Sxx, np.einsum("psi,prj->srij", X, X), atol=1e-12)
    np.testing.assert_allclose(Sxy, np.einsum("psi,ptk->stik", X, Y), atol=1e-12)
    np.testing.assert_allclose(yy, np.sum(Y**2), rtol=1e-14)
    L = random_L(rng, 5)
    Z, Yr = np_design(L, data, attention)
    G, C = post.gram(jnp.asarray(L))
    np.testing.assert_allclose(G, Z.T @ Z, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(C, Z.T @ Yr, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("boundary", ("cyclic", "causal"))
@pytest.mark.parametrize("attention", ATTENTIONS)
def test_gradient_matches_central_differences(attention, boundary, rng):
    data, post = make(attention, boundary=boundary, T=4, d=2, P=6)
    f = jax.jit(lambda L: post.log_density(L))
    L = random_L(rng, 4)
    g = np.asarray(jax.grad(f)(jnp.asarray(L)))
    h = 1e-5
    fd = np.zeros_like(L)
    for i, j in np.ndindex(L.shape):
        E = np.zeros_like(L)
        E[i, j] = h
        fd[i, j] = (float(f(L + E)) - float(f(L - E))) / (2 * h)
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-6)
    assert np.max(np.abs(g)) > 1e-2  # the check is not vacuous


@pytest.mark.parametrize("attention", ATTENTIONS)
def test_gradient_in_the_prior_variances_matches_central_differences(attention, rng):
    """The closed form has hand-written adjoints (posterior._ridge_terms, _crossprod); the gradient in
    (sigma_A2, sigma_V2, sigma2), which reaches them through lam = d sigma2 / sigma_V2, must be right too
    (the sampler passes the variances as traced arguments)."""
    data, post = make(attention, T=4, d=2, P=6)
    L = jnp.asarray(random_L(rng, 4))
    v0 = np.array([post.prior.sigma_A2, post.prior.sigma_V2, post.prior.sigma2])
    # Prior is a pytree: grad reaches the variances the way the compiled sampler passes them (traced leaves)
    f = jax.jit(lambda prior: post.with_prior(prior).log_density(L))
    g = np.asarray(jax.tree.leaves(jax.grad(f)(post.prior)))
    fd = np.zeros(3)
    for i in range(3):
        h = 1e-6 * v0[i]
        E = np.zeros(3)
        E[i] = h
        fd[i] = (float(f(ba.Prior(*(v0 + E)))) - float(f(ba.Prior(*(v0 - E))))) / (2 * h)
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-9)
    assert np.min(np.abs(g)) > 1e-6  # every variance enters


def test_hand_written_adjoints_match_autodiff(rng):
    """_crossprod (a^T b) and _ridge_terms against JAX's own differentiation of the plain formulas, with
    non-symmetric cotangents (inside log_density they are symmetric up to rounding, which would hide a
    transposed adjoint)."""
    from bayesattn.bayes.posterior import _crossprod, _ridge_terms

    a, b, g = (
        jnp.asarray(rng.standard_normal((5, 4))),
        jnp.asarray(rng.standard_normal((5, 4))),
        jnp.asarray(rng.standard_normal((4, 4))),
    )
    out, vjp = jax.vjp(_crossprod, a, b)
    ref, vjp_ref = jax.vjp(lambda a, b: a.T @ b, a, b)
    np.testing.assert_allclose(out, ref, rtol=1e-13)
    for x, y in zip(vjp(g), vjp_ref(g)):
        np.testing.assert_allclose(x, y, rtol=1e-12, atol=1e-12)
    X = rng.standard_normal((6, 3))
    K, C = jnp.asarray(X.T @ X + np.eye(3)), jnp.asarray(rng.standard_normal((3, 2)))

    def plain(K, C):
        return jnp.trace(C.T @ jnp.linalg.solve(K, C)), jnp.linalg.slogdet(K)[1]

    out, vjp = jax.vjp(_ridge_terms, K, C)
    ref, vjp_ref = jax.vjp(plain, K, C)
    np.testing.assert_allclose(out, ref, rtol=1e-12)
    for x, y in zip(vjp((0.7, -1.3)), vjp_ref((0.7, -1.3))):
        np.testing.assert_allclose(x, y, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("tokens", ("gaussian", "onehot"))
@pytest.mark.parametrize("boundary", ("cyclic", "causal"))
def test_linear_attention_is_symmetric_under_sign_flip(tokens, boundary, rng):
    data, post = make("linear", tokens, boundary, P=9)
    _, soft = make("softmax", tokens, boundary, P=9)
    for _ in range(3):
        L = random_L(rng, 5, scale=3.0)
        assert abs(float(post.log_density(L)) - float(post.log_density(-L))) < 1e-10
    # softmax is not symmetric: the test distinguishes the two
    L = 4.0 * data.task.target_pattern
    assert abs(float(soft.log_density(L)) - float(soft.log_density(-L))) > 1e-3


@pytest.mark.parametrize("attention", ATTENTIONS)
@pytest.mark.parametrize("boundary", ("cyclic", "causal"))
def test_no_data_posterior_is_the_prior(attention, boundary, rng):
    data, post = make(attention, boundary=boundary, P=0)
    assert data.X.shape == (0, 5, 3) and data.n == 0
    L = random_L(rng, 5)
    np.testing.assert_allclose(post.log_density(L), np_log_prior_L(L, PRIOR.sigma_A2), rtol=0, atol=1e-12)
    np.testing.assert_allclose(post.log_likelihood(L), 0.0, atol=1e-12)
    mean, cov = post.readout_posterior(L)
    np.testing.assert_array_equal(mean, 0.0)
    np.testing.assert_allclose(cov, PRIOR.sigma_V2 / 3 * np.eye(3), rtol=1e-12)


def np_regression(Z, Y, prior):
    """Bayesian linear regression y_k = Z v_k + noise, v_k ~ N(0, sigma_V2/d I): posterior mean (d_out, d), cov."""
    d = Z.shape[1]
    precision = Z.T @ Z / prior.sigma2 + np.eye(d) * d / prior.sigma_V2
    cov = np.linalg.inv(precision)
    return (cov @ Z.T @ Y / prior.sigma2).T, cov


@pytest.mark.parametrize("attention,tokens,boundary,offset", CASES[1::3])
def test_readout_posterior_matches_bayesian_linear_regression(attention, tokens, boundary, offset, rng):
    data, post = make(attention, tokens, boundary, offset, P=8)
    L = random_L(rng, 5)
    mean, cov = post.readout_posterior(L)
    ref_mean, ref_cov = np_regression(*np_design(L, data, attention), PRIOR)
    np.testing.assert_allclose(mean, ref_mean, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(cov, ref_cov, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("attention", ATTENTIONS)
def test_predict_matches_function_space_gp_predictive(attention, rng):
    # weight-space predict() against the n x n GP predictive: mean k*^T K^-1 y, var k** - k*^T K^-1 k* + sigma2
    data, post = make(attention, boundary="causal", offset=1, P=6)
    L = random_L(rng, 5)
    Xnew = rng.standard_normal((3, 5, 3))
    mean, var = post.predict(L, Xnew)
    assert mean.shape == (3, 5, 3) and var.shape == (3, 5)
    Z, Y = np_design(L, data, attention)
    alpha = np_attention(L, attention, data.task.key_mask)
    Zs = np.einsum("ts,psi->pti", alpha, Xnew).reshape(-1, 3)
    sV = PRIOR.sigma_V2 / 3
    K = sV * Z @ Z.T + PRIOR.sigma2 * np.eye(len(Z))
    Ks = sV * Z @ Zs.T
    ref_mean = Ks.T @ np.linalg.solve(K, Y)
    ref_var = sV * np.sum(Zs**2, 1) - np.sum(Ks * np.linalg.solve(K, Ks), 0) + PRIOR.sigma2
    np.testing.assert_allclose(np.asarray(mean).reshape(-1, 3), ref_mean, rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(np.asarray(var).reshape(-1), ref_var, rtol=1e-10)


def test_predict_matches_monte_carlo_over_V_and_noise(rng):
    data, post = make("softmax", P=10)
    L = random_L(rng, 5)
    x = rng.standard_normal((1, 5, 3))
    mean, var = (np.asarray(a) for a in post.predict(L, x))
    m_V, c_V = (np.asarray(a) for a in post.readout_posterior(L))
    z = np_attention(L, "softmax", data.task.key_mask)[2] @ x[0]  # query row t = 2
    N = 200_000
    V = m_V[0] + rng.standard_normal((N, 3)) @ np.linalg.cholesky(c_V).T  # output coordinate k = 0
    y = V @ z + np.sqrt(PRIOR.sigma2) * rng.standard_normal(N)
    se = np.sqrt(var[0, 2] / N)
    assert abs(y.mean() - mean[0, 2, 0]) < 5 * se
    assert abs(y.var() / var[0, 2] - 1) < 5 * np.sqrt(2 / N)


def test_posteriors_of_different_P_stack_under_vmap_and_share_one_jit(rng):
    task = ba.CopyTask(T=5, d=3)
    posts = [ba.Posterior(task.sample(jax.random.key(i), P), "softmax", PRIOR) for i, P in enumerate((3, 7, 0))]
    L = jnp.asarray(random_L(rng, 5))
    stacked = jax.tree.map(lambda *x: jnp.stack(x), *posts)
    batched = jax.vmap(lambda p: p.log_density(L))(stacked)
    loop = np.array([float(p.log_density(L)) for p in posts])
    np.testing.assert_allclose(batched, loop, rtol=1e-12)
    traces = []

    @jax.jit
    def f(post, L):
        traces.append(1)
        return post.log_density(L), post.order_parameters(L)["m"]

    for p, ref in zip(posts, loop):
        np.testing.assert_allclose(f(p, L)[0], ref, rtol=1e-12)
    assert len(traces) == 1  # one compilation for all P


def test_with_prior_reuses_statistics_and_matches_a_fresh_posterior(rng):
    data, post = make("linear")
    other = ba.Prior(2.0, 5.0, 1.5)
    L = random_L(rng, 5)
    np.testing.assert_allclose(
        post.with_prior(other).log_density(L), ba.Posterior(data, "linear", other).log_density(L), rtol=1e-13
    )


def test_user_dataset_with_junk_on_unmarked_rows_is_masked(rng):
    # rows without a source must not enter the likelihood, however the dataset was built
    data, post = make("softmax", boundary="causal", offset=2)
    Y = np.asarray(data.Y).copy()
    Y[:, :2] = rng.standard_normal(Y[:, :2].shape)
    junk = ba.Dataset(data.X, jnp.asarray(Y), data.task)
    L = random_L(rng, 5)
    np.testing.assert_allclose(ba.Posterior(junk, "softmax", PRIOR).log_density(L), post.log_density(L), rtol=1e-13)


# --- bad input ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ("sigma_A2", "sigma_V2", "sigma2"))
@pytest.mark.parametrize("value", (0, -1, float("nan"), float("inf"), "abc", None))
def test_prior_rejects_non_positive_or_non_finite_variances(name, value):
    with pytest.raises(ValueError, match=rf"{name}={value!r}".replace("(", r"\(")) as e:
        ba.Prior(**{name: value})
    assert "positive finite" in str(e.value)


@pytest.mark.parametrize("name, value", [("sigma_A2", 1e-310), ("sigma_V2", 1e-308), ("sigma2", 1e308)])
def test_prior_refuses_variances_whose_log_density_is_nan(name, value):
    """Positive, finite, but so far out that products of the variances under- or overflow: the log density at L = 0
    was NaN. The ends of the range are accepted and give a finite log density."""
    with pytest.raises(ValueError, match=re.escape(f"{name}={value!r}: expected a variance in [1e-100, 1e100]")):
        ba.Prior(**{name: value})
    data = ba.CopyTask(T=3, d=2).sample(jax.random.key(0), 4)
    for edge in (1e-100, 1e100):
        post = ba.Posterior(data, "softmax", ba.Prior(**{name: edge}))
        assert np.isfinite(float(post.log_density(jnp.zeros((3, 3)))))


def test_posterior_rejects_unknown_attention_and_wrong_arguments():
    data = ba.CopyTask(T=4, d=2).sample(jax.random.key(0), 3)
    with pytest.raises(ValueError, match=r"attention='relu'.*'softmax', 'linear'"):
        ba.Posterior(data, attention="relu")
    with pytest.raises(ValueError, match="dataset"):
        ba.Posterior((data.X, data.Y))
    with pytest.raises(ValueError, match="prior"):
        ba.Posterior(data, prior=(1.0, 1.0, 1.0))
    with pytest.raises(ValueError, match="attention='relu'"):
        ba.attention_weights(jnp.zeros((4, 4)), "relu", data.task.key_mask)


@pytest.mark.parametrize("shape", ((4, 5), (4,), (2, 4, 4), (), (5, 5)))
def test_L_of_wrong_shape_is_rejected(shape):
    _, post = make(T=4, d=2, P=3)
    L = np.zeros(shape)
    for method in (
        post.log_density,
        post.log_prior,
        post.log_likelihood,
        post.attention_weights,
        post.readout_posterior,
        lambda L: post.predict(L, np.zeros((1, 4, 2))),
    ):
        with pytest.raises(ValueError, match=r"L has shape " + re_shape(shape)):
            method(L)


def re_shape(shape):
    return str(tuple(shape)).replace("(", r"\(").replace(")", r"\)")


@pytest.mark.parametrize("shape", ((4, 5), (4,), ()))
def test_order_parameters_reject_wrong_shape(shape):
    _, post = make(T=4, d=2, P=3)
    with pytest.raises(ValueError, match=r"L has shape " + re_shape(shape)):
        post.order_parameters(np.zeros(shape))


@pytest.mark.parametrize("bad", (np.nan, np.inf, -np.inf))
def test_non_finite_L_is_rejected(bad):
    _, post = make(T=4, d=2, P=3)
    L = np.zeros((4, 4))
    L[1, 2] = bad
    for method in (post.log_density, post.attention_weights, post.readout_posterior, post.order_parameters):
        with pytest.raises(ValueError, match=r"L contains 1 NaN or inf"):
            method(L)
    with pytest.raises(ValueError, match=r"L contains 2 NaN or inf"):
        post.order_parameters(np.stack([L, L]))


def test_predict_rejects_bad_X():
    _, post = make(T=4, d=2, P=3)
    with pytest.raises(ValueError, match=r"X has shape \(4, 2\)"):
        post.predict(np.zeros((4, 4)), np.zeros((4, 2)))
    X = np.zeros((2, 4, 2))
    X[1, 3, 0] = np.inf
    with pytest.raises(ValueError, match=r"X contains 1 NaN or inf"):
        post.predict(np.zeros((4, 4)), X)


@pytest.mark.slow
@pytest.mark.parametrize("attention,tokens,boundary,offset", CASES)
def test_closed_form_equals_bruteforce_gp_evidence_larger(attention, tokens, boundary, offset, rng):
    # the fast test's check at n ~ 400 rows, d = 4, T = 8, with the realistic prior scale
    prior = ba.Prior(1.0, 100.0, 50.0)
    data, post = make(attention, tokens, boundary, offset, T=8, d=4, P=50, seed=5, prior=prior)
    for L in (random_L(rng, 8), 5.0 * data.task.target_pattern):
        ref = np_gp_log_evidence(*np_design(L, data, attention), prior)
        np.testing.assert_allclose(post.log_likelihood(L), ref, rtol=1e-10)


def test_posterior_views_and_references_refuse_arguments_that_would_broadcast():
    """features, gram and the brute-force references check their shapes (a V of another shape, an L of one axis or
    a dataset of another d would broadcast into a number); with no sequences the GP evidence is 0, the closed
    form's value, and a prediction for no sequences is empty."""
    task, prior = ba.CopyTask(T=4, d=2), ba.Prior(1.0, 100.0, 20.0)
    data = task.sample(jax.random.key(0), 5)
    post = ba.Posterior(data, "softmax", prior)
    L = jnp.zeros((4, 4))
    for call, named in [
        (lambda: post.features(L, jnp.zeros((2, 4, 3))), r"X has shape \(2, 4, 3\)"),
        (lambda: post.gram(jnp.zeros((3, 3))), r"L has shape \(3, 3\)"),
        (lambda: ba.joint_log_density(L, jnp.zeros((1, 2)), data, "softmax", prior), r"V has shape \(1, 2\)"),
        (lambda: ba.gp_log_evidence(jnp.zeros(4), data, "softmax", prior), r"L has shape \(4,\)"),
        (lambda: ba.gp_log_evidence(L, data, "softmax", None), "prior=NoneType"),
        (lambda: post.with_prior(None), "prior=NoneType"),
    ]:
        with pytest.raises(ValueError, match=named):
            call()
    empty = task.sample(jax.random.key(1), 0)
    assert float(ba.gp_log_evidence(L, empty, "softmax", prior)) == 0.0
    assert float(ba.Posterior(empty, "softmax", prior).log_likelihood(L)) == 0.0
    mean, var = post.predict(L, jnp.zeros((0, 4, 2)))
    assert mean.shape == (0, 4, 2) and var.shape == (0, 4)


def test_a_posterior_refuses_float32():
    """float64 switched off after import (a user's jax.config.update) is refused, not run in float32, where the
    log density moves by O(1) nats; switched back on, the same call works."""
    data = ba.CopyTask(T=4, d=2).sample(jax.random.key(0), 20)
    jax.config.update("jax_enable_x64", False)
    try:
        with pytest.raises(ValueError, match="jax_enable_x64=False: the posterior needs float64"):
            ba.Posterior(data, "softmax", ba.Prior(1.0, 10.0, 10.0))
    finally:
        jax.config.update("jax_enable_x64", True)
    assert ba.Posterior(data, "softmax", ba.Prior(1.0, 10.0, 10.0)).log_density(jnp.zeros((4, 4))).dtype == jnp.float64
