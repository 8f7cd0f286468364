"""bayesattn.stats against independent references: the Wilson interval's closed form and its exact coverage on
a known binomial, Fisher's test as an explicit hypergeometric tail sum, the Mann-Whitney test as a full
permutation enumeration, and the bootstrap median interval's rule for unsolved seeds and its coverage."""

from __future__ import annotations

import itertools
import math
from statistics import NormalDist

import numpy as np
import pytest

from bayesattn import stats

Z = NormalDist().inv_cdf(0.975)


def wilson_by_hand(k, n, z=Z):
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return centre - half, centre + half


@pytest.mark.parametrize("k, n", [(0, 8), (1, 8), (5, 8), (8, 8), (16, 16), (11, 16), (3, 40)])
def test_wilson_interval_is_the_closed_form(k, n):
    r = stats.solve_rate(k, n)
    assert r["rate"] == k / n and (r["solved"], r["seeds"]) == (k, n)
    np.testing.assert_allclose(r["ci"], wilson_by_hand(k, n), rtol=1e-9, atol=1e-12)


def test_wilson_coverage_on_a_known_binomial():
    """Exact coverage: the probability, summed over k, that the interval of k of n holds the true p."""
    for p, n in [(0.3, 20), (0.5, 16), (0.8, 30)]:
        cover = sum(
            math.comb(n, k) * p**k * (1 - p) ** (n - k)
            for k in range(n + 1)
            if stats.solve_rate(k, n)["ci"][0] <= p <= stats.solve_rate(k, n)["ci"][1]
        )
        assert 0.90 < cover < 0.99, (p, n, cover)


def test_solve_rate_bad_input_and_empty():
    with pytest.raises(ValueError, match="solved=5, seeds=4"):
        stats.solve_rate(5, 4)
    assert stats.solve_rate(0, 0)["ci"] is None


def hypergeometric_tail(ka, na, kb, nb):
    """P(X >= ka), X the successes of arm a when the ka + kb successes are spread at random over na + nb seeds."""
    K, N = ka + kb, na + nb
    return sum(math.comb(K, x) * math.comb(N - K, na - x) for x in range(ka, min(K, na) + 1)) / math.comb(N, na)


@pytest.mark.parametrize(
    "ka, na, kb, nb", [(8, 8, 5, 8), (16, 16, 8, 16), (3, 10, 7, 10), (0, 5, 0, 5), (11, 16, 1, 16)]
)
def test_fisher_is_the_hypergeometric_tail(ka, na, kb, nb):
    assert stats.fisher_greater(ka, na, kb, nb) == pytest.approx(hypergeometric_tail(ka, na, kb, nb), rel=1e-9)


def permutation_p_less(a, b):
    """Exact one-sided p of the rank-sum test: the share of all splits of the pooled values with a rank sum of
    arm a at most the observed one."""
    pooled = np.concatenate([a, b])
    ranks = np.argsort(np.argsort(pooled)) + 1.0  # no ties in these samples
    obs = ranks[: len(a)].sum()
    sums = [ranks[list(c)].sum() for c in itertools.combinations(range(len(pooled)), len(a))]
    return np.mean(np.asarray(sums) <= obs + 1e-9)


def test_mann_whitney_is_the_permutation_test():
    rng = np.random.default_rng(3)
    for na, nb, shift in [(5, 6, 0.0), (6, 6, 1.0), (4, 7, -0.5)]:
        a, b = rng.normal(size=na) - shift, rng.normal(size=nb)
        assert stats.mannwhitney_less(a, b) == pytest.approx(permutation_p_less(a, b), rel=1e-9)
    assert stats.mannwhitney_less([], [1.0]) is None and stats.mannwhitney_less([3.0], [3.0, 3.0]) is None


