"""Developmental trajectories of the circuit screens (docs/results/screens.md): a small transformer trained on in-context
repetition (:class:`~bayesattn.tasks.repeat.RepeatedSequenceTask`), log-spaced checkpoints, every screen on every
checkpoint.

A run writes, under its output folder::

    run/                      the training result (history.npz, result.json, checkpoints/step_*.eqx)
    points/step_<n>.json      one file per checkpoint: both probe batches' screens, the copy losses
    summary.json              config, versions, timings per head, BOS fraction per layer, the induction bump

Resumable: a finished training run is loaded, not redone; finished checkpoints are kept.
"""

from __future__ import annotations

import time
from pathlib import Path

import jax
import numpy as np

from ...diagnostics.ranking import held_from, pr_integral_ranking, precision_at_k, ranking_over_training
from ...diagnostics.screens import CIRCUIT_THRESHOLD, CLASSES, THRESHOLD
from ...files import read_json, write_json_atomic
from .config import TrajectoryConfig
from .tools import copy_losses, probe_batch, screen_transformer


def trajectory_probes(cfg: TrajectoryConfig) -> dict:
    """The two probe batches of a trajectory: ``probe_N`` repeated-pair and repeated-sequence sequences of
    ``probe_T`` tokens (0: T - 1, the last position is never a training query)."""
    kw = {"token_range": (0, cfg.vocab), "context": cfg.T, "baseline": cfg.baseline}
    T = cfg.probe_T or cfg.T - 1
    return {
        "repeated_pair": probe_batch(
            "repeated_pair", cfg.probe_N, T, cfg.vocab, cfg.probe_seed, pair_range=tuple(cfg.pair_range), **kw
        ),
        "repeated_sequence": probe_batch("repeated_sequence", cfg.probe_N, T, cfg.vocab, cfg.probe_seed, **kw),
    }


def train(cfg: TrajectoryConfig, seed: int, artifacts: Path | None = None):
    """(the training run, its wall time in seconds); loaded from ``artifacts/run`` when a run saved it there."""
    from ...training.fitting import fit
    from ...training.results import FitResult

    d = artifacts / "run" if artifacts is not None else None
    if d is not None and (d / "result.json").exists():
        wall = read_json(d / "train_wall.json")["train_wall_s"] if (d / "train_wall.json").exists() else None
        return FitResult.load(d), wall
    t0 = time.perf_counter()
    res = fit(
        cfg.network(),
        cfg.task(),
        jax.random.key(seed),
        loss="xent",
        lr=cfg.lr,
        steps=cfg.steps,
        batch_size=cfg.batch_size,
        test=None,
        probe_size=64,
        record_every=record_every(cfg),
        log_records=20,
        checkpoints=cfg.checkpoints,
        seed=seed,
    )
    wall = time.perf_counter() - t0
    if d is not None:
        res.save(d)
        write_json_atomic(d / "train_wall.json", {"train_wall_s": wall})
    return res, wall


def record_every(cfg: TrajectoryConfig) -> int:
    return max(1, cfg.steps // 60)


def screen_point(net, step: int, probes: dict) -> dict:
    out = {"step": int(step)}
    for kind, batch in probes.items():
        res, nll = screen_transformer(net, batch)
        rec = {
            "selectivity": {c: v.tolist() for c, v in res.selectivity.items()},
            "attention": {c: v.tolist() for c, v in res.attention.items()},
            "pr": res.pr.tolist(),
            "detection": {k: v.tolist() for k, v in res.detection.items()},
            "loss": float(nll.mean()),
        }
        if kind == "repeated_sequence":
            rec["copy_loss"] = copy_losses(nll, batch)
        out[kind] = rec
    return out


def trajectory_point(point: dict, artifacts: Path | None = None, progress: bool = False) -> dict:
    """Train the transformer of ``point["trajectory"]`` (seed ``point["seed"]``) and screen every checkpoint on
    both probe batches. The training run (checkpoints included) is saved under ``artifacts`` when given (and
    loaded from there by a rerun), so that ``bayesattn screen`` can read the checkpoints again."""
    cfg = TrajectoryConfig.load(point["trajectory"], source="point")
    probes = trajectory_probes(cfg)  # before training: a probe that cannot be built wastes no run
    res, train_wall = train(cfg, point["seed"], artifacts)
    t1 = time.perf_counter()
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(res.checkpoints), desc="screening checkpoints", unit="ckpt", leave=False)
    checkpoints = []
    for step, net in res.checkpoints:
        checkpoints.append(screen_point(net, step, probes))
        if bar:
            bar.update(1)
    if bar:
        bar.close()
    hist = {k: np.asarray(v).tolist() for k, v in res.history.items() if k in ("step", "loss")}
    return {
        "history": hist,
        "train_wall_s": train_wall,
        "screen_wall_s": time.perf_counter() - t1,
        "probes": {k: b.config for k, b in probes.items()},
        "checkpoints": checkpoints,
        "record_every": record_every(cfg),
    }


# ------------------------------------------------------------------------------------------- the summary
def _first(steps, ok):
    i = np.flatnonzero(ok)
    return None if i.size == 0 else int(steps[i[0]])


def pr_rise_step(steps, pr) -> int | None:
    """First checkpoint after the PR's minimum at which it has climbed half-way from that minimum to its later
    maximum (None when it never climbs)."""
    pr = np.asarray(pr, dtype=float)
    k = int(np.argmin(pr))
    top = pr[k:].max()
    if top <= pr[k]:
        return None
    return _first(np.asarray(steps)[k:], pr[k:] >= pr[k] + 0.5 * (top - pr[k]))


