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


def test_staircase_training_and_ode_parts_with_their_figures(tmp_path):
    """The default suite's run of the command's training and ODE parts (the slow test above adds the MCMC part):
    the summary's ODE stages are those of the ODE solved directly, the gradient flow's loss never rises, the
    stages come in order, and both parts draw their figure."""
    from bayesattn.dynamics.ode import ODEConfig, solve, stage_times
    from bayesattn.experiments import get_experiment

    cfg_file = Path(__file__).parent / "data" / "staircase_tiny.toml"
    out = tmp_path / "run"
    assert main(["staircase", "--config", str(cfg_file), "--parts", "train,ode", "--out", str(out), "--quiet"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert not summary.get("mcmc") and len(summary["train"]["stages"]) == 1  # the parts asked for only
    cfg = get_experiment("staircase").load_config(str(cfg_file))
    sol = solve(ODEConfig(**cfg.ode.model_dump()))
    assert summary["ode"]["stages"] == stage_times(sol) and len(summary["ode"]["stages"]) == 3
    done = [t for t in summary["ode"]["stages"] if t is not None]
    assert done == sorted(done)
    (point,) = (out / "points" / "ode").glob("*.json")
    loss = json.loads(point.read_text())["result"]["loss"]
    assert all(b <= a * (1 + 1e-6) for a, b in zip(loss, loss[1:])), "gradient flow: the loss cannot rise"
    assert sorted(p.name for p in (out / "figures").iterdir()) == ["staircase_ode.png", "staircase_training.png"]
