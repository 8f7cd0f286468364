"""`bayesattn staircase` end to end on a tiny config: every part, the summary, the figures, and a rerun that
computes nothing (resumable)."""

import json
from pathlib import Path

import pytest

from bayesattn.cli import main

pytest.importorskip("diffrax")


@pytest.mark.slow
def test_staircase_command_runs_and_resumes(tmp_path):
    cfg = Path(__file__).parent / "data" / "staircase_tiny.toml"
    out = tmp_path / "run"
    assert main(["staircase", "--config", str(cfg), "--out", str(out), "--quiet"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary["mcmc"]) == {"softmax/H=2/w=0.6/cold", "softmax/H=2/w=0.6/hot"}
    assert len(summary["train"]["stages"]) == 1 and len(summary["ode"]["stages"]) == 3
    assert sorted(p.name for p in (out / "figures").iterdir()) == [
        "staircase_bayes.png",
        "staircase_ode.png",
        "staircase_training.png",
    ]
    files = sorted((out / "points").rglob("*.json"))
    stamps = [p.stat().st_mtime_ns for p in files]
    assert main(["staircase", "--config", str(cfg), "--out", str(out), "--quiet"]) == 0
    assert [p.stat().st_mtime_ns for p in files] == stamps
