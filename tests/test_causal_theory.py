"""Causal softmax in the reduced theory (docs/theory.md section 10).

- the energy: differences of the exact closed-form log p(D | L) (causal mask, large P) against the reduced energy,
  which keeps its cyclic form with n = P (T - offset);
- the row-averaged cumulant generating function against direct Monte Carlo of whole causal rows (another seed),
  with the rows t < offset left out;
- the row-averaged Newton / density machinery with a single row type reproduces the cyclic one exactly;
- the phase curve against short exact NUTS at T = 8 (fast) and across the transition at T = 16 and 32 (slow).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import bayesattn as ba
from bayesattn import theory as th
from bayesattn.bayes.theory.causal import causal_softmax_table, causal_table, row_types, tilted_rows
from bayesattn.bayes.theory.common import occam_d, scales
from bayesattn.bayes.theory.softmax_minima import softmax_action_minima
from bayesattn.bayes.theory.softmax_table import cached_table

D_TOK = 8
PRIOR = ba.Prior(1.0, 100.0, 400.0)


def _causal_logits(T, offset, rng, c, s):
    """Logits with the shift by `offset` boosted by c, plus noise of scale s (masked entries are ignored)."""
    L = s * rng.normal(size=(T, T))
    t = np.arange(offset, T)
    L[t, t - offset] += c
    return L


def test_causal_row_types():
    Ks, w = row_types(ba.CopyTask(T=8, d=D_TOK, boundary="causal", offset=3))
    np.testing.assert_array_equal(Ks, [4, 5, 6, 7, 8])  # rows t = 3..7 have t + 1 keys; rows 0..2 have no source
    np.testing.assert_allclose(w, 0.2)


@pytest.mark.parametrize("offset, tokens", [(1, "gaussian"), (2, "gaussian"), (1, "onehot")])
def test_causal_energy_matches_the_exact_closed_form(offset, tokens):
    """At P = 40 000 the exact log-likelihood differences between attention matrices equal the reduced energy's,
    -T_q beta [1 - m^2/(q + eps)] - (d^2/2) log(1 + q/eps), with T_q = T - offset query rows (one-hot tokens:
    beta', eps' and the Occam weight d (d - 1) of docs/theory.md section 8, unchanged by the mask)."""
    T, P = 12, 40000
    task = ba.CopyTask(T=T, d=D_TOK, boundary="causal", offset=offset, tokens=tokens)
    post = ba.Posterior(task.sample(jax.random.key(3), P), "softmax", PRIOR)
    beta, eps, Tq = scales(task, PRIOR, np.array([float(P)]))
    assert Tq == T - offset
    rng = np.random.default_rng(1)
    exact, reduced, rows_T, ms = [], [], [], []
    b_T, e_T, _ = scales(task.replace(boundary="cyclic"), PRIOR, np.array([float(P)]))  # all T rows counted
    for c, s in [(0.0, 0.0), (2.0, 0.5), (4.0, 0.3), (6.0, 1.0), (1.0, 2.0)]:
        L = jnp.asarray(_causal_logits(T, offset, rng, c, s))
        op = post.order_parameters(L)
        m, q = float(op["m"]), float(op["q"])
        ms.append(m)
        exact.append(float(post.log_likelihood(L)))
        reduced.append(-(Tq * beta[0] * (1 - m**2 / (q + eps[0])) + occam_d(task) ** 2 / 2 * np.log1p(q / eps[0])))
        rows_T.append(-(T * b_T[0] * (1 - m**2 / (q + e_T[0])) + occam_d(task) ** 2 / 2 * np.log1p(q / e_T[0])))
    # the uniform causal row has m = q = mean over query rows of 1/(t + 1)
    assert abs(ms[0] - np.mean(1.0 / np.arange(offset + 1, T + 1))) < 1e-12 and ms[3] > 0.7
    dx, dr = np.asarray(exact) - exact[0], np.asarray(reduced) - reduced[0]
    assert np.max(np.abs(dx)) > 50.0
    # O(sqrt(n)) fluctuations of G and C give O(1) nats
    np.testing.assert_allclose(dr, dx, atol=3.0, rtol=0.01)
    # counting the rows t < offset (n = P T) is off by T / T_q - 1 of the differences: the test can fail
    assert np.max(np.abs(np.asarray(rows_T) - rows_T[0] - dx)) > 25.0


def test_causal_table_matches_brute_force_rows():
    """Lambda_bar = (1/T_q) sum_t log E exp(h a_t + g b_t) over the query rows, and its gradient (m, q), against
    direct Monte Carlo of whole rows (the other logits drawn with another seed, the source logit by quadrature) for
    T = 7, offset = 2 (rows with 3..7 keys)."""
    T, offset = 7, 2
    task = ba.CopyTask(T=T, d=D_TOK, boundary="causal", offset=offset)
    tab = causal_softmax_table(task, PRIOR, 10.0, nh=121, ng=61)
    x = np.linspace(-8, 16, 480)  # the source logit, by quadrature (as in the cyclic brute-force test)
    e = np.exp(x)[:, None]
    others = []
    for t in range(offset, T):
        z = np.asarray(jax.random.normal(jax.random.key(100 + t), (10000, t)))  # the other t = K - 1 logits
        others.append((np.exp(z).sum(1), np.exp(2 * z).sum(1)))
    for i, j in [(20, 30), (45, 50), (30, 40)]:
        h, g = tab.h[i], tab.g[j]
        Lam = m = q = 0.0
        for S1, S2 in others:
            a, b = e / (e + S1), (e**2 + S2) / (e + S1) ** 2
            lw = h * a + g * b - 0.5 * x[:, None] ** 2
            M = lw.max()
            w = np.exp(lw - M)
            Lam += (np.log(w.sum() * (x[1] - x[0]) / np.sqrt(2 * np.pi) / len(S1)) + M) / len(others)
            m += (w * a).sum() / w.sum() / len(others)
            q += (w * b).sum() / w.sum() / len(others)
        assert abs(tab.Lam[i, j] - Lam) < 0.04, (i, j, tab.Lam[i, j], Lam)
        assert abs(tab.m[i, j] - m) < 4e-3, (i, j, tab.m[i, j], m)
        assert abs(tab.q[i, j] - q) < 4e-3, (i, j, tab.q[i, j], q)


def test_single_row_type_reproduces_the_cyclic_machinery():
    """With one row type of T keys, the row-averaged table and Newton (``tilted_rows``) are the cyclic ones."""
    T = 12
    P = np.array([300.0, 600.0, 900.0])
    task = ba.CopyTask(T=T, d=D_TOK)
    beta, eps, Tq = scales(task, PRIOR, P)
    cyc = cached_table(T, 1.0, D_TOK, float(beta.max()), 121, 61, 2000, 0, 200, 96, 800)
    cau = causal_table((T,), (1.0,), 1.0, D_TOK, float(beta.max()), 121, 61, 2000, 0)
    for k in ("h", "g", "Lam", "m", "q", "detC"):
        np.testing.assert_allclose(getattr(cau, k), getattr(cyc, k), rtol=1e-10, atol=1e-12)
    a = softmax_action_minima([cyc], beta[None], eps[None], [Tq], D_TOK)
    b = softmax_action_minima([cau], beta[None], eps[None], [Tq], D_TOK, tilt=tilted_rows)
    np.testing.assert_allclose(b[2], a[2], rtol=1e-10)  # posterior means
    for ma, mb in zip(a[0][0], b[0][0]):
        assert len(ma) == len(mb) > 0
        np.testing.assert_allclose(np.array(mb)[:, :3], np.array(ma)[:, :3], rtol=1e-8)


def test_causal_phase_curve_matches_short_mcmc():
    """T = 8 causal (a crossover): the theory's posterior mean of m against exact NUTS at one P."""
    task = ba.CopyTask(T=8, d=D_TOK, boundary="causal")
    P = 600
    pc = th.phase_curve(task, PRIOR, "softmax", [P], num_samples=5000, nh=121, ng=61)
    post = ba.Posterior(task.sample(jax.random.key(11), P), "softmax", PRIOR)
    s = ba.sample(post, jax.random.key(12), num_chains=2, num_warmup=200, num_samples=200)
    mc = float(np.mean(s.order_parameters["m"]))
    assert abs(pc.mean["m"][0] - mc) < 0.02, (pc.mean["m"][0], mc)
    # the prior floor of a causal row is mean(1/K), far above the cyclic 1/T
    assert pc.mean["m"][0] > np.mean(1.0 / np.arange(2, 9))


