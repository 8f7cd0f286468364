"""Scale-out benchmarks (not tests): a sweep on a 2-worker Dask LocalCluster vs serially, the same sweep in
two plain processes (the ceiling of any executor), the overhead per point of Dask vs a process pool, and
batched MCMC points vs one at a time. Ratios are measured in one run.

    python benchmarks/bench_scaleout.py                    # everything (~11 min on 2 idle cores)
    python benchmarks/bench_scaleout.py --only batch       # one section: sweep | ceiling | overhead | batch
    python benchmarks/bench_scaleout.py --T 16 --warmup 200 --samples 300   # a smaller MCMC point

Sections
- sweep: 16 MCMC points (softmax, T = 32, d = 8, P log-spaced 250..4000, NUTS 4 chains x (500 + 1000) by
  default: the sweep of bench_sampling.py) through bayesattn.sweep.run_sweep, each run in a fresh process
  (``--sweep-kinds``): serially; on a fresh 2-worker LocalCluster of worker processes; on a 2-worker
  LocalCluster of threads in that process (``processes=False``: the workers share its compiled programs); on
  the stdlib thread executor (``sweep_executor("thread", 2)``). Executor start and compilations are included,
  as a user sees them. Each run's point files are compared with the serial ones (identical, timings and
  executor aside). Target: >= 1.7x with 2 Dask workers. (Before 2026-12-01 the serial run was timed in this
  process and the cluster's workers were fresh; now every run starts fresh.)
- ceiling: what 2 cores allow with no executor at all. Plain Python processes (spawned), each fresh (its
  imports, its compilations) and each running its points serially: all points in one process; one half of
  them (alternate P) alone; both halves side by side. All points / the pair is the speed-up of a perfect
  2-worker executor: zero scheduling, submission, start-up and result overhead.
- overhead: --tiny near-empty points through a 2-process pool and a 2-worker LocalCluster, both started and
  warmed first: the wall time per point is the executor's overhead (submit, pickle, result, atomic write).
- batch: the 16 posteriors of the sweep sampled one ``ba.sample`` call at a time vs ``sample_many`` (one
  program: lax.map over the points on a CPU) and vmapped over all 16 (``points_per_batch=16``, the GPU
  setting), each run once to compile and once timed; the draws of the first two are compared bit for bit.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import multiprocessing as mp
import os
import tempfile
import time
from pathlib import Path

import jax
import numpy as np

import bayesattn as ba
from bayesattn.bayes.batched import sample_many
from bayesattn.scaleout import sweep_executor
from bayesattn.sweep import run_sweep

SIGMA2_PER_P = 8 / (2 * 7.0)  # sigma2 = P_ref d / (2 beta) at P_ref = 1000, beta = 7 (bench_sampling's sweep)


def sweep_point(point: dict) -> dict:
    """One MCMC point: its data and sampler keys folded from the point's own P and seeds."""
    data = ba.CopyTask(T=point["T"], d=point["d"]).sample(jax.random.fold_in(jax.random.key(0), point["P"]), point["P"])
    post = ba.Posterior(data, "softmax", ba.Prior(1.0, 100.0, point["sigma2"]))
    s = ba.sample(
        post,
        jax.random.fold_in(jax.random.key(1), point["P"]),
        num_chains=point["chains"],
        num_warmup=point["warmup"],
        num_samples=point["samples"],
    )
    return {k: v for k, v in s.summary().items() if k != "draws"}


def tiny_point(point: dict) -> dict:
    return {"value": point["P"] ** 2}


def make_points(args) -> list[dict]:
    Ps = np.unique(np.round(np.geomspace(250, 4000, args.points)).astype(int)).tolist()
    return [
        {
            "method": "bench",
            "T": args.T,
            "d": args.d,
            "P": P,
            "sigma2": 1000 * SIGMA2_PER_P,
            "chains": args.chains,
            "warmup": args.warmup,
            "samples": args.samples,
        }
        for P in Ps
    ]


def strip(rec: dict) -> dict:
    diag = {k: v for k, v in rec["result"]["diagnostics"].items() if k not in ("wall_time_s", "compile_time_s")}
    return {"point": rec["point"], "result": {**rec["result"], "diagnostics": diag}, "versions": rec["versions"]}


SWEEP_KINDS = {
    "serial": "serially",
    "dask": "2 Dask workers (processes)",
    "dask-thread": "2 Dask workers (threads of one process)",
    "thread": "2 threads (thread executor)",
}


