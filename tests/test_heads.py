"""H attention heads in the closed form (docs/model.md section 2, extended to H heads) against independent
references: a brute-force n x n Gaussian-process evidence on the concatenated features written here in numpy,
central differences, the symmetry under permuting heads, and numpyro's NUTS on the joint (L^1..L^H, V) model.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import np_attention
from numpyro.diagnostics import effective_sample_size
from scipy import stats

import bayesattn as ba

ATTENTIONS = ("softmax", "linear")


def np_concat_design(L, dataset, attention):
    """Z: (n, H d) with rows [alpha^1_t X_mu, ..., alpha^H_t X_mu] on query rows, and Y: (n, d_out)."""
    task = dataset.task
    X, Y = np.asarray(dataset.X), np.asarray(dataset.Y)
    rows = np.flatnonzero(task.query_mask)
    alphas = [np_attention(Lh, attention, task.key_mask) for Lh in np.asarray(L)]
    Z = np.stack([np.concatenate([a[t] @ X[mu] for a in alphas]) for mu in range(X.shape[0]) for t in rows])
    return Z, Y[:, rows].reshape(-1, task.d_out)


def np_gp_evidence_heads(Z, Y, prior, d):
    """sum_k log N(Y[:, k]; 0, (sigma_V2 / d) Z Z^T + sigma2 I): each readout entry has the one-head variance."""
    K = (prior.sigma_V2 / d) * Z @ Z.T + prior.sigma2 * np.eye(Z.shape[0])
    mvn = stats.multivariate_normal(mean=np.zeros(Z.shape[0]), cov=K)
    return float(sum(mvn.logpdf(Y[:, k]) for k in range(Y.shape[1])))


@pytest.mark.parametrize("boundary", ("cyclic", "causal"))
@pytest.mark.parametrize("H", (2, 3))
@pytest.mark.parametrize("attention", ATTENTIONS)
def test_closed_form_equals_brute_force_gp_on_concatenated_features(attention, H, boundary, rng):
    task = ba.CopyTask(T=4, d=2, boundary=boundary)
    data = task.sample(jax.random.key(H), P=9)
    prior = ba.Prior(1.3, 7.0, 0.8)
    post = ba.Posterior(data, attention, prior, heads=H)
    assert post.L_shape == (H, 4, 4)
    for _ in range(2):
        L = 1.5 * rng.standard_normal((H, 4, 4))
        Z, Y = np_concat_design(L, data, attention)
        ref = np_gp_evidence_heads(Z, Y, prior, task.d)
        np.testing.assert_allclose(float(post.log_likelihood(jnp.asarray(L))), ref, rtol=1e-8)
        log_prior = float(stats.norm.logpdf(L, scale=math.sqrt(prior.sigma_A2)).sum())
        np.testing.assert_allclose(float(post.log_density(jnp.asarray(L))), ref + log_prior, rtol=1e-8)
        G, C = post.gram(jnp.asarray(L))
        np.testing.assert_allclose(G, Z.T @ Z, rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(C, Z.T @ Y, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("attention", ATTENTIONS)
def test_one_head_is_todays_posterior(attention, rng):
    data = ba.CopyTask(T=5, d=3).sample(jax.random.key(0), P=11)
    prior = ba.Prior(1.0, 10.0, 2.0)
    a, b = ba.Posterior(data, attention, prior), ba.Posterior(data, attention, prior, heads=1)
    c = ba.Posterior(data, ba.AttentionModel(attention, heads=1), prior)
    L = jnp.asarray(rng.standard_normal((5, 5)))
    assert a.L_shape == b.L_shape == (5, 5)
    assert float(a.log_density(L)) == float(b.log_density(L)) == float(c.log_density(L))
    Z, Y = np_concat_design(np.asarray(L)[None], data, attention)  # one head: the plain design matrix
    np.testing.assert_allclose(float(a.log_likelihood(L)), np_gp_evidence_heads(Z, Y, prior, 3), rtol=1e-8)


@pytest.mark.parametrize("attention", ATTENTIONS)
def test_density_is_symmetric_under_permuting_heads(attention, rng):
    data = ba.CopyTask(T=4, d=2).sample(jax.random.key(1), P=13)
    post = ba.Posterior(data, attention, ba.Prior(1.0, 10.0, 1.0), heads=3)
    L = rng.standard_normal((3, 4, 4))
    ref = float(post.log_density(jnp.asarray(L)))
    for perm in ([1, 0, 2], [2, 0, 1]):
        np.testing.assert_allclose(float(post.log_density(jnp.asarray(L[perm]))), ref, rtol=1e-12)
    # ... and not under permuting positions within one head only (the check can fail)
    L2 = L.copy()
    L2[0] = L2[0][::-1]
    assert abs(float(post.log_density(jnp.asarray(L2))) - ref) > 1e-6


@pytest.mark.parametrize("attention", ATTENTIONS)
def test_gradient_matches_central_differences_two_heads(attention, rng):
    data = ba.CopyTask(T=3, d=2, boundary="causal").sample(jax.random.key(2), P=8)
    post = ba.Posterior(data, attention, ba.Prior(1.0, 10.0, 1.0), heads=2)
    f = jax.jit(post.log_density)
    L = rng.standard_normal((2, 3, 3))
    g = np.asarray(jax.grad(f)(jnp.asarray(L)))
    fd = np.zeros_like(L)
    h = 1e-5
    for idx in np.ndindex(L.shape):
        E = np.zeros_like(L)
        E[idx] = h
        fd[idx] = (float(f(L + E)) - float(f(L - E))) / (2 * h)
    mask = np.broadcast_to(post.key_mask, L.shape)
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-6)
    assert np.max(np.abs(g[mask])) > 1e-2


def test_readout_posterior_and_predict_two_heads(rng):
    """V | L, D is Bayesian linear regression on the concatenated features (numpy normal equations)."""
    data = ba.CopyTask(T=4, d=2).sample(jax.random.key(3), P=10)
    prior = ba.Prior(1.0, 5.0, 0.5)
    post = ba.Posterior(data, "softmax", prior, heads=2)
    L = rng.standard_normal((2, 4, 4))
    Z, Y = np_concat_design(L, data, "softmax")
    A = Z.T @ Z + prior.lam(2) * np.eye(4)
    mean, cov = post.readout_posterior(jnp.asarray(L))
    np.testing.assert_allclose(mean, np.linalg.solve(A, Z.T @ Y).T, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(cov, prior.sigma2 * np.linalg.inv(A), rtol=1e-9, atol=1e-12)
    Xn = np.asarray(ba.CopyTask(T=4, d=2).sample(jax.random.key(4), P=3).X)
    mu, var = post.predict(jnp.asarray(L), jnp.asarray(Xn))
    alphas = [np_attention(Lh, "softmax", data.task.key_mask) for Lh in L]
    Zn = np.concatenate([np.einsum("ts,psi->pti", a, Xn) for a in alphas], axis=-1)
    np.testing.assert_allclose(mu, Zn @ np.linalg.solve(A, Z.T @ Y), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(
        var, np.einsum("pti,ij,ptj->pt", Zn, prior.sigma2 * np.linalg.inv(A), Zn) + prior.sigma2, rtol=1e-9
    )


def test_observables_of_two_heads_are_label_free_where_documented(rng):
    data = ba.CopyTask(T=4, d=2).sample(jax.random.key(5), P=5)
    post = ba.Posterior(data, "softmax", ba.Prior(), heads=2)
    L = rng.standard_normal((6, 2, 4, 4))
    obs = post.observables(L)
    swapped = post.observables(L[:, ::-1])
    for name in ("m", "q", "u", "overlap", "entropy"):
        assert obs[name].shape == (6,)
        np.testing.assert_allclose(obs[name], swapped[name], rtol=1e-12)
    np.testing.assert_allclose(obs["m_h0"], swapped["m_h1"], rtol=1e-12)  # labelled ones follow their head
    np.testing.assert_allclose(obs["m"], np.maximum(obs["m_h0"], obs["m_h1"]), rtol=1e-12)
    one = [ba.Posterior(data, "softmax", ba.Prior()).order_parameters(L[:, h]) for h in range(2)]
    np.testing.assert_allclose(obs["q"], 0.5 * (one[0]["q"] + one[1]["q"]), rtol=1e-12)


@pytest.mark.parametrize(
    "bad, match",
    [
        (dict(heads=0), "heads=0"),
        (dict(heads=1.5), "heads=1.5"),
        (dict(attention=ba.AttentionModel("linear", heads=2), heads=3), "heads=3"),
        (dict(attention="relu"), "attention='relu'"),
    ],
)
def test_bad_heads_raise(bad, match):
    data = ba.CopyTask(T=3, d=2).sample(jax.random.key(0), P=2)
    kw = {"attention": "softmax", **bad}
    with pytest.raises(ValueError, match=match):
        ba.Posterior(data, kw.pop("attention"), ba.Prior(), **kw)


def test_L_of_the_wrong_shape_raises():
    data = ba.CopyTask(T=3, d=2).sample(jax.random.key(0), P=2)
    post = ba.Posterior(data, "softmax", ba.Prior(), heads=2)
    for L in (np.zeros((3, 3)), np.zeros((3, 3, 3)), np.zeros((2, 3, 4))):
        with pytest.raises(ValueError, match=r"expected \(2, 3, 3\) for heads=2, T=3"):
            post.log_density(L)
    with pytest.raises(ValueError, match="init has shape"):
        ba.sample(post, jax.random.key(0), init=np.zeros((3, 3)), num_chains=2, num_warmup=5, num_samples=8)


# --------------------------------------------------------------------------------------------------------
# sampling H heads: every init, SMC, and the joint (L, V) reference
# --------------------------------------------------------------------------------------------------------
def ess_thin(x):
    x = np.asarray(x)
    stride = max(1, int(math.ceil(x.size / max(float(effective_sample_size(x)), 1.0))))
    return x[:, ::stride].ravel()


@pytest.mark.parametrize("init", ("cold", "hot", "prior"))
def test_sampling_two_heads_at_p0_gives_the_prior(init):
    """At P = 0 the posterior over (H, T, T) is N(0, sigma_A2 I): the draws' moments from every start."""
    data = ba.CopyTask(T=3, d=2).sample(jax.random.key(0), P=0)
    post = ba.Posterior(data, "softmax", ba.Prior(2.0, 10.0, 1.0), heads=2)
    s = ba.sample(post, jax.random.key(7), init=init, num_chains=2, num_warmup=200, num_samples=600)
    assert s.L.shape == (2, 600, 2, 3, 3)
    flat = s.L.reshape(-1, 18)
    assert abs(flat.mean()) < 0.15 and abs(flat.var() - 2.0) < 0.3
    assert set(s.order_parameters) >= {"m", "q", "u", "overlap", "entropy", "m_h0", "m_h1"}
    for name, x in s.order_parameters.items():
        assert x.shape == (2, 600) and name in s.diagnostics and name in s.summary()["draws"]


