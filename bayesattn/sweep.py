"""Run any computation over a grid of points, one result file per point, atomically and resumably.

A *point* is a JSON-serialisable dict (method, attention, P, task and prior fields, keys, ...). Its result file
is ``out_dir/<point_id(point)>.json``; the id is readable and ends in a hash of the whole point, so a changed
point never reuses a stale result (the caller decides what a point holds: only what its computation depends
on). Files are written to a temporary name and renamed (``os.replace``), so an interrupted sweep leaves only
complete files: rerunning the same sweep skips them and computes the rest.

Execution is pluggable: ``executor`` is any ``concurrent.futures.Executor`` (a process pool by default when
``workers > 1``) or a ``dask.distributed.Client`` (:mod:`bayesattn.scaleout` builds them); ``compute`` must
then be picklable (a module-level function). Result files are always written by the calling process, so a
lost worker never leaves a partial file. A point that raises is listed in ``failures.jsonl`` and the sweep
goes on (:class:`SweepError` at the end); points of one shape can be computed together (:class:`Batch`).

Interrupts (:func:`exit_on_interrupt`, for command-line processes): SIGINT / SIGTERM end the process at once
with status 130 / 143, except during the write-and-rename of a result file, which is finished first.
"""

from __future__ import annotations

import concurrent.futures as cf
import functools
import hashlib
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from ._json import to_plain
from ._validate import check_int

PACKAGES = ("bayesattn", "jax", "jaxlib", "numpy", "numpyro", "blackjax", "optax", "scipy", "matplotlib")


def package_versions() -> dict[str, str]:
    """Versions of the packages that determine the numbers, plus Python's."""
    out = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


@functools.cache
def code_version() -> dict[str, Any]:
    """The git commit of the bayesattn source that runs, and whether its tracked files differ from it.

    Only when the imported package is the ``bayesattn/`` folder of a git checkout (an editable install or
    PYTHONPATH); otherwise, e.g. an installed wheel, both are "unknown"."""
    pkg = Path(__file__).resolve().parent
    unknown = {"git_commit": "unknown", "git_dirty": "unknown"}

    def git(*args):
        return subprocess.run(["git", "-C", str(pkg), *args], capture_output=True, text=True, timeout=10)

    try:
        top = git("rev-parse", "--show-toplevel")
        if top.returncode or Path(top.stdout.strip()).resolve() / pkg.name != pkg:
            return unknown  # not a checkout, or a checkout that merely contains an installed copy
        commit = git("rev-parse", "HEAD")
        status = git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return unknown
    if commit.returncode or status.returncode:
        return unknown
    return {"git_commit": commit.stdout.strip(), "git_dirty": bool(status.stdout.strip())}


def provenance() -> dict[str, Any]:
    """What produced a result: code version (git), platform, JAX backend and devices, package versions."""
    import jax

    return {
        **code_version(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "hostname": platform.node(),
        "jax_backend": jax.default_backend(),
        "jax_devices": [f"{d.platform}:{d.device_kind}" for d in jax.devices()],
        "versions": package_versions(),
    }


def to_jsonable(obj: Any) -> Any:
    """Plain JSON types; non-finite floats become the strings 'nan' / 'inf' (visible, never a bare NaN token)."""
    return to_plain(obj, nonfinite="string")


def point_id(point: dict) -> str:
    """Readable, unique file stem of a point: 'method-attention-P=..-<hash>'."""
    blob = json.dumps(to_jsonable(point), sort_keys=True)
    digest = hashlib.sha1(blob.encode()).hexdigest()[:10]
    parts = [str(point[k]) for k in ("method", "attention") if k in point]
    parts += [f"{k}={point[k]}" for k in ("T", "P", "sigma_A2") if k in point]
    stem = "-".join(parts).replace("/", "_").replace(" ", "")
    return f"{stem}-{digest}" if stem else digest


# ----------------------------------------------------------------------------------------------- output paths
def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _probe(folder: Path) -> None:
    """Create and remove a file in ``folder``: raises OSError if the folder cannot take new files."""
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".bayesattn-probe-")
    os.close(fd)
    os.unlink(tmp)


def _why(e: OSError) -> str:
    return e.strerror or type(e).__name__


