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
