"""Plateau lengths: when, in training time, a copy head appears. Gradient descent (gradient flow in time
lr x steps) and Adam, from a small init, on the marginal objective (and, as options, gradient flow itself integrated by
diffrax on the marginal or the joint objective: methods "flow" and "flow_joint"), against P near the transition; beside them
the zero-temperature theory's prediction (:func:`bayesattn.theory.plateau_curve`: the reduced one-dimensional
flow, its saddle-node bottleneck law (P - P_s)^(-1/2) for softmax and its critical slowing down 1 / (P - P_c) for
linear attention). docs/results/plateau.md.

A run writes one point file per (attention, T) under ``points/theory/`` and one per (attention, T, method, seed)
under ``points/runs/`` (every P of the case in one program; a seed's data and init come from its seed alone),
``summary.json`` (per case and method: median plateau with its 95% bootstrap interval per P, the fitted exponent
with a bootstrap interval over seeds, the theory's) and ``figures/plateau.{png,pdf}``.
"""

from __future__ import annotations

from ..contract import Experiment
from .config import DIFFRAX_METHODS, FLOW_METHODS, PlateauConfig

__all__ = ["Plateau", "PlateauConfig"]


class Plateau(Experiment):
    name = "plateau"
    description = "plateau lengths of gradient descent and Adam against P, beside the zero-temperature theory"
    Config = PlateauConfig
    default_config = "plateau"

    def check(self, config: PlateauConfig) -> None:
        import importlib.util

        wants = [m for m in config.methods if m in DIFFRAX_METHODS]
        if wants and importlib.util.find_spec("diffrax") is None:
            raise ValueError(f"methods={wants}: the gradient flow needs diffrax (pip install 'bayesattn[dynamics]')")

    def points(self, config: PlateauConfig) -> dict[str, list[dict]]:
        # each point holds what its result reads: the theory not the optimisers' settings, a gd run not Adam's
        common = {"d": config.d, "prior": config.prior.model_dump(), "init_scale": config.init_scale}
        theory, runs = [], []
        for case in config.cases:
            where = {"attention": case.attention, "T": case.T, "P_over": case.P_over, "P_ref": case.P_ref}
            theory.append({"kind": "theory", **common, "case": where, "theory_points": config.theory_points})
            for method in config.methods:
                flow = method in FLOW_METHODS
                lr, steps = (case.gd_lr, case.gd_steps) if flow else (case.adam_lr, case.adam_steps)
                extra = {"temperature": config.sgld_temperature} if method == "sgld" else {}
                for seed in range(config.seeds):
                    run = {"method": method, "lr": lr, "steps": steps, "records": case.records, "seed": seed, **extra}
                    runs.append({"kind": "run", **common, "case": where, **run})
        return {"theory": theory, "runs": runs}

    def compute(self, point: dict) -> dict:
        from .compute import compute_point

        return compute_point(point, progress=self.progress)

    def summarize(self, config, records):
        from .summary import summarize

        return summarize(records)

    def describe(self, summary: dict) -> list[str]:
        from .summary import describe

        return describe(summary)

    def figures(self, folder):
        from .figures import draw_all

        return draw_all(folder)