def test_smc_two_heads_at_p0_is_the_prior():
    data = ba.CopyTask(T=3, d=2).sample(jax.random.key(0), P=0)
    post = ba.Posterior(data, "linear", ba.Prior(1.0, 10.0, 1.0), heads=2)
    s = ba.sample(post, jax.random.key(3), method="smc", num_chains=2, num_samples=400)
    assert s.L.shape == (2, 400, 2, 3, 3)
    assert abs(float(np.mean(s.extra["log_evidence"]["runs"]))) < 1e-9  # likelihood of no data is 1
    assert abs(s.L.var() - 1.0) < 0.15


# slow (22 s): the one-head joint-vs-marginal check (tests/test_sampling.py) stays in the default suite
@pytest.mark.slow
def test_joint_numpyro_matches_marginal_two_heads():
    """The closed form with V integrated out and numpyro NUTS on (L^1, L^2, V) sample the same law of the
    label-free observables (KS on draws thinned to their effective size; fails if the H-head closed form is off)."""
    task = ba.CopyTask(T=3, d=2)
    data = task.sample(jax.random.key(11), P=25)
    prior = ba.Prior(1.0, 10.0, 25 * 2 / (2 * 3.0))  # beta = P d / (2 sigma2) = 3
    post = ba.Posterior(data, "softmax", prior, heads=2)
    marg = ba.sample(post, jax.random.key(12), num_chains=4, num_warmup=300, num_samples=1000)
    joint = ba.sample_joint(
        data,
        jax.random.key(13),
        attention="softmax",
        prior=prior,
        heads=2,
        num_chains=4,
        num_warmup=300,
        num_samples=1000,
    )
    assert joint.L.shape == marg.L.shape == (4, 1000, 2, 3, 3)
    for name in ("m", "q", "overlap"):
        p = stats.ks_2samp(ess_thin(marg.order_parameters[name]), ess_thin(joint.order_parameters[name])).pvalue
        assert p > 1e-3, (name, p)
    # the test has power: the law differs from a posterior with a 4x smaller noise variance
    sharper = ba.sample(
        post.with_prior(prior.replace(sigma2=prior.sigma2 / 4)),
        jax.random.key(14),
        num_chains=4,
        num_warmup=300,
        num_samples=1000,
    )
    p = stats.ks_2samp(ess_thin(sharper.order_parameters["m"]), ess_thin(joint.order_parameters["m"])).pvalue
    assert p < 1e-3


