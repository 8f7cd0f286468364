"""The data's sufficient statistics: what the closed-form posterior (:mod:`bayesattn.bayes.posterior`) and the
full-batch training objective need of a data set, whatever its number of sequences P."""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .._fused import fused
from .._validate import check_real_array


class SufficientStats(NamedTuple):
    """What the closed form and the full-batch training objective need of the data, whatever P is.

    Sxx[s, s'] = sum_mu x_s x_s'^T: (T, T, d, d); Syx[t, s] = sum_mu x_s y_t^T: (T, T, d, d_out) (stored
    (t, s)-major, the layout the closed form reads; :attr:`Sxy` is the (s, t) view); YY = sum over query rows of
    y y^T: (d_out, d_out); n: the number of (sequence, query) rows. A pytree (a NamedTuple of arrays).
    """

    Sxx: jax.Array
    Syx: jax.Array
    YY: jax.Array
    n: jax.Array

    @property
    def Sxy(self) -> jax.Array:
        return jnp.swapaxes(self.Syx, 0, 1)

    @property
    def yy(self) -> jax.Array:
        """|Y|^2 = tr YY."""
        return jnp.trace(self.YY)

    @classmethod
    def from_data(cls, X: jax.Array, Y: jax.Array, query_mask: np.ndarray) -> SufficientStats:
        """Statistics of X: (P, T, d) and Y: (P, T, d_out); rows outside ``query_mask`` (T,) are ignored."""
        qm = np.asarray(query_mask)
        if qm.dtype != bool or qm.shape != np.shape(X)[1:2]:
            raise ValueError(
                f"query_mask of shape {qm.shape} and dtype {qm.dtype}: expected a bool mask of shape "
                f"{np.shape(X)[1:2]}, one entry per position of X"
            )
        return cls(*_query_statistics_fused(X, Y, qm), jnp.asarray(X.shape[0] * int(qm.sum()), jnp.float64))


def _query_statistics(X, Y, qm, *, apart: bool = False) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Sxx, Syx and Y^T Y of :meth:`SufficientStats.from_data`, the rows outside the (T,) bool ``qm`` zeroed;
    ``apart``: as :func:`_statistics`."""
    Y = jnp.asarray(Y, jnp.float64) * jnp.asarray(qm, jnp.float64)[None, :, None]
    Sxx, Sxy, _ = _statistics(jnp.asarray(X, jnp.float64), Y, apart=apart)
    Yf = Y.reshape(-1, Y.shape[-1])
    return Sxx, jnp.swapaxes(Sxy, 0, 1), _apart(_apart(Yf.T, apart) @ Yf, apart)


def _apart(x: jax.Array, apart: bool) -> jax.Array:
    return jax.lax.optimization_barrier(x) if apart else x


def _statistics(X, Y, *, apart: bool = False) -> tuple[jax.Array, jax.Array, jax.Array]:
    """:func:`sufficient_statistics`. ``apart``: the transpose and the products each behind an optimisation
    barrier, so that one compiled program rounds the products as the eager operations do (XLA would fold the
    transpose into the product, which sums in another order)."""
    P, T, d = X.shape
    d_out = Y.shape[-1]
    Xf = X.reshape(P, T * d)
    XfT = _apart(Xf.T, apart)
    # explicit sizes, not -1: reshape cannot infer an axis when P = 0 (the no-data posterior)
    Sxx = _apart(XfT @ Xf, apart).reshape(T, d, T, d).transpose(0, 2, 1, 3)
    Sxy = _apart(XfT @ Y.reshape(P, T * d_out), apart).reshape(T, d, T, d_out).transpose(0, 2, 1, 3)
    return Sxx, Sxy, jnp.sum(Y**2)


_query_statistics_fused = fused(_query_statistics, functools.partial(_query_statistics, apart=True))
_statistics_fused = fused(_statistics, functools.partial(_statistics, apart=True))


def _real_array(name: str, value, shape: tuple) -> jax.Array:
    """``value`` checked by :func:`check_real_array`, as float64. A traced value (inside jit, grad or vmap) is
    checked for its shape and dtype only."""
    return jnp.asarray(check_real_array(name, value, shape), jnp.float64)


def sufficient_statistics(X: jax.Array, Y: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Sxx[s, s'] = sum_mu x_s x_s'^T: (T, T, d, d); Sxy[s, t] = sum_mu x_s y_t^T: (T, T, d, d_out);
    yy = |Y|^2. X: (P, T, d), Y: (P, T, d_out): arrays of real numbers (computed in float64), finite, with the same
    P and T; ValueError naming X or Y otherwise (inside a trace only their shapes and dtypes are checked)."""
    X = _real_array("X", X, (None, None, None))
    Y = _real_array("Y", Y, (X.shape[0], X.shape[1], None))
    return _statistics_fused(X, Y)
