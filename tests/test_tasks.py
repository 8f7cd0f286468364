"""The copy task: determinism, targets, token laws, causal masks, user datasets and bad input."""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

import bayesattn as ba

ALL = [(tok, b, off) for tok in ("gaussian", "onehot") for b in ("cyclic", "causal") for off in (1, 2)]


@pytest.mark.parametrize("tokens,boundary,offset", ALL)
def test_sampling_is_a_pure_function_of_the_key(tokens, boundary, offset):
    task = ba.CopyTask(T=5, d=4, offset=offset, tokens=tokens, boundary=boundary)
    a, b = task.sample(jax.random.key(7), 20), task.sample(jax.random.key(7), 20)
    c = task.sample(jax.random.key(8), 20)
    np.testing.assert_array_equal(a.X, b.X)
    np.testing.assert_array_equal(a.Y, b.Y)
    assert not np.array_equal(a.X, c.X)
    assert a.X.shape == a.Y.shape == (20, 5, 4) and a.X.dtype == jnp.float64


@pytest.mark.parametrize("tokens", ["gaussian", "onehot"])
def test_draws_above_256_rows_are_the_plain_draw_bit_for_bit(tokens):
    """draw_tokens draws a power-of-two number of rows and keeps the first P (one compilation per size class):
    the same bits as jax.random's own draw of exactly P rows, the reference here."""
    from bayesattn.tasks.base import _draw_rows, draw_tokens

    assert [_draw_rows(n) for n in (1, 256, 257, 1000, 1024, 1025)] == [1, 256, 512, 1024, 1024, 2048]
    for key in (jax.random.key(3), jax.random.PRNGKey(3)):
        for P in (257, 301, 1000):
            got = draw_tokens(key, (P, 7), 5, tokens)
            ref = (
                jax.random.normal(key, (P, 7, 5), dtype=jnp.float64)
                if tokens == "gaussian"
                else jax.nn.one_hot(jax.random.randint(key, (P, 7), 0, 5), 5, dtype=jnp.float64)
            )
            assert got.shape == (P, 7, 5)
            np.testing.assert_array_equal(np.asarray(got), np.asarray(ref))


def test_without_partitionable_threefry_every_P_is_drawn_as_it_is():
    """Row p's bits depend on P without jax_threefry_partitionable: then the draw is not rounded up, and still
    equals the plain draw."""
    from bayesattn.tasks.base import _draw_rows, draw_tokens

    key = jax.random.key(4)
    with jax.threefry_partitionable(False):
        assert _draw_rows(1000) == 1000
        np.testing.assert_array_equal(
            np.asarray(draw_tokens(key, (300, 3), 2, "gaussian")),
            np.asarray(jax.random.normal(key, (300, 3, 2), dtype=jnp.float64)),
        )


@pytest.mark.parametrize("tokens,boundary,offset", ALL)
def test_targets_are_the_token_offset_positions_back(tokens, boundary, offset):
    T = 5
    task = ba.CopyTask(T=T, d=3, offset=offset, tokens=tokens, boundary=boundary)
    ds = task.sample(jax.random.key(1), 6)
    X, Y = np.asarray(ds.X), np.asarray(ds.Y)
    first = 0 if boundary == "cyclic" else offset
    for t in range(first, T):
        np.testing.assert_array_equal(Y[:, t], X[:, (t - offset) % T])
    np.testing.assert_array_equal(Y[:, :first], 0.0)
    assert ds.n == 6 * (T - first)


@pytest.mark.parametrize("boundary", ("cyclic", "causal"))
def test_masks_and_target_pattern(boundary):
    T, off = 6, 2
    task = ba.CopyTask(T=T, d=2, offset=off, boundary=boundary)
    km, qm, pat = task.key_mask, task.query_mask, task.target_pattern
    assert km.shape == (T, T) and km.dtype == bool and qm.shape == (T,) and qm.dtype == bool
    if boundary == "cyclic":
        assert km.all() and qm.all()
    else:
        for t in range(T):
            for s in range(T):
                assert km[t, s] == (s <= t)
        assert list(qm) == [t >= off for t in range(T)]
    for t in range(T):
        expected = np.zeros(T)
        if qm[t]:
            expected[(t - off) % T] = 1.0
        np.testing.assert_array_equal(pat[t], expected)
    assert np.all(km[pat > 0])  # the source is always an allowed key


