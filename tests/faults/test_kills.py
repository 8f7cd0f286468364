"""SIGKILL at random moments, then a rerun: the result folder equals an uninterrupted run's, timings aside. The toy
experiment is killed many times in the default suite; each real experiment once at a tiny size (slow tests)."""

import json
import random
import signal
import subprocess
import sys
import time

import pytest
from fault_support import ENV, ROOT, folder_state, toy_command

TIMING = ("wall", "time_s", "_s")  # keys of results that are timings (wall_s, compile_time_s, train_wall_s, ...)


def _science(x):
    """A result without its timings (keys ending in _s or holding 'wall' / 'time_s')."""
    if isinstance(x, dict):
        return {k: _science(v) for k, v in x.items() if not (k.endswith("_s") or "wall" in k or "time_s" in k)}
    if isinstance(x, list):
        return [_science(v) for v in x]
    return x


def _kill_and_resume(argv, out, delays, point_glob="points/*/*.json"):
    """Run ``argv`` (a list for Popen) and SIGKILL it after each delay in turn, then let a last run finish.
    Returns the number of kills that landed while the run was still working."""
    landed = 0
    for delay in delays:
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=ENV)
        time.sleep(delay)
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            landed += 1
        proc.wait()
    done = subprocess.run(argv, capture_output=True, text=True, env=ENV, timeout=900)
    assert done.returncode == 0, done.stderr
    return landed


def _kill_once_there(argv, out, pattern, poll=0.05, timeout=600):
    """Run ``argv`` and SIGKILL it as soon as a file matching ``pattern`` (under ``out``) exists, mid-run."""
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV)
    deadline = time.time() + timeout
    while time.time() < deadline and proc.poll() is None and not list(out.glob(pattern)):
        time.sleep(poll)
    assert proc.poll() is None, "the run ended before a kill could land"
    proc.send_signal(signal.SIGKILL)
    proc.wait()


def test_toy_killed_at_random_moments_equals_an_uninterrupted_run(tmp_path):
    ref, out = tmp_path / "ref", tmp_path / "killed"
    args = ["--set", "n=40", "--set", "sleep=0.03", "--quiet"]
    r = subprocess.run(toy_command(*args, "--out", str(ref)), capture_output=True, text=True, env=ENV, timeout=300)
    assert r.returncode == 0, r.stderr
    rng = random.Random(7)
    delays = [rng.uniform(0.3, 3.0) for _ in range(8)]
    landed = _kill_and_resume(toy_command(*args, "--out", str(out)), out, delays)
    assert landed >= 4, "most kills should land mid-run"
    assert folder_state(out) == folder_state(ref)
    assert not list(out.rglob("*.tmp"))
    assert (
        json.loads((out / "summary.json").read_text())["total"]
        == json.loads((ref / "summary.json").read_text())["total"]
    )


def _cli(*args):
    return [sys.executable, "-m", "bayesattn.cli", *args]


TINY = {
    "phase-diagram": [
        "phase-diagram",
        "--T",
        "8",
        "--d",
        "4",
        "--P",
        "100,200,400",
        "--set",
        "mcmc.num_chains=1",
        "--set",
        "mcmc.num_warmup=60",
        "--set",
        "mcmc.num_samples=60",
        "--set",
        "adam.seeds=1",
        "--set",
        "adam.steps=100",
        "--set",
        "theory.num_P=30",
        "--set",
        "theory.vary_name=",
    ],
    "three-transitions": [
        "three-transitions",
        "--set",
        "T_values=[4]",
        "--set",
        'attentions=["linear"]',
        "--set",
        "workers=1",
        "--set",
        "adam.steps=300",
        "--set",
        "adam.grid_points=4",
        "--set",
        "mcmc.num_warmup=100",
        "--set",
        "mcmc.num_samples=150",
        "--set",
        "mcmc.num_chains=2",
        "--set",
        "mcmc.grid=3",
        "--set",
        "mcmc.refine=1",
        "--set",
        "mcmc.span=1.35",
    ],
    "staircase": ["staircase", "--config", str(ROOT / "tests" / "data" / "staircase_tiny.toml")],
    "plateau": [
        "plateau",
        "--set",
        "seeds=2",
        "--set",
        'cases=[{attention="linear", T=4, P_over=[1.5, 2.0, 3.0], gd_lr=0.01, gd_steps=300, adam_steps=200}]',
        "--set",
        "theory_points=12",
        "--set",
        'methods=["gd", "sgld", "adam"]',
    ],
    "sparse": [
        "sparse",
        "--set",
        'parts=["grid", "bayes"]',
        "--set",
        "seeds=4",
        "--set",
        "seeds_per_program=2",
        "--set",
        "grid=[[4, 1]]",
        "--set",
        "train.width=8",
        "--set",
        "train.heads=2",
        "--set",
        "train.mlp=16",
        "--set",
        "train.steps=20",
        "--set",
        "train.tokens_per_step=64",
        "--set",
        "train.record_every=10",
        "--set",
        "train.probe=16",
        "--set",
        "train.warmup=5",
        "--set",
        "bayes.grid=[[4, 2]]",
        "--set",
        "bayes.P=[40, 80]",
        "--set",
        'bayes.inits=["cold"]',
        "--set",
        "bayes.mcmc.num_chains=1",
        "--set",
        "bayes.mcmc.num_warmup=30",
        "--set",
        "bayes.mcmc.num_samples=30",
    ],
    "dynlab": [
        "dynlab",
        "--config",
        "focus_dilution",
        "--set",
        "seeds=4",
        "--set",
        "seeds_per_program=2",
        "--set",
        "settings=[{}, {vocab = 3, ratio = 0.3}]",
        "--set",
        "base.T=6",
        "--set",
        "base.n=16",
        "--set",
        "base.d=4",
        "--set",
        "base.steps=40",
        "--set",
        "base.record_every=10",
        "--set",
        "equilibrium.P=[16, 64]",
        "--set",
        "equilibrium.mcmc.num_warmup=50",
        "--set",
        "equilibrium.mcmc.num_samples=50",
    ],
    "screens": [
        "screens",
        "--config",
        "screens_bayes",
        "--set",
        "bayes.T=4",
        "--set",
        "bayes.d=3",
        "--set",
        "bayes.P=[20, 200, 2000]",
        "--set",
        "bayes.probe_N=32",
        "--set",
        "bayes.theory_points=2",
        "--set",
        "bayes.mcmc.num_chains=1",
        "--set",
        "bayes.mcmc.num_warmup=50",
        "--set",
        "bayes.mcmc.num_samples=50",
    ],
}


