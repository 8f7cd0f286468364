"""Run any computation over a grid of points, one result file per point, atomically and resumably; and run a
whole experiment (:func:`run_experiment`) through it.

A *point* is a JSON-serialisable dict (method, attention, P, task and prior fields, keys, ...). Its result file
is ``out_dir/<point_id(point)>.json``; the id is readable and ends in a hash of the whole point, so a changed
point never reuses a stale result (the caller decides what a point holds: only what its computation depends
on). Files are written atomically (:func:`bayesattn.files.write_atomic`), so an interrupted sweep leaves only
complete files: rerunning the same sweep checks them, keeps them, and computes the rest. A damaged file (cut
short by a copy, garbled) is set aside and its point computed again.

Execution is pluggable: ``executor`` is any ``concurrent.futures.Executor`` (a process pool by default when
``workers > 1``) or a ``dask.distributed.Client`` (:mod:`bayesattn.scaleout` builds them); ``compute`` must
then be picklable (a module-level function, or a method of a module-level class). Result files are always
written by the calling process, so a lost worker never leaves a partial file. A point that raises is listed in
``failures.jsonl`` and the sweep goes on (:class:`SweepError` at the end); points of one shape can be computed
together (:class:`~bayesattn._batching.Batch`).

One run at a time writes into a result folder (:func:`bayesattn.runtime.folder_lock`); a second one stops with
one line, or waits.
"""

from __future__ import annotations

import concurrent.futures as cf
import os
import platform
import sys
import time
import traceback
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from . import runtime
from ._batching import Batch
from ._validate import check_int
from .files import (
    check_record,
    checksum,
    clear_stale_temps,
    load_results,
    point_id,
    read_json,
    read_run_info,
    set_aside,
    to_jsonable,
    write_json_atomic,
    write_jsonl_atomic,
)
from .provenance import computed_on, package_versions, provenance
from .runtime import folder_lock, prepare_output_dir, worker_init

__all__ = [
    "Batch",
    "FAILURES",
    "SweepError",
    "check_record",
    "executor_name",
    "load_results",
    "point_id",
    "read_json",
    "run_experiment",
    "run_sweep",
    "set_aside",
    "to_jsonable",
    "verify",
    "write_json_atomic",
]


# ----------------------------------------------------------------------------------------------- the sweep
class SweepError(RuntimeError):
    """Some points of a sweep failed; the others are on disk. ``failures``: one dict per failed point."""

    def __init__(self, message: str, failures: list[dict]):
        super().__init__(message)
        self.failures = failures


FAILURES = "failures.jsonl"  # in a sweep's folder: the failed points of its latest run, one JSON object a line


def _is_dask(executor) -> bool:
    return type(executor).__module__.split(".")[0] == "distributed" and hasattr(executor, "scheduler_info")


def executor_name(executor, workers: int = 1) -> str:
    """What a point file records as its executor: "serial", "thread", "process", "dask", else the executor's
    class name."""
    if executor is None:
        return "serial" if workers == 1 else "process"
    if _is_dask(executor) or type(executor).__module__.split(".")[0] == "distributed":
        return "dask"
    if isinstance(executor, cf.ProcessPoolExecutor):
        return "process"
    if isinstance(executor, cf.ThreadPoolExecutor):
        return "thread"
    return type(executor).__name__


