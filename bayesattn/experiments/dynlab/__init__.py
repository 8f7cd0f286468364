"""The training-dynamics laboratory (docs/results/dynlab.md): clustering heads on sparse modular addition (Odonnat,
Bouaziz, Cabannes), focus-dilution cycles on Markov data, and their equilibrium counterpart (the copy task's
posterior-mean attention entropy against P, by NUTS and by the theory).

A run writes, under its output folder::

    points/train/*.json         one file per (setting, seed): curves, spikes or stages, curvature, sandbox frames
    points/equilibrium/*.json   one file per (T, P): NUTS's posterior-mean attention entropy
    points/theory/*.json        one file per T: the theory's entropy over P
    points/langevin/*.json      one file per seed: the posterior's Langevin dynamics (entropy, m) at every P
    summary.json                per setting: success, spikes per run, cycles per run, divergences
    artifacts/focus-*.npz       a focus-dilution block's state while it trains (resumable; removed when it ends)

Seeds train ``seeds_per_program`` at a time in one vmapped program, in aligned blocks, so that a seed's result
does not depend on which other seeds were asked for.
"""

from __future__ import annotations

from ..contract import Experiment
from .config import ClusterConfig, DynlabConfig, FDConfig, geometric_pi

__all__ = ["ClusterConfig", "Dynlab", "DynlabConfig", "FDConfig", "geometric_pi"]


class Dynlab(Experiment):
    name = "dynlab"
    description = "training dynamics: clustering heads (loss spikes) and focus-dilution cycles, with many seeds"
    Config = DynlabConfig
    default_config = "clustering_head"
    artifacts = None  # set by the runner: where a focus-dilution block keeps its state while it trains (resumable)

    def points(self, cfg: DynlabConfig) -> dict[str, list[dict]]:
        from .summary import label

        out: dict[str, list[dict]] = {"train": []}
        seen = []
        opts = cfg.optimizers if cfg.experiment == "focus_dilution" else ["adam"]
        for setting in cfg.settings:
            for o in opts:
                c = cfg.setting_config(setting, o)
                d = c.point_dict()
                if d in seen:
                    continue  # a setting that fixes its optimizer appears once
                seen.append(d)
                base = {
                    "experiment": cfg.experiment,
                    "label": label(c),
                    "config": d,
                    "seeds_per_program": cfg.seeds_per_program,
                }
                if cfg.experiment == "clustering_head":
                    base.update({k: v for k, v in cfg.options.point_dict().items() if k != "sandbox_seeds"})
                for i in range(cfg.seeds):
                    pt = {**base, "seed": cfg.seed + i}
                    if cfg.experiment == "clustering_head":
                        pt["sandbox"] = i < cfg.options.sandbox_seeds
                    out["train"].append(pt)
        eq = cfg.equilibrium
        if eq is not None:
            flat = {"d": eq.d, **eq.prior.model_dump(), **eq.mcmc.model_dump()}
            out["equilibrium"] = [
                {"method": "equilibrium", "P": P, **flat, "T": T, "seed": cfg.seed} for T in eq.Ts for P in eq.P
            ]
            out["theory"] = [
                {"method": "entropy_theory", "P": list(eq.P), "T": T, "d": eq.d, **eq.prior.model_dump()} for T in eq.Ts
            ]
        lg = cfg.langevin
        if lg is not None:
            flat = {k: v for k, v in lg.model_dump().items() if k not in ("prior", "seeds")}
            out["langevin"] = [
                {"method": "langevin", **flat, **lg.prior.model_dump(), "seed": cfg.seed + i} for i in range(lg.seeds)
            ]
        return out

    def compute(self, point: dict) -> dict:
        if "experiment" in point:
            return self.compute_block([point])[0]
        from . import equilibrium

        return {
            "equilibrium": equilibrium.equilibrium_point,
            "entropy_theory": equilibrium.theory_point,
            "langevin": equilibrium.langevin_point,
        }[point["method"]](point)

    def compute_block(self, points: list[dict]) -> list[dict]:
        if points[0]["experiment"] == "clustering_head":
            from .clustering_head import run_block

            return run_block(points, progress=self.progress)
        from .focus_dilution import run_block

        return run_block(points, progress=self.progress, artifacts=self.artifacts)

    def batch(self, config: DynlabConfig, part: str):
        if part != "train":
            return None
        from ..._batching import Batch

        return Batch(key=_block_key, many=self.compute_block, size=config.seeds_per_program)

    def summarize(self, config, records):
        from .summary import summarize

        return summarize(config, records)

    def describe(self, summary: dict) -> list[str]:
        from .summary import describe

        return describe(summary)

    def figures(self, folder):
        from .figures import draw_all

        return draw_all(folder)

    def part_figures(self, folder, part):
        """The training figures as soon as the training part is done (before the equilibrium's MCMC)."""
        from .figures import draw_all

        return draw_all(folder) if part == "train" else []


def _block_key(point: dict) -> str:
    """Points of one setting and one aligned block of seeds are computed together."""
    import json

    rest = {k: v for k, v in point.items() if k not in ("seed", "sandbox")}
    return json.dumps(rest, sort_keys=True) + f"#{point['seed'] // point['seeds_per_program']}"
