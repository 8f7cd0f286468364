"""Intervals and tests for the seed statistics of the training experiments (solve rates, emergence times t*).

Everything here is a thin, documented layer over :mod:`scipy.stats`; nothing is hand-rolled.

- :func:`solve_rate`: k solved seeds of n, with the 95% Wilson score interval
  (``scipy.stats.binomtest(k, n).proportion_ci(method="wilson")``).
- :func:`censor`: the rule for unsolved seeds. **An unsolved seed is right-censored at the budget**: its t* is
  taken as the step budget of its run (it had not emerged by then, so its true t* is at least that). Ranks and
  medians are then well defined: a censored seed is slower than every solved one, so the median of the censored
  sample is the true median whenever fewer than half of the seeds are unsolved, and is reported as ``None``
  ("at or above the budget") otherwise.
- :func:`median_interval`: the median t* (censored rule) and its 95% bootstrap percentile interval
  (``scipy.stats.bootstrap``, an explicit ``numpy.random.Generator`` seeded by ``seed``); an endpoint at the
  budget means "at or above the budget".
- :func:`mean_interval`: a mean over seeds and its 95% bootstrap percentile interval (same resampling).
- :func:`against_curve`: values over data sets (seeds, P) against a theory's curve at the same P: the mean over
  the data sets with its interval, their spread beside the runs' own standard errors, and where the interval holds
  the theory's value (for a Monte Carlo theory run with several seeds, where the Welch interval of the difference,
  ``scipy.stats.ttest_ind(equal_var=False)``, holds 0); :func:`curve_at` reads a curve between its grid points
  (linear in log P).
- :func:`helps`: a one-sided test of "arm a helps against arm b": Fisher's exact test that a's solve rate is
  higher, and the Mann-Whitney U test that a's (censored) t* are smaller. Returns p-values; no correction for
  multiple comparisons is applied (the caller says how many it makes).

No JAX here; importing this module imports scipy.stats.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np
from scipy import stats as _st

LEVEL = 0.95
CENSOR_RULE = (
    "unsolved seeds right-censored at the step budget (t* = budget); the median is None when half or more of the "
    "seeds are unsolved"
)
WILSON = "95% Wilson score interval"
BOOTSTRAP = "95% bootstrap percentile interval (9999 resamples, seeded)"


def solve_rate(k: int, n: int, confidence_level: float = LEVEL) -> dict:
    """{"solved": k, "seeds": n, "rate": k / n, "ci": [lo, hi]}: the Wilson score interval of k successes in n
    trials (n = 0: rate and interval None)."""
    k, n = int(k), int(n)
    if n < 0 or not 0 <= k <= max(n, 0):
        raise ValueError(f"solved={k}, seeds={n}: expected 0 <= solved <= seeds")
    if n == 0:
        return {"solved": 0, "seeds": 0, "rate": None, "ci": None}
    ci = _st.binomtest(k, n).proportion_ci(confidence_level=confidence_level, method="wilson")
    return {"solved": k, "seeds": n, "rate": k / n, "ci": [float(ci.low), float(ci.high)]}


def censor(t_star: Sequence, budget: float) -> np.ndarray:
    """t* per seed with None (unsolved) replaced by ``budget``; a solved t* above the budget is clipped to it (so
    two arms with different budgets compare at the smaller one: pass that)."""
    return np.array([budget if t is None else min(float(t), budget) for t in t_star], dtype=float)


def _median(x, axis=-1):
    return np.median(x, axis=axis)


def _percentile_ci(x: np.ndarray, statistic, seed: int, n_resamples: int, confidence_level: float) -> list:
    """[lo, hi]: the bootstrap percentile interval of ``statistic`` over the values x (seeded resampling)."""
    res = _st.bootstrap(
        (x,),
        statistic,
        n_resamples=n_resamples,
        confidence_level=confidence_level,
        method="percentile",
        vectorized=True,
        rng=np.random.default_rng(seed),
    )
    return [float(res.confidence_interval.low), float(res.confidence_interval.high)]


def median_interval(
    t_star: Sequence, budget: float, seed: int = 0, n_resamples: int = 9999, confidence_level: float = LEVEL
) -> dict:
    """The median t* over all seeds with unsolved seeds censored at ``budget`` (:data:`CENSOR_RULE`) and its
    bootstrap percentile interval. Returns {"median", "ci": [lo, hi], "censored": number of unsolved seeds,
    "rule"}; "median" is None when half or more seeds are censored (the true median is then >= budget), "ci" is
    None for fewer than 2 seeds, and [v, v] when every seed has the same value."""
    x = censor(t_star, budget)
    n_cens = sum(t is None for t in t_star)
    out: dict = {"median": None, "ci": None, "censored": int(n_cens), "seeds": int(x.size), "rule": CENSOR_RULE}
    if x.size == 0:
        return out
    med = float(np.median(x))
    out["median"] = med if 2 * n_cens < x.size else None
    if x.size < 2:
        return out
    if np.all(x == x[0]):
        out["ci"] = [float(x[0]), float(x[0])]
        return out
    out["ci"] = _percentile_ci(x, _median, seed, n_resamples, confidence_level)
    return out


def found_median(values: Sequence[float | None]) -> dict:
    """{"median", "ci", "not_found"}: the median over the values found (None: a quantity a seed did not give,
    such as a transition outside its grid) with its bootstrap percentile interval (:func:`median_interval`; None
    without values), and how many were not found."""
    found = [float(v) for v in values if v is not None]
    m = median_interval(found, budget=np.inf) if found else {"median": None, "ci": None}
    return {"median": m["median"], "ci": m["ci"], "not_found": len(values) - len(found)}


def mean_interval(values: Sequence[float], seed: int = 0, n_resamples: int = 9999, confidence_level: float = LEVEL):
    """{"mean", "ci": [lo, hi], "seeds"}: the mean over seeds and its bootstrap percentile interval (None for no
    value; "ci" None for fewer than 2 values, [v, v] when every value is the same)."""
    x = np.asarray(values, dtype=float)
    out: dict = {"mean": None, "ci": None, "seeds": int(x.size)}
    if x.size == 0:
        return out
    out["mean"] = float(np.mean(x))
    if x.size < 2:
        return out
    if np.all(x == x[0]):
        out["ci"] = [float(x[0]), float(x[0])]
        return out
    out["ci"] = _percentile_ci(x, np.mean, seed, n_resamples, confidence_level)
    return out


# a comparison with a theory's curve counts the grid points more than this fraction in P from each of the theory's
# first-order transitions: there the posterior of one data set is a mixture whose weight moves with the data, and
# the between-data-set spread of the mean is largest
AWAY = 0.10


def curve_at(P_curve: Sequence[float], values: Sequence[float | None], P: Sequence[float]) -> np.ndarray:
    """A curve's values (None: not finite) on its grid ``P_curve``, linear in log P at ``P``."""
    Pt = np.asarray(P_curve, dtype=float)
    vt = np.array([np.nan if v is None else v for v in values], dtype=float)
    ok = np.isfinite(Pt) & np.isfinite(vt)
    return np.interp(np.log(np.asarray(P, dtype=float)), np.log(Pt[ok]), vt[ok])