def _results(out):
    return {k: _science(v["result"]) for k, v in folder_state(out).items()}


@pytest.mark.slow
@pytest.mark.parametrize("experiment", sorted(TINY))
def test_real_experiment_killed_mid_run_equals_an_uninterrupted_run(tmp_path, experiment):
    ref, out = tmp_path / "ref", tmp_path / "killed"
    base = [*TINY[experiment], "--quiet", "--no-figures"]
    r = subprocess.run(_cli(*base, "--out", str(ref)), capture_output=True, text=True, env=ENV, timeout=900)
    assert r.returncode == 0, r.stderr
    # kill once the first point file is on disk (mid-run), then once more a little later, then finish
    argv = _cli(*base, "--out", str(out))
    _kill_once_there(argv, out, "points/*/*.json")
    _kill_and_resume(argv, out, [4.0])
    assert _results(out) == _results(ref)
    assert not list(out.rglob("*.tmp"))


_FD_KILL_CONFIG = (
    'name = "fd_kill"\nexperiment = "focus_dilution"\nseeds = 2\nseeds_per_program = 2\nsettings = [{}]\n'
    "[base]\nT = 6\nn = 16\nd = 4\nsteps = 6000\nrecord_every = 10\n"
)


@pytest.mark.parametrize("experiment", ["staircase", "dynlab"])
def test_training_run_killed_between_parts_goes_on_from_its_saved_state(tmp_path, experiment):
    """SIGKILL of a long training run once it has saved its state (a staircase run after a part,
    artifacts/train-*.npz; a focus-dilution block of dynlab after a block of records, artifacts/focus-*.npz): the
    rerun goes on from there (the file is then removed) and its points equal an uninterrupted run's."""
    if experiment == "staircase":
        base = [*TINY["staircase"], "--set", 'parts=["train"]', "--set", "train.steps=3000"]
        base += ["--set", "train.record_every=100"]
        saved = "artifacts/train-*"
    else:
        (tmp_path / "fd.toml").write_text(_FD_KILL_CONFIG)
        base, saved = ["dynlab", "--config", str(tmp_path / "fd.toml")], "artifacts/focus-*"
    base += ["--quiet", "--no-figures"]
    ref, out = tmp_path / "ref", tmp_path / "killed"
    r = subprocess.run(_cli(*base, "--out", str(ref)), capture_output=True, text=True, env=ENV, timeout=600)
    assert r.returncode == 0, r.stderr
    _kill_once_there(_cli(*base, "--out", str(out)), out, saved + ".npz", poll=0.01)
    assert list(out.glob(saved + ".npz")) and not list(out.glob("points/train/*.json"))
    # `bayesattn check` names the run in flight: its saved state, the step and the training time before it
    r = subprocess.run(_cli("check", str(out)), capture_output=True, text=True, env=ENV, timeout=300)
    assert r.returncode == 1, r.stderr
    (line,) = [x for x in r.stdout.splitlines() if x.startswith("in progress: ")]
    steps = 3000 if experiment == "staircase" else 6000
    assert line.startswith("in progress: " + saved.replace("*", "")) and f" of {steps} after " in line
    assert " s of training (" in line and line.endswith("the rerun goes on from there")
    _kill_and_resume(_cli(*base, "--out", str(out)), out, [])
    assert _results(out) == _results(ref)
    assert not list(out.glob(saved)) and not list(out.rglob("*.tmp"))