def pr_ranking(steps, pr, sel) -> dict:
    """The paper's PR-integral ranking (and PR spread, for comparison) of the heads over the whole run: the heads
    in order with their integral, the elbow, precision-at-k against the final checkpoint's classified heads; and,
    checkpoint by checkpoint from the PR up to that checkpoint, whether the top heads are exactly the final
    induction heads (induction selectivity >= 30x at the last checkpoint). Empty with fewer than two checkpoints."""
    if len(steps) < 2:
        return {}
    ranked = pr_integral_ranking(pr, steps)
    order = ranked["order"]
    best = np.stack([sel[c][-1] for c in CLASSES]).max(axis=0)  # (L, H) best selectivity at the end
    classified = [tuple(map(int, x)) for x in np.argwhere(best >= THRESHOLD)]
    induction = [tuple(map(int, x)) for x in np.argwhere(sel["induction"][-1] >= THRESHOLD)]
    out = {
        **{k: ranked[k] for k in ("order", "integral", "elbow_k")},
        "precision_at_k": precision_at_k(order, classified, range(1, len(order) + 1)),
        "classified": [list(h) for h in classified],
        "induction_heads": [list(h) for h in induction],
    }
    if induction:
        first = [_first(steps, sel["induction"][:, l, h] >= THRESHOLD) for l, h in induction]
        out["induction_crossing_steps"] = first
        out["over_training"] = {sig: ranking_over_training(pr, steps, induction, sig) for sig in ("integral", "spread")}
    return out


def circuit_convergence(steps, induction, threshold: float = CIRCUIT_THRESHOLD) -> dict:
    """When the screen settles on its final set of induction heads: ``heads``, the [layer, head] pairs at
    induction selectivity >= ``threshold`` (default 50x, the circuit: :data:`CIRCUIT_THRESHOLD`) at the last
    checkpoint, and ``from_step``, the first checkpoint from which the heads at or above it are exactly those at
    every later checkpoint (None when the final set is empty). induction: (K, layers, heads) selectivities over
    the checkpoints ``steps``."""
    at = np.asarray(induction) >= threshold  # (K, L, H)
    final = at[-1]
    if not final.any():
        return {"heads": [], "from_step": None}
    return {"heads": np.argwhere(final).tolist(), "from_step": held_from(steps, (at == final).all(axis=(1, 2)))}


def summarize(points: list, history: dict, every: int = 1) -> dict:
    """Per head: its final classes (repeated-pair screen at 30x), the first checkpoint crossing the threshold
    of each, its PR half-rise checkpoint; per layer: BOS fraction over checkpoints; the induction bump: the
    steepest loss drop vs the first induction-circuit head (50x) and the first previous-token head."""
    points = sorted(points, key=lambda p: p["step"])
    steps = np.array([p["step"] for p in points])
    pair = [p["repeated_pair"] for p in points]
    sel = {c: np.array([p["selectivity"][c] for p in pair]) for c in CLASSES}  # (K, L, H)
    pr = np.array([p["pr"] for p in pair])
    K, L, H = pr.shape
    heads = []
    for layer in range(L):
        for head in range(H):
            final = [c for c in CLASSES if sel[c][-1, layer, head] >= THRESHOLD]
            crossing = {c: _first(steps, sel[c][:, layer, head] >= THRESHOLD) for c in final}
            rise = pr_rise_step(steps, pr[:, layer, head])
            heads.append(
                {
                    "layer": layer,
                    "head": head,
                    "classes": final,
                    "crossing_step": crossing,
                    "pr_rise_step": rise,
                    "pr": pr[:, layer, head].tolist(),
                    "pr_at_or_before": {
                        c: (rise is not None and s is not None and rise <= s) for c, s in crossing.items()
                    },
                }
            )
    bos = (sel["bos"] >= THRESHOLD).mean(axis=2)  # (K, L)
    hsteps = np.asarray(history["step"])
    loss = np.asarray(history["loss"])
    regular = (hsteps % every == 0) | (hsteps == hsteps[-1])  # the evenly spaced records, not the log-spaced ones
    hsteps, loss = hsteps[regular], loss[regular]
    i = int(np.argmin(np.diff(loss)))  # the largest drop between consecutive evenly spaced records
    ind_any = (sel["induction"] >= CIRCUIT_THRESHOLD).any(axis=2)  # (K, L)
    prev_any = (sel["previous_token"] >= THRESHOLD).any(axis=2)
    seq = [p["repeated_sequence"] for p in points]
    return {
        "steps": steps.tolist(),
        "heads": heads,
        "circuit": circuit_convergence(steps, sel["induction"]),
        "induction_class": circuit_convergence(steps, sel["induction"], THRESHOLD),
        "induction_final_max": float(sel["induction"][-1].max()),  # the strongest head's at the last checkpoint
        "ranking": pr_ranking(steps, pr, sel),
        "bos_fraction": bos.tolist(),
        "copy_loss": [p["copy_loss"] for p in seq],
        "induction_bump": {
            "steepest_drop_between": [int(hsteps[i]), int(hsteps[i + 1])],
            "loss_halfway_step": _first(hsteps, loss <= 0.5 * (loss[0] + loss[-1])),
            "loss_before": float(loss[i]),
            "loss_after": float(loss[i + 1]),
            "first_induction_head": {f"layer{l}": _first(steps, ind_any[:, l]) for l in range(L)},
            "first_previous_token_head": {f"layer{l}": _first(steps, prev_any[:, l]) for l in range(L)},
        },
    }
