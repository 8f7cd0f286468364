"""Sparse attention patterns (docs/results/sparse.md): random emergence of sparse patterns in trained one-layer
transformers and causal MLP-Mixers, and the Bayesian learnability threshold of the regression surrogate.

A run writes, under its output folder::

    points/grid/*.json      one file per (S, s, seed): the transformer's training run
    points/heads/*.json     one file per (H, seed) at fixed width
    points/head_dim/*.json  one file per (head size, seed) at fixed H
    points/mixer/*.json     one file per (model, learning rate, s, seed) at fixed S
    points/bayes/*.json     one file per (S, s, P, init): NUTS on the closed-form posterior of the surrogate
    points/theory/*.json    one file per (S, s): the s-source order-parameter theory over P
    summary.json            per training setting: solved seeds (95% Wilson interval), t* (median with its 95%
                            bootstrap interval, unsolved seeds censored at the budget; range), plateau, IoU;
                            comparisons (heads, head size, Mixer vs transformer) with one-sided p-values; P_c(S, s)

Seeds train ``seeds_per_program`` at a time in one vmapped program, in aligned blocks (seed i in block
i // seeds_per_program), so a seed's result does not depend on which other seeds were asked for; each seed
stops on its own (``stop_after_solved`` steps after its own t*), and by default draws its own map A
(``train.A = "per_seed"``; ``"fixed"``: one map for all seeds, from ``train.task_seed``).
"""

from __future__ import annotations

from ..contract import Experiment, draw_figures
from .config import PARTS, SparseConfig, SparseTrainConfig

__all__ = ["PARTS", "Sparse", "SparseConfig", "SparseTrainConfig"]

TRAIN_PARTS = ("grid", "heads", "head_dim", "mixer")


class Sparse(Experiment):
    name = "sparse"
    description = "sparse attention patterns: emergence over seeds, heads, head size, Mixer; the Bayesian P_c(S, s)"
    Config = SparseConfig
    default_config = "sparse_emergence"

    def points(self, cfg: SparseConfig) -> dict[str, list[dict]]:
        def runs(part, **changes):
            train = cfg.train_config(**changes).config()
            return [
                {"part": part, "train": train, "seed": i, "key": cfg.seed, "seeds_per_program": cfg.seeds_per_program}
                for i in range(cfg.seeds)
            ]

        out: dict[str, list[dict]] = {}
        if "grid" in cfg.parts:
            out["grid"] = [p for S, s in cfg.grid for p in runs("grid", S=S, s=s)]
        if "heads" in cfg.parts:
            out["heads"] = [p for H in cfg.heads for p in runs("heads", S=cfg.heads_S, s=cfg.heads_s, heads=H)]
        if "head_dim" in cfg.parts:
            out["head_dim"] = [
                p
                for hd in cfg.head_dims
                for p in runs("head_dim", S=cfg.heads_S, s=cfg.heads_s, heads=cfg.head_dim_heads, head_dim=hd)
            ]
        if "mixer" in cfg.parts:
            out["mixer"] = [
                p
                for m in ("transformer", "mixer")
                for lr in cfg.lrs(m)
                for s in cfg.mixer_s
                for p in runs("mixer", S=cfg.mixer_S, s=s, model=m, lr=lr)
            ]
        b = {k: v for k, v in cfg.bayes.model_dump().items() if k not in ("grid", "P", "inits")}
        if "bayes" in cfg.parts:
            out["bayes"] = [
                {
                    "part": "bayes",
                    "S": S,
                    "s": s,
                    "P": int(P),
                    "init": init,
                    "bayes": b,
                    "task_seed": 0,
                    "key": cfg.seed * 1000003 + int(P),
                }
                for S, s in cfg.bayes.grid
                for P in cfg.bayes.P
                for init in cfg.bayes.inits
            ]
        if "theory" in cfg.parts:  # the theory needs no sampler settings
            th = {k: v for k, v in b.items() if k != "mcmc"}
            out["theory"] = [
                {"part": "theory", "S": S, "s": s, "P": [int(p) for p in cfg.bayes.P], "bayes": th, "key": cfg.seed}
                for S, s in cfg.bayes.grid
            ]

        return out

    def compute(self, point: dict) -> dict:
        from . import compute

        if point["part"] in TRAIN_PARTS:
            return compute.train_block([point], progress=self.progress)[0]
        return {"bayes": compute.bayes_point, "theory": compute.theory_point}[point["part"]](point)

    def compute_block(self, points: list[dict]) -> list[dict]:
        from .compute import train_block

        return train_block(points, progress=self.progress)

    def batch(self, config: SparseConfig, part: str):
        if part not in TRAIN_PARTS:
            return None
        from ..._batching import Batch

        return Batch(key=_block_key, many=self.compute_block, size=config.seeds_per_program)

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


def _block_key(point: dict) -> str:
    """Points of one training config and one aligned block of seeds are computed together."""
    import json

    rest = {k: v for k, v in point.items() if k != "seed"}
    return json.dumps(rest, sort_keys=True) + f"#{point['seed'] // point['seeds_per_program']}"