def test_causal_loss_curve_plateau_and_no_joint_mode():
    """loss_curve for causal softmax: the posterior's test error from the curve, the plateau of uniform rows
    1 - <1/K> (mean over query rows), and no joint mode (the zero-temperature theory is cyclic only)."""
    task = ba.CopyTask(T=6, d=D_TOK, boundary="causal", offset=2)
    pc = th.phase_curve(task, PRIOR, "softmax", [200.0, 2000.0], num_samples=2000, nh=121, ng=61)
    lc = th.loss_curve(task, PRIOR, "softmax", [200.0, 2000.0], curve=pc)
    u = np.mean(1.0 / np.array([3, 4, 5, 6]))
    _, eps, _ = scales(task, PRIOR, np.array([200.0, 2000.0]))
    np.testing.assert_allclose(lc["plateau"], 1 - u**2 * (u + 2 * eps) / (u + eps) ** 2, rtol=1e-12)
    assert "joint_mode" not in lc
    assert lc["posterior"][1] < lc["posterior"][0] < lc["plateau"][0]


def test_causal_phase_diagram_matches_its_curves():
    """phase_diagram over sigma_A2 for causal softmax: each row is the phase_curve of that prior."""
    task = ba.CopyTask(T=6, d=D_TOK, boundary="causal", offset=2)
    kw = dict(num_samples=2000, nh=121, ng=61)
    P = [200.0, 2000.0]
    pdg = th.phase_diagram(task, PRIOR, "softmax", P, {"sigma_A2": [1.0, 1.5]}, **kw)
    for k, s2 in enumerate([1.0, 1.5]):
        pc = th.phase_curve(task, PRIOR.replace(sigma_A2=s2), "softmax", P, **kw)
        np.testing.assert_allclose(pdg.mean[k], pc.mean["m"], rtol=1e-10)
    assert pdg.order == ["crossover", "crossover"]
    assert pdg.mean[0, 0] < pdg.mean[1, 0]  # a wider prior on the logits concentrates rows more at small P


