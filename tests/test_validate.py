"""The shared input checks: each accepts exactly what it says and names the parameter, the value and what is
allowed (the reference is the interval written out as comparisons)."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from bayesattn._validate import check_between

ENDS = {"neither": (False, False), "low": (True, False), "high": (False, True), "both": (True, True)}


@given(
    value=st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([0.0, 1.0, -1.0, 2.0, 0.5])),
    closed=st.sampled_from(sorted(ENDS)),
)
def test_check_between_is_the_interval(value, closed):
    low_in, high_in = ENDS[closed]
    inside = math.isfinite(value) and (value >= 0 if low_in else value > 0) and (value <= 1 if high_in else value < 1)
    if inside:
        assert check_between("x", value, 0, 1, closed=closed) == value
    else:
        interval = f"{'[' if low_in else '('}0, 1{']' if high_in else ')'}"
        with pytest.raises(ValueError, match="^" + re.escape(f"x={value!r}: expected a number in {interval}") + "$"):
            check_between("x", value, 0, 1, closed=closed)


@pytest.mark.parametrize("value", [True, "a", None, [0.5], np.nan])
def test_check_between_rejects_what_is_not_a_number(value):
    with pytest.raises(ValueError, match="momentum="):
        check_between("momentum", value, 0, 1, closed="low")


def test_check_between_accepts_numpy_scalars_and_names_a_bad_closure():
    assert check_between("m", np.float32(0.25), 0, 1) == 0.25
    with pytest.raises(ValueError, match="closed='open'"):
        check_between("m", 0.5, 0, 1, closed="open")


# ------------------------------------------------------------------------------------------ keys, masks, sizes
def test_check_key_takes_one_key_of_either_kind_and_names_anything_else():
    import jax

    from bayesattn._validate import check_key

    typed, legacy = jax.random.key(0), jax.random.PRNGKey(0)
    assert check_key("key", typed) is typed and check_key("key", legacy) is legacy
    for bad, shown in [
        (0, "key=0"),
        (None, "key=None"),
        (jax.random.split(typed, 2), "key=PRNGKeyArray of shape (2,)"),
        (np.zeros(2, np.int64), "key=ndarray of shape (2,)"),
    ]:
        with pytest.raises(ValueError, match=re.escape(shown) + ": expected one JAX PRNG key"):
            check_key("key", bad)


def test_entry_points_refuse_a_seed_given_as_the_key():
    import jax

    import bayesattn as ba

    task = ba.CopyTask(T=4, d=2)
    data = task.sample(jax.random.key(0), 5)
    prior = ba.Prior(1.0, 100.0, 20.0)
    calls = [
        lambda: task.sample(None, 2),
        lambda: ba.sample(ba.Posterior(data, "softmax", prior), 0, num_chains=1, num_warmup=5, num_samples=4),
        lambda: ba.train(data, prior, "softmax", 0, steps=2),
        lambda: ba.train_sweep(task, prior, "softmax", [2], [0], None, steps=2),
    ]
    for call in calls:
        with pytest.raises(ValueError, match="expected one JAX PRNG key"):
            call()
    with pytest.raises(ValueError, match="expected a task that draws sequences"):
        ba.train_sweep(ba.Task(T=4, d=2), prior, "softmax", [2], [0], jax.random.key(0), steps=2)


def test_a_data_set_too_large_for_one_array_is_refused_before_it_is_drawn():
    import jax

    import bayesattn as ba
    from bayesattn.tasks.base import MAX_ARRAY_NUMBERS

    task = ba.CopyTask(T=4, d=2)
    limit = MAX_ARRAY_NUMBERS // (4 * 2)
    with pytest.raises(ValueError, match=f"P={limit + 1}: expected at most {limit} sequences"):
        task.sample(jax.random.key(0), limit + 1)


def test_attention_maps_and_observables_refuse_masks_that_would_broadcast():
    """A (T,) mask, an integer mask or one of another T broadcasts into wrong weights: each is refused naming it;
    an all-False query mask (no row to average) too; a NaN in alpha stays a NaN in every order parameter."""
    import jax.numpy as jnp

    import bayesattn as ba

    task = ba.CopyTask(T=4, d=2)
    L = jnp.zeros((4, 4))
    for attention in (ba.softmax_attention, ba.linear_attention):
        for mask in (np.ones(4, bool), np.ones((4, 4), int), np.ones((3, 3), bool)):
            with pytest.raises(ValueError, match="key_mask of shape"):
                attention(L, mask)
        with pytest.raises(ValueError, match=r"L of shape \(4,\)"):
            attention(jnp.zeros(4), task.key_mask)
    alpha = ba.softmax_attention(L, task.key_mask)
    for mask in (np.arange(4), np.zeros(4, bool), np.ones(3, bool)):
        with pytest.raises(ValueError, match="query_mask of shape"):
            ba.order_parameters(alpha, task.target_pattern, mask)
    with pytest.raises(ValueError, match="target_pattern of shape"):
        ba.order_parameters(alpha, np.eye(3), task.query_mask)
    op = ba.order_parameters(alpha.at[0, 0].set(jnp.nan), task.target_pattern, task.query_mask)
    assert all(bool(jnp.isnan(op[k])) for k in ("m", "q", "u"))


def test_number_checks_refuse_texts_and_bools_that_float_would_take():
    """float() takes "1e-3" and True; a number argument given as either is a mistake the checks name."""
    from bayesattn._validate import check_between, check_nonnegative, check_positive

    for value in ("1.0", True, np.bool_(True), b"2"):
        for check in (check_positive, check_nonnegative, lambda n, v: check_between(n, v, 0, 2)):
            with pytest.raises(ValueError, match=re.escape(f"lr={value!r}: expected")):
                check("lr", value)
    assert check_positive("lr", np.float32(0.5)) == 0.5 and check_nonnegative("lr", np.int64(0)) == 0.0


def test_theory_at_one_point_refuses_a_P_or_grid_it_cannot_use():
    import jax.numpy as jnp

    import bayesattn as ba

    task, prior, th = ba.CopyTask(T=4, d=2), ba.Prior(1.0, 100.0, 20.0), ba.theory
    for call, named in [
        (lambda: th.linear_log_density(task, prior, 0, jnp.array([0.1])), "P=0"),
        (lambda: th.linear_log_density(task, prior, 10, [1.5, -0.1]), "u=[1.5, -0.1]: expected squared cosines"),
        (lambda: th.linear_log_density(task, prior, 10, np.zeros((2, 2))), "u has shape (2, 2): expected shape (*)"),
        (lambda: th.linear_log_density(task, prior, 10, 0.5j), "u has dtype complex128"),
        # beyond the numerics' range the means left [0, 1] (m = 17 at beta = 2.5e17)
        (lambda: th.phase_curve(task, prior, "softmax", [1e20]), "P=[1e+20] with sigma2=20: beta = P d / (2 sigma2)"),
        (lambda: th.phase_curve(task, ba.Prior(1.0, 100.0, 1e-100), "linear", [10.0]), "expected beta <= 1e+11"),
        (lambda: th.phase_curve(ba.CopyTask(T=4, d=1, tokens="onehot"), prior, "linear", [10.0]), "task.d=1: one-hot"),
        (lambda: th.mode_action(task, prior, "linear", -1.0, [0.1]), "P=-1.0"),
        (lambda: th.critical_exponent(task, prior, num=1), "num=1"),
        (lambda: th.critical_exponent(task, prior, rel_range=(0.1, 0.01)), "rel_range=(0.1, 0.01)"),
        (lambda: th.softmax_action_table(task, prior, float("nan")), "beta_max=nan"),
        (lambda: th.softmax_action_table(task, prior, 10.0, nh=0), "nh=0"),
        (lambda: th.phase_curve(task, prior, "softmax", [10.0], nh=1), "nh=1"),
        (lambda: th.phase_curve(task, prior, "softmax", [10.0], seed=-1), "seed=-1"),
        (lambda: th.entropy_curve(task, prior, [10.0], num_samples=1), "num_samples=1"),
        (lambda: th.tilted_row_entropy(task, prior, 0.0, 0.0, ng=2.5), "ng=2.5"),
    ]:
        with pytest.raises(ValueError, match=re.escape(named)):
            call()


def test_linear_log_density_takes_a_number_or_a_vector_of_u():
    """A number gave an IndexError; the result has the shape of u, and a vector's entries are its numbers'."""
    import bayesattn as ba

    task, prior = ba.CopyTask(T=4, d=2), ba.Prior(1.0, 100.0, 20.0)
    vec = np.asarray(ba.theory.linear_log_density(task, prior, 10, [0.2, 0.5]))
    one = ba.theory.linear_log_density(task, prior, 10, 0.5)
    assert vec.shape == (2,) and np.shape(one) == () and float(one) == pytest.approx(vec[1], rel=1e-12)


def test_a_dataset_given_as_a_task_is_named_by_its_type_not_printed():
    """A Dataset passed where a task goes: the message names its type on one line, where its repr printed
    every array (the theory, the sweep, the networks all check their task the same way)."""
    import jax

    import bayesattn as ba

    data = ba.CopyTask(T=4, d=2).sample(jax.random.key(0), 50)
    assert "Array" in repr(data)  # what the message held before
    prior = ba.Prior(1.0, 100.0, 20.0)
    for call in (
        lambda: ba.theory.phase_curve(data, prior, "softmax", [10.0]),
        lambda: ba.train_sweep(data, prior, "softmax", P_values=[20], seeds=[0], key=jax.random.key(1)),
    ):
        with pytest.raises(ValueError, match=r"^task=<Dataset>: ") as e:
            call()
        assert "Array" not in str(e.value) and "\n" not in str(e.value)


def test_switches_take_true_or_false_only():
    """A string such as "no" was read as true (a progress bar on, online training, the noise-fit term)."""
    import jax

    import bayesattn as ba

    task = ba.CopyTask(T=4, d=2)
    data = task.sample(jax.random.key(0), 6)
    post = ba.Posterior(data)
    net = {"name": "single_layer", "T": 4, "d_in": 2}
    for call, named in [
        (lambda: ba.sample(post, jax.random.key(0), num_chains=1, num_samples=8, progress="no"), "progress='no'"),
        (lambda: ba.sample_joint(data, jax.random.key(0), progress="no"), "progress='no'"),
        (lambda: ba.fit_sweep(net, task, [4], [0], jax.random.key(0), online="no"), "online='no'"),
        (lambda: ba.theory.phase_curve(task, ba.Prior(), "softmax", [10.0], noise_fit="yes"), "noise_fit='yes'"),
    ]:
        with pytest.raises(ValueError, match=re.escape(f"{named}: expected True or False")):
            call()


def test_int_items_are_checked_as_given_and_keywords_name_the_function_called():
    """A list's items are checked before any cast (NumPy reads [1, 2.5] as floats and [True, 2] as ints); an
    unknown keyword passed on to an inner function is named with the function the user called."""
    from bayesattn._validate import check_int_items, check_keywords, keyword_only

    assert check_int_items("P", [1, np.int64(2)]) == [1, 2] and check_int_items("P", np.arange(1, 3)) == [1, 2]
    assert check_int_items("P", 3) == [3]
    for values, named in [([1, 2.5], "P item=2.5"), ([True, 2], "P item=True"), (np.array([1.5]), "P item=1.5")]:
        with pytest.raises(ValueError, match=re.escape(f"{named}: expected an integer")):
            check_int_items("P", values)
    with pytest.raises(ValueError, match=re.escape("P item=0: expected an integer >= 1")):
        check_int_items("P", [0], minimum=1)

    def inner(x, *, a=1, b=2):
        return x

    assert keyword_only(inner) == ("a", "b") and check_keywords("outer", {"a": 3}, keyword_only(inner)) == {"a": 3}
    with pytest.raises(
        TypeError, match=re.escape("outer() got unexpected keyword argument(s) 'c': expected any of a, b")
    ):
        check_keywords("outer", {"a": 3, "c": 4}, keyword_only(inner))