def fresh_sweep(points: list[dict], compute, kind: str, workers: int = 2) -> dict:
    """Run in a fresh process (:func:`in_fresh_processes`): the sweep of ``points`` through ``run_sweep`` on
    ``kind``'s executor (a SWEEP_KINDS key), in a temporary folder; its seconds (executor start and every
    compilation included), CPU seconds per second of this process, and records."""
    t0, c0 = time.perf_counter(), os.times()
    ctx = (
        sweep_executor("dask", workers, processes=False)
        if kind == "dask-thread"
        else sweep_executor(kind, None if kind == "serial" else workers)
    )
    with tempfile.TemporaryDirectory() as tmp, ctx as ex:  # serial: None, run_sweep's own loop
        recs = run_sweep(points, compute, tmp, executor=ex, progress=False)
    t, c1 = time.perf_counter() - t0, os.times()
    return {"s": t, "cores": (c1.user + c1.system - c0.user - c0.system) / t, "recs": recs}


def in_fresh_processes(fn, *calls: tuple) -> list:
    """``fn(*args)`` for each ``args`` of ``calls``, each in a new spawned Python process (nothing compiled by
    an earlier run is reused), all started together; their results, in order."""
    pools = [cf.ProcessPoolExecutor(1, mp_context=mp.get_context("spawn")) for _ in calls]
    try:
        futures = [pool.submit(fn, *args) for pool, args in zip(pools, calls)]  # each submit starts its process
        return [f.result() for f in futures]
    finally:
        for pool in pools:
            pool.shutdown()


def bench_sweep(rows, args):
    points = make_points(args)
    res = {}
    for kind in args.sweep_kinds:
        (res[kind],) = in_fresh_processes(fresh_sweep, (points, sweep_point, kind))
        print(f"[sweep] {SWEEP_KINDS[kind]}: {res[kind]['s']:.1f} s", flush=True)
    size = f"{len(points)} points, T={args.T} d={args.d}, {args.chains} chains x ({args.warmup}+{args.samples})"
    if "serial" in res:
        r = res["serial"]
        compile_s = sum(x["result"]["diagnostics"]["compile_time_s"] for x in r["recs"])
        rows += [
            ("sweep", f"{size}: serial, a fresh process (s)", f"{r['s']:.1f}", f"compile {compile_s:.1f} s, once"),
            (
                "sweep",
                "cores the serial run keeps busy (CPU s / wall s)",
                f"{r['cores']:.2f}",
                f"so 2 cores allow at most {2 / max(r['cores'], 1.0):.2f}x over it",
            ),
        ]
    for kind in res:
        if kind == "serial":
            continue
        note = {
            "dask": "cluster start and each worker's compilations included",
            "dask-thread": "LocalCluster(processes=False): workers share this process's compiled programs",
            "thread": "sweep_executor('thread', 2): stdlib thread pool",
        }[kind]
        rows.append(("sweep", f"the same on {SWEEP_KINDS[kind]}, a fresh process (s)", f"{res[kind]['s']:.1f}", note))
        if "serial" in res:
            same = [strip(a) for a in res["serial"]["recs"]] == [strip(b) for b in res[kind]["recs"]]
            rows += [
                (
                    "sweep",
                    f"speed-up, {SWEEP_KINDS[kind]} vs serial",
                    f"{res['serial']['s'] / res[kind]['s']:.2f}x",
                    "target >= 1.7x (2 Dask workers)" if kind.startswith("dask") else "",
                ),
                ("sweep", "point files identical to serial (timings, host, executor aside)", str(same), ""),
            ]


def _side_by_side(halves: list[list[dict]]) -> tuple[float, list[dict]]:
    """Each list of points swept serially in a plain fresh process of its own, all at once, no executor between
    them: (wall seconds, process start and imports included; each process's :func:`fresh_sweep` result)."""
    t0 = time.perf_counter()
    outs = in_fresh_processes(fresh_sweep, *[(pts, sweep_point, "serial") for pts in halves])
    return time.perf_counter() - t0, outs


def bench_ceiling(rows, args):
    points = make_points(args)
    t_serial, (serial,) = _side_by_side([points])
    t_alone, (alone,) = _side_by_side([points[0::2]])
    t_pair, pair = _side_by_side([points[0::2], points[1::2]])
    slow = pair[0]["s"] / alone["s"]
    rows += [
        (
            "ceiling",
            f"{len(points)} points serially in one plain process (s)",
            f"{t_serial:.1f}",
            f"{serial['s']:.1f} s after its imports, {serial['cores']:.2f} cores busy",
        ),
        (
            "ceiling",
            f"half ({len(points[0::2])} points) in one plain process, alone (s)",
            f"{t_alone:.1f}",
            f"{alone['s']:.1f} s after its imports, {alone['cores']:.2f} cores busy",
        ),
        (
            "ceiling",
            "both halves in two plain processes side by side (s)",
            f"{t_pair:.1f}",
            f"after imports {pair[0]['s']:.1f} / {pair[1]['s']:.1f} s; the same half runs {slow:.2f}x "
            "slower beside the other than alone",
        ),
        (
            "ceiling",
            "speed-up of a perfect 2-worker executor over serial",
            f"{t_serial / t_pair:.2f}x",
            "no scheduler, no submission, no result transfer: the most any executor gets on this machine",
        ),
    ]


