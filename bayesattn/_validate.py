"""Input checks shared by the public entry points.

Every check raises ``ValueError`` naming the parameter, the value and what is allowed.
Inside jit-traced code the values are abstract, so only static properties (shapes) are checked there.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np


def is_traced(x: Any) -> bool:
    """Whether ``x`` is an abstract value inside a JAX trace (never, when JAX is not even imported: this module
    is imported by the command line before JAX)."""
    jax = sys.modules.get("jax")
    return jax is not None and isinstance(x, jax.core.Tracer)


def check_int(name: str, value: Any, *, minimum: int | None = None, maximum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name}={value!r}: expected an integer")
    value = int(value)
    if minimum is not None and value < minimum:
        allowed = f">= {minimum}" if maximum is None else f"in {minimum}..{maximum}"
        raise ValueError(f"{name}={value}: expected an integer {allowed}")
    if maximum is not None and value > maximum:
        allowed = f"<= {maximum}" if minimum is None else f"in {minimum}..{maximum}"
        raise ValueError(f"{name}={value}: expected an integer {allowed}")
    return value


def check_int_items(name: str, values: Any, *, minimum: int | None = None, maximum: int | None = None) -> list[int]:
    """``values`` (one integer, a list, tuple or range of them, or an array) as a list of ints, each checked by
    :func:`check_int` as ``name item``. A list's items are checked as given, before any conversion could change
    them (NumPy would read [1, 2.5] as 1.0, 2.5 and [True, 2] as 1, 2)."""
    if isinstance(values, (list, tuple, range)):
        items = list(values)
    else:
        items = np.atleast_1d(np.asarray(values)).tolist()
    return [check_int(f"{name} item", v, minimum=minimum, maximum=maximum) for v in items]


def check_seeds(seeds: Any) -> list[int]:
    """``seeds`` (one or a list) as a list of integers in 0..2**32 - 1: each is folded into a key as a 32-bit word
    (``jax.random.fold_in``), where a larger one overflowed after the check."""
    return check_int_items("seeds", seeds, minimum=0, maximum=2**32 - 1)


def keyword_only(function) -> tuple[str, ...]:
    """The names of ``function``'s keyword-only parameters (those after ``*``)."""
    import inspect

    return tuple(n for n, p in inspect.signature(function).parameters.items() if p.kind is p.KEYWORD_ONLY)


def check_keywords(function: str, given: dict, accepted: Iterable[str]) -> dict:
    """``given`` (a function's ``**kwargs``, passed on to another function) as it is when every name is in
    ``accepted``; TypeError naming ``function`` (the one the user called, not the one they are passed on to), the
    unknown names and the accepted ones otherwise."""
    accepted = tuple(accepted)
    unknown = [k for k in given if k not in accepted]
    if unknown:
        raise TypeError(
            f"{function}() got unexpected keyword argument(s) {', '.join(map(repr, unknown))}: expected any of "
            f"{', '.join(accepted)}"
        )
    return given


def check_key(name: str, key: Any) -> Any:
    """One JAX PRNG key: a typed key (``jax.random.key(seed)``) or a legacy uint32 key of shape (2,)
    (``jax.random.PRNGKey(seed)``), traced or not. Returned as it is; ValueError naming ``name`` otherwise (an int
    seed, None, an array of keys)."""
    import jax

    shape, dtype = getattr(key, "shape", None), getattr(key, "dtype", None)
    if dtype is not None and shape is not None:
        if jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key) and len(shape) == 0:
            return key
        if dtype == np.uint32 and tuple(shape) == (2,):
            return key
    what = f"{type(key).__name__} of shape {tuple(shape)}" if shape is not None else repr(key)
    raise ValueError(f"{name}={what}: expected one JAX PRNG key, e.g. jax.random.key(seed)")


def _real(value: Any) -> float:
    """A number as a float: TypeError for a bool or a text (which float() would take: True as 1, "1e-3" as 0.001),
    TypeError or ValueError for anything else that is not a number."""
    if isinstance(value, (bool, np.bool_, str, bytes)):
        raise TypeError(type(value).__name__)
    return float(value)


def check_callable(name: str, value: Any, what: str = "a function", *, optional: bool = False):
    """``value`` as it is when it can be called (or is None, when ``optional``); ValueError naming ``name`` and
    ``what`` it should be otherwise (a number or None passed for a function failed later, inside JAX or a loop)."""
    if not (callable(value) or (optional and value is None)):
        raise ValueError(f"{name}={brief(value)}: expected {what}{' or None' if optional else ''}")
    return value


def check_bool(name: str, value: Any) -> bool:
    """A switch: True or False (NumPy's bools too). A string such as "no" is refused, not read as true."""
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name}={value!r}: expected True or False")
    return bool(value)


def check_finite(name: str, value: Any) -> float:
    """A finite real number, of either sign."""
    try:
        v = _real(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name}={value!r}: expected a finite number") from None
    if not math.isfinite(v):
        raise ValueError(f"{name}={value!r}: expected a finite number")
    return v


