"""The H-head, K-lag order-parameter theory (bayesattn.bayes.theory.heads; docs/theory.md section 12)."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import bayesattn as ba
from bayesattn.bayes.theory.heads import check_heads_task, heads_curve, heads_energy, label_free
from bayesattn.bayes.theory.heads_rowlaw import (
    adapt_proposal,
    default_proposal,
    is_moments,
    linear_cgf,
    n_stats,
    pack,
    softmax_row_samples,
    unpack,
)

PRIOR = ba.Prior(1.0, 100.0, 400.0)
TASK = ba.MultiLagCopyTask(T=16, d=8, spans=((1,), (2,)), weights=(1.0, 0.6), rotations="orthogonal")


def _order_parameters(post, L, task):
    a = np.asarray(post.attention_weights(jnp.asarray(L)))
    pats = np.stack(list(task.target_patterns.values()))
    return np.einsum("hts,kts->hk", a, pats) / task.T, np.einsum("hts,gts->hg", a, a) / task.T


def test_energy_matches_closed_form_like_one_over_sqrt_P():
    """-T Phi_E(m(L), Q(L)) against the exact closed form (log likelihood + (n d / 2) log(2 pi sigma2)):
    differences between a random, a cooperative and a competitive L, relative error over 3 data sets; it must
    shrink like 1/sqrt(P) (measured: softmax 2.9e-3 -> 3.3e-4, linear 1.9e-3 -> 4.8e-4 from P = 1000 to 64000)."""
    pats = np.stack(list(TASK.target_patterns.values()))
    rel = {}
    for P in (1000, 64000):
        for seed in range(3):
            data = TASK.sample(jax.random.key(seed), P)
            rng = np.random.default_rng(seed)
            noise = [0.5 * rng.normal(size=(2, 16, 16)) for _ in range(3)]
            for attention, amp in (("softmax", 3.0), ("linear", 4.0)):
                post = ba.Posterior(data, attention, PRIOR, heads=2)
                Ls = [2 * noise[0], amp * pats + noise[1], amp * pats[[0, 0]] + noise[2]]
                ex, th = [], []
                for L in Ls:
                    const = 0.5 * float(post.n) * 8 * np.log(2 * np.pi * 400)
                    ex.append(float(post.log_likelihood(jnp.asarray(L))) + const)
                    m, Q = _order_parameters(post, L, TASK)
                    th.append(-TASK.T * float(heads_energy(m, Q, task=TASK, prior=PRIOR, P=P)))
                ex, th = np.asarray(ex), np.asarray(th)
                err = np.abs((th[1:] - th[0]) - (ex[1:] - ex[0])) / np.abs(ex[1:] - ex[0])
                rel.setdefault((attention, P), []).append(err)
    for attention in ("softmax", "linear"):
        small, large = np.mean(rel[(attention, 1000)]), np.mean(rel[(attention, 64000)])
        assert large < 2e-3, attention
        assert large < 0.4 * small, attention  # 1/sqrt(64) = 0.125 expected; 0.4 leaves room for 3 data sets


def test_energy_one_head_is_section_1():
    """H = K = 1, w = 1, U = I: Phi_E = beta [1 - m^2 / (q + eps)] + (d^2 / 2T) log(1 + q / eps) (ba.theory.action)."""
    task = ba.MultiLagCopyTask(T=16, d=8, spans=((1,),), weights=(1.0,))
    P, m, q = 1500.0, 0.31, 0.17
    beta, eps = P * 8 / 800.0, PRIOR.lam(8) / (P * 16)
    ref = ba.theory.action(m, q, 0.0, beta=beta, eps=eps, d=8, T_q=16)
    assert float(heads_energy([[m]], [[q]], task=task, prior=PRIOR, P=P)) == pytest.approx(float(ref), rel=1e-12)


def test_symmetries_of_energy_and_row_laws():
    """Permuting heads leaves Phi_E, the linear CGF and the label-free view unchanged; rotating linear heads
    (an exact symmetry) leaves Phi_E and the linear CGF unchanged."""
    rng = np.random.default_rng(1)
    H, K = 3, 2
    task = ba.MultiLagCopyTask(T=16, d=8, spans=((1,), (3,)), weights=(1.0, 0.5), rotations="orthogonal")
    m = rng.uniform(0, 0.5, (H, K))
    A = rng.normal(size=(H, 5))
    Q = A @ A.T / 5 + 0.3 * np.eye(H)
    lam = pack(rng.normal(size=(H, K)), -np.eye(H) * 2 + 0.1 * rng.normal(size=(H, H)) * (1 - np.eye(H)))
    lam = pack(*[0.5 * (v + np.swapaxes(v, -1, -2)) if v.shape == (H, H) else v for v in unpack(lam, H, K, xp=np)])
    E0 = float(heads_energy(m, Q, task=task, prior=PRIOR, P=2000))
    C0 = float(linear_cgf(jnp.asarray(lam), H, K, 16, 1.0))
    lf0 = label_free(m, Q)
    th, G = unpack(lam, H, K, xp=np)
    for p in itertools.permutations(range(H)):
        p = list(p)
        Ep = heads_energy(m[p], Q[np.ix_(p, p)], task=task, prior=PRIOR, P=2000)
        assert float(Ep) == pytest.approx(E0, rel=1e-12)
        Cp = linear_cgf(jnp.asarray(pack(th[p], G[np.ix_(p, p)])), H, K, 16, 1.0)
        assert float(Cp) == pytest.approx(C0, rel=1e-12)
        lf = label_free(m[p], Q[np.ix_(p, p)])
        for k in lf0:
            np.testing.assert_allclose(lf[k], lf0[k], atol=1e-14)
    O = np.linalg.qr(rng.normal(size=(H, H)))[0]
    assert float(heads_energy(O @ m, O @ Q @ O.T, task=task, prior=PRIOR, P=2000)) == pytest.approx(E0, rel=1e-10)
    # the tilt is theta . a + l^T Gs l / T with Gs = (G + diag G) / 2 (packed G holds c_hh' once per pair)
    Gs = O @ (0.5 * (G + np.diag(np.diag(G)))) @ O.T
    G_rot = 2.0 * Gs - np.diag(np.diag(Gs))
    assert float(linear_cgf(jnp.asarray(pack(O @ th, G_rot)), H, K, 16, 1.0)) == pytest.approx(C0, rel=1e-10)


def test_capture_is_the_pattern_share_of_the_heads_span():
    """label_free's "capture" from the order parameters (m, Q) of real attention maps equals
    diagnostics.observables.pattern_capture, the projection of each lag's pattern onto the span of the heads'
    maps computed on the maps themselves; and it is unchanged by any rotation of the heads (linear heads'
    symmetry), which moves the best head's mass."""
    from bayesattn.diagnostics.observables import pattern_capture

    rng = np.random.default_rng(3)
    task = ba.MultiLagCopyTask(T=12, d=4, spans=((1,), (3,)), weights=(1.0, 0.5), rotations="orthogonal")
    pats = list(task.target_patterns.values())
    data = task.sample(jax.random.key(0), 4)
    for attention, H in (("softmax", 2), ("linear", 3)):
        post = ba.Posterior(data, attention, PRIOR, heads=H)
        L = 1.5 * rng.normal(size=(H, 12, 12)) + 2.0 * pats[0]
        m, Q = _order_parameters(post, L, task)
        lf = label_free(m, Q)
        alpha = jnp.asarray(post.attention_weights(jnp.asarray(L)))
        ref = [float(pattern_capture(alpha, p, task.query_mask)) for p in pats]
        np.testing.assert_allclose(lf["capture"], ref, rtol=1e-10)
        assert 0.0 < min(ref) and max(ref) < 1.0
        O = np.linalg.qr(rng.normal(size=(H, H)))[0]
        lf_rot = label_free(O @ m, O @ Q @ O.T)
        np.testing.assert_allclose(lf_rot["capture"], lf["capture"], rtol=1e-10)
        assert np.max(np.abs(lf_rot["mass_max"] - lf["mass_max"])) > 1e-3