def against_curve(
    P: Sequence[float],
    values: np.ndarray,
    ses: np.ndarray,
    theory: np.ndarray,
    transitions: Sequence[float] = (),
    relative: bool = False,
    theory_runs: np.ndarray | None = None,
) -> dict:
    """Values over data sets against a theory's curve. ``values``, ``ses``: (data sets, P), each run's value and its
    own standard error (NaN: missing); ``theory``: (P,), the curve at ``P`` (:func:`curve_at`); ``transitions``:
    the theory's first-order transitions in P; ``theory_runs``: (runs, P), a Monte Carlo theory computed with two
    or more seeds, whose mean is ``theory``.

    Returns per P the mean over the data sets with its bootstrap interval (:func:`mean_interval`), the spread
    between the data sets (standard deviation) beside the median of the runs' own standard errors, whether the
    point lies more than :data:`AWAY` in P from every transition, and over those points in how many the theory
    agrees (Wilson interval) and the largest gap, mean minus theory (largest by its size relative to the theory's
    value where ``relative``). The theory agrees at a point where the mean's interval holds its value; with
    ``theory_runs``, where the Welch 95% interval of the difference of the two means (``gap_ci``, beside the
    theory runs' spread ``theory_sd``) holds 0, so that the theory's own Monte Carlo error is counted."""
    P = [float(x) for x in P]
    values, ses, theory = np.asarray(values, float), np.asarray(ses, float), np.asarray(theory, float)
    away = [all(abs(np.log(x / t)) > np.log1p(AWAY) for t in transitions) for x in P]
    means = [mean_interval(values[:, j][np.isfinite(values[:, j])]) for j in range(len(P))]
    gaps = np.array([np.nan if m["mean"] is None else m["mean"] for m in means]) - theory
    extra: dict = {}
    if theory_runs is None:
        inside = [m["ci"] is not None and m["ci"][0] <= t <= m["ci"][1] for m, t in zip(means, theory)]
    else:
        runs = np.asarray(theory_runs, float)
        gap_ci = [_welch_interval(values[:, j][np.isfinite(values[:, j])], runs[:, j]) for j in range(len(P))]
        inside = [c is not None and c[0] <= 0.0 <= c[1] for c in gap_ci]
        extra = {"theory_runs": int(runs.shape[0]), "theory_sd": runs.std(axis=0, ddof=1).tolist(), "gap_ci": gap_ci}
    size = np.abs(gaps / theory) if relative else np.abs(gaps)
    k_away = [j for j, a in enumerate(away) if a and np.isfinite(size[j])]
    worst = max(k_away, key=lambda j: size[j]) if k_away else None
    return {
        **extra,
        "P": P,
        "theory": theory.tolist(),
        "mean": [m["mean"] for m in means],
        "ci": [m["ci"] for m in means],
        "sd_between": values.std(axis=0, ddof=1).tolist(),
        "se_within": np.nanmedian(ses, axis=0).tolist(),
        "away": away,
        "theory_inside_away": solve_rate(sum(inside[j] for j in k_away), len(k_away)),
        "largest_gap_away": None
        if worst is None
        else {"P": P[worst], "gap": float(gaps[worst]), "relative": float(gaps[worst] / theory[worst])},
    }


