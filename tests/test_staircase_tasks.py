"""The staircase tasks against their definitions: MultiLagCopyTask targets from an explicit loop, the Markov
chain's empirical next-token frequencies against the teacher's softmax, and bad input."""

import jax
import numpy as np
import pytest

import bayesattn as ba
from bayesattn.tasks import task_from_config


def _softmax(z):
    z = z - z.max(-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(-1, keepdims=True)


@pytest.mark.parametrize("boundary", ["cyclic", "causal"])
@pytest.mark.parametrize("aggregate", ["mean", "sum"])
def test_multilag_targets_match_loop(boundary, aggregate):
    task = ba.MultiLagCopyTask(
        T=7,
        d=3,
        spans=((1, 2), (4,)),
        weights=(1.0, -0.7),
        aggregate=aggregate,
        rotations="orthogonal",
        seed=3,
        boundary=boundary,
    )
    ds = task.sample(jax.random.key(0), 5)
    X, Y = np.asarray(ds.X), np.asarray(ds.Y)
    U = np.asarray(task.rotation_matrices())
    np.testing.assert_allclose(np.einsum("kij,kil->kjl", U, U), np.broadcast_to(np.eye(3), (2, 3, 3)), atol=1e-12)
    ref = np.zeros_like(Y)
    for p in range(5):
        for t in range(7):
            if boundary == "causal" and t < 4:
                continue
            for k, span in enumerate(task.spans):
                xs = [X[p, (t - lag) % 7] for lag in span]
                agg = np.mean(xs, 0) if aggregate == "mean" else np.sum(xs, 0)
                ref[p, t] += task.weights[k] * U[k] @ agg
    np.testing.assert_allclose(Y, ref, atol=1e-12)
    # the readout [w_k U_k] with head k on span k (mean) reproduces Y exactly: the task is realisable by K heads
    if aggregate == "mean":
        Z = np.concatenate(
            [np.einsum("ts,psi->pti", task.span_matrix(k) / len(s), X) for k, s in enumerate(task.spans)], axis=-1
        )
        np.testing.assert_allclose(Z @ np.asarray(task.readout()).T, Y, atol=1e-12)
    assert set(task.target_patterns) == {"lags1-2", "lag4"}
    assert task_from_config(task.config()) == task


def test_markov_next_token_frequencies_match_teacher_softmax():
    task = ba.HighOrderMarkovTask(T=40, d=3, span_lengths=(1, 1), m=1.5, scale=1.5, seed=1)
    ds = task.sample(jax.random.key(7), 1500)
    tok = np.asarray(ds.X.argmax(-1))
    nxt = np.asarray(ds.Y.argmax(-1))
    A = np.asarray(task.teacher_matrices())  # (2, 3, 3): A[0] oldest (weight m^0), A[1] newest (m^1)
    np.testing.assert_allclose(np.linalg.norm(A[1], 2) / np.linalg.norm(A[0], 2), 1.5, rtol=1e-12)
    E = np.eye(3)
    worst = 0.0
    for a in range(3):
        for b in range(3):  # context: token a at t - 1 (oldest span), b at t (newest span)
            sel = (tok[:, :-1] == a) & (tok[:, 1:] == b)
            sel = np.concatenate([np.zeros((tok.shape[0], 1), bool), sel], axis=1) & task.query_mask
            counts = np.bincount(nxt[sel], minlength=3)
            n = counts.sum()
            p = _softmax(A[0] @ E[a] + A[1] @ E[b])
            se = np.sqrt(p * (1 - p) / n)
            worst = max(worst, float(np.max(np.abs(counts / n - p) / se)))
    assert worst < 4.5, worst  # every frequency within 4.5 standard errors (9 contexts x 3 tokens)


def test_markov_teacher_logits_and_restriction():
    task = ba.HighOrderMarkovTask(T=10, d=4, span_lengths=(2, 1, 2), m=1.7, seed=2)
    ds = task.sample(jax.random.key(1), 3)
    X = np.asarray(ds.X)
    A = np.asarray(task.teacher_matrices())
    full = np.asarray(task.teacher_logits(ds.X))
    newest = np.asarray(task.teacher_logits(ds.X, newest=1))
    for t in range(task.burn_in - 1, task.T):
        # context: tokens t-4..t; oldest span (t-4, t-3), middle (t-2), newest (t-1, t)
        ref = A[0] @ (X[:, t - 4] + X[:, t - 3]).T + A[1] @ X[:, t - 2].T + A[2] @ (X[:, t - 1] + X[:, t]).T
        np.testing.assert_allclose(full[:, t], ref.T, atol=1e-12)
        np.testing.assert_allclose(newest[:, t], (A[2] @ (X[:, t - 1] + X[:, t]).T).T, atol=1e-12)
    # burn-in tokens are uniform: first-token frequencies over many sequences
    first = np.asarray(task.sample(jax.random.key(2), 4000).X[:, 0].sum(0)) / 4000
    np.testing.assert_allclose(first, 0.25, atol=0.03)
    pats = task.target_patterns
    assert list(pats) == ["span1", "span2", "span3"]
    last = task.T - 1
    keys = [np.flatnonzero(pats[p][last]).tolist() for p in pats]
    assert keys == [[last - 4, last - 3], [last - 2], [last - 1, last]]


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(spans=((1,), (9,))), "lag"),  # beyond T - 1 = 7
        (dict(spans=((1, 2), (2,))), "two spans"),  # overlap
        (dict(spans=((1,), ())), "empty"),
        (dict(spans=()), "at least one span"),
        (dict(weights=(1.0,)), "one per span"),
        # texts and bools were read as numbers: "12" as (1.0, 2.0), True as 1.0
        (dict(weights="12"), r"weights='12': expected a sequence of numbers, one per span"),
        (dict(weights=("1", "2")), r"weights\[0\]='1': expected a finite number"),
        (dict(weights=(True, False)), r"weights\[0\]=True: expected a finite number"),
        (dict(weights=(1.0, float("inf"))), r"weights\[1\]=inf: expected a finite number"),
        (dict(weights=3.0), r"weights=3.0: expected a sequence of numbers"),
        (dict(aggregate="max"), "aggregate"),
    ],
)
def test_multilag_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ba.MultiLagCopyTask(T=8, d=2, **kwargs)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(d=1), "vocabulary"),
        (dict(T=5, span_lengths=(2, 2, 2)), "beyond T"),
        (dict(span_lengths=(2, 0)), "span_lengths"),
        (dict(span_lengths=()), "at least one span"),
        (dict(m=-1.0), "m="),
    ],
)
def test_markov_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ba.HighOrderMarkovTask(**kwargs)
