"""The sparse-pattern tasks (bayesattn/tasks/sparse.py) against brute-force numpy definitions, and the
regression surrogate's closed-form posterior against the n x n Gaussian-process evidence."""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import np_design, np_gp_log_evidence, np_log_prior_L

import bayesattn as ba
from bayesattn.tasks.sparse import ca_step, ca_trajectory, check_rule_tables, sparse_support


@pytest.mark.parametrize("S,s", [(1, 1), (5, 1), (8, 3), (16, 3), (12, 12)])
def test_support_has_exactly_s_ones_per_row(S, s):
    for seed in range(3):
        A = sparse_support(jax.random.key(seed), S, s)
        assert A.shape == (S, S) and set(np.unique(A)) <= {0, 1}
        assert (A.sum(axis=1) == s).all()
    assert (sparse_support(jax.random.key(7), S, s) == sparse_support(jax.random.key(7), S, s)).all()


def test_support_positions_are_uniform():
    # over many keys, each key position of a row is in the support with probability s / S
    S, s, n = 6, 2, 600
    freq = np.mean([sparse_support(jax.random.key(i), S, s) for i in range(n)], axis=0)
    se = np.sqrt((s / S) * (1 - s / S) / n)
    assert np.abs(freq - s / S).max() < 5 * se


def test_linear_map_is_A_x0_mod_2():
    task = ba.SparseLinearMapTask(S=7, s=3, seed=4)
    A = task.support
    assert (A.sum(axis=1) == 3).all()
    x = np.asarray(task.sample_tokens(jax.random.key(0), 50))
    assert x.shape == (50, 14) and set(np.unique(x)) <= {0, 1}
    for row in x:
        x0, x1 = row[:7], row[7:]
        for i in range(7):  # brute force: the parity of the supported bits
            assert x1[i] == sum(x0[j] for j in range(7) if A[i, j]) % 2
    # x0 is uniform: the bit frequency is near 1/2
    assert abs(x[:, :7].mean() - 0.5) < 0.07
    # a different seed gives another map, the same seed the same one
    assert not (ba.SparseLinearMapTask(S=7, s=3, seed=5).support == A).all()
    assert (ba.SparseLinearMapTask(S=7, s=3, seed=4).support == A).all()


def test_linear_map_as_a_task():
    task = ba.SparseLinearMapTask(S=5, s=2, seed=1)
    assert task.T == 10 and task.d == 2
    ds = task.sample(jax.random.key(3), 4)
    tok = np.asarray(task.sample_tokens(jax.random.key(3), 4))
    X, Y = np.asarray(ds.X), np.asarray(ds.Y)
    assert (X.argmax(-1) == tok).all()
    rows = task.query_rows
    assert list(rows) == [4, 5, 6, 7, 8] and task.query_mask.sum() == 5
    assert (Y[:, rows].argmax(-1) == tok[:, rows + 1]).all()  # next token on the query rows
    assert (Y[:, ~task.query_mask] == 0).all()
    # the pattern of query row S-1+i is row i of A over the first half, allowed by the causal mask
    pat = task.target_patterns["support"]
    assert np.allclose(pat[rows, :5] * 2, task.support) and np.allclose(pat.sum(1)[rows], 1)
    assert not (task.row_supports & ~task.key_mask).any()
    assert ba.task_from_config(task.config()) == task


@pytest.mark.parametrize(
    "kw,match",
    [({"S": 4, "s": 5}, "s=5"), ({"S": 4, "s": 0}, "s=0"), ({"S": 0, "s": 1}, "S=0"), ({"S": 4, "s": 1.5}, "s=1.5")],
)
def test_bad_sparsity_is_a_clear_error(kw, match):
    with pytest.raises(ValueError, match=match):
        ba.SparseLinearMapTask(**kw)
    with pytest.raises(ValueError, match=match):
        ba.SparseRegressionTask(**kw)


def _np_ca(table, x, k):
    out = [list(x)]
    n = len(x)
    for _ in range(k):
        x = [table[x[(j - 1) % n]][x[j]][x[(j + 1) % n]] for j in range(n)]
        out.append(x)
    return np.array(out)


def test_ca_applied_k_times_matches_a_loop():
    rng = np.random.default_rng(0)
    table = rng.integers(0, 4, (4, 4, 4))
    x = rng.integers(0, 4, 16)
    np.testing.assert_array_equal(ca_step(jnp.asarray(table), jnp.asarray(x)), _np_ca(table, x, 1)[1])
    for k in (1, 3, 5):
        np.testing.assert_array_equal(ca_trajectory(jnp.asarray(table), jnp.asarray(x), k), _np_ca(table, x, k))


