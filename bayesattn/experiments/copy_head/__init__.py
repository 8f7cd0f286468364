"""The copy-head phase diagram, the toolkit's main job: where in the number of training sequences P the copy
head appears, from the order-parameter theory, exact-posterior MCMC and Adam, softmax and linear attention side
by side (docs/model.md, docs/theory.md).

A run writes, under its output folder::

    run.json, summary.json       config, transitions per attention and method, MCMC diagnostics, key rules, times
    points/theory/*.json         one file per attention: phase curve, landscapes, planes
    points/mcmc/*.json           one file per (attention, P): data record, cold / hot chains, diagnostics
    points/adam/*.json           one file per (attention, P): data record, Adam from small and hot init
    figures/*.png, *.pdf         drawn from the files above only (``bayesattn figures`` redraws them)
"""

from __future__ import annotations

from ..contract import Experiment
from .config import METHODS, RunConfig

__all__ = ["DEPENDS_ON", "METHODS", "PhaseDiagram", "RunConfig", "build_points"]

# what each method's grid point depends on, besides attention, task and prior (its cache key)
DEPENDS_ON = {"theory": ("theory", "P"), "mcmc": ("mcmc", "seed"), "adam": ("adam", "seed")}


def build_points(cfg: RunConfig) -> dict[str, list[dict]]:
    """The grid points of each requested method. A point carries only what its method depends on (its config
    section, the task, the prior and, for sampling and training, the seed and P), so that its file name, a
    hash of the point, changes exactly when its result would."""
    conf = cfg.to_dict()
    pts: dict[str, list[dict]] = {}
    for method in cfg.methods:
        base = {"method": method, "task": conf["task"], "prior": conf["prior"]}
        base.update({("P_grid" if k == "P" else k): conf[k] for k in DEPENDS_ON[method]})
        # one-hot: the theory's loss prediction and MCMC's held-out error are the centred target's; saying so in the
        # point keeps the files of runs that measured the plain error (and predicted none) from being reused
        if method != "adam" and cfg.task.held_out_target:
            base["held_out"] = cfg.task.held_out_target
        if method == "theory":
            pts[method] = [{**base, "attention": a} for a in cfg.attention]
        else:  # an MCMC point carries its attention's sampler settings (mcmc.by_attention applied)
            per = {a: {"mcmc": cfg.mcmc.effective(a)} if method == "mcmc" else {} for a in cfg.attention}
            # once per seed: the first seed's points are those of a one-seed run, so adding seeds keeps them
            pts[method] = [
                {**base, **per[a], "seed": cfg.seed + i, "attention": a, "P": int(P)}
                for i in range(cfg.seeds)
                for a in cfg.attention
                for P in cfg.P.grid()
            ]
    return pts


class PhaseDiagram(Experiment):
    name = "phase-diagram"
    description = "copy-head transition in P: theory, exact-posterior MCMC and Adam, softmax vs linear attention"
    Config = RunConfig
    # two threads by default: the points' files are the same on every executor (tests/test_scaleout.py), and on a
    # 2-core machine the default run takes about two thirds of its serial time (docs/benchmarks.md)
    default_threads = 2
    mcmc_batch: int = 1  # MCMC points of one shape sampled this many at a time in one program (--batch)

    def check(self, config: RunConfig) -> None:
        from ...bayes.theory.common import covers
        from ...tasks.base import MAX_ARRAY_NUMBERS

        task = config.make_task()
        P_max, limit = int(config.P.grid()[-1]), MAX_ARRAY_NUMBERS // (task.T * task.d)
        if {"mcmc", "adam"} & set(config.methods) and P_max > limit:  # what task.sample would refuse at each point
            raise ValueError(
                f"P={P_max}: expected at most {limit} sequences at T={task.T}, d={task.d} for MCMC and Adam (their "
                f"data set is one array of at most {MAX_ARRAY_NUMBERS} numbers)"
            )
        for a in config.attention if "theory" in config.methods else ():  # what the theory covers (docs/theory.md)
            if not covers(task, a, onehot=True, causal=True):
                raise ValueError(
                    f"task.tokens={task.tokens!r}, task.boundary={task.boundary!r} with attention={a!r}: the theory "
                    "does not cover this case (it covers Gaussian and one-hot tokens on the cyclic boundary, and "
                    "on the causal one Gaussian tokens and softmax with one-hot tokens); leave 'theory' out of "
                    "methods to sample and train it"
                )

    def points(self, config: RunConfig) -> dict[str, list[dict]]:
        return build_points(config)

    def compute(self, point: dict) -> dict:
        from .compute import COMPUTE

        return COMPUTE[point["method"]](point)

    def batch(self, config: RunConfig, part: str):
        if part != "mcmc" or self.mcmc_batch <= 1:
            return None
        from ..._batching import Batch
        from .compute import mcmc_group_key, mcmc_points

        return Batch(key=mcmc_group_key, many=mcmc_points, size=self.mcmc_batch)

    def summarize(self, config: RunConfig, records: dict[str, list[dict]]) -> dict:
        from .seeds import seed_statistics
        from .summary import summarize

        out = summarize(config, records)
        st = seed_statistics(records, {r["point"]["attention"]: r["result"] for r in records.get("theory", [])})
        return out if st is None else {**out, "seeds": st}

    def describe(self, summary: dict) -> list[str]:
        from .seeds import describe_seeds
        from .summary import describe

        return describe(summary) + (describe_seeds(summary["seeds"]) if "seeds" in summary else [])

    def figures(self, folder):
        from .figures import draw_all

        return draw_all(folder)