def test_helps_censors_unsolved_seeds_at_the_smaller_budget():
    a = [100, 120, 130, None]
    b = [400, None, None, None]
    r = stats.helps(a, b, 2000, 1000)
    assert r["solved"] == [3, 1] and r["censored_at"] == 1000
    assert r["p_solve"] == pytest.approx(hypergeometric_tail(3, 4, 1, 4))
    assert r["p_faster"] == stats.mannwhitney_less([100, 120, 130, 1000], [400, 1000, 1000, 1000])
    c = stats.compare("a", a, 2000, "b", b, 1000)
    assert c["b_helps"]["p_solve"] == pytest.approx(hypergeometric_tail(1, 4, 3, 4))
    # where the budget changes the ranks: a's seeds solved at 1500 and 1700 (within its 2000 steps) count as
    # unsolved at b's budget of 1000, so the arms compare on what both runs could have seen
    a, b = [100, 1500, 1700, None], [300, 500, None, None]
    r = stats.helps(a, b, 2000, 1000)
    at_1000 = stats.mannwhitney_less([100, 1000, 1000, 1000], [300, 500, 1000, 1000])
    at_2000 = stats.mannwhitney_less([100, 1500, 1700, 2000], [300, 500, 2000, 2000])
    assert r["censored_at"] == 1000 and r["p_faster"] == pytest.approx(at_1000, rel=1e-12)
    assert abs(at_1000 - at_2000) > 0.05  # the test above can tell the two budgets apart


def test_median_interval_rule_and_reproducibility():
    ts = [300, 350, 420, 500, 610, None, 800, None]
    r = stats.median_interval(ts, budget=1000, seed=1)
    x = [300, 350, 420, 500, 610, 1000, 800, 1000]
    assert r["median"] == np.median(x) and r["censored"] == 2
    assert r["ci"][0] <= r["median"] <= r["ci"][1] and r["ci"][1] <= 1000
    assert stats.median_interval(ts, budget=1000, seed=1) == r  # a seeded generator: the same interval
    half = stats.median_interval([100, None, 200, None], budget=500)
    assert half["median"] is None and half["ci"] is not None  # half unsolved: the median is >= the budget
    assert stats.median_interval([7, 7, 7], budget=10)["ci"] == [7.0, 7.0]
    assert stats.median_interval([7], budget=10)["ci"] is None


def test_bootstrap_median_interval_covers_the_true_median():
    rng = np.random.default_rng(0)
    true = np.log(2) * 500  # the median of an exponential of mean 500
    hits = 0
    for i in range(150):
        x = rng.exponential(500, size=16).tolist()
        ci = stats.median_interval(x, budget=1e9, seed=i, n_resamples=999)["ci"]
        hits += ci[0] <= true <= ci[1]
    assert 0.85 <= hits / 150 <= 0.99


def test_mean_interval_against_the_normal_interval():
    """For 400 normal values the bootstrap interval of the mean is close to mean +- 1.96 s / sqrt(n); the edge
    cases give None or a point."""
    x = np.random.default_rng(1).normal(3.0, 2.0, 400)
    iv = stats.mean_interval(x)
    half = 1.96 * x.std(ddof=1) / np.sqrt(x.size)
    assert iv["mean"] == pytest.approx(x.mean())
    assert iv["ci"][0] == pytest.approx(x.mean() - half, abs=0.1 * half)
    assert iv["ci"][1] == pytest.approx(x.mean() + half, abs=0.1 * half)
    assert stats.mean_interval([]) == {"mean": None, "ci": None, "seeds": 0}
    assert stats.mean_interval([2.0])["ci"] is None and stats.mean_interval([2.0, 2.0])["ci"] == [2.0, 2.0]


def test_found_median_counts_what_was_not_found():
    from bayesattn.stats import found_median

    out = found_median([3.0, None, 1.0, 2.0, None])
    assert out["median"] == 2.0 and out["not_found"] == 2
    assert 1.0 <= out["ci"][0] <= 2.0 <= out["ci"][1] <= 3.0
    assert found_median([None, None]) == {"median": None, "ci": None, "not_found": 2}
    assert found_median([5.0]) == {"median": 5.0, "ci": None, "not_found": 0}  # one value: no interval


def test_sign_test_against_the_binomial_by_hand():
    from math import comb

    from bayesattn.stats import sign_test

    # 7 of 8 on one side: P(X >= 7) + P(X <= 1) for X ~ Bin(8, 1/2)
    assert sign_test(7, 8) == pytest.approx(2 * (comb(8, 7) + comb(8, 8)) / 2**8)
    assert sign_test(4, 8) == pytest.approx(1.0) and sign_test(8, 8) == pytest.approx(2 / 2**8)


def test_curve_at_is_linear_in_log_P_and_skips_missing_values():
    """Halfway in log P between 100 and 400 (P = 200) lies halfway between the values; a None on the grid is
    skipped, so P = 200 reads between its neighbours 100 and 400 there too."""
    assert stats.curve_at([100, 400], [1.0, 3.0], [200, 100, 400]) == pytest.approx([2.0, 1.0, 3.0])
    assert stats.curve_at([100, 200, 400], [1.0, None, 3.0], [200]) == pytest.approx([2.0])


