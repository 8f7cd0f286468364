"""The Bayesian copy head's screens from the order-parameter theory (bayesattn.experiments.screens.theory)."""

import numpy as np
import pytest

import bayesattn as ba
from bayesattn.experiments.screens.theory import (
    _tilted,
    pr_onehot_limit,
    prior_row_law,
    row_posterior,
    screens_from_law,
)


def test_tilted_row_law_matches_whole_rows():
    """The (y, r) row law tilted by exp(h a + g b), against whole softmax rows drawn from the prior and
    reweighted (independent draws; a, b computed from the rows themselves)."""
    T, sA2 = 5, 1.0
    y = np.linspace(-12.0, 14.0, 800)
    r, logQ = prior_row_law(T, sA2, y, num_samples=20000, seed=0)
    a = 1 / (1 + np.exp(-y))
    b = a[:, None] ** 2 + (1 - a[:, None]) ** 2 * r[None, :]
    hs, gs = np.array([0.0, 3.0]), np.array([-4.0, 0.0])
    p, cond, Ea, Eb = _tilted(hs, gs, a, b, logQ)
    rng = np.random.default_rng(7)
    logits = rng.normal(size=(400000, T)) * np.sqrt(sA2)
    al = np.exp(logits - logits.max(1, keepdims=True))
    al /= al.sum(1, keepdims=True)
    ar, br = al[:, 0], (al**2).sum(1)
    for gi, g in enumerate(gs):
        for hi, h in enumerate(hs):
            w = np.exp(h * ar + g * br)
            w /= w.sum()
            law = p[gi, hi][:, None] * cond[gi]
            assert Ea[gi, hi] == pytest.approx(w @ ar, abs=4e-3)
            assert Eb[gi, hi] == pytest.approx(w @ br, abs=4e-3)
            assert np.sum(law * pr_onehot_limit(b, 4)) == pytest.approx(w @ pr_onehot_limit(br, 4), abs=1e-2)
            assert law[a > 0.5].sum() == pytest.approx(w[ar > 0.5].sum(), abs=5e-3)


def test_screens_from_a_point_law():
    """A row law on one node: the screens are those of that row."""
    T, d = 6, 4
    y = np.linspace(-3, 3, 7)
    a = 1 / (1 + np.exp(-y))
    r = np.linspace(1 / (T - 1), 1, 5)
    b = a[:, None] ** 2 + (1 - a[:, None]) ** 2 * r[None, :]
    law = np.zeros((7, 5))
    law[5, 2] = 1.0
    s = screens_from_law(
        {"P": 1.0, "law": law, "a": a, "b": b, "m": 0, "q": 0, "max_dev": 0, "edge_mass": 0, "dropped_entries": 0}, T, d
    )
    sel = (T - 1) * a[5] / (1 - a[5])
    assert s["m"] == pytest.approx(a[5]) and s["q"] == pytest.approx(b[5, 2])
    assert s["pr_limit_mean"] == pytest.approx(float(pr_onehot_limit(b[5, 2], d)))
    assert s["log10_selectivity_mean"] == pytest.approx(np.log10(sel))
    assert s["frac_above_threshold"] == (1.0 if sel >= 30 else 0.0)


# both sides integrate the same table, which reaches the dual grid's edge here (a warning about its bias against
# the exact posterior, not against each other)
@pytest.mark.filterwarnings("ignore:theory. the posterior density reaches the edge:UserWarning")
def test_row_posterior_mean_matches_phase_curve():
    """The row law's mean of a is the theory's posterior mean m (PhaseCurve.mean, same table and weights)."""
    task = ba.CopyTask(T=4, d=4, offset=1, tokens="onehot", boundary="cyclic")
    prior = ba.Prior(1.0, 100.0, 10.0)
    num = dict(nh=121, ng=61, num_samples=5000)
    P = 400.0
    pc = ba.theory.phase_curve(task, prior, "softmax", [P], **num)
    rp = row_posterior(task, prior, P, numerics=num)
    s = screens_from_law(rp, task.T, task.d)
    assert rp["m"] == pytest.approx(pc.mean["m"][0], abs=1e-9)
    assert rp["q"] == pytest.approx(pc.mean["q"][0], abs=1e-9)
    assert s["m"] == pytest.approx(pc.mean["m"][0], abs=3e-3)
    assert s["q"] == pytest.approx(pc.mean["q"][0], abs=3e-3)
    assert rp["dropped_entries"] == 0 and rp["max_dev"] < 3e-3
    # PR is a concave function of b near the posterior: its mean over the row law lies below PR(<b>)
    assert s["pr_limit_mean"] < s["pr_limit_at_mean_q"]
