"""One-hot tokens in the reduced theory (docs/theory.md section 8).

The reduction's energy is checked against the exact closed form (docs/model.md section 2) evaluated on sampled
one-hot data at large P: differences of log p(D | L) between attention matrices must match the differences of
the reduced energy, which for one-hot tokens has beta = P (d - 1) / (2 sigma2 d), eps = d lam / n and Occam
weight d (d - 1). The Gaussian-token energy misses them by an order of magnitude, so the test can fail.
"""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import bayesattn as ba
from bayesattn import theory as th
from bayesattn.bayes.theory.common import occam_d, scales


def _attention_matrices(T, rng):
    shift = np.roll(np.eye(T), -1, axis=1)  # row t has its 1 at the source t - 1 (cyclic)
    out = [np.zeros((T, T))]
    for c, s in [(2.0, 0.5), (4.0, 0.3), (6.0, 1.0), (1.0, 2.0)]:
        out.append(c * shift + s * rng.normal(size=(T, T)))
    return out


def _reduced_energy(task, prior, P, m, q, d_occam):
    beta, eps, Tq = scales(task, prior, np.array([float(P)]))
    return Tq * beta[0] * (1.0 - m**2 / (q + eps[0])) + d_occam**2 / 2.0 * np.log1p(q / eps[0])


def test_onehot_energy_matches_the_exact_closed_form():
    T, d, P = 16, 8, 40000
    prior = ba.Prior(1.0, 100.0, 400.0)
    task = ba.CopyTask(T=T, d=d, tokens="onehot")
    post = ba.Posterior(task.sample(jax.random.key(1), P), "softmax", prior)
    Ls = _attention_matrices(T, np.random.default_rng(0))
    exact, reduced, gauss = [], [], []
    for L in Ls:
        op = post.order_parameters(jnp.asarray(L))
        m, q = float(op["m"]), float(op["q"])
        exact.append(float(post.log_likelihood(jnp.asarray(L))))
        reduced.append(-_reduced_energy(task, prior, P, m, q, occam_d(task)))
        gauss.append(-_reduced_energy(task.replace(tokens="gaussian"), prior, P, m, q, d))
    assert Ls[1][1, 0] > 1.0 and post.order_parameters(jnp.asarray(Ls[3]))["m"] > 0.7  # the shift is where we put it
    dx, dr, dg = (np.asarray(v) - v[0] for v in (exact, reduced, gauss))
    assert np.max(np.abs(dx)) > 300.0  # the differences are large, so the check has teeth
    # O(sqrt(n)) fluctuations of G and C give O(1) nats; measured agreement ~0.1 nat on 400-600
    np.testing.assert_allclose(dr, dx, atol=2.0, rtol=0.01)
    assert np.max(np.abs(dg - dx)) > 100.0  # the Gaussian-token energy is far off


def test_onehot_softmax_has_a_first_order_transition_at_larger_P():
    """One-hot tokens carry 1/d of the signal per coordinate: at T = 32 the transition is first order and
    moves from the Gaussian binodal (738.3) by about d^2/(d - 1); at equal signal to noise (sigma2 / d) by
    about d/(d - 1)."""
    prior = ba.Prior(1.0, 100.0, 400.0)
    oh = th.phase_curve(ba.CopyTask(T=32, d=8, tokens="onehot"), prior, "softmax", np.arange(6000.0, 7400.0, 10.0))
    assert oh.transition["order"] == "first"
    lo, hi = oh.transition["spinodals"]
    assert 6500 < lo < oh.transition["P_c"] < hi < 6800
    m = oh.stable["m"]
    assert m[0] < 0.06 and m[-1] > 0.15  # uniform below, copy above


@pytest.mark.parametrize(
    "kw, match",
    [
        (dict(attention="linear", task=ba.CopyTask(T=8, d=8, tokens="onehot", boundary="causal")), "onehot"),
        (dict(noise_fit=True), "noise_fit"),
    ],
)
def test_onehot_not_covered_says_so(kw, match):
    args = dict(task=ba.CopyTask(T=8, d=8, tokens="onehot"), attention="softmax", noise_fit=False)
    args.update(kw)
    with pytest.raises(ValueError, match=match):
        th.phase_curve(args["task"], ba.Prior(), args["attention"], [100, 200], noise_fit=args["noise_fit"])


def test_covered_refuses_a_flag_that_is_not_a_bool():
    """A truthy text was read as True (onehot='yes' covered one-hot tokens); covers does not answer False for it."""
    from bayesattn.bayes.theory.common import covers

    task = ba.CopyTask(T=8, d=8, tokens="onehot")
    with pytest.raises(ValueError, match="onehot='yes': expected True or False"):
        th.covered(task, "softmax", onehot="yes")
    with pytest.raises(ValueError, match="causal=1: expected True or False"):
        covers(task, "softmax", onehot=True, causal=1)
    assert th.covered(task, "softmax", onehot=np.True_) == "softmax"


def test_onehot_modes_and_landscape_not_covered():
    task = ba.CopyTask(T=8, d=8, tokens="onehot")
    with pytest.raises(ValueError, match="covers"):
        th.mode_curve(task, ba.Prior(), "softmax", [100, 200])


def test_large_beta_table_has_no_unphysical_entries_and_a_monotone_mean():
    """At sigma2 = 10, T = 8 (beta ~ 230 and 875) the matrix-product form of the row table underflows at the
    largest tilts. Those entries were left with det Cov < 0 and made the posterior mean q come out 0 at P = 5335.
    After the recompute every entry obeys what any softmax row must (m in [0, 1], 1/T <= q <= 1, m^2 <= q,
    det Cov > 0), and the posterior mean of m grows with P."""
    from bayesattn.bayes.theory.softmax_table import cached_table, unphysical

    task, prior = ba.CopyTask(T=8, d=8, tokens="onehot"), ba.Prior(1.0, 100.0, 10.0)
    Ps = np.array([5335.0, 20000.0])
    beta = scales(task, prior, Ps)[0]
    tab = cached_table(8, 1.0, occam_d(task), float(beta[-1]), 241, 121, 20000, 0, 200, 96, 800)
    assert not unphysical(8, tab.Lam, tab.m, tab.q, tab.detC).any()
    with pytest.warns(UserWarning, match=r"at P = 20000\.\.20000 a candidate minimum"):  # on the edge: said, and where
        c = th.phase_curve(task, prior, "softmax", Ps)
    m, q = np.asarray(c.mean["m"]), np.asarray(c.mean["q"])
    assert np.all(q >= 1 / 8) and np.all(m**2 <= q) and 0.5 < m[0] < m[1] <= 1


def test_one_call_over_three_decades_of_P_agrees_with_one_call_per_P():
    """One phase_curve over P = 30..30000 (its table cut into beta bands, and the Laplace limit where one grid
    cell holds the density) against a separate call at each P: the same posterior mean of m. One table for the
    whole range gave m = 0.947 at every P from 1290 to 15815."""
    task, prior = ba.CopyTask(T=8, d=8, tokens="onehot"), ba.Prior(1.0, 100.0, 10.0)
    Ps = np.geomspace(30, 30000, 7)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the largest P's minimum sits on its grid's edge
        together = np.asarray(th.phase_curve(task, prior, "softmax", Ps).mean["m"])
        alone = np.array(
            [float(th.phase_curve(task, prior, "softmax", Ps[i : i + 1]).mean["m"][0]) for i in range(len(Ps))]
        )
    assert np.all(np.diff(alone) > 0)
    np.testing.assert_allclose(together, alone, atol=0.01)
