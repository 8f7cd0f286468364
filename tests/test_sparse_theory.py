"""The s-source row theory (bayesattn/bayes/theory/sparse.py): the importance-sampled row cumulant generating
function against plain Monte Carlo of whole rows, and (slow) the theory against the exact posterior."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import logsumexp

from bayesattn.bayes.theory.sparse import RowSamples, excess_curve


def test_row_cgf_matches_plain_monte_carlo():
    S, s = 6, 2
    rows = RowSamples.draw(S, s, n_per_shift=3000, seed=1)
    rng = np.random.default_rng(2)
    L = rng.standard_normal((400_000, S))
    al = np.exp(L - L.max(1, keepdims=True))
    al /= al.sum(1, keepdims=True)
    a, b = al[:, :s].sum(1), (al**2).sum(1)
    for h, g in [(0.0, 0.0), (2.0, -1.0), (5.0, -3.0)]:
        lam, Ma, Mb = rows.tilt(h, g)
        w = h * a + g * b
        ref = logsumexp(w) - np.log(w.size)
        p = np.exp(w - logsumexp(w))
        assert abs(lam - ref) < 0.02
        assert abs(Ma - p @ a) < 0.01 and abs(Mb - p @ b) < 0.01


def test_one_source_is_the_copy_task_theory():
    """At s = 1 the surrogate is the cyclic copy task (tests/test_sparse_tasks.py), so the s-source row theory's
    stable excess mass must be the copy-head theory's (bayesattn.theory.phase_curve: its own dual table, its own
    sampling), mapped from m to (m - 1/S) / (1 - 1/S). Two implementations of one law; their Monte Carlo noise
    is a few 1e-3."""
    import bayesattn as ba

    S, P = 8, [300.0, 600.0, 1000.0, 2000.0]
    sparse = excess_curve(S, 1, P)["excess"]
    m = np.asarray(ba.theory.phase_curve(ba.CopyTask(T=S, d=8), ba.Prior(1.0, 100.0, 400.0), "softmax", P).stable["m"])
    np.testing.assert_allclose(sparse, (m - 1 / S) / (1 - 1 / S), atol=0.006)
    assert sparse[-1] - sparse[0] > 0.3  # over a range where the mass moves, not a flat comparison


@pytest.mark.slow
def test_theory_against_exact_posterior():
    # NUTS (docs/results/sparse.md section 4, S = 8, s = 2, summed targets): excess 0.11, 0.28, 0.46, 0.69 at
    # P = 200, 400, 800, 3200
    r = excess_curve(8, 2, [200, 400, 800, 3200])
    np.testing.assert_allclose(r["excess"], [0.11, 0.28, 0.46, 0.69], atol=0.03)
    assert not any(r["coexistence"])
