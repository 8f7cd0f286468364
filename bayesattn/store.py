"""Point stores: a run's finished point files, compressed, kept where they outlive the machine that computed them.

A long run (days of CPU time, seed by seed) may go on over several machines or working sessions, each starting
from a fresh checkout. Its finished points travel in a *point store*: a folder ``<store>/<part>/`` of the run's
point files, each gzip-compressed (``<point_id>.json.gz``, the same record, checksum included), small enough to
keep under git beside the run's summary. :func:`archive_points` writes a result folder's finished points into a
store; ``bayesattn run ... --reuse STORE`` (:func:`bayesattn.sweep.run_sweep`'s ``reuse``) takes them back
before computing the rest, each only when it holds exactly the point asked for and its result matches its
checksum. A store never decides what a run computes: the run's config does, through the point ids.

A point's record says where it was computed (its ``provenance``: host, platform, CPU, code commit). A training
run in float32 on another CPU may differ from this one's in its last bits, which long trainings amplify, so a
seed's result is reproducible on one machine and software stack, not across them; a store keeps the record that
was computed, and says where.
"""

from __future__ import annotations

import os
from pathlib import Path

from .files import read_json, read_run_info, write_json_gz_atomic
from .runtime import prepare_output_dir
from .sweep import check_record, point_id

__all__ = ["archive_points"]


def archive_points(run_dir: str | os.PathLike, store: str | os.PathLike) -> dict[str, int]:
    """Copy the finished point files of the result folder ``run_dir`` (those its ``run.json`` lists for its
    config) into the point store ``store``, gzip-compressed: ``<store>/<part>/<point_id>.json.gz``.

    A record already in the store with the same checksum is left as it is; a file in ``run_dir`` that is not a
    complete record of its point (cut short, garbled) is not copied. Returns the counts ``written``,
    ``unchanged``, ``missing`` (listed but not computed yet) and ``damaged``. ValueError when ``run_dir`` is not
    a folder written by ``bayesattn run`` or ``store`` is inside it."""
    run, store = Path(run_dir), Path(store)
    listed = read_run_info(run).get("point_files")
    if store.resolve().is_relative_to(run.resolve()):
        raise ValueError(f"--to={str(store)!r}: inside the result folder {str(run_dir)!r} (expected another folder)")
    if listed is None:
        raise ValueError(f"dir={str(run_dir)!r}: its run.json lists no point files (a run older than the list)")
    prepare_output_dir(store, "--to")
    counts = {"written": 0, "unchanged": 0, "missing": 0, "damaged": 0}
    for part, names in listed.items():
        for name in names:
            src = run / "points" / part / name
            if not src.is_file():
                counts["missing"] += 1
                continue
            try:
                rec = read_json(src)
            except ValueError:
                rec = None
            point = rec.get("point") if isinstance(rec, dict) else None
            if point is None or f"{point_id(point)}.json" != name or check_record(src, point)[1] is not None:
                counts["damaged"] += 1
                continue
            dst = store / part / f"{name}.gz"
            old = check_record(dst, point)[0] if dst.is_file() else None
            if old is not None and old.get("checksum") == rec.get("checksum"):
                counts["unchanged"] += 1
                continue
            write_json_gz_atomic(dst, rec)
            counts["written"] += 1
    return counts
