"""Conversion of results (numpy / jax arrays and scalars, nested dicts and lists) to plain Python for JSON."""

from __future__ import annotations

import math
from typing import Any, Literal

import numpy as np


def to_plain(obj: Any, nonfinite: Literal["keep", "none", "string"] = "keep") -> Any:
    """Recursively convert arrays and numpy scalars to lists / floats / ints / bools; objects with a
    ``to_dict()`` are converted through it. Non-finite floats are kept as floats (``"keep"``), replaced by
    None (``"none"``) or written as the strings 'nan' / 'inf' / '-inf' (``"string"``, so that a file never
    holds a bare NaN token and nothing non-finite is silently dropped)."""
    if isinstance(obj, dict):
        return {str(k): to_plain(v, nonfinite) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_plain(v, nonfinite) for v in obj]
    if hasattr(obj, "to_dict"):
        return to_plain(obj.to_dict(), nonfinite)
    if hasattr(obj, "__array__") and not isinstance(obj, (str, bytes)):
        arr = np.asarray(obj)
        return to_plain(arr.tolist() if arr.ndim else arr.item(), nonfinite)
    if isinstance(obj, (np.floating, float)):
        v = float(obj)
        if math.isfinite(v) or nonfinite == "keep":
            return v
        return None if nonfinite == "none" else repr(v)
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.bool_):
        return bool(obj)
    return obj