def _run_task(compute: Callable, points: list[dict], executor: str, many: bool) -> list[tuple[str, dict]]:
    """On the worker: compute points (one, or a batch through ``many``) -> one (status, record) per point.

    A computation that raises gives ("error", {error, traceback, host}) for each of its points, so that the sweep
    goes on; interrupts (BaseException) pass through. A record carries the checksum of its result."""
    # before the computation: a record names the code this process runs, not a commit made while it computed (the
    # commit is cached per process, so every process, worker or not, reads it before its first point computes)
    prov = provenance()
    t0 = time.perf_counter()
    try:
        results = compute(points) if many else [compute(points[0])]
        if len(results) != len(points):
            raise ValueError(f"batch of {len(points)} points returned {len(results)} results")
    except Exception as e:  # noqa: BLE001 -- reported per point, in the failures file
        fail = {
            "error": f"{type(e).__name__}: {e}",
            "traceback": traceback.format_exc(),
            "host": platform.node(),
            "executor": executor,
        }
        return [("error", fail) for _ in points]
    wall = (time.perf_counter() - t0) / len(points)
    versions = prov.pop("versions")
    prov["executor"] = executor
    if many:
        prov["batch_size"] = len(points)
    at = time.strftime("%Y-%m-%dT%H:%M:%S")
    return [
        (
            "ok",
            {
                "point": p,
                "result": r,
                "checksum": checksum(r),
                "wall_time_s": wall,
                "versions": versions,
                "provenance": prov,
                "finished_at": at,
            },
        )
        for p, r in zip(points, results)
    ]


def _take_reused(
    points: Sequence[dict], paths: list[Path], kept: dict[int, dict], stores: list[Path], warn: Callable
) -> int:
    """Copy into ``paths`` the missing points' complete records found in ``stores`` (checked as
    :func:`check_record` checks a resumed file); fills ``kept``; returns how many were taken."""
    taken = 0
    for i, path in enumerate(paths):
        if i in kept:
            continue
        for store in stores:
            found = [f for f in (store / path.name, store / f"{path.name}.gz") if f.is_file()]
            rec, problem = (None, "") if not found else check_record(found[0], points[i])
            if rec is not None:
                write_json_atomic(path, rec)
                kept[i] = rec
                taken += 1
                break
            if found:
                warn(f"{found[0]} {problem}; not taken, the point is looked for further or computed")
    return taken


def _tasks(points: Sequence[dict], todo: list[int], batch: Batch | None) -> list[list[int]]:
    """Indices of the points of each call: one point each, or batch groups of at most ``batch.size``."""
    if batch is None or batch.size <= 1:
        return [[i] for i in todo]
    groups: dict[Any, list[int]] = {}
    single = []
    for i in todo:
        k = batch.key(points[i])
        (single.append([i]) if k is None else groups.setdefault(k, []).append(i))
    chunks = [g[j : j + batch.size] for g in groups.values() for j in range(0, len(g), batch.size)]
    return chunks + single


