"""Linear attention with one-hot tokens in the reduced theory (docs/theory.md section 8.1).

- the four-parameter energy (m, q, v, w) against the exact closed form on sampled one-hot data at large P;
- the grid integration of the exact (A, B, R, K) law against an independent sampler of the reduced density
  written directly in L (NUTS on 64 logits, no frame variables);
- the origin instability against the grid's maximum, and the not-covered message;
- slow: the phase curve against exact NUTS on the closed-form posterior.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import bayesattn as ba
from bayesattn import theory as th
from bayesattn.bayes.theory.linear_onehot import (
    _critical_P,
    frame_variables,
    onehot_linear_coefficients,
    onehot_linear_energy,
    onehot_linear_means,
    onehot_linear_tables,
)

PRIOR = ba.Prior(1.0, 100.0, 400.0)


def _direct_order_parameters(L):
    """(m, q, v, w) straight from the definitions (alpha = L / sqrt(T), cyclic shift by one)."""
    T = L.shape[-1]
    al = L / np.sqrt(T)
    a = al[..., np.arange(T), (np.arange(T) - 1) % T]
    r = al.sum(-1)
    return a.mean(-1), (al**2).sum((-1, -2)) / T, r.mean(-1), (r**2).mean(-1)


def test_onehot_linear_energy_matches_the_exact_closed_form():
    T, d, P = 16, 8, 40000
    task = ba.CopyTask(T=T, d=d, tokens="onehot")
    post = ba.Posterior(task.sample(jax.random.key(1), P), "linear", PRIOR)
    rng = np.random.default_rng(0)
    J, pat = np.ones((T, T)) / T, np.roll(np.eye(T), -1, axis=1)
    Ls = [
        rng.normal(size=(T, T)),
        rng.normal(size=(T, T)) + 3 * J,
        3 * pat + 0.5 * rng.normal(size=(T, T)),
        5 * pat + 4 * J + rng.normal(size=(T, T)),
        2 * J + 2 * np.outer(rng.normal(size=T), np.ones(T)),
        8 * J,
        0.1 * rng.normal(size=(T, T)),
    ]
    c1, c2, o1, o2, eps = (float(np.asarray(x)) for x in onehot_linear_coefficients(task, PRIOR, P))
    exact, reduced, no_mean = [], [], []
    for L in Ls:
        A, B, R, K = (float(x) for x in frame_variables(L))
        m, q, v, w = _direct_order_parameters(L)
        # the frame reproduces the order parameters and the norm
        np.testing.assert_allclose(
            [(np.sqrt(T - 1) * B + A) / T**1.5, A / np.sqrt(T), (A**2 + R) / T, (A**2 + B**2 + R + K) / T**2],
            [m, v, w, q],
            rtol=1e-10,
            atol=1e-12,
        )
        exact.append(float(post.log_likelihood(jnp.asarray(L))))
        reduced.append(-float(onehot_linear_energy(A, B, R, K, T, c1, c2, o1, o2, eps)))
        no_mean.append(-(c1 * (1 - m**2 / (q + eps)) + o1 * np.log1p(q / eps)))  # the softmax-style energy
    dx, dr, dn = (np.asarray(v) - v[0] for v in (exact, reduced, no_mean))
    assert np.max(np.abs(dx)) > 300.0
    # measured: 0.23 nat at most on differences up to 545 nats
    np.testing.assert_allclose(dr, dx, atol=1.0)
    assert np.max(np.abs(dn - dx)) > 50.0  # without the all-ones sector the energy is far off


def _nuts_reduced(T, P, key, num=1600):
    """NUTS on the reduced log density of L written directly (prior + energy of (m, q, v, w)); <u>, <q>."""
    import blackjax

    task = ba.CopyTask(T=T, d=8, tokens="onehot")
    c1, c2, o1, o2, eps = (float(np.asarray(x)) for x in onehot_linear_coefficients(task, PRIOR, P))
    src = jnp.asarray((np.arange(T) - 1) % T)

    def logp(L):
        al = L / jnp.sqrt(T)
        a, r = al[jnp.arange(T), src], al.sum(-1)
        m, q, v, w = a.mean(), (al**2).sum() / T, r.mean(), (r**2).mean()
        E = (
            c1 * (1 - m**2 / (q + eps))
            + c2 * (1 - v**2 / (w + eps))
            + o1 * jnp.log1p(q / eps)
            + o2 * jnp.log1p(w / eps)
        )
        return -0.5 * jnp.sum(L**2) / PRIOR.sigma_A2 - E

    k1, k2 = jax.random.split(key)
    warm = blackjax.window_adaptation(blackjax.nuts, logp)
    (state, params), _ = warm.run(k1, 0.3 * jax.random.normal(k2, (T, T)), num_steps=300)
    kernel = blackjax.nuts(logp, **params).step

    def step(st, k):
        st, _ = kernel(k, st)
        m, q, _, _ = _direct_order_parameters_j(st.position)
        return st, jnp.array([m**2 / q, q])

    _, obs = jax.lax.scan(step, state, jax.random.split(k1, num))
    return np.asarray(obs)


def _direct_order_parameters_j(L):
    T = L.shape[-1]
    al = L / jnp.sqrt(T)
    a = al[jnp.arange(T), (jnp.arange(T) - 1) % T]
    r = al.sum(-1)
    return a.mean(), (al**2).sum() / T, r.mean(), (r**2).mean()


def test_grid_integration_matches_nuts_on_the_reduced_density():
    """T = 8: the grid's <u> and <q> against NUTS on the reduced density of the 64 logits (no frame variables,
    no grid), above the onset."""
    T = 8
    task = ba.CopyTask(T=T, d=8, tokens="onehot")
    P = np.array([6000.0])  # above the onset (P_c = 3410), below the copy crossover
    A, B, lz, cond = onehot_linear_tables(task, PRIOR, P)
    for i, p in enumerate(P):
        theory, edge = onehot_linear_means(A[i], B[i], lz[i], cond[i])
        assert edge < 1e-8
        obs = _nuts_reduced(T, p, jax.random.key(int(p)))
        chunks = obs.reshape(8, -1, 2).mean(axis=1)  # batch means for the Monte Carlo error
        se = chunks.std(axis=0, ddof=1) / np.sqrt(8)
        mc = obs.mean(axis=0)
        print(
            f"P = {p:.0f}: grid <u> = {theory[0]:.5f}, <q> = {theory[1]:.5f}; "
            f"NUTS {mc[0]:.5f} +- {se[0]:.5f}, {mc[1]:.5f} +- {se[1]:.5f}"
        )
        assert abs(theory[0] - mc[0]) < max(4 * se[0], 3e-3), (p, theory[0], mc[0], se[0])
        assert abs(theory[1] - mc[1]) < max(4 * se[1], 3e-3) * 3, (p, theory[1], mc[1], se[1])


def test_phase_curve_onset_transition_and_metastable_branch():
    """The origin is the grid's maximum below P_c and not above; the copy crossover comes later. Above the copy
    crossover a second maximum appears at (A, -B), the copy component against the row sums' sign: m^2 is smaller
    there, so it is never the stable one (exact NUTS chains can stay on it: docs/theory.md section 8.1)."""
    T = 8
    task = ba.CopyTask(T=T, d=8, tokens="onehot")
    Pc = _critical_P(task, PRIOR)
    pc = th.phase_curve(task, PRIOR, "linear", [0.8 * Pc, 1.5 * Pc, 4.0 * Pc, 20000.0, 40000.0])
    assert pc.transition["order"] == "second" and pc.transition["P_c"] == pytest.approx(Pc, rel=1e-12)
    assert pc.stable["u"][0] < 1e-12 and pc.stable["u"][1] > 1e-4
    assert np.all(np.diff(pc.mean["u"]) > 0) and pc.mean["u"][2] > 0.3
    assert pc.transition["P_copy_at_A0"] > Pc  # the row sums go first
    lc = th.loss_curve(task, PRIOR, "linear", pc.P, curve=pc)
    np.testing.assert_allclose(lc["posterior"], pc.mean["test_error"])
    assert lc["posterior"][0] > lc["posterior"][-1]
    assert pc.transition["spinodals"] == [] and len(pc.branches) == 2
    meta, stab = pc.branches[1], pc.branches[0]
    assert pc.transition["metastable_from"] == meta["P"][0] > 1.5 * Pc
    k = np.searchsorted(stab["P"], meta["P"])
    assert np.all(meta["free_energy"] > stab["free_energy"][k]) and np.all(meta["u"] < stab["u"][k])


def test_onehot_linear_causal_not_covered_says_what_is():
    task = ba.CopyTask(T=8, d=8, tokens="onehot", boundary="causal")
    with pytest.raises(ValueError, match="tokens='onehot' with boundary='cyclic' \\(softmax and linear\\)"):
        th.phase_curve(task, PRIOR, "linear", [100, 200])


@pytest.mark.slow
@pytest.mark.parametrize("T, P", [(16, 4500.0), (16, 9000.0), (32, 10000.0), (32, 18000.0)])
def test_onehot_linear_theory_vs_exact_nuts(T, P):
    """Exact NUTS on the closed-form posterior (2 chains x (500 + 500), cold start) against the theory's <u>."""
    task = ba.CopyTask(T=T, d=8, tokens="onehot")
    post = ba.Posterior(task.sample(jax.random.key(11 + int(P)), int(P)), "linear", PRIOR)
    s = ba.sample(post, jax.random.key(int(P)), num_chains=2, num_warmup=500, num_samples=500, init="cold")
    mc = float(np.asarray(s.order_parameters["u"]).mean())
    pc = th.phase_curve(task, PRIOR, "linear", [P])
    assert abs(pc.mean["u"][0] - mc) < 0.01, (pc.mean["u"][0], mc)


