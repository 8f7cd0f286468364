"""The theory's attention-entropy prediction (docs/theory.md section 11): the tilted single-row entropy against
a brute-force Monte Carlo of the same measure, the grid form against the per-point form, the posterior means'
m against phase_curve, and (slow) the posterior-mean entropy against exact NUTS."""

import numpy as np
import pytest

import bayesattn as ba
from bayesattn.bayes.theory.entropy import _entropy_table, _table_and_moment, _tilted_entropy

TASK = ba.CopyTask(T=8, d=4)
PRIOR = ba.Prior(1.0, 100.0, 400.0)


def _brute_force_row_entropy(T, sigma_A2, h, g, n=400_000, seed=12345):
    """Mean entropy of softmax rows of T i.i.d. N(0, sigma_A2) logits (key 0 = the source), importance-weighted
    by exp(h a + g b), a = weight on the source, b = sum of squared weights; independent numpy draws."""
    rng = np.random.default_rng(seed)
    lg = rng.normal(0.0, np.sqrt(sigma_A2), (n, T))
    al = np.exp(lg - lg.max(1, keepdims=True))
    al /= al.sum(1, keepdims=True)
    H = -np.sum(al * np.log(al), axis=1)
    lw = h * al[:, 0] + g * np.sum(al**2, axis=1)
    w = np.exp(lw - lw.max())
    ess = w.sum() ** 2 / np.sum(w**2)
    return float(np.sum(w * H) / w.sum()), ess


@pytest.mark.parametrize(
    "T,sigma_A2,h,g",
    [(8, 1.0, 0.0, 0.0), (8, 1.0, 6.0, -2.0), (8, 1.0, 12.0, -6.0), (8, 1.0, -1.0, -4.0), (4, 2.5, 5.0, -1.0)],
)
def test_tilted_row_entropy_matches_brute_force(T, sigma_A2, h, g):
    ref, ess = _brute_force_row_entropy(T, sigma_A2, h, g)
    assert ess > 5000  # the reference itself is precise (standard error < ~0.01 nats)
    got = ba.theory.tilted_row_entropy(ba.CopyTask(T=T, d=4), ba.Prior(sigma_A2, 100.0, 400.0), h, g, beta_max=10.0)
    assert abs(got - ref) < 0.012, (got, ref)


def test_entropy_table_equals_the_per_point_sum_and_limits():
    tab, Hbar = _table_and_moment(TASK, PRIOR, 10.0, 20000, 0, 241, 121)
    EH = np.asarray(_entropy_table(tab.h, tab.g, *tab.mom[:3], Hbar))
    for i, j in [(30, 100), (120, 60), (200, 10), (240, 0)]:
        ref = float(_tilted_entropy(tab.h[i], tab.g[j], *tab.mom[:3], Hbar))
        assert abs(EH[i, j] - ref) < 1e-10
    assert np.all((EH > 0) & (EH < np.log(TASK.T)))
    # a strong tilt towards the source key (large h) empties the row's entropy
    j0 = len(tab.g) - 1  # g = 0
    assert EH[-1, j0] < 0.2 * np.log(TASK.T) and np.all(np.diff(EH[tab.h >= 0, j0]) < 0)


def test_entropy_curve_m_equals_phase_curve_and_entropy_falls():
    P = [64, 2048, 8192]
    ec = ba.theory.entropy_curve(TASK, PRIOR, P)
    for k, Pk in enumerate(P):  # one table per P on both sides
        pc = ba.theory.phase_curve(TASK, PRIOR, "softmax", [Pk])
        assert ec["masked_cells"][k] == 0
        assert abs(ec["m"][k] - pc.mean["m"][0]) < 1e-9
    assert ec["uniform"] == pytest.approx(np.log(8)) and ec["posterior"][0] < ec["uniform"]
    assert ec["posterior"][0] > ec["posterior"][1] > ec["posterior"][2]


def test_entropy_curve_bad_input():
    with pytest.raises(ValueError, match="P_values"):
        ba.theory.entropy_curve(TASK, PRIOR, [100, 50])
    with pytest.raises(ValueError):
        ba.theory.entropy_curve(ba.CopyTask(T=8, d=4, boundary="causal"), PRIOR, [100])


@pytest.mark.slow
@pytest.mark.parametrize("P", [1024, 4096, 16384])
def test_entropy_curve_against_nuts(P):
    """The posterior-mean attention entropy of exact NUTS (T = 8, d = 4) against the theory, within 0.02 nats
    (measured gaps at these P: < 0.001; docs/results/dynlab.md section 3)."""
    from bayesattn.experiments.dynlab.equilibrium import equilibrium_point

    r = equilibrium_point({"P": P, "T": 8, "d": 4, "seed": 1, "num_chains": 2, "num_warmup": 300, "num_samples": 300})
    th = ba.theory.entropy_curve(TASK, PRIOR, [P])["posterior"][0]
    assert abs(r["entropy"]["mean"] - th) < 0.02 + 4 * r["entropy"]["se"]
