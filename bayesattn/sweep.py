"""Run any computation over a grid of points, one result file per point, atomically and resumably.

A *point* is a JSON-serialisable dict (method, attention, P, task and prior fields, keys, ...). Its result file
is ``out_dir/<point_id(point)>.json``; the id is readable and ends in a hash of the whole point, so a changed
config never reuses a stale result. Files are written to a temporary name and renamed (``os.replace``), so an
interrupted sweep leaves only complete files: rerunning the same sweep skips them and computes the rest.

Execution is pluggable: ``executor`` is any ``concurrent.futures.Executor`` (a process pool by default when
``workers > 1``; a distributed engine exposing the same interface, e.g. dask's or ray's executors, plugs in
unchanged). ``compute`` must then be picklable (a module-level function).
"""

from __future__ import annotations

import concurrent.futures as cf
import hashlib
import json
import os
import platform
import tempfile
import time
from collections.abc import Callable, Sequence
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


def write_json_atomic(path: Path, data: dict) -> None:
    """Write JSON to a temporary file in the same folder, fsync, then rename over ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(to_jsonable(data), f, indent=1)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_json(path: Path) -> dict:
    with open(path) as f:
        return json.load(f)


def _run_one(compute: Callable[[dict], dict], point: dict) -> dict:
    t0 = time.perf_counter()
    result = compute(point)
    return {"point": point, "result": result, "wall_time_s": time.perf_counter() - t0,
            "versions": package_versions(), "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S")}


def run_sweep(
    points: Sequence[dict],
    compute: Callable[[dict], dict],
    out_dir: str | os.PathLike,
    *,
    workers: int = 1,
    progress: bool = True,
    executor: cf.Executor | None = None,
    desc: str = "sweep",
) -> list[dict]:
    """Compute ``compute(point)`` for every point not already on disk; return all records in ``points`` order.

    Each record is ``{"point", "result", "wall_time_s", "versions", "finished_at"}`` and is stored in
    ``out_dir/<point_id>.json`` as soon as its point finishes. ``workers > 1`` runs points in a process pool
    (``compute`` must then be a picklable module-level function); ``executor`` overrides the pool.
    """
    workers = check_int("workers", workers, minimum=1)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for stale in out.glob(".*.json.*.tmp"):  # half-written by a killed run: never read, cleared here
        stale.unlink(missing_ok=True)
    paths = [out / f"{point_id(p)}.json" for p in points]
    if len(set(paths)) != len(paths):
        raise ValueError("points: contains duplicate points (each grid point must be unique)")
    todo = [i for i, path in enumerate(paths) if not path.exists()]

    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(points), initial=len(points) - len(todo), desc=desc, unit="pt")
    try:
        if executor is None and workers == 1:
            for i in todo:
                write_json_atomic(paths[i], _run_one(compute, points[i]))
                if bar:
                    bar.update(1)
        else:
            own = executor is None
            if own:
                import multiprocessing as mp

                # spawn: JAX is multithreaded and must not be forked
                executor = cf.ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn"))
            try:
                futures = {executor.submit(_run_one, compute, points[i]): i for i in todo}
                for fut in cf.as_completed(futures):
                    write_json_atomic(paths[futures[fut]], fut.result())
                    if bar:
                        bar.update(1)
            finally:
                if own:
                    executor.shutdown(wait=True, cancel_futures=True)
    finally:
        if bar:
            bar.close()
    return [read_json(p) for p in paths]


def load_results(out_dir: str | os.PathLike) -> list[dict]:
    """All finished records in a folder (any sweep), sorted by file name."""
    return [read_json(p) for p in sorted(Path(out_dir).glob("*.json")) if not p.name.startswith(".")]