def _welch_interval(a: np.ndarray, b: np.ndarray) -> list | None:
    """The Welch 95% interval of mean(a) - mean(b) (``scipy.stats.ttest_ind(equal_var=False)``); None with fewer
    than 2 values on a side; [d, d] where neither side varies."""
    if a.size < 2 or b.size < 2:
        return None
    constant = np.all(a == a[0]), np.all(b == b[0])
    if all(constant):
        return [float(a[0] - b[0])] * 2
    with warnings.catch_warnings():
        if any(constant):  # exact: that side's variance is 0 (scipy warns of precision loss for identical values)
            warnings.filterwarnings("ignore", "Precision loss occurred", RuntimeWarning)
        ci = _st.ttest_ind(a, b, equal_var=False).confidence_interval(confidence_level=LEVEL)
    return [float(ci.low), float(ci.high)]


def sign_test(k: int, n: int) -> float:
    """Two-sided sign test: the binomial p-value of k of n seeds on one side of a reference value, against half."""
    return float(_st.binomtest(int(k), int(n), 0.5).pvalue)


def fisher_greater(k_a: int, n_a: int, k_b: int, n_b: int) -> float:
    """One-sided Fisher exact p-value that arm a's success probability exceeds arm b's (k successes of n)."""
    table = [[k_a, n_a - k_a], [k_b, n_b - k_b]]
    return float(_st.fisher_exact(table, alternative="greater").pvalue)


def mannwhitney_less(a: Sequence[float], b: Sequence[float]) -> float | None:
    """One-sided Mann-Whitney U p-value that a's values tend to be smaller than b's (None if an arm is empty or
    every value is tied, where the test says nothing). Exact without ties for small samples (scipy's "auto"),
    the normal approximation with a tie correction otherwise."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    if a.size == 0 or b.size == 0 or np.all(np.concatenate([a, b]) == a[0]):
        return None
    return float(_st.mannwhitneyu(a, b, alternative="less", method="auto").pvalue)


def helps(t_a: Sequence, t_b: Sequence, budget_a: float, budget_b: float) -> dict:
    """ "Arm a helps against arm b", one-sided, from per-seed t* (None: unsolved):

    - "p_solve": Fisher's exact test that a solves a larger fraction of seeds;
    - "p_faster": Mann-Whitney U that a's t* are smaller, unsolved seeds censored at min(budget_a, budget_b).

    Small p supports "a helps"; a large p does not support the opposite (test b against a for that)."""
    ka, kb = sum(t is not None for t in t_a), sum(t is not None for t in t_b)
    budget = min(budget_a, budget_b)
    return {
        "p_solve": fisher_greater(ka, len(t_a), kb, len(t_b)),
        "p_faster": mannwhitney_less(censor(t_a, budget), censor(t_b, budget)),
        "solved": [ka, kb],
        "seeds": [len(t_a), len(t_b)],
        "censored_at": budget,
    }


def compare(name_a: str, t_a: Sequence, budget_a: float, name_b: str, t_b: Sequence, budget_b: float) -> dict:
    """Both directions of :func:`helps`: {"a", "b", "a_helps": {...}, "b_helps": {...}}."""
    return {
        "a": name_a,
        "b": name_b,
        "a_helps": helps(t_a, t_b, budget_a, budget_b),
        "b_helps": helps(t_b, t_a, budget_b, budget_a),
    }


def fmt_ci(ci, digits: int = 2) -> str:
    """'[lo, hi]' for an interval (or '-')."""
    if ci is None:
        return "-"
    return f"[{ci[0]:.{digits}f}, {ci[1]:.{digits}f}]" if digits else f"[{ci[0]:.0f}, {ci[1]:.0f}]"