def run_sweep(
    points: Sequence[dict],
    compute: Callable[[dict], dict],
    out_dir: str | os.PathLike,
    *,
    workers: int = 1,
    progress: bool = True,
    executor: Any = None,
    desc: str = "sweep",
    batch: Batch | None = None,
    stats: dict | None = None,
    warn: Callable[[str], None] | None = None,
    reuse: Sequence[str | os.PathLike] = (),
) -> list[dict]:
    """Compute ``compute(point)`` for every point not already on disk; return all records in ``points`` order.

    Each record is ``{"point", "result", "wall_time_s", "versions", "provenance", "finished_at"}`` (provenance:
    :func:`provenance` of the process that computed the point, without the versions, plus "executor") and is
    stored in ``out_dir/<point_id>.json`` as soon as its point finishes. ``workers > 1`` runs points in a
    process pool (``compute`` must then be a picklable module-level function); ``executor`` overrides the pool:
    any ``concurrent.futures.Executor``, or a ``dask.distributed.Client`` (its futures; a point whose worker
    dies is rerun by the scheduler, up to its ``allowed-failures``). ``batch``: compute groups of points in one
    call (:class:`Batch`).

    A point whose computation raises (or whose worker is lost for good) does not stop the sweep: it is listed,
    with its id, the error and the traceback, in ``out_dir/failures.jsonl``, and after all other points
    :class:`SweepError` is raised. Rerunning computes the failed and missing points only.

    A point file that does not parse, holds another point than its name says, or whose result does not match
    its checksum (a copy cut short, bit rot) is moved aside to ``<name>.json.corrupt`` with one warning that
    names it (``warn``; default: a line on stderr), and its point is computed again. ``stats``, when given, is
    filled with the counts: ``resumed`` (finished files kept), ``reused``, ``computed``, ``damaged`` (the names
    set aside).

    ``reuse``: folders of finished point files of other runs or machines, read only (a point store under git:
    :func:`bayesattn.store.archive_points`). A point missing from ``out_dir`` is taken from the first of them
    that holds its file (``<point_id>.json`` or ``.json.gz``), and only when that file holds exactly this point
    and its result matches its checksum; a file that does not is named in one warning and left alone.
    """
    workers = check_int("workers", workers, minimum=1)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    clear_stale_temps(out)  # half-written by a killed run (results, failures.jsonl)
    paths = [out / f"{point_id(p)}.json" for p in points]
    if len(set(paths)) != len(paths):
        raise ValueError("points: contains duplicate points (each grid point must be unique)")
    warn = warn or runtime.warn
    kept: dict[int, dict] = {}
    damaged = []
    for i, path in enumerate(paths):
        if path.exists():
            rec, problem = check_record(path, points[i])
            if problem is None:
                kept[i] = rec
            else:
                aside = set_aside(path)
                damaged.append(path.name)
                warn(f"{path} {problem}; moved to {aside.name}, computing its point again")
    resumed = len(kept)
    reused = _take_reused(points, paths, kept, [Path(d) for d in reuse], warn)
    todo = [i for i in range(len(points)) if i not in kept]
    if stats is not None:
        stats.update(resumed=resumed, reused=reused, computed=len(todo), damaged=damaged)
    failures_path = out / FAILURES
    failures_path.unlink(missing_ok=True)  # it described an earlier run, whose failed points are retried now
    failures: list[dict] = []
    name = executor_name(executor, workers)
    many = batch is not None and batch.size > 1
    fn = batch.many if many else compute

    bar = None
    if progress and todo:  # a sweep with nothing left to compute shows no bar (its summary counts the resumed)
        from tqdm.auto import tqdm

        bar = tqdm(total=len(points), initial=len(points) - len(todo), desc=desc, unit="pt")

    def finish(idx: list[int], outcomes: list[tuple[str, dict]]) -> None:
        for i, (status, rec) in zip(idx, outcomes):
            if status == "ok":
                write_json_atomic(paths[i], rec)
                kept[i] = rec
            else:
                failures.append(
                    {"id": point_id(points[i]), "point": points[i], **rec, "at": time.strftime("%Y-%m-%dT%H:%M:%S")}
                )
                write_jsonl_atomic(failures_path, failures)
        if bar:
            bar.update(len(idx))

    def lost(idx: list[int]) -> list[tuple[str, dict]]:  # the executor lost the task (dead worker, broken pool)
        e = sys.exc_info()[1]
        rec = {
            "error": f"{type(e).__name__}: {e}",
            "traceback": traceback.format_exc(),
            "host": "unknown",
            "executor": name,
        }
        return [("error", rec)] * len(idx)

    tasks = _tasks(points, todo, batch)
    try:
        if executor is None and workers == 1:
            for idx in tasks:
                finish(idx, _run_task(fn, [points[i] for i in idx], name, many))
        else:
            own = executor is None
            if own:
                import multiprocessing as mp

                # spawn: JAX is multithreaded and must not be forked
                executor = cf.ProcessPoolExecutor(
                    max_workers=workers, mp_context=mp.get_context("spawn"), initializer=worker_init
                )
            futures: dict = {}
            try:
                if _is_dask(executor):
                    from distributed import as_completed

                    for idx in tasks:
                        key = f"{desc}-{point_id(points[idx[0]])}-{uuid.uuid4().hex[:8]}"
                        fut = executor.submit(_run_task, fn, [points[i] for i in idx], name, many, key=key, pure=False)
                        futures[fut] = idx
                    completed = as_completed(list(futures), loop=executor.loop)
                else:
                    futures = {
                        executor.submit(_run_task, fn, [points[i] for i in idx], name, many): idx for idx in tasks
                    }
                    completed = cf.as_completed(futures)
                for fut in completed:
                    idx = futures.pop(fut)
                    try:
                        outcomes = fut.result()
                    except Exception:  # noqa: BLE001 -- a lost task: reported, left for the rerun
                        outcomes = lost(idx)
                    finish(idx, outcomes)
                    if _is_dask(executor):
                        # its result is on disk: released, a worker that dies later does not make the scheduler
                        # compute it again to restore the lost copy
                        fut.release()
            finally:
                if own:
                    executor.shutdown(wait=True, cancel_futures=True)
                elif _is_dask(executor):
                    executor.cancel([f for f in futures if not f.done()])
    finally:
        if bar:
            bar.close()
    if failures:
        ids = ", ".join(f["id"] for f in failures[:3]) + (", ..." if len(failures) > 3 else "")
        raise SweepError(
            f"{desc}: {len(failures)} of {len(points)} points failed ({ids}); errors and tracebacks "
            f"in {failures_path}; the other points are on disk, rerun to retry the failed ones",
            failures,
        )
    if stats is not None:
        stats["computed"] -= len(failures)
        stats["failed"] = len(failures)
    # the records as their files hold them (JSON types): what a resumed run reads back
    return [read_json(paths[i]) if i in todo else kept[i] for i in range(len(points))]


