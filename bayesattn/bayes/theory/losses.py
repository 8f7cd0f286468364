"""The theory's loss predictions over P (docs/theory.md section 9)."""

from __future__ import annotations

import numpy as np

from ..._json import to_plain
from .causal import row_types
from .common import check_grid, check_prior, covered, covers, prediction_error, scales
from .curves import phase_curve
from .phase_curve import PhaseCurve
from .zero_temperature import mode_curve


def _uniform_rows(task, P, eps) -> list:
    """Softmax's plateau: uniform rows, m = q = the mean over query rows of 1/K_t (1/T cyclic; K_t = t + 1
    causal)."""
    Ks, w = row_types(task)
    u = float(np.sum(w / Ks))
    return np.asarray(prediction_error(u, u, eps)).tolist()


def _zero_attention(task, P, eps) -> list:
    """Linear attention's plateau: L = 0 predicts nothing (error 1)."""
    return np.ones(len(P)).tolist()


# per attention kind: the error where Adam from a small init starts, over P
PLATEAUS = {"softmax": _uniform_rows, "linear": _zero_attention}


def _check_curve(curve, task, prior, attention, P) -> None:
    """ValueError naming ``curve`` unless it is the phase_curve of this task, prior, attention and P grid (a curve of
    another prior or task would give its test errors as this one's)."""
    if not isinstance(curve, PhaseCurve):
        raise ValueError(f"curve={type(curve).__name__}: expected a PhaseCurve (ba.theory.phase_curve) or None")
    if curve.attention != attention:
        raise ValueError(f"curve of attention={curve.attention!r}: expected the phase_curve of attention={attention!r}")
    if "test_error" not in curve.mean:
        raise ValueError(
            "curve has no posterior test error (a mode_curve?): expected the phase_curve (ba.theory.phase_curve) "
            "of the same arguments"
        )
    if len(curve.P) != len(P) or not np.allclose(curve.P, P):
        raise ValueError("curve: expected the phase_curve of the same P_values")
    config = curve.config or {}
    for name, want in (("task", task.config()), ("prior", prior.config())):
        if name not in config:
            raise ValueError(f"curve records no {name} (curve.config has {sorted(config)}): expected a phase_curve")
        have, want = to_plain(config[name]), to_plain(want)
        if have != want:
            diff = sorted(k for k in set(have) | set(want) if have.get(k) != want.get(k))
            raise ValueError(
                f"curve is of another {name}: {diff} differ (curve {[have.get(k) for k in diff]}, "
                f"{name} {[want.get(k) for k in diff]}): expected the phase_curve of the same {name}"
            )


def loss_curve(task, prior, attention, P_values, *, curve=None) -> dict:
    """Predicted errors over P as fractions of the target's variance per query row and output coordinate (the
    mean squared error for Gaussian tokens; for one-hot tokens, of the centred target).

    - ``posterior``: the posterior mean of the test error of the readout's posterior mean at L, which is what
      exact MCMC measures on held-out data (and, to leading order in n, also the training error);
    - ``joint_mode``: the error at the joint mode of (L, V) that Adam converges to when it is on the stable
      branch (Gaussian tokens only: the zero-temperature theory; not for causal softmax);
    - ``plateau``: uniform softmax attention with its fitted readout, 1 - <1/K> + O(eps) (<1/K> = 1/T cyclic, the
      mean of 1/(t + 1) over the query rows causal); L = 0 for linear
      attention (error 1): where Adam from a small init starts.

    ``curve``: the ``phase_curve`` of the same arguments, if already computed; ValueError for one of another task,
    prior, attention or P grid, or a ``mode_curve``.

    Examples
    --------
    >>> import bayesattn as ba
    >>> lc = ba.theory.loss_curve(ba.CopyTask(T=16, d=8), ba.Prior(1, 100, 400), "linear", [400, 1600, 3200])
    >>> [round(v, 2) for v in lc["plateau"]]
    [1.0, 1.0, 1.0]
    """
    attention = covered(task, attention, onehot=True, causal=True)
    prior = check_prior(prior)
    P = check_grid("P_values", P_values)
    if curve is None:
        curve = phase_curve(task, prior, attention, P)
    else:
        _check_curve(curve, task, prior, attention, P)
    _, eps, _ = scales(task, prior, P)
    out = {"P": P.tolist(), "posterior": np.asarray(curve.mean["test_error"]).tolist()}
    out["plateau"] = PLATEAUS[attention](task, P, eps)
    if covers(task, attention):  # what the zero-temperature theory (mode_curve) covers
        mode = mode_curve(task, prior, attention, P, objective="joint")
        out["joint_mode"] = np.asarray(prediction_error(mode.stable["m"], mode.stable["q"], eps)).tolist()
    return out