def test_against_curve_by_hand():
    """Three data sets at four P against a made-up theory, a transition at P = 210: the points at 200 and 220 lie
    within AWAY of it and are not counted; at 100 every data set equals the theory plus 0.1 (an interval of one
    value, which misses the theory), at 400 they straddle it. The means, spreads, the median standard errors, the
    count inside and the largest gap (absolute, and by size relative to the theory) are worked out by hand."""
    P = [100, 200, 220, 400]
    theory = np.array([1.0, 2.0, 2.0, 4.0])
    values = np.array([[1.1, 2.5, 2.0, 3.9], [1.1, 2.5, 2.0, 4.0], [1.1, 2.5, 2.0, 4.2]])
    ses = np.array([[0.1, 0.2, 0.3, 0.4], [0.3, 0.2, 0.1, 0.0], [0.2, np.nan, 0.2, 0.2]])
    at = stats.against_curve(P, values, ses, theory, transitions=[210.0])
    assert at["P"] == P and at["theory"] == pytest.approx(theory.tolist())
    assert at["mean"] == pytest.approx([1.1, 2.5, 2.0, (3.9 + 4.0 + 4.2) / 3])
    assert max(220 / 210, 210 / 200) - 1 < stats.AWAY < min(210 / 100, 400 / 210) - 1
    assert at["away"] == [True, False, False, True]
    assert at["sd_between"] == pytest.approx([0.0, 0.0, 0.0, np.std([3.9, 4.0, 4.2], ddof=1)])
    assert at["se_within"] == pytest.approx([0.2, 0.2, 0.2, 0.2])
    assert at["ci"][0] == pytest.approx([1.1, 1.1])  # every value the same: the interval is that value
    lo, hi = at["ci"][3]
    assert 3.9 <= lo < 4.0 < hi <= 4.2
    assert at["theory_inside_away"]["solved"] == 1 and at["theory_inside_away"]["seeds"] == 2
    assert at["largest_gap_away"] == pytest.approx({"P": 100.0, "gap": 0.1, "relative": 0.1})
    rel = stats.against_curve(P, values, ses, theory, transitions=[210.0], relative=True)
    assert rel["largest_gap_away"]["P"] == 100.0  # 0.1 of 1.0 beats 0.033 of 4.0
    none = stats.against_curve(P, values, ses, theory)
    assert all(none["away"]) and none["largest_gap_away"]["P"] == 200.0 and none["theory_inside_away"]["seeds"] == 4


def test_against_curve_counts_a_monte_carlo_theory_by_the_welch_interval():
    """With the theory computed three times, the agreement at a point is the Welch interval of the two means, worked
    out here from its formula (Welch-Satterthwaite degrees of freedom, Student's t quantile): it holds 0 at P = 100,
    where the theory's runs straddle the data sets' mean, and not at P = 200, where they lie far above it."""
    from scipy.stats import t as student

    values = np.array([[1.0, 2.0], [1.2, 2.1], [1.1, 1.9], [0.9, 2.0]])
    runs = np.array([[0.8, 3.0], [1.2, 3.1], [1.3, 2.9]])
    at = stats.against_curve([100, 200], values, np.zeros_like(values), runs.mean(axis=0), theory_runs=runs)
    for j in range(2):
        a, b = values[:, j], runs[:, j]
        va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
        df = (va + vb) ** 2 / (va**2 / (a.size - 1) + vb**2 / (b.size - 1))
        half = student.ppf(0.975, df) * np.sqrt(va + vb)
        d = a.mean() - b.mean()
        assert at["gap_ci"][j] == pytest.approx([d - half, d + half])
    assert at["theory_runs"] == 3 and at["theory_sd"] == pytest.approx(runs.std(axis=0, ddof=1).tolist())
    assert at["theory_inside_away"]["solved"] == 1 and at["theory_inside_away"]["seeds"] == 2
    same = stats.against_curve([100], np.ones((3, 1)), np.zeros((3, 1)), [0.5], theory_runs=np.full((2, 1), 0.5))
    assert same["gap_ci"] == [[0.5, 0.5]] and same["theory_inside_away"]["solved"] == 0
