"""Result files: plain-JSON conversion, the one atomic write, reads that name the file they fail on, and the point
files of a sweep (:func:`point_id` names them, :func:`check_record` checks one, :func:`set_aside` moves a damaged one).

Every result file of the package goes through :func:`write_atomic`: the bytes go to a temporary file in the
same folder, are fsync-ed, and the temporary file is renamed over the target, so a reader (or a run killed at
any instant) only ever sees the old file or the complete new one. A failed write (a full disk, a folder made
read-only mid-run) removes its temporary file and raises an ``OSError`` that names the target path.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from ._json import to_plain

# Held during the write-and-rename of a result file: the interrupt watcher (bayesattn.sweep.exit_on_interrupt)
# takes it before ending the process, so a signal never leaves a finished point unwritten.
WRITE_LOCK = threading.RLock()


def to_jsonable(obj: Any) -> Any:
    """Plain JSON types; non-finite floats become the strings 'nan' / 'inf' (visible, never a bare NaN token)."""
    return to_plain(obj, nonfinite="string")


def checksum(obj: Any) -> str:
    """SHA-256 of the canonical JSON of ``obj`` (sorted keys): equal for a result and its parsed file."""
    return hashlib.sha256(json.dumps(to_jsonable(obj), sort_keys=True).encode()).hexdigest()


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_atomic(path: str | os.PathLike, write: Callable[[IO[bytes]], Any]) -> Path:
    """Write ``path`` atomically: ``write(f)`` fills a temporary binary file in the same folder, which is
    fsync-ed and renamed over ``path``. The file gets the permissions of a plain ``open`` (0666 minus the
    umask). On failure the temporary file is removed and an OSError naming ``path`` is raised."""
    path = Path(path)
    with WRITE_LOCK:
        tmp = None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
            os.fchmod(fd, 0o666 & ~_umask())
            with os.fdopen(fd, "wb") as f:
                write(f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except OSError as e:
            if tmp is not None:
                Path(tmp).unlink(missing_ok=True)
            raise OSError(e.errno, e.strerror or str(e), str(path)) from None
        except BaseException:
            if tmp is not None:
                Path(tmp).unlink(missing_ok=True)
            raise
    return path


def clear_stale_temps(folder: str | os.PathLike) -> list[Path]:
    """Remove the temporary files that :func:`write_atomic` leaves in ``folder`` when its process is killed
    mid-write (``.<name>.<random>.tmp``); returns them. Call it only while no other process writes there (under the
    folder's lock)."""
    stale = sorted(Path(folder).glob(".*.tmp"))
    for f in stale:
        f.unlink(missing_ok=True)
    return stale


def write_json_atomic(path: str | os.PathLike, data: Any) -> Path:
    """Write ``data`` (converted by :func:`to_jsonable`) as indented JSON, atomically (:func:`write_atomic`)."""
    blob = json.dumps(to_jsonable(data), indent=1).encode()
    return write_atomic(path, lambda f: f.write(blob))


def write_json_gz_atomic(path: str | os.PathLike, data: Any) -> Path:
    """Write ``data`` as compact gzip-compressed JSON, atomically: the form of a point store's files
    (:func:`bayesattn.sweep.archive_points`). The gzip header carries no time stamp, so equal data give equal
    bytes (a store under git changes only where a record does)."""
    blob = gzip.compress(json.dumps(to_jsonable(data), separators=(",", ":")).encode(), compresslevel=9, mtime=0)
    return write_atomic(path, lambda f: f.write(blob))


def write_jsonl_atomic(path: str | os.PathLike, rows: list) -> Path:
    """Write one JSON object per line, atomically."""
    blob = "".join(json.dumps(to_jsonable(r)) + "\n" for r in rows).encode()
    return write_atomic(path, lambda f: f.write(blob))


def read_json(path: str | os.PathLike) -> Any:
    """Parse a JSON file, gzip-compressed when its name ends in ``.gz``; ValueError naming the file when it does
    not parse (a truncated or garbled file)."""
    path = Path(path)
    try:
        if path.suffix == ".gz":
            with gzip.open(path, "rt") as f:
                return json.load(f)
        with open(path) as f:
            return json.load(f)
    except (ValueError, EOFError, gzip.BadGzipFile) as e:  # JSONDecodeError, bytes that are not text, a cut gzip
        raise ValueError(f"{path}: not valid JSON ({e})") from None


def read_run_info(folder: str | os.PathLike, name: str = "dir") -> dict:
    """The ``run.json`` of a result folder written by ``bayesattn run`` (:func:`bayesattn.sweep.run_experiment`): an
    object with ``experiment`` (a name), ``config`` (an object) and, since runs list them, ``point_files`` (an
    object). ValueError naming ``name`` and the folder when there is none, it does not parse or it is another kind
    of file."""
    run = Path(folder) / "run.json"
    if not run.is_file():
        raise ValueError(f"{name}={str(folder)!r}: no run.json there (expected a folder written by `bayesattn run`)")
    info = read_json(run)
    if not (
        isinstance(info, dict)
        and isinstance(info.get("experiment"), str)
        and isinstance(info.get("config"), dict)
        and isinstance(info.get("point_files", {}), dict)
    ):
        raise ValueError(
            f"{name}={str(folder)!r}: its run.json is not a run's record (expected an object with 'experiment' and "
            "'config', as `bayesattn run` writes)"
        )
    return info


def load_results(folder: str | os.PathLike) -> list[dict]:
    """The records of a folder of point files (any sweep), sorted by file name. In a part's folder of an
    experiment's run (``<run>/points/<part>``, whose ``<run>/run.json`` lists the point files of the run's config),
    only the files of that config: points that an earlier config left in the folder are kept on disk (a rerun
    with that config finds them) but are not the current run's results, so no summary or figure reads them."""
    folder = Path(folder)
    files = [p for p in sorted(folder.glob("*.json")) if not p.name.startswith(".")]
    current = current_point_files(folder)
    if current is not None:
        files = [p for p in files if p.name in current]
    return [read_json(p) for p in files]


def current_point_files(folder: str | os.PathLike) -> set[str] | None:
    """The point file names of the run's current config for the part folder ``folder`` (``<run>/points/<part>``),
    from ``<run>/run.json``: empty for a part the config does not run; None where the folder is not such a part
    folder or its run.json does not list them (runs made before the list existed)."""
    folder = Path(folder)
    if folder.parent.name != "points" or not (folder.parent.parent / "run.json").is_file():
        return None
    listed = read_run_info(folder.parent.parent).get("point_files")
    return None if listed is None else set(listed.get(folder.name, ()))


# ------------------------------------------------------------------------------------------ point files
def point_id(point: dict) -> str:
    """Readable, unique file stem of a point: 'method-attention-P=..-<hash>'."""
    blob = json.dumps(to_jsonable(point), sort_keys=True)
    digest = hashlib.sha1(blob.encode()).hexdigest()[:10]
    parts = [str(point[k]) for k in ("method", "attention") if k in point]
    parts += [f"{k}={point[k]}" for k in ("T", "P", "sigma_A2") if k in point]
    stem = "-".join(parts).replace("/", "_").replace(" ", "")
    return f"{stem}-{digest}" if stem else digest


# ----------------------------------------------------------------------------------------------- damaged files
DAMAGED = ".corrupt"  # suffix of a set-aside damaged point file


def check_record(path: Path, point: dict) -> tuple[dict | None, str | None]:
    """(the record, None) when ``path`` is a complete record of ``point``; (None, what is wrong) otherwise: it
    does not parse, is not a point record, holds another point, or its result does not match its checksum."""
    try:
        rec = read_json(path)
    except (OSError, ValueError) as e:
        return None, f"does not parse ({str(e).removeprefix(str(path) + ': ')})"
    if not isinstance(rec, dict) or "point" not in rec or "result" not in rec:
        return None, "is not a point record (no 'point' and 'result')"
    if rec["point"] != to_jsonable(point):
        return None, "holds another point than its name says"
    if "checksum" in rec and rec["checksum"] != checksum(rec["result"]):
        return None, "has a result that does not match its checksum"
    return rec, None


def set_aside(path: Path) -> Path:
    """Rename a damaged file to ``<name>.corrupt`` (``.corrupt.1``, ... when that exists); returns the new path."""
    aside = path.with_name(path.name + DAMAGED)
    k = 0
    while aside.exists():
        k += 1
        aside = path.with_name(f"{path.name}{DAMAGED}.{k}")
    os.replace(path, aside)
    return aside
