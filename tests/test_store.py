"""Point stores: a run's finished points archived (gzip-compressed) and taken back by another run with --reuse,
each checked against the point asked for and its checksum; a record that does not match is never taken."""

import gzip
import json
import shutil

import pytest

from bayesattn.cli import main
from bayesattn.experiments.copy_head import PhaseDiagram
from bayesattn.experiments.copy_head import compute as copy_head
from bayesattn.files import read_json, write_json_gz_atomic
from bayesattn.store import archive_points
from bayesattn.sweep import point_id, run_experiment

ARGS = ["--methods", "mcmc", "--attention", "softmax", "--P", "100,200,300", "--executor", "serial"]


def _fake_mcmc(point):
    m = 0.1 + point["P"] / 1000
    return {"data": {"P": point["P"]}, "inits": {"cold": {"m": {"mean": m}, "u": {"mean": m}}}}


def _no_mcmc(point):
    raise AssertionError(f"point P = {point['P']} computed: it should have been taken from the store")


def _run(argv, capsys):
    code = main(["phase-diagram", *ARGS, "--quiet", "--no-figures", *argv])
    return code, capsys.readouterr()


def test_gzip_json_round_trip_and_stable_bytes(tmp_path):
    data = {"a": [1.5, 2.0, None], "b": {"c": "text"}, "n": float("nan")}
    write_json_gz_atomic(tmp_path / "x.json.gz", data)
    first = (tmp_path / "x.json.gz").read_bytes()
    assert json.loads(gzip.decompress(first)) == {**data, "n": "nan"} == read_json(tmp_path / "x.json.gz")
    write_json_gz_atomic(tmp_path / "x.json.gz", data)  # no time stamp in the header: equal data, equal bytes
    assert (tmp_path / "x.json.gz").read_bytes() == first
    (tmp_path / "cut.json.gz").write_bytes(first[: len(first) // 2])
    with pytest.raises(ValueError, match="cut.json.gz: not valid JSON"):
        read_json(tmp_path / "cut.json.gz")


def test_archive_then_reuse_computes_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(copy_head.COMPUTE, "mcmc", _fake_mcmc)
    run, store = tmp_path / "run", tmp_path / "store"
    assert _run(["--out", str(run)], capsys)[0] == 0
    assert main(["archive", str(run), "--to", str(store)]) == 0
    assert "3 point files written, 0 unchanged" in capsys.readouterr().out
    stored = sorted(p.name for p in (store / "mcmc").iterdir())
    assert stored == sorted(f"{p.name}.gz" for p in (run / "points" / "mcmc").glob("*.json"))
    # archiving again changes nothing
    assert archive_points(run, store) == {"written": 0, "unchanged": 3, "missing": 0, "damaged": 0}

    # a fresh folder, elsewhere: every point comes from the store, with the very record computed first
    monkeypatch.setitem(copy_head.COMPUTE, "mcmc", _no_mcmc)
    again = tmp_path / "again"
    assert _run(["--out", str(again), "--reuse", str(store)], capsys)[0] == 0
    summary = read_json(again / "summary.json")
    assert summary["points_reused"] == 3 and summary["points_computed"] == 0 and summary["points_resumed"] == 0
    for f in (run / "points" / "mcmc").glob("*.json"):
        assert read_json(again / "points" / "mcmc" / f.name) == read_json(f)
    assert summary["transitions"] == read_json(run / "summary.json")["transitions"]
    # a result folder serves as well as a store (<dir>/points/<part>)
    assert _run(["--out", str(tmp_path / "third"), "--reuse", str(run)], capsys)[0] == 0
    assert read_json(tmp_path / "third" / "summary.json")["points_reused"] == 3


def test_a_store_record_that_does_not_match_is_not_taken(tmp_path, monkeypatch):
    monkeypatch.setitem(copy_head.COMPUTE, "mcmc", _fake_mcmc)
    cfg = PhaseDiagram.load_config(None, ["methods=mcmc", "attention=softmax", "P.values=[100, 200, 300]"])
    run = tmp_path / "run"
    quiet = dict(progress=False, figures=False, log=lambda *_: None)
    run_experiment(PhaseDiagram(), cfg, run, **quiet)
    store = tmp_path / "store"
    archive_points(run, store)
    points = PhaseDiagram().points(cfg)["mcmc"]
    names = [f"{point_id(p)}.json.gz" for p in points]
    # P = 100's file swapped for P = 200's record; P = 300's result altered behind its checksum
    shutil.copy(store / "mcmc" / names[1], store / "mcmc" / names[0])
    rec = read_json(store / "mcmc" / names[2])
    rec["result"]["inits"]["cold"]["m"]["mean"] = 0.9
    write_json_gz_atomic(store / "mcmc" / names[2], rec)

    computed, warnings = [], []
    monkeypatch.setitem(copy_head.COMPUTE, "mcmc", lambda p: computed.append(p["P"]) or _fake_mcmc(p))
    out = tmp_path / "again"
    summary = run_experiment(PhaseDiagram(), cfg, out, **quiet, reuse=[store])
    assert sorted(computed) == [100, 300] and summary["points_reused"] == 1
    by_P = {r["point"]["P"]: r["result"] for r in map(read_json, (out / "points" / "mcmc").glob("*.json"))}
    assert {P: r["inits"]["cold"]["m"]["mean"] for P, r in by_P.items()} == pytest.approx(
        {100: 0.2, 200: 0.3, 300: 0.4}
    )

    # the warnings name each file and what is wrong with it
    from bayesattn.sweep import run_sweep

    run_sweep(points, _fake_mcmc, tmp_path / "sweep", progress=False, warn=warnings.append, reuse=[store / "mcmc"])
    assert len(warnings) == 2
    assert names[0] in warnings[0] and "holds another point" in warnings[0]
    assert names[2] in warnings[1] and "checksum" in warnings[1]


def test_archive_skips_damaged_and_missing_files(tmp_path, monkeypatch):
    monkeypatch.setitem(copy_head.COMPUTE, "mcmc", _fake_mcmc)
    cfg = PhaseDiagram.load_config(None, ["methods=mcmc", "attention=softmax", "P.values=[100, 200, 300]"])
    run = tmp_path / "run"
    run_experiment(PhaseDiagram(), cfg, run, progress=False, figures=False, log=lambda *_: None)
    files = sorted((run / "points" / "mcmc").glob("*.json"))
    files[0].write_text(files[0].read_text()[:50])  # cut short
    files[1].unlink()  # not computed yet
    assert archive_points(run, tmp_path / "store") == {"written": 1, "unchanged": 0, "missing": 1, "damaged": 1}
    assert [p.name for p in (tmp_path / "store" / "mcmc").iterdir()] == [f"{files[2].name}.gz"]


def test_bad_store_arguments_are_named(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(copy_head.COMPUTE, "mcmc", _no_mcmc)
    code, cap = _run(["--out", str(tmp_path / "run"), "--reuse", str(tmp_path / "nowhere")], capsys)
    assert code == 2 and "--reuse=" in cap.err and "nowhere" in cap.err and len(cap.err.strip().splitlines()) == 1
    assert not (tmp_path / "run" / "points").exists()  # checked before any work
    assert main(["archive", str(tmp_path), "--to", str(tmp_path / "store")]) == 2
    assert "no run.json" in capsys.readouterr().err
    monkeypatch.setitem(copy_head.COMPUTE, "mcmc", _fake_mcmc)
    assert _run(["--out", str(tmp_path / "run")], capsys)[0] == 0
    assert main(["archive", str(tmp_path / "run"), "--to", str(tmp_path / "run" / "store")]) == 2
    assert "inside the result folder" in capsys.readouterr().err


def test_summary_names_the_machines_its_points_were_computed_on(tmp_path, monkeypatch):
    """A summary made here from points computed elsewhere says where they were computed (computed_on), beside
    its own process's provenance."""
    monkeypatch.setitem(copy_head.COMPUTE, "mcmc", _fake_mcmc)
    cfg = PhaseDiagram.load_config(None, ["methods=mcmc", "attention=softmax", "P.values=[100, 200, 300]"])
    quiet = dict(progress=False, figures=False, log=lambda *_: None)
    here = run_experiment(PhaseDiagram(), cfg, tmp_path / "run", **quiet)
    assert here["computed_on"] == [
        {
            **{k: here["provenance"][k] for k in ("git_commit", "git_dirty", "cpu", "jax_backend", "jax_devices")},
            "jax": here["versions"]["jax"],
            "jaxlib": here["versions"]["jaxlib"],
            "points": 3,
        }
    ]
    store = tmp_path / "store"
    archive_points(tmp_path / "run", store)
    # two of the stored points say they came from a GPU machine at another commit (the checksum covers results)
    for f in sorted((store / "mcmc").iterdir())[:2]:
        rec = read_json(f)
        rec["provenance"].update(git_commit="0" * 40, jax_backend="gpu", jax_devices=["gpu:NVIDIA H200"])
        rec["versions"]["jax"] = "0.11.2"
        write_json_gz_atomic(f, rec)
    monkeypatch.setitem(copy_head.COMPUTE, "mcmc", _no_mcmc)
    summary = run_experiment(PhaseDiagram(), cfg, tmp_path / "again", **quiet, reuse=[store])
    gpu, cpu = summary["computed_on"]
    assert (gpu["points"], gpu["jax_backend"], gpu["git_commit"], gpu["jax"]) == (2, "gpu", "0" * 40, "0.11.2")
    assert (cpu["points"], cpu["jax_backend"]) == (1, here["provenance"]["jax_backend"])
    assert summary["provenance"] == here["provenance"]  # the summarising process: this one