def check_positive(name: str, value: Any) -> float:
    try:
        v = _real(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name}={value!r}: expected a positive finite number") from None
    if not math.isfinite(v) or v <= 0:
        raise ValueError(f"{name}={value!r}: expected a positive finite number")
    return v


def check_nonnegative(name: str, value: Any) -> float:
    """:func:`check_positive` with 0 allowed."""
    try:
        v = _real(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name}={value!r}: expected a finite number >= 0") from None
    if not math.isfinite(v) or v < 0:
        raise ValueError(f"{name}={value!r}: expected a finite number >= 0")
    return v


def check_between(name: str, value: Any, low: float, high: float, *, closed: str = "neither") -> float:
    """A finite number in the interval from ``low`` to ``high``; ``closed`` says which ends belong to it:
    ``"neither"`` (low, high), ``"low"`` [low, high), ``"high"`` (low, high] or ``"both"`` [low, high]."""
    if closed not in ("neither", "low", "high", "both"):
        raise ValueError(f"closed={closed!r}: expected one of 'neither', 'low', 'high', 'both'")
    low_in, high_in = closed in ("low", "both"), closed in ("high", "both")
    interval = f"{'[' if low_in else '('}{low:g}, {high:g}{']' if high_in else ')'}"
    message = f"{name}={value!r}: expected a number in {interval}"
    try:
        v = _real(value)
    except (TypeError, ValueError):
        raise ValueError(message) from None
    above = v >= low if low_in else v > low
    below = v <= high if high_in else v < high
    if not (math.isfinite(v) and above and below):
        raise ValueError(message)
    return v


def check_entries(name: str, value: Any, check: Callable[[str, Any], Any]) -> Any:
    """``check`` (a check of one number, such as :func:`check_positive`) on a number, or on each entry of an array of
    real numbers, named "<name> entry"; returns ``value`` unchanged."""
    if np.ndim(value) == 0:
        check(name, value)
    else:
        for v in np.ravel(check_real_dtype(name, value)):
            check(f"{name} entry", float(v))
    return value


def brief(value: Any, width: int = 80) -> str:
    """``repr(value)`` for an error message, or ``<TypeName>`` where the repr is longer than ``width`` characters
    (a Dataset or Samples would print its arrays)."""
    text = repr(value)
    return text if len(text) <= width else f"<{type(value).__name__}>"


def check_distinct(name: str, values: list) -> list:
    """``values`` as they are when none is repeated; ValueError naming ``name`` and the repeated ones otherwise."""
    repeated = sorted({v for v in values if values.count(v) > 1}, key=repr)
    if repeated:
        raise ValueError(f"{name}={values!r}: expected distinct values ({', '.join(map(repr, repeated))} repeated)")
    return values


def check_choice(name: str, value: Any, allowed: Iterable[str]) -> str:
    allowed = tuple(allowed)
    if value not in allowed:
        raise ValueError(f"{name}={value!r}: expected one of {', '.join(map(repr, allowed))}")
    return value


def check_array(name: str, value: Any, shape: tuple[int | None, ...], *, finite: bool = True):
    """Check an array's exact shape (None = any size on that axis) and, when concrete, finiteness."""
    shp = tuple(getattr(value, "shape", np.shape(value)))
    ok = len(shp) == len(shape) and all(e is None or e == s for e, s in zip(shape, shp))
    if not ok:
        want = "(" + ", ".join("*" if e is None else str(e) for e in shape) + ")"
        raise ValueError(f"{name} has shape {shp}: expected shape {want} (no broadcasting)")
    if finite and not is_traced(value):
        arr = np.asarray(value)
        if not np.all(np.isfinite(arr)):
            bad = int(np.size(arr) - np.count_nonzero(np.isfinite(arr)))
            raise ValueError(f"{name} contains {bad} NaN or inf value(s): expected finite numbers")
    return value


def check_real_dtype(name: str, value: Any):
    """``value`` as an array of real numbers (bool, integer or float) of any shape: a JAX array or traced value as
    it is, anything else as a NumPy array. ValueError naming ``name`` for another dtype (complex numbers, strings,
    objects, PRNG keys) before any conversion could drop part of it. A static check: the same under jit."""
    jax = sys.modules.get("jax")
    keep = is_traced(value) or (jax is not None and isinstance(value, jax.Array))
    arr = value if keep else np.asarray(value)
    try:
        kind = np.dtype(arr.dtype).kind
    except TypeError:  # an extended dtype, such as a typed PRNG key's
        kind = "?"
    if kind not in "biuf":
        raise ValueError(f"{name} has dtype {arr.dtype}: expected real numbers")
    return arr


def check_real_array(name: str, value: Any, shape: tuple[int | None, ...], *, finite: bool = True):
    """:func:`check_real_dtype` and :func:`check_array`: real numbers of ``shape`` (None: any size), finite when
    concrete (unless ``finite=False``)."""
    return check_array(name, check_real_dtype(name, value), shape, finite=finite)