def test_onehot_tokens_are_one_hot_and_uniform():
    d = 5
    ds = ba.CopyTask(T=4, d=d, tokens="onehot").sample(jax.random.key(2), 2000)
    X = np.asarray(ds.X)
    assert set(np.unique(X)) == {0.0, 1.0}
    np.testing.assert_array_equal(X.sum(-1), 1.0)
    counts = X.reshape(-1, d).sum(0)
    assert stats.chisquare(counts).pvalue > 1e-4  # uniform over the d symbols


def test_gaussian_tokens_are_standard_normal():
    X = np.asarray(ba.CopyTask(T=4, d=3).sample(jax.random.key(3), 3000).X).reshape(-1, 3)
    N = X.shape[0]
    assert np.all(np.abs(X.mean(0)) < 5 / np.sqrt(N))
    np.testing.assert_allclose(np.cov(X.T), np.eye(3), atol=5 * np.sqrt(2 / N))
    assert stats.kstest(X[:, 0], "norm").pvalue > 1e-4


def test_zero_sequences_allowed():
    ds = ba.CopyTask(T=3, d=2).sample(jax.random.key(0), 0)
    assert ds.X.shape == (0, 3, 2) and ds.Y.shape == (0, 3, 2) and ds.P == 0 and ds.n == 0


def test_from_arrays_round_trip_and_masking():
    task = ba.CopyTask(T=4, d=2, offset=1, boundary="causal")
    ds = task.sample(jax.random.key(4), 5)
    back = ba.Dataset.from_arrays(np.asarray(ds.X), np.asarray(ds.Y), task)
    np.testing.assert_array_equal(back.X, ds.X)
    np.testing.assert_array_equal(back.Y, ds.Y)
    assert back.task == task and back.P == 5 and back.n == ds.n == 15
    # targets on rows without a source are zeroed (documented: they are marked, not used)
    Y = np.ones((5, 4, 2))
    np.testing.assert_array_equal(ba.Dataset.from_arrays(ds.X, Y, task).Y[:, 0], 0.0)
    # lists and integer arrays are accepted and stored as float64
    ints = ba.Dataset.from_arrays(np.zeros((1, 4, 2), int).tolist(), np.zeros((1, 4, 2), int), task)
    assert ints.X.dtype == jnp.float64 and ints.Y.dtype == jnp.float64


def test_task_config_and_replace():
    task = ba.CopyTask(T=4, d=2, offset=3, tokens="onehot", boundary="causal")
    assert task.config() == {"name": "CopyTask", "T": 4, "d": 2, "offset": 3, "tokens": "onehot", "boundary": "causal"}
    assert task.replace(T=8).T == 8 and task.replace(T=8).offset == 3
    with pytest.raises(ValueError, match="offset=3"):
        task.replace(T=3)


# --- bad input ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(T=1, d=2), r"T=1: expected an integer >= 2"),
        (dict(T=0, d=2), r"T=0"),
        (dict(T=4.0, d=2), r"T=4\.0: expected an integer"),
        (dict(T=True, d=2), r"T=True: expected an integer"),
        (dict(T=4, d=0), r"d=0: expected an integer >= 1"),
        (dict(T=4, d=-3), r"d=-3"),
        (dict(T=4, d=2, offset=0), r"offset=0: expected an integer in 1\.\.3"),
        (dict(T=4, d=2, offset=4), r"offset=4: expected an integer in 1\.\.3"),
        (dict(T=4, d=2, offset=-1), r"offset=-1"),
        (dict(T=4, d=2, tokens="binary"), r"tokens='binary': expected one of 'gaussian', 'onehot'"),
        (dict(T=4, d=2, boundary="open"), r"boundary='open': expected one of 'cyclic', 'causal'"),
    ],
)
def test_copy_task_rejects_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ba.CopyTask(**kwargs)


