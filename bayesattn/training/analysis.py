"""Training compared across P and with the theory: finals, onsets, curves and emergence steps (plain data)."""

from __future__ import annotations

import warnings

import jax
import numpy as np

from .._validate import brief, check_keywords, check_nonnegative, keyword_only
from ..bayes.posterior import Prior
from ..models.attention import AttentionName, attention_kind
from ..tasks import Task
from .loop import train_sweep
from .results import SweepResult


def _phase_curve_dict(phase_curve) -> dict:
    if phase_curve is None:
        return {}
    if isinstance(phase_curve, dict):
        return phase_curve
    if hasattr(phase_curve, "to_dict"):
        return phase_curve.to_dict()
    raise ValueError(
        f"phase_curve={brief(phase_curve)}: expected a ba.theory.PhaseCurve, its dict (to_dict()), or None"
    )


def final_vs_P(
    sweep_small: SweepResult,
    sweep_hot: SweepResult | None = None,
    phase_curve=None,
    *,
    key: str | None = None,
    threshold: float | None = None,
    min_q: float | None = None,
) -> dict:
    """Final order parameter vs P for Adam from small (and hot) init, next to the theory's phase curve.

    key: "m" (softmax default) or "u" (linear default). threshold: the order parameter above which a run
    "has found the copy head" (default: 2/T for m, 0.5 for u). min_q: a run also needs q > min_q (default
    1e-4 for linear, 0 for softmax): a collapsed linear attention (L -> 0, the trivial minimum of J below
    its instability) has an arbitrary cosine u. phase_curve: a ``ba.theory.PhaseCurve`` or
    its dict (``branches``, ``transition`` {"order", "P_c", "spinodals"}) or None. The theory's reference
    points are reported as "binodal" (first order) or "P_c" (second order; ``P_c_exact`` if P_c is off the
    grid) and "spinodal_lower" / "spinodal_upper".

    Returns plain data: P, per-seed finals, mean / std / min / max across seeds, ``onset_small`` (smallest P at
    which every seed from small init is above threshold; ``onset_small_any``: at least one seed),
    ``onset_hot`` (smallest P at which every hot seed stays above threshold), the theory's P_c and spinodals,
    and, if the theory has them, which of binodal / spinodals the small-init onset is closest to (in log P).
    """
    for name, sw in (("sweep_small", sweep_small), ("sweep_hot", sweep_hot)):
        if not isinstance(sw, SweepResult) and not (name == "sweep_hot" and sw is None):
            raise ValueError(f"{name}={type(sw).__name__}: expected a SweepResult (ba.train_sweep)")
    kind = attention_kind(sweep_small.config.get("attention", "softmax"))
    key = key or kind.order_parameter
    if key not in sweep_small.final_order_parameters:
        raise ValueError(f"key={key!r}: expected one of {sorted(sweep_small.final_order_parameters)}")
    if sweep_hot is not None and any(
        sweep_hot.config.get(k) != sweep_small.config.get(k) for k in ("attention", "task", "prior")
    ):
        raise ValueError("sweep_hot: expected a sweep of sweep_small's attention, task and prior (from another init)")
    T = sweep_small.config["task"]["T"]
    threshold = (2.0 / T if key == "m" else 0.5) if threshold is None else check_nonnegative("threshold", threshold)
    # an unnormalised map collapses to L -> 0, where its cosine u is arbitrary
    min_q = (0.0 if kind.normalised else 1e-4) if min_q is None else check_nonnegative("min_q", min_q)

    def summary(sw):
        x = sw.final_order_parameters[key]
        above = (x > threshold) & (sw.final_order_parameters["q"] > min_q)
        P = sw.P_values
        all_idx = np.flatnonzero(above.all(axis=1))
        any_idx = np.flatnonzero(above.any(axis=1))
        return {
            "P": P,
            "final": x,
            "mean": x.mean(1),
            "std": x.std(1),
            "min": x.min(1),
            "max": x.max(1),
            "final_m": sw.final_order_parameters["m"],
            "final_q": sw.final_order_parameters["q"],
            "frac_above": above.mean(1),
            "onset_all": float(P[all_idx[0]]) if all_idx.size else None,
            "onset_any": float(P[any_idx[0]]) if any_idx.size else None,
            "failures": sw.failures,
        }

    out = {"key": key, "threshold": threshold, "min_q": min_q, "attention": kind.name, "small": summary(sweep_small)}
    out["onset_small"] = out["small"]["onset_all"]
    out["onset_small_any"] = out["small"]["onset_any"]
    if sweep_hot is not None:
        out["hot"] = summary(sweep_hot)
        hot = (sweep_hot.final_order_parameters[key] > threshold) & (sweep_hot.final_order_parameters["q"] > min_q)
        # hot runs stay copying down to the lower stability edge: smallest P above which all hot seeds copy
        stays = np.flatnonzero(np.array([hot[i:].all() for i in range(hot.shape[0])]))
        out["onset_hot"] = float(sweep_hot.P_values[stays[0]]) if stays.size else None
    pc = _phase_curve_dict(phase_curve)
    out["theory"] = pc
    trans = pc.get("transition") or {}
    refs = {}
    Pc = trans.get("P_c") if trans.get("P_c") is not None else trans.get("P_c_exact")
    if Pc is not None:
        refs["binodal" if trans.get("order") == "first" else "P_c"] = float(Pc)
    spin = [s for s in (trans.get("spinodals") or []) if s is not None and np.isfinite(s)]
    for name, s in zip(("spinodal_lower", "spinodal_upper"), sorted(spin)):
        refs[name] = float(s)  # lower: the copy branch appears; upper: the uniform branch disappears
    out["theory_P"] = refs
    if refs and out["onset_small"] is not None:
        dist = {k: abs(np.log(out["onset_small"] / v)) for k, v in refs.items()}
        out["onset_small_closest"] = min(dist, key=dist.get)
        out["onset_small_log_distance"] = dist
    return out