@pytest.mark.parametrize("k", [1, 3])
def test_ca_sequences_are_trajectories_of_a_pool_table(k):
    task = ba.CellularAutomatonTask(k=k, n_rules=8, seed=2)
    pool = task.rule_tables
    assert pool.shape == (8, 4, 4, 4) and task.T == 16 * (k + 1)
    seqs = np.asarray(task.sample_tokens(jax.random.key(1), 12))
    used = set()
    for seq in seqs:
        traj = seq.reshape(k + 1, 16)
        matches = [i for i in range(8) if (_np_ca(pool[i], traj[0], k) == traj).all()]
        assert matches, "a sequence is not the trajectory of any table of the pool"
        used.update(matches)
    assert len(used) > 1  # tables vary between sequences
    # the neighbourhood pattern: the query predicting cell j of state t+1 sees cells j-1, j, j+1 of state t
    sup = task.row_supports
    row = 16 * 1 + 0 - 1  # predicts cell 0 of state 1
    assert sorted(np.flatnonzero(sup[row])) == [0, 1, 15]
    assert (sup.sum(1)[task.query_rows] == 3).all() and not (sup & ~task.key_mask).any()
    assert ba.task_from_config(task.config()) == task


def test_rule_tables_of_the_wrong_shape_are_clear_errors():
    ok = np.zeros((4, 4, 4), int)
    assert check_rule_tables(ok).shape == (1, 4, 4, 4) and check_rule_tables(np.zeros(64, int)).shape == (1, 4, 4, 4)
    for bad in (np.zeros((4, 4), int), np.zeros((3, 4, 4), int), np.zeros((2, 63), int), np.zeros((0, 4, 4, 4), int)):
        with pytest.raises(ValueError, match="rule tables"):
            check_rule_tables(bad)
    with pytest.raises(ValueError, match="0..3"):
        check_rule_tables(np.full((4, 4, 4), 4))
    with pytest.raises(ValueError, match="dtype"):
        check_rule_tables(np.zeros((4, 4, 4)))
    with pytest.raises(ValueError, match="rule tables have shape"):
        ba.CellularAutomatonTask(k=1).sample_tokens(jax.random.key(0), 2, tables=np.zeros((5, 5, 5), int))


def test_regression_surrogate_data():
    task = ba.SparseRegressionTask(S=6, s=3, dim=2, seed=3)
    ds = task.sample(jax.random.key(0), 5)
    X, Y, A = np.asarray(ds.X), np.asarray(ds.Y), task.support
    for mu, i, k in itertools.product(range(5), range(6), range(2)):
        assert np.isclose(Y[mu, i, k], sum(X[mu, j, k] for j in range(6) if A[i, j]))
    assert task.key_mask.all() and task.query_mask.all()
    assert ba.task_from_config(task.config()) == task
    norm = ba.SparseRegressionTask(S=6, s=3, dim=2, seed=3, normalize=True).sample(jax.random.key(0), 5)
    np.testing.assert_allclose(np.asarray(norm.Y) * np.sqrt(3), Y, rtol=1e-12)


@pytest.mark.parametrize("attention", ["softmax", "linear"])
def test_surrogate_closed_form_matches_brute_force_gp(attention, rng):
    task = ba.SparseRegressionTask(S=5, s=2, dim=2, seed=1)
    data = task.sample(jax.random.key(2), 6)
    prior = ba.Prior(sigma_A2=1.3, sigma_V2=50.0, sigma2=0.7)
    post = ba.Posterior(data, attention, prior)
    for L in (1.5 * rng.standard_normal((5, 5)), 5.0 * task.support, np.zeros((5, 5))):
        ref = np_gp_log_evidence(*np_design(L, data, attention), prior) + np_log_prior_L(L, prior.sigma_A2)
        np.testing.assert_allclose(post.log_density(jnp.asarray(L)), ref, rtol=1e-10, atol=1e-9)
    if attention == "linear":
        return
    # the mass on the support at a hot start: m = (1/s) * mass, mass -> 1
    m = float(post.order_parameters(jnp.asarray(30.0 * task.support))["m"])
    assert abs(m - 0.5) < 1e-6


def test_surrogate_with_one_source_is_the_copy_task(rng):
    sur = ba.SparseRegressionTask(S=6, s=1, dim=3, support_kind="shift")
    copy = ba.CopyTask(T=6, d=3, offset=1)
    key = jax.random.key(5)
    a, b = sur.sample(key, 8), copy.sample(key, 8)
    np.testing.assert_array_equal(a.X, b.X)
    np.testing.assert_array_equal(a.Y, b.Y)
    np.testing.assert_array_equal(sur.target_patterns["support"], copy.target_pattern)
    L = jnp.asarray(rng.standard_normal((6, 6)))
    np.testing.assert_allclose(ba.Posterior(a).log_density(L), ba.Posterior(b).log_density(L), rtol=1e-12)