def _row_stats_linear(rng, n, H, K, T):
    alpha = rng.normal(size=(n, H, T)) / np.sqrt(T)
    iu = np.triu_indices(H)
    c = np.einsum("nhs,ngs->nhg", alpha, alpha)[:, iu[0], iu[1]]
    return np.concatenate([alpha[:, :, :K].reshape(n, -1), c], axis=1)


def test_linear_row_law_against_monte_carlo():
    """Lambda, tilted means and covariance of the Gaussian row law against plain Monte Carlo over prior rows."""
    H, K, T = 2, 2, 16
    S = _row_stats_linear(np.random.default_rng(0), 200_000, H, K, T)
    lam = pack(np.array([[1.5, -0.7], [0.4, 1.1]]), np.array([[-2.0, 0.6], [0.6, -1.0]]))
    lw = S @ lam
    w = np.exp(lw - lw.max())
    mc_L = np.log(w.mean()) + lw.max()
    mc_mean = w @ S / w.sum()
    L = jnp.asarray(lam)
    f = lambda v: linear_cgf(v, H, K, T, 1.0)  # noqa: E731
    assert float(f(L)) == pytest.approx(mc_L, abs=0.01)
    np.testing.assert_allclose(np.asarray(jax.grad(f)(L)), mc_mean, atol=5e-3)
    dS = S - mc_mean
    np.testing.assert_allclose(np.asarray(jax.hessian(f)(L)), (dS * w[:, None]).T @ dS / w.sum(), atol=3e-3)
    assert not np.isfinite(float(f(jnp.asarray(pack(np.zeros((H, K)), np.eye(H) * 9.0)))))  # improper tilt