# --------------------------------------------------------------------------------------------------------
# training H heads: the objective is the joint density, on the statistics and on minibatches alike
# --------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("attention", ATTENTIONS)
def test_training_objective_two_heads_is_scaled_joint_density(attention, rng):
    from bayesattn.training import objective

    data = ba.CopyTask(T=4, d=2, boundary="causal").sample(jax.random.key(6), P=17)
    prior = ba.Prior(1.0, 10.0, 2.0)
    post = ba.Posterior(data, attention, prior, heads=2)
    pts = [(jnp.asarray(rng.standard_normal((2, 4, 4))), jnp.asarray(rng.standard_normal((2, 4)))) for _ in range(2)]
    J = [float(ba.training_objective(L, V, post)) for L, V in pts]
    ref = [
        -prior.sigma2 / float(post.n) * float(ba.joint_log_density(L, V, data, attention, prior, heads=2))
        for L, V in pts
    ]
    np.testing.assert_allclose(J[0] - J[1], ref[0] - ref[1], rtol=1e-10)
    L, V = pts[0]
    direct = objective.batch_sq_error(data.task, post.model, L, V, data.X, data.Y)
    np.testing.assert_allclose(float(direct), float(objective.sq_error(post, L, V)), rtol=1e-10)
    with pytest.raises(ValueError, match=r"V has shape \(2, 2\)"):
        ba.training_objective(L, V[:, :2], post)


def test_train_two_heads_records_per_head_observables():
    data = ba.CopyTask(T=4, d=2).sample(jax.random.key(0), 60)
    res = ba.train(
        data, ba.Prior(1.0, 10.0, 5.0), "softmax", jax.random.key(1), heads=2, steps=60, init="hot", record_every=20
    )
    assert res.final_params[0].shape == (2, 4, 4) and res.final_params[1].shape == (2, 4)
    assert res.history["L"].shape == (4, 2, 4, 4) and res.config["heads"] == 2
    for name in ("m", "m_h0", "m_h1", "overlap"):
        assert res.history[name].shape == (4,)
    np.testing.assert_allclose(res.history["m"], np.maximum(res.history["m_h0"], res.history["m_h1"]), rtol=1e-12)
    assert res.history["m"][0] > 0.85  # the hot start puts 0.9 on the source in each head
