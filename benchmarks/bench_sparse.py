"""Benchmark: seeds of the sparse linear-map training, vmapped in one program against looped one by one.

    python benchmarks/bench_sparse.py [--config sparse_emergence] [--S 8 --s 2] [--seeds 16] [--steps 300]
    (--steps: a multiple of 50)
    python benchmarks/bench_sparse.py --full    # one full 16-seed point of the config (early stop as configured)

Default: the CPU default's training settings (the sparse experiment's named config sparse_emergence) at one grid point,
``--steps`` steps without early stopping, all seeds vmapped (``train_seeds(vmap=True)``) and then the same seeds
one after another through the per-seed program (``vmap=False``), compilation timed apart (a first short run).
Reported: seed-steps per second of each, the ratio, and the projected wall time of a 16-seed point of the
config's ``steps``. ``--full`` runs one whole point (vmapped, with the config's early stop) and reports its wall
time and seeds per second (vmapped): the target is <= 10 min for 16 seeds on 2 cores.
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np

from bayesattn.experiments.sparse import Sparse
from bayesattn.experiments.sparse.training import train_seeds


def timed(cfg, seeds, vmap):
    t0 = time.perf_counter()
    r = train_seeds(cfg, seeds, vmap=vmap, record_attention=False)
    return time.perf_counter() - t0, r


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", default="sparse_emergence")
    ap.add_argument("--S", type=int, default=8)
    ap.add_argument("--s", type=int, default=2)
    ap.add_argument("--seeds", type=int, default=16)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--full", action="store_true", help="one whole point of the config, vmapped, early stop on")
    a = ap.parse_args()
    cfg = Sparse.load_config(a.config).train_config(S=a.S, s=a.s)
    seeds = list(range(a.seeds))
    print(
        f"{platform.node()} cores={os.cpu_count()} load={os.getloadavg()[0]:.1f} config={a.config} "
        f"S={a.S} s={a.s} width={cfg.width} H={cfg.heads} mlp={cfg.mlp} batch={cfg.batch} seqs"
    )
    if a.full:
        wall, r = timed(cfg, seeds, True)
        ts = [t for t in r["t_star"] if t is not None]
        print(
            f"full point: {len(seeds)} seeds, {r['steps_run']} steps (early stop), wall {wall:.1f} s "
            f"(compile included), {len(seeds) / wall:.4f} seeds/s; solved {len(ts)}/{len(seeds)}, "
            f"median t* {np.median(ts) if ts else None}"
        )
        return
    chunk = 50  # steps per compiled chunk: a warm-up of one chunk compiles what the timed run uses
    short = cfg.replace(steps=chunk, record_every=chunk, stop_after_solved=0)
    run = cfg.replace(steps=a.steps, record_every=chunk, stop_after_solved=0)
    rows = {}
    for vmap in (True, False):
        comp, _ = timed(short, seeds, vmap)
        print(f"  warm-up (compile + {chunk} steps): {comp:.1f} s")
        wall, _ = timed(run, seeds, vmap)
        rows["vmapped" if vmap else "looped"] = wall
        rate = len(seeds) * a.steps / wall
        print(
            f"{'vmapped' if vmap else 'looped':8s}: {len(seeds)} seeds x {a.steps} steps in {wall:.1f} s = "
            f"{rate:.0f} seed-steps/s; 16 seeds x {cfg.steps} steps projected {16 * cfg.steps / rate / 60:.1f} min"
        )
    print(f"vmapped / looped speed-up: {rows['looped'] / rows['vmapped']:.2f}x")


if __name__ == "__main__":
    main()
