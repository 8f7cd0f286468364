"""A toy experiment of the contract for the fault tests: cheap points (a few ms each, or ``sleep`` seconds), one
part, a summary and one figure file, so that a fault can be injected at any moment of a run."""

from __future__ import annotations

import time
from pathlib import Path

from bayesattn.experiments.config import ExperimentConfig, NonNegativeInt, PositiveInt
from bayesattn.experiments.contract import Experiment


class ToyConfig(ExperimentConfig):
    name: str = "toy"
    n: PositiveInt = 20
    sleep: float = 0.0
    seed: NonNegativeInt = 0


class Toy(Experiment):
    name = "toy"
    description = "a toy experiment for fault injection"
    Config = ToyConfig
    default_config = "toy"

    @classmethod
    def configs(cls):
        return {}

    @classmethod
    def load_config(cls, name_or_path=None, sets=()):
        from bayesattn.experiments.config import apply_overrides

        return cls.Config.load(apply_overrides(cls.Config, {}, sets), source="toy config")

    def points(self, config):
        return {"squares": [{"i": i, "seed": config.seed, "sleep": config.sleep} for i in range(config.n)]}

    def compute(self, point):
        time.sleep(point["sleep"])
        return {"square": point["i"] ** 2 + point["seed"], "pad": list(range(50))}

    def summarize(self, config, records):
        return {"total": sum(r["result"]["square"] for r in records["squares"])}

    def describe(self, summary):
        return [f"toy: total {summary['total']}"]

    def figures(self, folder):
        out = Path(folder) / "figures" / "toy.txt"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text("a figure\n")
        return [out]


def register():
    """Make ``bayesattn run toy`` known to this process's command line."""
    from bayesattn.experiments import EXPERIMENTS

    EXPERIMENTS["toy"] = Toy