@pytest.mark.parametrize("call", ["landscape", "mode_curve", "table"])
def test_causal_softmax_not_covered_elsewhere_says_so(call):
    task = ba.CopyTask(T=8, d=D_TOK, boundary="causal")
    with pytest.raises(ValueError, match="causal"):
        if call == "landscape":
            th.landscape(task, PRIOR, "softmax", 500.0)
        elif call == "mode_curve":
            th.mode_curve(task, PRIOR, "softmax", [100.0, 200.0])
        else:
            th.softmax_action_table(task, PRIOR, 5.0)


# P values across the causal crossovers (steepest near P ~ 450 at T = 16 and ~ 600 at T = 32)
SLOW_P = {16: [200, 450, 700, 1200], 32: [300, 550, 650, 1000]}


@pytest.mark.slow
@pytest.mark.parametrize("T, P", [(T, P) for T, Ps in SLOW_P.items() for P in Ps])
def test_causal_theory_vs_nuts(T, P):
    """Exact NUTS (4 chains x (400 warmup + 600 draws), cold and hot starts, one data set per P, other seeds than
    scripts/theory_vs_mcmc.py) against the theory's posterior mean of m: within 0.01. Both starts agree (no
    coexistence window: the causal transitions at T = 16 and 32 are crossovers)."""
    task = ba.CopyTask(T=T, d=D_TOK, boundary="causal")
    pc = th.phase_curve(task, PRIOR, "softmax", [float(P)])
    assert pc.transition["order"] == "crossover" and len(pc.branches) == 1
    post = ba.Posterior(task.sample(jax.random.key(500 + P), P), "softmax", PRIOR)
    means = []
    for j, init in enumerate(("cold", "hot")):
        s = ba.sample(post, jax.random.key(900 + 2 * P + j), num_chains=4, num_warmup=400, num_samples=600, init=init)
        means.append(float(np.mean(s.order_parameters["m"])))
    assert abs(means[0] - means[1]) < 0.01, means
    assert abs(0.5 * (means[0] + means[1]) - pc.mean["m"][0]) < 0.01, (means, pc.mean["m"][0])
