"""Focus-dilution stages read again from a run's saved curves (no training): the number of cycles as a function
of the detection threshold, and per seed the timeline of the stages the paper names.

The rules (:func:`bayesattn.diagnostics.dynamics.detect_stages`, on the config's ``stage_signal``, by default the
entropy of the attention mass over token values):

- **focus**: the signal falls by at least ``min_drop`` nats (a zig-zag filter: smaller wiggles are merged);
- **dilution**: the signal rises by at least ``min_drop`` nats;
- **condensation**: before the first focus or dilution, the embedding's effective rank is below ``rank_one``;
- **restart**: a focus that follows a dilution. A **cycle** is a focus followed by a dilution.

A cycle count at one threshold says little when the curve's swings are near that threshold; the count against
the threshold shows where it is stable.
"""

from __future__ import annotations

import numpy as np

from ... import stats
from ...diagnostics.dynamics import detect_stages

THRESHOLDS = (0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.05, 0.075, 0.1, 0.15, 0.2)  # min_drop, nats

RULES = {
    "focus": "the entropy signal falls by >= min_drop nats (zig-zag filter)",
    "dilution": "the entropy signal rises by >= min_drop nats",
    "condensation": "effective rank of E < rank_one before the first focus or dilution",
    "restart": "a focus that follows a dilution",
}


def healthy_curves(run: dict, signal: str) -> tuple[np.ndarray, np.ndarray] | None:
    """(signal, effective rank of E) of one seed up to its divergence; None for a diverged seed."""
    if run["diverged_at_step"] is not None:
        return None
    c = run["curves"]
    return np.asarray(c[signal], float), np.asarray(c["rank_E"], float)


def cycles_vs_threshold(runs: list[dict], config: dict, thresholds=THRESHOLDS) -> dict:
    """Cycles per healthy seed at every detection threshold ``min_drop`` in ``thresholds``, with the other rules
    of ``config`` (``stage_signal``, ``rank_one``). Returns {"min_drop": [...], "per_seed": [[cycles at each
    threshold] per seed], "seeds": [...], "mean": [...], "ci": [...] (bootstrap, :func:`bayesattn.stats.mean_interval`),
    "config_min_drop": the run's own threshold}."""
    signal, rank_one = config.get("stage_signal", "value_entropy"), config.get("rank_one", 1.3)
    per_seed, seeds = [], []
    for run in runs:
        curves = healthy_curves(run, signal)
        if curves is None:
            continue
        per_seed.append([detect_stages(*curves, rank_one=rank_one, min_drop=th)["cycles"] for th in thresholds])
        seeds.append(run["seed"])
    cols = np.asarray(per_seed, float).reshape(len(per_seed), len(thresholds))
    intervals = [stats.mean_interval(cols[:, j]) for j in range(len(thresholds))]
    return {
        "min_drop": list(thresholds),
        "per_seed": per_seed,
        "seeds": seeds,
        "mean": [iv["mean"] for iv in intervals],
        "ci": [iv["ci"] for iv in intervals],
        "config_min_drop": config.get("min_drop", 0.05),
    }


def timeline(run: dict) -> list[tuple[str, int, int]]:
    """One seed's stages as (stage, first step, last step), in order; a restart is ("restart", s, s)."""
    st = run["stage_steps"]
    out = []
    if st["condensation"]:
        out.append(("condensation", *st["condensation"]))
    out += [(p["stage"], p["start"], p["end"]) for p in st["phases"]]
    out += [("restart", r, r) for r in st["restarts"]]
    return sorted(out, key=lambda x: (x[1], x[0] != "restart"))