@pytest.mark.parametrize("P,match", [(-1, r"P=-1: expected an integer >= 0"), (2.5, r"P=2\.5"), ("3", r"P='3'")])
def test_sample_rejects_bad_P(P, match):
    with pytest.raises(ValueError, match=match):
        ba.CopyTask(T=4, d=2).sample(jax.random.key(0), P)


@pytest.mark.parametrize("which", ("X", "Y"))
@pytest.mark.parametrize("bad", (np.nan, np.inf))
def test_from_arrays_rejects_non_finite(which, bad):
    task = ba.CopyTask(T=4, d=2)
    arrays = {"X": np.zeros((3, 4, 2)), "Y": np.zeros((3, 4, 2))}
    arrays[which][2, 1, 0] = bad
    with pytest.raises(ValueError, match=rf"{which} contains 1 NaN or inf"):
        ba.Dataset.from_arrays(arrays["X"], arrays["Y"], task)


@pytest.mark.parametrize(
    "xs,ys,match",
    [
        ((3, 5, 2), (3, 5, 2), r"X has shape \(3, 5, 2\): expected shape \(\*, 4, 2\)"),
        ((3, 4, 3), (3, 4, 3), r"X has shape \(3, 4, 3\)"),
        ((4, 2), (4, 2), r"X has shape \(4, 2\)"),
        ((3, 4, 2), (2, 4, 2), r"Y has shape \(2, 4, 2\): expected shape \(3, 4, 2\)"),
        ((3, 4, 2), (3, 4, 1), r"Y has shape \(3, 4, 1\)"),
        ((3, 4, 2), (4, 2), r"Y has shape \(4, 2\)"),  # no silent broadcasting
    ],
)
def test_from_arrays_rejects_mismatched_shapes(xs, ys, match):
    with pytest.raises(ValueError, match=match):
        ba.Dataset.from_arrays(np.zeros(xs), np.zeros(ys), ba.CopyTask(T=4, d=2))


@pytest.mark.parametrize("which", ("X", "Y"))
@pytest.mark.parametrize("bad", (np.complex128(1j), "0.5"))
def test_from_arrays_rejects_values_that_are_not_real_numbers(which, bad):
    # complex input lost its imaginary part with only NumPy's warning, and strings were parsed as numbers
    task = ba.CopyTask(T=4, d=2)
    arrays = {"X": np.zeros((3, 4, 2)).tolist(), "Y": np.zeros((3, 4, 2)).tolist()}
    arrays[which][2][1][0] = bad
    with pytest.raises(ValueError, match=rf"{which} has dtype .*: expected real numbers"):
        ba.Dataset.from_arrays(arrays["X"], arrays["Y"], task)


def test_from_arrays_rejects_a_non_task():
    with pytest.raises(ValueError, match="task="):
        ba.Dataset.from_arrays(np.zeros((1, 4, 2)), np.zeros((1, 4, 2)), task={"T": 4, "d": 2})


def test_posterior_rejects_a_hand_built_dataset_with_nan():
    task = ba.CopyTask(T=4, d=2)
    X = np.zeros((2, 4, 2))
    X[0, 0, 0] = np.nan
    with pytest.raises(ValueError, match=r"dataset\.X contains 1 NaN or inf"):
        ba.Posterior(ba.Dataset(jnp.asarray(X), jnp.zeros((2, 4, 2)), task))


def test_numpy_integer_arguments_are_stored_as_python_ints():
    # grids built with numpy must still give JSON-serialisable configs and equal, equally hashed tasks
    task = ba.CopyTask(T=np.int64(4), d=np.int32(2), offset=np.int64(1))
    assert all(type(v) is int for v in (task.T, task.d, task.offset))
    assert json.loads(json.dumps(task.config())) == ba.CopyTask(T=4, d=2).config()
    assert hash(task) == hash(ba.CopyTask(T=4, d=2))
