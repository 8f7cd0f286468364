"""Seeds batched (one vmapped, compiled program) vs looped (the same program for one seed, called once per
seed) for the two training-dynamics experiments (docs/results/dynlab.md). Prints seeds/s and the ratio; compilation is
excluded (each program runs once before timing). Not a test."""

from __future__ import annotations

import argparse
import time

import jax

from bayesattn.experiments.dynlab import clustering_head as ch
from bayesattn.experiments.dynlab import focus_dilution as fd


def _time(f, repeats: int) -> float:
    f()  # warm-up (compilation)
    t = time.perf_counter()
    for _ in range(repeats):
        f()
    return (time.perf_counter() - t) / repeats


def bench_cluster(S: int, epochs: int, repeats: int) -> tuple[float, float]:
    cfg = ch.ClusterConfig(epochs=epochs)
    _, train_block = ch.make_trainer(cfg)
    batched = ch.init_states(cfg, range(S))
    singles = [ch.init_states(cfg, [s]) for s in range(S)]
    tb = _time(lambda: jax.block_until_ready(train_block(batched, epochs)[1]["loss"]), repeats)
    tl = _time(lambda: [jax.block_until_ready(train_block(x, epochs)[1]["loss"]) for x in singles], repeats)
    return S * epochs / tb, S * epochs / tl


def bench_fd(S: int, steps: int, repeats: int) -> tuple[float, float]:
    cfg = fd.FDConfig(steps=steps, record_every=steps // 4, n=128, lr=2.0, init_scale=1e-3)
    tb = _time(lambda: fd.train(cfg, list(range(S)), block=4), repeats)
    tl = _time(lambda: [fd.train(cfg, [s], block=4) for s in range(S)], repeats)
    return S * steps / tb, S * steps / tl


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seeds", type=int, default=16)
    ap.add_argument("--epochs", type=int, default=5, help="clustering-head epochs per timed call")
    ap.add_argument("--steps", type=int, default=400, help="focus-dilution GD steps per timed call")
    ap.add_argument("--repeats", type=int, default=2)
    a = ap.parse_args(argv)
    print(f"backend {jax.default_backend()}, {a.seeds} seeds")
    print("experiment        batched seed-units/s   looped seed-units/s   ratio")
    b, l_ = bench_cluster(a.seeds, a.epochs, a.repeats)
    print(f"clustering head   {b:12.1f} ep/s       {l_:12.1f} ep/s     {b / l_:6.2f}")
    b, l_ = bench_fd(a.seeds, a.steps, a.repeats)
    print(f"focus-dilution    {b:12.1f} step/s     {l_:12.1f} step/s   {b / l_:6.2f}")
    print(
        "(seed-units/s: seeds x epochs (or GD steps) per second of wall time, compilation excluded; the full "
        "default runs 16 seeds x 1000 epochs and 3 GD settings x 4 seeds x 14000 steps plus Adam)"
    )


if __name__ == "__main__":
    main()
