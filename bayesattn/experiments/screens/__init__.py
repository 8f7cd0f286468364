"""Circuit screens (the spectral-probe-circuits setting; docs/results/screens.md): selectivity per class, participation
ratio and detection scores of every head, along the training of a small transformer (``trajectory``), for the
Bayesian copy head across P (``bayes`` and its ``theory`` line), and for pretrained models (``model``: SmolLM2).

A run writes, under its output folder::

    points/trajectory/*.json   one file per run: the screens of every checkpoint (checkpoints in artifacts/)
    points/bayes/*.json        one file per P: NUTS draws through the screens
    points/theory/*.json       the order-parameter theory's screens over the P range
    points/model/*.json        one file per model (or checkpoint series): one record per head
    summary.json               the induction bump, thresholds in P, the heads' classes
"""

from __future__ import annotations

from ..contract import Experiment, draw_figures
from .config import PARTS, BayesLensConfig, ModelScreen, ScreensConfig, TrajectoryConfig

__all__ = ["PARTS", "BayesLensConfig", "ModelScreen", "Screens", "ScreensConfig", "TrajectoryConfig"]


class Screens(Experiment):
    name = "screens"
    description = "circuit screens: heads over training, the Bayesian copy head across P, pretrained SmolLM2"
    Config = ScreensConfig
    default_config = "screens"
    artifacts = None  # set by the runner: where a trajectory keeps its training run and checkpoints

    def check(self, cfg: ScreensConfig) -> None:
        if "trajectory" in cfg.parts:  # the probes' own checks (pair_range against probe_T), before any training
            from .trajectory import trajectory_probes

            try:
                trajectory_probes(cfg.trajectory)
            except ValueError as e:
                raise ValueError(f"trajectory.{e}") from None

    def points(self, cfg: ScreensConfig) -> dict[str, list[dict]]:
        out: dict[str, list[dict]] = {}
        lens = {k: v for k, v in cfg.bayes.model_dump().items() if k not in ("P", "theory_points")}
        if "trajectory" in cfg.parts:
            traj = cfg.trajectory.model_dump()
            out["trajectory"] = [
                {"part": "trajectory", "trajectory": traj, "seed": cfg.seed + i} for i in range(cfg.seeds)
            ]
        if "bayes" in cfg.parts:
            out["bayes"] = [{"part": "bayes", "bayes": lens, "P": int(P), "seed": cfg.seed} for P in cfg.bayes.P]
        if "theory" in cfg.parts:  # the theory needs the task and the prior only
            out["theory"] = [
                {
                    "part": "theory",
                    "bayes": {k: lens[k] for k in ("T", "d", "tokens", "boundary", "prior")},
                    "P_range": [min(cfg.bayes.P), max(cfg.bayes.P)],
                    "theory_points": cfg.bayes.theory_points,
                }
            ]
        if "model" in cfg.parts:
            out["model"] = [{"part": "model", "model": cfg.model.model_dump()}]
        return out

    def compute(self, point: dict) -> dict:
        part = point["part"]
        if part == "trajectory":
            from ...files import checksum
            from .trajectory import trajectory_point

            where = None if self.artifacts is None else self.artifacts / f"trajectory-{checksum(point)[:12]}"
            return trajectory_point(point, where, progress=self.progress)
        if part == "model":
            from .tools import model_point

            return model_point(point, progress=self.progress)
        from . import bayes

        return {"bayes": bayes.bayes_point, "theory": bayes.theory_point}[part](point)

    def summarize(self, config, records):
        from .summary import summarize

        return summarize(records)

    def describe(self, summary: dict) -> list[str]:
        from .summary import describe

        return describe(summary)

    def figures(self, folder):
        from .figures import PART_FIGURES

        return draw_figures(folder, PART_FIGURES)

    def part_figures(self, folder, part):
        from .figures import PART_FIGURES

        return draw_figures(folder, PART_FIGURES, [part])