def test_softmax_importance_sampler_against_plain_monte_carlo():
    """The importance-sampled row law (adapted proposal) against plain prior Monte Carlo of whole rows, at a
    tilt where head 0 copies lag 1 in part of the rows and the heads are coupled through c_01."""
    H, K, T = 2, 2, 16
    lam = jnp.asarray(pack(np.array([[9.0, 0.0], [0.0, 6.0]]), np.array([[-4.0, -3.0], [-3.0, -4.0]])))
    key = jax.random.key(3)
    S, lw, x = softmax_row_samples(key, *default_proposal(H, K), H=H, K=K, T=T, n=100_000, sigma_A2=1.0)
    S, lw, x = softmax_row_samples(key, *adapt_proposal(lam, S, lw, x, 1.0), H=H, K=K, T=T, n=100_000, sigma_A2=1.0)
    L_is, m_is, _, ess = is_moments(lam, S, lw)
    z = np.asarray(jax.random.normal(jax.random.key(11), (1_000_000, H, T)))
    a = np.exp(z - z.max(-1, keepdims=True))
    a /= a.sum(-1, keepdims=True)
    iu = np.triu_indices(H)
    S0 = np.concatenate([a[:, :, :K].reshape(len(a), -1), np.einsum("nhs,ngs->nhg", a, a)[:, iu[0], iu[1]]], 1)
    l0 = S0 @ np.asarray(lam)
    w0 = np.exp(l0 - l0.max())
    assert float(ess) > 5000
    assert float(L_is) == pytest.approx(np.log(w0.mean()) + l0.max(), abs=0.02)
    np.testing.assert_allclose(np.asarray(m_is), w0 @ S0 / w0.sum(), atol=4e-3)


def test_one_head_reduces_to_phase_curve():
    """H = K = 1: the fixed point equals ba.theory.phase_curve's stable minimum (softmax: exact-at-finite-T table
    of docs/theory.md section 2, here importance sampling; linear: the same limit, to O(1/T^2) of the exact cosine
    law). Measured: softmax m within 4e-4, q within 5e-4; linear m within 6e-3."""
    for att, tol_m, P in (("softmax", 3e-3, [300, 800, 3000]), ("linear", 0.012, [300, 1200, 3000])):
        pc = ba.theory.phase_curve(ba.CopyTask(T=16, d=8), PRIOR, att, P)
        hc = heads_curve(P, heads=1, attention=att, weights=(1.0,), num_samples=30_000)
        m_fp, q_fp = hc.fixed["m_fp"].ravel(), hc.fixed["Q_fp"].ravel()
        ok = pc.stable["m"] > 0.02 if att == "linear" else np.ones(len(P), bool)  # linear: above P_c only
        np.testing.assert_allclose(m_fp[ok], pc.stable["m"][ok], atol=tol_m)
        np.testing.assert_allclose(q_fp, pc.stable["q"], atol=3e-3)


def test_row_laws_of_one_energy_share_their_programs():
    """Two row laws of the same task and sizes get the same jitted programs (a second curve compiles nothing);
    another task's weights, or the other attention, get their own. The energy function is one object per set of
    parameters, compared by value, and equals the energy it stands for."""
    from bayesattn.bayes.theory.heads import energy_params, row_energy
    from bayesattn.bayes.theory.heads_rowlaw import ROW_LAWS

    def law(task, att="linear", K=2):
        return ROW_LAWS[att](row_energy(energy_params(task, PRIOR, [100.0]), 2, K), 2, K, task.T, 1.0, 1000, None)

    other = ba.MultiLagCopyTask(T=16, d=8, spans=((1,), (2,)), weights=(1.0, 0.5), rotations="orthogonal")
    a, b, c, s = law(TASK), law(TASK), law(other), law(TASK, "softmax")
    assert a.phi is b.phi and a._psi is b._psi and a._lin is b._lin
    assert c.phi is not a.phi and s.phi is not a.phi and s._psi is not a._psi
    x = pack(np.full((2, 2), 0.3), np.eye(2) + 0.1)
    m, Q = unpack(x, 2, 2, xp=np)
    want = heads_energy(m, Q, task=TASK, prior=PRIOR, P=100.0)
    ep = energy_params(TASK, PRIOR, [100.0])
    assert float(a.phi(jnp.asarray(x), ep["beta"][0], ep["eps"][0])) == pytest.approx(float(want), rel=1e-12)


