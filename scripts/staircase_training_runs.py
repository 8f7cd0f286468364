"""Compute the training runs of a staircase config in a chosen order (resumable; the same point files as
``bayesattn staircase --parts train``), so that on a busy machine the first seed of the main run and the variants
finish before the later seeds:

    python scripts/staircase_training_runs.py --config staircase --order main:1,transformer,sgd,main:2

``main:N`` computes the first N seeds of the main run; a variant name computes all its seeds. The figures and
summary.json are then written as by the CLI.
"""

from __future__ import annotations

import argparse

from bayesattn.experiments import get_experiment
from bayesattn.sweep import run_experiment


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", default="staircase")
    ap.add_argument("--order", default="main:1,transformer,sgd,main:2")
    ap.add_argument("--out", help="default: results/<config name>")
    a = ap.parse_args()
    cls = get_experiment("staircase")
    base = cls.load_config(a.config).replace(parts=["train"])
    out = a.out or f"results/{base.name}"
    for item in a.order.split(","):
        name, _, n = item.partition(":")
        cfg = base.replace(train_only=[name], **({"train_seeds": int(n)} if n else {}))
        s = run_experiment(cls(), cfg, out, progress=False, figures=False, log=lambda _: None)
        print(item, s["train"]["stages"], flush=True)
    s = run_experiment(cls(), base.replace(train_only=None), out, progress=False)  # everything computed, and figures
    print(s["figures"], flush=True)


if __name__ == "__main__":
    main()
