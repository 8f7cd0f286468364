"""Damaged point files (a copy cut short, garbage, a file holding another point, an edited number): each is set
aside with one warning naming it and its point is computed again; `bayesattn check` finds them without
computing anything; the summary counts them."""

import json

import pytest
from fault_support import folder_state, use_toy

from bayesattn.cli import main
from bayesattn.sweep import check_record, point_id, run_sweep

SETS = ["--set", "n=6", "--quiet", "--no-figures"]


def _damage(path, how, other=None):
    if how == "truncated":
        path.write_bytes(path.read_bytes()[:300])
    elif how == "garbage":
        path.write_bytes(b"\x00\xff\xfe not json at all \x81")
    elif how == "empty":
        path.write_bytes(b"")
    elif how == "another point":
        path.write_bytes(other.read_bytes())
    elif how == "edited number":
        rec = json.loads(path.read_text())
        rec["result"]["square"] += 1
        path.write_text(json.dumps(rec))


@pytest.mark.parametrize("how", ["truncated", "garbage", "empty", "another point", "edited number"])
def test_a_damaged_point_file_is_set_aside_and_recomputed(tmp_path, monkeypatch, capsys, how):
    use_toy(monkeypatch)
    out = tmp_path / "run"
    assert main(["run", "toy", *SETS, "--out", str(out)]) == 0
    clean = folder_state(out)
    files = sorted((out / "points" / "squares").glob("*.json"))
    _damage(files[2], how, other=files[3])
    capsys.readouterr()
    assert main(["check", str(out)]) == 1
    report = capsys.readouterr().out
    assert f"damaged: {files[2].name}" in report and "1 point files missing or damaged" in report
    assert main(["run", "toy", *SETS, "--out", str(out)]) == 0
    err = [line for line in capsys.readouterr().err.splitlines() if "warning" in line]
    assert len(err) == 1 and files[2].name in err[0] and ".corrupt" in err[0], err
    assert (files[2].parent / (files[2].name + ".corrupt")).exists()
    assert folder_state(out) == clean  # recomputed, the others untouched
    summary = json.loads((out / "summary.json").read_text())
    assert summary["points_damaged"] == [files[2].name] and summary["points_computed"] == 1
    assert main(["check", str(out)]) == 0


def test_check_lists_missing_points_and_computes_nothing(tmp_path, monkeypatch, capsys):
    use_toy(monkeypatch)
    out = tmp_path / "run"
    assert main(["run", "toy", *SETS, "--out", str(out)]) == 0
    gone = sorted((out / "points" / "squares").glob("*.json"))[:2]
    for p in gone:
        p.unlink()
    capsys.readouterr()
    assert main(["check", str(out)]) == 1
    text = capsys.readouterr().out
    assert "4 complete, 2 missing, 0 damaged" in text and all(f"missing: {p.name}" in text for p in gone)
    assert not any(p.exists() for p in gone)  # check computes nothing


def test_check_record_names_what_is_wrong(tmp_path):
    points = [{"i": 1}, {"i": 2}]
    run_sweep(points, lambda p: {"v": p["i"]}, tmp_path, progress=False)
    a, b = (tmp_path / f"{point_id(p)}.json" for p in points)
    assert check_record(a, points[0]) == (json.loads(a.read_text()), None)
    assert check_record(a, points[1])[1] == "holds another point than its name says"
    a.write_text('{"point": {"i": 1}')
    assert check_record(a, points[0])[1].startswith("does not parse")
    b.write_text(json.dumps({"point": {"i": 2}, "result": {"v": 3}, "checksum": "0" * 64}))
    assert check_record(b, points[1])[1] == "has a result that does not match its checksum"


def test_a_changed_config_reads_only_its_own_points(tmp_path, monkeypatch):
    """A second config run into the same folder keeps the first one's point files on disk (its rerun finds them)
    but its summary and everything that reads the folder's results (files.load_results: the figures) see only
    its own points; a folder without the list (an older run.json) still reads every file."""
    from bayesattn.files import load_results, read_json

    use_toy(monkeypatch)
    out = tmp_path / "run"
    folder = out / "points" / "squares"
    assert main(["run", "toy", *SETS, "--out", str(out)]) == 0  # squares 0..25
    first = sorted(p.name for p in folder.glob("*.json"))
    assert main(["run", "toy", "--set", "n=3", "--set", "seed=7", "--quiet", "--no-figures", "--out", str(out)]) == 0
    assert len(list(folder.glob("*.json"))) == 6 + 3 and set(first) <= {p.name for p in folder.glob("*.json")}
    assert sorted(r["result"]["square"] for r in load_results(folder)) == [7, 8, 11]
    assert read_json(out / "summary.json")["total"] == 7 + 8 + 11
    run = read_json(out / "run.json")
    del run["point_files"]
    (out / "run.json").write_text(json.dumps(run))
    assert len(load_results(folder)) == 9
