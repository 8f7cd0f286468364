"""The staircase (Yueksel, Alvarez Lucendo & Flammarion; docs/results/staircase.md): stages in the amount of data, from
the exact posterior of H heads on :class:`~bayesattn.MultiLagCopyTask` and the H-head theory; stages in training
time, the paper's minimal model on :class:`~bayesattn.HighOrderMarkovTask`; and the simplified ODE.

A run writes, under its output folder::

    points/mcmc/*.json       one file per (attention, H, ratio, P, init): per-head and label-free lag masses
    points/theory/*.json     one file per (attention, H, ratio, seed): the H-head theory on the MCMC grid
    points/train/*.json      one file per training run and seed: records over steps, stage times
    points/ode/*.json        the ODE trajectory
    artifacts/train-*.npz    a training run's state after its last finished part, while it runs (resumable)
    summary.json             transitions P_k per (attention, H, ratio, init), stage times
"""

from __future__ import annotations

from ..contract import Experiment, draw_figures
from .config import PARTS, StaircaseConfig

__all__ = ["PARTS", "Staircase", "StaircaseConfig"]


class Staircase(Experiment):
    name = "staircase"
    description = "the multi-head staircase: posterior stages in P, the paper's training stages, the ODE"
    Config = StaircaseConfig
    default_config = "staircase"
    artifacts = None  # set by the runner: where a training run keeps its state between parts (resumable)

    def points(self, cfg: StaircaseConfig) -> dict[str, list[dict]]:
        # a point holds only what it depends on, so the same point computed under another grid is reused
        b = {k: v for k, v in cfg.bayes.model_dump().items() if k not in ("heads", "attention", "inits", "P", "seeds")}
        out: dict[str, list[dict]] = {}
        if "mcmc" in cfg.parts:
            out["mcmc"] = [
                {
                    "method": "mcmc",
                    "attention": a,
                    "heads": H,
                    "P": int(P),
                    "init": i,
                    "bayes": {**b, "ratio": float(r)},
                    "seed": cfg.seed + s,
                }
                for s in range(cfg.bayes.seeds)
                for r in cfg.bayes.ratios
                for a in cfg.bayes.attention
                for H in cfg.bayes.heads
                for P in cfg.bayes.P
                for i in cfg.bayes.inits
            ]
        if "theory" in cfg.parts:
            out["theory"] = [
                {
                    "method": "theory",
                    "attention": a,
                    "heads": H,
                    "P_grid": [int(P) for P in cfg.bayes.P],
                    "bayes": {**{k: v for k, v in b.items() if k != "mcmc"}, "ratio": float(r)},  # no sampler
                    "num_samples": cfg.theory.num_samples,
                    "seed": cfg.seed + s,
                }
                for s in range(cfg.theory.seeds)
                for r in cfg.bayes.ratios
                for a in cfg.bayes.attention
                for H in cfg.theory.heads
            ]
        if "train" in cfg.parts:
            runs = {"main": (cfg.train, cfg.train_seeds), **{n: cfg.variant(n) for n in cfg.train_variants}}
            out["train"] = [
                {"method": "train", "variant": name, "train": tc.config(), "seed": cfg.seed + s}
                for name, (tc, seeds) in runs.items()
                if cfg.train_only is None or name in cfg.train_only
                for s in range(seeds)
            ]
        if "ode" in cfg.parts:
            out["ode"] = [{"method": "ode", "ode": cfg.ode.model_dump()}]
        return out

    def compute(self, point: dict) -> dict:
        from . import bayes

        if point["method"] == "train":
            return bayes.train_point(point, progress=self.progress, artifacts=self.artifacts)
        return {"mcmc": bayes.mcmc_point, "theory": bayes.theory_point, "ode": bayes.ode_point}[point["method"]](point)

    def summarize(self, config, records):
        from .summary import summarize

        return summarize(records, config.seed)

    def describe(self, summary: dict) -> list[str]:
        from .summary import describe

        return describe(summary)

    def figures(self, folder):
        from .figures import PART_FIGURES

        return draw_figures(folder, PART_FIGURES)

    def part_figures(self, folder, part):
        from .figures import PART_FIGURES

        return draw_figures(folder, PART_FIGURES, [part])
