"""Compute the training runs of a staircase config in a chosen order (resumable; the same point files as
``bayesattn staircase --parts train``), so that on a busy machine the first seed of the main run and the variants
finish before the later seeds:

    python scripts/staircase_training_runs.py --config staircase --order main:1,transformer,sgd,main:2

``main:N`` computes the first N seeds of the main run; a variant name computes all its seeds. The figures and
summary.json are then written as by the CLI.
"""

from __future__ import annotations

import argparse
import copy

from bayesattn.experiments.staircase import StaircaseConfig, run
from bayesattn.plots.staircase import draw_all


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", default="staircase")
    ap.add_argument("--order", default="main:1,transformer,sgd,main:2")
    ap.add_argument("--out", help="default: results/<config name>")
    a = ap.parse_args()
    base = StaircaseConfig.from_toml(a.config)
    base.parts = ["train"]
    out = a.out or f"results/{base.name}"
    for item in a.order.split(","):
        name, _, n = item.partition(":")
        cfg = copy.deepcopy(base)
        cfg.train_only = [name]
        if n:
            cfg.train_seeds = int(n)
        s = run(cfg, out, progress=False)
        print(item, s["train"]["stages"], flush=True)
    cfg = copy.deepcopy(base)
    cfg.train_only = ["main", *base.train_variants]
    run(cfg, out, progress=False)  # summary of everything computed
    print(draw_all(out), flush=True)


if __name__ == "__main__":
    main()