def training_curves(
    task: Task, prior: Prior, attention: AttentionName, P_values, key: jax.Array, *, seeds=(0,), **train_kwargs
) -> dict:
    """Training curves at a few P (e.g. below, near and above the transition): for each P and seed the
    history of step, loss, test_loss, objective, m, q, u and the emergence of m; ``train_kwargs``: the options of
    :func:`~bayesattn.train_sweep`."""
    check_keywords("training_curves", train_kwargs, ("seeds", *keyword_only(train_sweep)))
    sw = train_sweep(task, prior, attention, P_values, seeds, key, **train_kwargs)
    em = sw.emergence()
    curves = {k: v for k, v in sw.history.items() if k != "L"}
    return {
        "P": sw.P_values,
        "seeds": sw.seeds,
        "curves": curves,
        "emergence_step": em["step"],
        "sharpness": em["sharpness"],
        "rise": em["rise"],
        "failures": sw.failures,
        "config": sw.config,
    }


def emergence_vs_P(sweep: SweepResult, key: str = "m") -> dict:
    """Emergence step and sharpness against P: per-seed arrays (nP, nS) and the median over seeds that rose."""
    if not isinstance(sweep, SweepResult):
        raise ValueError(f"sweep={brief(sweep)}: expected a SweepResult (ba.train_sweep)")
    em = sweep.emergence(key)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN rows: no seed rose at that P
        med_step = np.nanmedian(em["step"], axis=1)
        med_sharp = np.nanmedian(em["sharpness"], axis=1)
    return {
        "P": sweep.P_values,
        "step": em["step"],
        "sharpness": em["sharpness"],
        "rise": em["rise"],
        "median_step": med_step,
        "median_sharpness": med_sharp,
        "frac_emerged": np.mean(np.isfinite(em["step"]), axis=1),
    }