# ----------------------------------------------------------------------------------------------- experiments
def check_reuse(reuse: Sequence[str | os.PathLike]) -> list[Path]:
    """The folders of ``--reuse`` as paths; ValueError naming the first that is not a folder."""
    reuse = [Path(d) for d in reuse]
    for d in reuse:
        if not d.is_dir():
            raise ValueError(f"--reuse={str(d)!r}: not a folder (expected a result folder or a point store)")
    return reuse


def run_experiment(
    experiment,
    config,
    out_dir: str | os.PathLike,
    *,
    executor: Any = None,
    workers: int = 1,
    progress: bool = True,
    figures: bool = True,
    wait: bool = False,
    log: Callable[[str], None] = print,
    reuse: Sequence[str | os.PathLike] = (),
    on_start: Callable[[], None] | None = None,
) -> dict:
    """Run an experiment of the contract (:class:`bayesattn.experiments.contract.Experiment`) into ``out_dir``:
    every missing point of every part through :func:`run_sweep`, then ``summary.json`` and the figures.

    Checked before any work: the config (``experiment.check``), the folder (created, writable: ValueError naming
    it) and its lock (FolderInUse when another run writes there, unless ``wait``). ``run.json`` records the
    experiment and its config, so that ``bayesattn check`` and ``figures`` can read the folder back. ``on_start``
    (when given) is called once the lock is held, before any point (the command line's start line). ``reuse``:
    result folders or point stores whose finished points are taken before computing (:func:`run_sweep`; a
    part's files are looked for in ``<dir>/points/<part>`` and ``<dir>/<part>``; checked to exist first). Points
    that fail do not stop the other parts: SweepError at the end, and no summary. Returns the summary, which holds
    the experiment's own summary and: ``experiment``, ``config``, ``points`` (per part), ``points_resumed``,
    ``points_reused``, ``points_computed``, ``points_damaged``, ``compute_time_s`` (the sum of the points' own
    times, whichever run computed them) and per part, ``wall_time_s`` (this run), ``figures``, ``versions`` and
    ``provenance`` (this process's) and ``computed_on`` (the points' own machines and commits: :func:`computed_on`)."""
    experiment.check(config)
    parts = {part: pts for part, pts in experiment.points(config).items() if pts}
    reuse = check_reuse(reuse)
    out = prepare_output_dir(out_dir, "--out")
    with folder_lock(out, wait=wait):
        if on_start is not None:
            on_start()
        t0 = time.perf_counter()
        experiment.progress = progress
        if (out / "run.json").is_file():  # a folder of another experiment is refused; one of another config of
            # this experiment is not: its points stay beside this config's, and a rerun of it finds them
            try:
                before = read_run_info(out, "--out")["experiment"]
            except ValueError:
                before = experiment.name  # not a run's record: replaced below
            if before != experiment.name:
                raise ValueError(
                    f"--out={str(out)!r}: holds a run of the experiment {before!r} (its run.json); expected a new "
                    f"folder or one of {experiment.name!r}"
                )
        if hasattr(experiment, "artifacts"):  # an experiment that keeps files besides its points (checkpoints)
            experiment.artifacts = out / "artifacts"
        write_json_atomic(
            out / "run.json",
            {
                "experiment": experiment.name,
                "config": config.to_dict(),
                "points": {p: len(v) for p, v in parts.items()},
                # the files of this config's points: what summaries and figures read (files.load_results)
                "point_files": {p: sorted(f"{point_id(q)}.json" for q in v) for p, v in parts.items()},
                "versions": package_versions(),
            },
        )
        records: dict[str, list[dict]] = {}
        stats: dict[str, dict] = {}
        errors = []
        for part, pts in parts.items():
            stats[part] = {}
            try:
                records[part] = run_sweep(
                    pts,
                    experiment.compute,
                    out / "points" / part,
                    workers=workers,
                    executor=executor,
                    progress=progress,
                    desc=part,
                    batch=experiment.batch(config, part),
                    stats=stats[part],
                    reuse=[d / "points" / part if (d / "points" / part).is_dir() else d / part for d in reuse],
                )
            except SweepError as e:
                errors.append(e)
                continue
            if figures and len(parts) > 1:
                for path in experiment.part_figures(out, part):
                    if progress:
                        log(f"{part} done: {Path(path).relative_to(out)}")
        if errors:
            raise SweepError("; ".join(map(str, errors)), [f for e in errors for f in e.failures])
        summary = experiment.summarize(config, records)
        prov = provenance()
        compute = {p: float(sum(r.get("wall_time_s", 0.0) for r in recs)) for p, recs in records.items()}
        summary = {
            "experiment": experiment.name,
            "config": config.to_dict(),
            **summary,
            "points": {p: len(r) for p, r in records.items()},
            "points_resumed": sum(s["resumed"] for s in stats.values()),
            "points_reused": sum(s["reused"] for s in stats.values()),
            "points_computed": sum(s["computed"] for s in stats.values()),
            "points_damaged": [d for s in stats.values() for d in s["damaged"]],
            "compute_time_s": float(sum(compute.values())),
            "compute_time_s_by_part": compute,
            "versions": prov.pop("versions"),
            "provenance": prov,
            "computed_on": computed_on([r for recs in records.values() for r in recs]),
        }

        def finish(**extra):
            summary.update(extra, wall_time_s=time.perf_counter() - t0)
            write_json_atomic(out / "summary.json", summary)

        finish()
        if figures:
            finish(figures=[str(Path(p).relative_to(out)) for p in experiment.figures(out)])
    for line in experiment.describe(summary):
        log(line)
    return summary


def verify(points: dict[str, list[dict]], out_dir: str | os.PathLike) -> dict:
    """Check a result folder against the points it should hold, computing nothing: per part, the points whose
    files are complete (``ok``), ``missing``, ``damaged`` (name: what is wrong) and the ``other`` point files
    there (results of other settings, kept for when those settings come back)."""
    out = Path(out_dir)
    report: dict[str, dict] = {}
    for part, pts in points.items():
        folder = out / "points" / part
        expected = {f"{point_id(p)}.json": p for p in pts}
        r = report[part] = {"ok": [], "missing": [], "damaged": {}, "other": []}
        for name, p in expected.items():
            path = folder / name
            if not path.exists():
                r["missing"].append(name)
                continue
            problem = check_record(path, p)[1]
            (r["damaged"].__setitem__(name, problem) if problem else r["ok"].append(name))
        if folder.is_dir():
            r["other"] = sorted(
                q.name for q in folder.glob("*.json") if q.name not in expected and not q.name.startswith(".")
            )
    return report
