"""Ranking the heads of a network by their participation-ratio trajectory over training checkpoints (Xu, "When do
attention circuits form?"; docs/results/screens.md): the integral of max(PR - 1, 0) over steps, the PR spread,
the elbow of the ranked integrals, and precision-at-k against a set of known heads. Functions of arrays only."""

from __future__ import annotations

import numpy as np


def pr_integral(pr, steps, baseline: float = 1.0) -> np.ndarray:
    """The paper's ranking signal: the trapezoid integral over checkpoint steps of max(PR - baseline, 0) (the
    PR above that of a rank-1 output), in step units. pr: (K, ...) over K checkpoints at ``steps`` (K,)."""
    pr = np.asarray(pr, dtype=np.float64)
    s = np.asarray(steps, dtype=np.float64)
    if pr.ndim < 1 or s.ndim != 1 or pr.shape[0] != s.size or s.size < 2:
        raise ValueError(f"pr has shape {pr.shape} and steps {s.shape}: expected (K, ...) and (K,) with K >= 2")
    if np.any(np.diff(s) <= 0):
        raise ValueError(f"steps={s.tolist()}: expected strictly increasing checkpoint steps")
    return np.trapezoid(np.maximum(pr - baseline, 0.0), s, axis=0)


def pr_spread(pr) -> np.ndarray:
    """max - min of the PR over checkpoints (axis 0): the paper's first ranking signal."""
    pr = np.asarray(pr, dtype=np.float64)
    return pr.max(axis=0) - pr.min(axis=0)


def rank_heads(score) -> list[tuple[int, int]]:
    """(layer, head) pairs of a (layers, heads) score, highest first (ties by index)."""
    score = np.asarray(score, dtype=np.float64)
    order = np.argsort(-score, axis=None, kind="stable")
    return [tuple(map(int, np.unravel_index(i, score.shape))) for i in order]


def elbow(values) -> int:
    """The knee of a descending sequence (the paper's cut-off k): the index farthest from the chord between the
    first and the last value."""
    v = np.asarray(values, dtype=np.float64)
    if v.ndim != 1 or v.size < 2:
        raise ValueError(f"values has shape {v.shape}: expected at least two values")
    x = np.arange(v.size)
    a, b = v[-1] - v[0], -(v.size - 1.0)
    c = (v.size - 1.0) * v[0]
    return int(np.argmax(np.abs(a * x + b * v + c)))


def pr_integral_ranking(pr, steps) -> dict:
    """The heads of a PR trajectory pr: (K, layers, heads) over checkpoint ``steps`` ranked by :func:`pr_integral`
    (highest first), with their integrals, PR spreads and the :func:`elbow` of the sorted integrals, and the
    order by :func:`pr_spread` for comparison."""
    integ, spread = pr_integral(pr, steps), pr_spread(pr)
    order = rank_heads(integ)
    return {
        "order": [list(h) for h in order],
        "integral": [float(integ[h]) for h in order],
        "spread": [float(spread[h]) for h in order],
        "elbow_k": elbow([integ[h] for h in order]),
        "order_by_spread": [list(h) for h in rank_heads(spread)],
    }


def precision_at_k(ranked, positives, ks) -> dict:
    """k -> share of the top k of ``ranked`` that are in ``positives`` (e.g. the heads the screen classifies)."""
    pos = set(map(tuple, positives))
    return {int(k): sum(tuple(h) in pos for h in ranked[:k]) / k for k in ks}


def held_from(steps, ok) -> int | None:
    """The first of ``steps`` from which ``ok`` (one bool per step) holds at every later step; None when it does
    not hold at the last step."""
    ok = np.asarray(ok, dtype=bool)
    failed = np.flatnonzero(~ok)
    start = 0 if failed.size == 0 else int(failed[-1]) + 1
    return int(np.asarray(steps)[start]) if start < ok.size else None


def ranking_over_training(pr, steps, heads, signal: str = "integral") -> dict:
    """At each checkpoint k, rank the heads by ``signal`` ("integral" or "spread") of their PR trajectory up to k
    and ask whether the top len(heads) are exactly ``heads``: per checkpoint ``top`` (the top heads) and ``match``;
    ``first_match`` (the first step where they match) and ``from_step`` (the first step from which they match at
    every later checkpoint). pr: (K, layers, heads)."""
    pr = np.asarray(pr, dtype=np.float64)
    steps = np.asarray(steps)
    want = set(map(tuple, heads))
    n = len(want)
    top, match = [], []
    for k in range(1, len(steps)):
        sc = pr_integral(pr[: k + 1], steps[: k + 1]) if signal == "integral" else pr_spread(pr[: k + 1])
        t = rank_heads(sc)[:n]
        top.append([list(h) for h in t])
        match.append(set(t) == want)
    match = np.array(match)
    return {
        "signal": signal,
        "steps": steps[1:].tolist(),
        "top": top,
        "match": match.tolist(),
        "first_match": int(steps[1:][np.argmax(match)]) if match.any() else None,
        "from_step": held_from(steps[1:], match),
    }