def prepare_output_dir(path: str | os.PathLike, name: str = "out_dir") -> Path:
    """Create the folder ``path`` (and its parents) and check that files can be written there.

    ValueError naming ``name`` when it is an existing file or cannot be created or written: call it before any
    work, so that a bad path fails in a second and not after the computation."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise ValueError(f"{name}={str(path)!r}: exists and is not a folder; expected a folder to write results into")
    try:
        path.mkdir(parents=True, exist_ok=True)
        _probe(path)
    except OSError as e:
        raise ValueError(
            f"{name}={str(path)!r}: cannot write files there ({_why(e)}); expected a writable folder"
        ) from None
    return path


def check_output_file(path: str | os.PathLike, name: str = "out") -> Path:
    """Check that the file ``path`` can be written (creating its parent folders); ValueError naming ``name``."""
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{name}={str(path)!r}: is a folder; expected a file name")
    if path.exists() and not os.access(path, os.W_OK):
        raise ValueError(f"{name}={str(path)!r}: exists and is not writable")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        _probe(path.parent)
    except OSError as e:
        raise ValueError(
            f"{name}={str(path)!r}: cannot write files in {str(path.parent)!r} ({_why(e)}); "
            "expected a path in a writable folder"
        ) from None
    return path


# ----------------------------------------------------------------------------------------------- interrupts
# Held during the write-and-rename of a result file; the interrupt watcher takes it before ending the process,
# so a signal never leaves a finished point unwritten.
_WRITE_LOCK = threading.RLock()
_WATCHER: dict[str, Any] = {}


def exit_on_interrupt(message: str) -> None:
    """For a command-line process: on SIGINT (SIGTERM) print ``message`` and end at once with status 130 (143).

    Why not KeyboardInterrupt: JAX dispatches work to XLA's threads asynchronously, so when the exception
    reaches the top, compiled code or a compilation may still be running; Python's teardown then frees
    buffers and the client under those threads, which crashed (status 139) in 3 of 13 tries. Instead,
    Python's C-level handler writes the signal number to a pipe (``signal.set_wakeup_fd``) the moment it
    arrives, and a watcher thread ends the process with ``os._exit`` (no teardown) as soon as no result file
    is being written. Every finished point is already on disk (written atomically), so nothing is lost, and
    the exit does not wait for the running computation to finish. Call from the main thread."""
    if _WATCHER:
        _WATCHER["message"] = message
        return
    r, w = os.pipe()
    os.set_blocking(w, False)
    signal.set_wakeup_fd(w, warn_on_full_buffer=False)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: None)  # the watcher acts; no KeyboardInterrupt in the main thread
    _WATCHER.update(message=message, fds=(r, w))

    def watch():
        sig = 0
        while sig not in (signal.SIGINT, signal.SIGTERM):  # the pipe also carries other handled signals
            sig = os.read(r, 1)[0]
        with _WRITE_LOCK:  # let a result file that is being written be renamed into place first
            try:
                sys.stdout.flush()
                sys.stderr.write(f"\n{_WATCHER['message']}\n")
                sys.stderr.flush()
            finally:
                os._exit(128 + sig)

    threading.Thread(target=watch, name="bayesattn-interrupt", daemon=True).start()


def _worker_init() -> None:
    """Pool workers: leave interrupts to the parent, and end when the parent has ended."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    parent = os.getppid()

    def watch_parent():
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch_parent, name="bayesattn-parent-watch", daemon=True).start()


# ----------------------------------------------------------------------------------------------- files
def write_json_atomic(path: Path, data: dict) -> None:
    """Write JSON to a temporary file in the same folder, fsync, then rename over ``path``.

    The file gets the permissions of a plain ``open`` (0666 minus the umask), not mkstemp's private 0600."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    blob = json.dumps(to_jsonable(data), indent=1)
    with _WRITE_LOCK:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            os.fchmod(fd, 0o666 & ~_umask())
            with os.fdopen(fd, "w") as f:
                f.write(blob)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


def read_json(path: Path) -> dict:
    with open(path) as f:
        return json.load(f)


@dataclass(frozen=True)
class Batch:
    """How a sweep computes several points in one call (``run_sweep(..., batch=...)``).

    ``key(point)``: points with equal keys (not None) can be computed together (same shapes); ``many(points)``
    returns their results in order, the same as ``[compute(p) for p in points]`` would (a picklable module-level
    function); ``size``: at most this many points per call (1: no batching)."""

    key: Callable[[dict], Hashable]
    many: Callable[[list[dict]], list[dict]]
    size: int = 8


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
    goes on; interrupts (BaseException) pass through."""
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
    prov = provenance()
    versions = prov.pop("versions")
    prov["executor"] = executor
    if many:
        prov["batch_size"] = len(points)
    at = time.strftime("%Y-%m-%dT%H:%M:%S")
    return [
        (
            "ok",
            {"point": p, "result": r, "wall_time_s": wall, "versions": versions, "provenance": prov, "finished_at": at},
        )
        for p, r in zip(points, results)
    ]


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
    """
    workers = check_int("workers", workers, minimum=1)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for stale in out.glob(".*.json*.tmp"):  # half-written by a killed run (results, failures.jsonl): cleared
        stale.unlink(missing_ok=True)
    paths = [out / f"{point_id(p)}.json" for p in points]
    if len(set(paths)) != len(paths):
        raise ValueError("points: contains duplicate points (each grid point must be unique)")
    todo = [i for i, path in enumerate(paths) if not path.exists()]
    failures_path = out / FAILURES
    failures_path.unlink(missing_ok=True)  # it described an earlier run, whose failed points are retried now
    failures: list[dict] = []
    name = executor_name(executor, workers)
    many = batch is not None and batch.size > 1
    fn = batch.many if many else compute

    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(points), initial=len(points) - len(todo), desc=desc, unit="pt")

    def finish(idx: list[int], outcomes: list[tuple[str, dict]]) -> None:
        for i, (status, rec) in zip(idx, outcomes):
            if status == "ok":
                write_json_atomic(paths[i], rec)
            else:
                failures.append(
                    {"id": point_id(points[i]), "point": points[i], **rec, "at": time.strftime("%Y-%m-%dT%H:%M:%S")}
                )
                _write_failures(failures_path, failures)
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
                    max_workers=workers, mp_context=mp.get_context("spawn"), initializer=_worker_init
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
                    idx = futures[fut]
                    try:
                        outcomes = fut.result()
                    except Exception:  # noqa: BLE001 -- a lost task: reported, left for the rerun
                        outcomes = lost(idx)
                    finish(idx, outcomes)
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
    return [read_json(p) for p in paths]


def _write_failures(path: Path, failures: list[dict]) -> None:
    """The failures file, rewritten atomically: one JSON object per line."""
    blob = "".join(json.dumps(to_jsonable(f)) + "\n" for f in failures)
    with _WRITE_LOCK:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w") as f:
                f.write(blob)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


def load_results(out_dir: str | os.PathLike) -> list[dict]:
    """All finished records in a folder (any sweep), sorted by file name."""
    return [read_json(p) for p in sorted(Path(out_dir).glob("*.json")) if not p.name.startswith(".")]