def bench_overhead(rows, args):
    points = [{"method": "tiny", "P": P} for P in range(args.tiny)]
    warm = [{"method": "warm", "P": P} for P in range(4)]
    res = {}
    for kind in ("process", "dask"):
        with sweep_executor(kind, 2) as ex, tempfile.TemporaryDirectory() as tmp:
            run_sweep(warm, tiny_point, Path(tmp) / "warm", executor=ex, progress=False)  # start, import, compile
            t0 = time.perf_counter()
            run_sweep(points, tiny_point, Path(tmp) / "run", executor=ex, progress=False)
            res[kind] = (time.perf_counter() - t0) / len(points)
    rows += [
        ("overhead", f"{args.tiny} near-empty points, 2-process pool: ms per point", f"{res['process'] * 1e3:.2f}", ""),
        (
            "overhead",
            f"{args.tiny} near-empty points, 2-worker LocalCluster: ms per point",
            f"{res['dask'] * 1e3:.2f}",
            f"{res['dask'] / res['process']:.2f}x the pool; Dask minus pool: {(res['dask'] - res['process']) * 1e3:.2f} ms",
        ),
    ]


def bench_batch(rows, args):
    points = make_points(args)
    posts, keys = [], []
    for p in points:
        data = ba.CopyTask(T=p["T"], d=p["d"]).sample(jax.random.fold_in(jax.random.key(0), p["P"]), p["P"])
        posts.append(ba.Posterior(data, "softmax", ba.Prior(1.0, 100.0, p["sigma2"])))
        keys.append(jax.random.fold_in(jax.random.key(1), p["P"]))
    kw = dict(num_chains=args.chains, num_warmup=args.warmup, num_samples=args.samples)

    def one_at_a_time():
        return [ba.sample(post, key, **kw) for post, key in zip(posts, keys)]

    times, out = {}, {}
    for name, fn in (
        ("one", one_at_a_time),
        ("grouped", lambda: sample_many(posts, keys, **kw)),
        ("vmapped", lambda: sample_many(posts, keys, points_per_batch=len(posts), **kw)),
    ):
        t0 = time.perf_counter()
        fn()  # compile (and run once)
        first = time.perf_counter() - t0
        t0 = time.perf_counter()
        out[name] = fn()
        times[name] = (first, time.perf_counter() - t0)
    same = all(np.array_equal(a.L, b.L) for a, b in zip(out["one"], out["grouped"]))
    dm = max(abs(a.summary()["m"]["mean"] - b.summary()["m"]["mean"]) for a, b in zip(out["one"], out["vmapped"]))
    size = f"{len(points)} posteriors, T={args.T} d={args.d}, {args.chains} chains x ({args.warmup}+{args.samples})"
    rows += [
        (
            "batch",
            f"{size}: one sample() call each (s; first call: compile unless cached)",
            f"{times['one'][1]:.2f}",
            f"first {times['one'][0]:.1f} s",
        ),
        (
            "batch",
            "sample_many, one program, lax.map over the points (CPU default)",
            f"{times['grouped'][1]:.2f}",
            f"speed-up {times['one'][1] / times['grouped'][1]:.2f}x; first {times['grouped'][0]:.1f} s; draws identical: {same}",
        ),
        (
            "batch",
            "sample_many, all 16 vmapped (the accelerator default)",
            f"{times['vmapped'][1]:.2f}",
            f"speed-up {times['one'][1] / times['vmapped'][1]:.2f}x; first {times['vmapped'][0]:.1f} s; max |dm| vs one: {dm:.3f}",
        ),
    ]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--only", choices=["sweep", "ceiling", "overhead", "batch"], action="append", help="sections (repeatable)"
    )
    ap.add_argument("--T", type=int, default=32)
    ap.add_argument("--d", type=int, default=8)
    ap.add_argument(
        "--sweep-kinds",
        nargs="+",
        choices=list(SWEEP_KINDS),
        default=list(SWEEP_KINDS),
        help="executors of the sweep section, each in a fresh process",
    )
    ap.add_argument("--points", type=int, default=16)
    ap.add_argument("--chains", type=int, default=4)
    ap.add_argument("--warmup", type=int, default=500)
    ap.add_argument("--samples", type=int, default=1000)
    ap.add_argument("--tiny", type=int, default=200, help="points of the overhead section")
    args = ap.parse_args()
    print(f"jax {jax.__version__}, backend {jax.default_backend()}, devices {jax.devices()}", flush=True)
    rows = []
    sections = (
        ("sweep", bench_sweep),
        ("ceiling", bench_ceiling),
        ("overhead", bench_overhead),
        ("batch", bench_batch),
    )
    for name, fn in sections:
        if not args.only or name in args.only:
            fn(rows, args)
            for r in rows:
                if r[0] == name:
                    print(" | ".join(r), flush=True)


if __name__ == "__main__":
    main()