def test_bad_input():
    with pytest.raises(ValueError, match="boundary"):
        check_heads_task(ba.MultiLagCopyTask(T=8, d=4, boundary="causal"))
    with pytest.raises(ValueError, match="tokens"):
        check_heads_task(ba.MultiLagCopyTask(T=8, d=4, tokens="onehot"))
    with pytest.raises(ValueError, match="span of several lags"):
        check_heads_task(ba.MultiLagCopyTask(T=8, d=4, spans=((1, 2), (3,))))
    with pytest.raises(ValueError, match="not covered"):
        check_heads_task(ba.CopyTask(T=8, d=4))
    with pytest.raises(ValueError, match="attention"):
        heads_curve([100], attention="relu")
    with pytest.raises(ValueError, match="P"):
        heads_curve([300, 100])
    with pytest.raises(ValueError, match="fluct_samples=0"):  # before the importance sampling runs
        heads_curve([100], fluct_samples=0)
    with pytest.raises(ValueError, match="min_ess=nan"):
        heads_curve([100], min_ess=float("nan"))
    with pytest.raises(ValueError, match="T=8, d=8, weights=None with a task"):
        heads_curve([100], task=ba.MultiLagCopyTask(T=16, d=8, spans=((1,), (2,))), T=8)
    with pytest.raises(ValueError, match="heads=5 with T=4: .* K <= T - 1 = 3"):
        heads_curve([10], T=4, d=2, heads=5)
    with pytest.raises(ValueError, match="m of shape \\(2, 1\\): .* K = 1 lags; expected task.K = 2"):
        heads_energy(np.full((2, 1), 0.3), 0.4 * np.eye(2), task=TASK, prior=PRIOR, P=100.0)
    with pytest.raises(ValueError, match="m of shape \\(2,\\): expected \\(..., H, K\\)"):
        heads_energy(np.full(2, 0.3), 0.4 * np.eye(2), task=TASK, prior=PRIOR, P=100.0)
    assert n_stats(3, 2) == 12


@pytest.mark.slow
@pytest.mark.parametrize("attention, obs", [("softmax", "mass_max"), ("linear", "capture")])
def test_two_heads_against_mcmc(attention, obs):
    """T = 16, d = 8, H = 2, lags 1, 2 (w = 1, 0.6): each attention's label-free lag order parameter (softmax:
    the best head's mass; linear: the lag's share in the heads' span), theory vs NUTS (2 chains x (300 + 500)),
    away from the transitions (softmax P_1 ~ 630, P_2 ~ 1800; linear ~ 1630, 4500): within 0.03."""
    P = [200, 3076, 19024]
    hc = heads_curve(P, heads=2, attention=attention)
    for i, p in enumerate(P):
        post = ba.Posterior(TASK.sample(jax.random.key(100 + p), p), attention, PRIOR, heads=2)
        s = ba.sample(post, jax.random.key(p), num_chains=2, num_warmup=300, num_samples=500)
        for k, lag in enumerate(("lag1", "lag2")):
            assert abs(float(np.mean(s.order_parameters[f"{obs}:{lag}"])) - hc.mean[obs][i, k]) < 0.03


def test_linear_legendre_in_blocks_equals_it_in_one_piece():
    """More rows than one block (``block``, lowered here to 64 to keep the test small) are vmapped a block at a time
    and the blocks looped (two of 64, then the 22 left): the same dual points as the rows taken in pieces that fit
    one block, and Newton's answer is the tilt each row came from. (One vmap over 800 rows wedged XLA's CPU
    thread pool.)"""
    import jax
    import jax.numpy as jnp

    from bayesattn.bayes.theory import heads_rowlaw

    kw = dict(H=3, K=3, T=5, sigma_A2=1.0, block=64)
    # row means of the law (its gradient at random tilts), so that Newton has an answer to find
    lams = jnp.asarray(np.random.default_rng(0).normal(size=(150, 15)) * 0.05)
    xs = jax.vmap(jax.grad(lambda v: heads_rowlaw.linear_cgf(v, 3, 3, 5, 1.0)))(lams)
    whole = heads_rowlaw.linear_legendre(xs, jnp.zeros(15), **kw)
    pieces = [heads_rowlaw.linear_legendre(xs[i : i + 50], jnp.zeros(15), **kw) for i in range(0, 150, 50)]
    for got, parts in zip(whole, zip(*pieces)):
        assert got.shape[0] == 150
        np.testing.assert_allclose(
            np.asarray(got), np.concatenate([np.asarray(p) for p in parts]), rtol=1e-9, atol=1e-12
        )
    assert float(jnp.max(whole[3])) < 1e-8  # grad Lambda(lam) = x at every row
    np.testing.assert_allclose(np.asarray(whole[0]), np.asarray(lams), atol=1e-6)  # and lam is the tilt it came from
