"""Sweep engine: one atomic file per point, resume skips finished points, interruption loses nothing."""

import json
import math

import numpy as np
import pytest

from bayesattn.sweep import load_results, point_id, run_sweep, to_jsonable

CALLS = []


def square(point):
    CALLS.append(point["P"])
    if point["P"] == 3 and point.get("fail"):
        raise KeyboardInterrupt  # an interrupt in the middle of a sweep
    return {"value": np.float64(point["P"]) ** 2, "arr": np.arange(3)}


def test_sweep_writes_one_file_per_point_and_resumes(tmp_path):
    CALLS.clear()
    points = [{"method": "toy", "P": p} for p in range(5)]
    recs = run_sweep(points, square, tmp_path, progress=False)
    assert [r["result"]["value"] for r in recs] == [p**2 for p in range(5)]
    assert len(list(tmp_path.glob("*.json"))) == 5
    assert "jax" in recs[0]["versions"] and recs[0]["point"] == points[0]
    CALLS.clear()
    run_sweep(points, square, tmp_path, progress=False)
    assert CALLS == []  # all finished: nothing recomputed


def test_interrupted_sweep_keeps_finished_points(tmp_path):
    CALLS.clear()
    points = [{"method": "toy", "P": p, "fail": True} for p in range(5)]
    with pytest.raises(KeyboardInterrupt):
        run_sweep(points, square, tmp_path, progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(f"{point_id(p)}.json" for p in points[:3])
    assert not list(tmp_path.glob(".*tmp"))  # no half-written file
    CALLS.clear()
    for p in points:
        p["fail"] = False
    # the changed point (fail flag) gets a new id: a config change never reuses stale results
    points2 = [{"method": "toy", "P": p} for p in range(5)]
    run_sweep(points2, square, tmp_path, progress=False)
    assert len(load_results(tmp_path)) == 8


def test_process_pool_matches_serial(tmp_path):
    points = [{"method": "toy", "P": p} for p in range(4)]
    a = run_sweep(points, square, tmp_path / "a", progress=False)
    b = run_sweep(points, square, tmp_path / "b", workers=2, progress=False)
    assert [r["result"] for r in a] == [r["result"] for r in b]


def test_nonfinite_values_are_visible_not_bare_nan():
    out = json.loads(json.dumps(to_jsonable({"x": np.array([1.0, np.nan]), "y": math.inf})))
    assert out == {"x": [1.0, "nan"], "y": "inf"}


def test_bad_input(tmp_path):
    with pytest.raises(ValueError, match="workers"):
        run_sweep([{"P": 1}], square, tmp_path, workers=0)
    with pytest.raises(ValueError, match="duplicate"):
        run_sweep([{"P": 1}, {"P": 1}], square, tmp_path)


def test_a_record_names_the_code_read_before_any_point_computed(tmp_path):
    """The git commit in a point's provenance is read before the first point computes (once per process), so a
    commit made during a long computation does not relabel the code that ran: the version cache is already
    filled while the point computes, and the record holds that version."""
    from bayesattn import provenance

    provenance.code_version.cache_clear()
    seen = []

    def compute(point):
        seen.append(provenance.code_version.cache_info().currsize)
        return {"x": point["i"]}

    recs = run_sweep([{"i": 0}, {"i": 1}], compute, tmp_path, progress=False)
    assert seen == [1, 1]
    want = provenance.code_version()
    assert all(r["provenance"]["git_commit"] == want["git_commit"] for r in recs)
