"""Result files are written atomically: a write that fails halfway, or whose rename fails, never
leaves a partial or overwritten result file; a rerun of the sweep recomputes the point.

The failures are injected into the two steps of the write: the JSON serialiser (which writes part of the
document, then raises) and the rename (``os.replace``). A plain ``open(path, "w")`` would leave a truncated
file in the first case and the new content in the second.
"""

from __future__ import annotations

import os

import pytest

from bayesattn import files as result_files
from bayesattn.files import read_json, write_json_atomic
from bayesattn.sweep import point_id, run_sweep

CALLS = []


def compute(point):
    CALLS.append(point["P"])
    return {"value": point["P"] ** 2, "pad": list(range(200))}  # long enough to be cut halfway


def files(folder):
    return sorted(p.name for p in folder.iterdir())


class Interrupted(Exception):
    pass


class HalfWriter:
    """A file object whose write() writes the first half of the document, flushes it, then fails."""

    def __init__(self, f):
        self.f = f

    def write(self, text):
        self.f.write(text[: len(text) // 2])
        self.f.flush()
        raise Interrupted("disk full halfway through the document")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.f.close()
        return False

    def __getattr__(self, name):
        return getattr(self.f, name)


def half_writing_fdopen(fd, *args, **kw):
    """os.fdopen whose file fails halfway through the JSON document (the serialised result)."""
    return HalfWriter(REAL_FDOPEN(fd, *args, **kw))


REAL_FDOPEN = result_files.os.fdopen


def test_serialiser_failing_halfway_leaves_no_result_file_and_rerun_recomputes(tmp_path, monkeypatch):
    points = [{"method": "toy", "P": p} for p in range(3)]
    run_sweep(points[:1], compute, tmp_path, progress=False)  # one finished point
    done = files(tmp_path)
    assert done == [f"{point_id(points[0])}.json"]
    CALLS.clear()
    monkeypatch.setattr(result_files.os, "fdopen", half_writing_fdopen)
    with pytest.raises(Interrupted):
        run_sweep(points, compute, tmp_path, progress=False)
    monkeypatch.undo()
    assert CALLS == [1]  # point 1 was computed, its write failed
    assert files(tmp_path) == done  # no file for point 1, not even a temporary one; point 0 untouched
    CALLS.clear()
    recs = run_sweep(points, compute, tmp_path, progress=False)
    assert CALLS == [1, 2]  # the failed point is recomputed, the finished one is not
    assert [r["result"]["value"] for r in recs] == [0, 1, 4]
    for p in points:
        assert read_json(tmp_path / f"{point_id(p)}.json")["point"] == p


def test_failed_rename_keeps_the_old_file_whole(tmp_path, monkeypatch):
    path = tmp_path / "result.json"
    old = {"value": 1, "pad": list(range(200))}
    write_json_atomic(path, old)
    assert read_json(path) == old

    def no_rename(src, dst):
        raise OSError("rename failed")

    monkeypatch.setattr(result_files.os, "replace", no_rename)
    with pytest.raises(OSError, match="rename failed"):
        write_json_atomic(path, {"value": 2, "pad": []})
    monkeypatch.undo()
    assert read_json(path) == old  # the old, valid content
    assert files(tmp_path) == ["result.json"]  # the temporary file is cleared


def test_failed_rename_in_a_sweep_leaves_no_result_file(tmp_path, monkeypatch):
    points = [{"method": "toy", "P": p} for p in range(2)]

    def no_rename(src, dst):
        raise OSError("rename failed")

    CALLS.clear()
    monkeypatch.setattr(result_files.os, "replace", no_rename)
    with pytest.raises(OSError, match="rename failed"):
        run_sweep(points, compute, tmp_path, progress=False)
    monkeypatch.undo()
    assert files(tmp_path) == []
    CALLS.clear()
    recs = run_sweep(points, compute, tmp_path, progress=False)
    assert CALLS == [0, 1] and [r["result"]["value"] for r in recs] == [0, 1]


def test_stale_temporary_file_of_a_killed_run_is_never_read(tmp_path):
    """A process killed between the write and the rename leaves only a dot-temporary file: the point is
    not done, and the rerun clears the file and computes the point."""
    point = {"method": "toy", "P": 5}
    stale = tmp_path / f".{point_id(point)}.json.abc.tmp"
    stale.write_text('{"point": {"method": "toy", "P": 5}, "res')  # cut mid-write
    CALLS.clear()
    recs = run_sweep([point], compute, tmp_path, progress=False)
    assert CALLS == [5] and recs[0]["result"]["value"] == 25
    assert files(tmp_path) == [f"{point_id(point)}.json"]
    assert not os.path.exists(stale)