def test_test_error_is_the_held_out_error_of_the_centred_target():
    """At fixed L (with an all-ones part), the exact readout trained on P one-hot sequences and scored on fresh ones:
    the error of the part orthogonal to the all-ones vector, as a fraction of its variance (d - 1)/d, is
    1 - m^2 (q + 2 eps')/(q + eps')^2, the quantity `mean["test_error"]` averages."""
    from bayesattn.bayes.theory.common import prediction_error

    T, d, P = 8, 8, 4000
    task = ba.CopyTask(T=T, d=d, tokens="onehot")
    post = ba.Posterior(task.sample(jax.random.key(3), P), "linear", PRIOR)
    eps = float(onehot_linear_coefficients(task, PRIOR, P)[4])
    test = task.sample(jax.random.key(7), 2000)
    proj = jnp.eye(d) - jnp.ones((d, d)) / d
    rng = np.random.default_rng(1)
    J, shift = np.ones((T, T)) / T, np.roll(np.eye(T), -1, axis=1)
    for L in [
        0.3 * rng.normal(size=(T, T)) + 3 * J,
        2 * shift + 4 * J + 0.5 * rng.normal(size=(T, T)),
        4 * shift + 0.3 * rng.normal(size=(T, T)),
    ]:
        m, q, _, _ = _direct_order_parameters(L)
        pred = float(prediction_error(m, q, eps))
        mean, _ = post.predict(jnp.asarray(L), jnp.asarray(test.X))
        meas = float(jnp.mean(jnp.sum(((mean - test.Y) @ proj) ** 2, -1)) / ((d - 1) / d))
        print(f"held-out error of the centred target: predicted {pred:.4f}, measured {meas:.4f}")
        assert abs(meas - pred) < 0.02 * pred + 0.005, (pred, meas)
