"""Ctrl-C at any moment ends the command with status 130, at once, without a crash or a traceback, and loses no
finished point. The signal lands during compilation, the theory, MCMC and a file write."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
TINY = [
    "--T",
    "8",
    "--d",
    "4",
    "--set",
    "mcmc.num_chains=1",
    "--set",
    "mcmc.num_warmup=50",
    "--set",
    "theory.num_P=40",
    "--set",
    "theory.vary_name=",
    "--no-figures",
    "--quiet",
]


def _start(args, tmp_path):
    return subprocess.Popen(
        [sys.executable, "-m", "bayesattn.cli", "phase-diagram", *args],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
    )


def _wait_for(cond, proc, timeout=180.0):
    deadline = time.time() + timeout
    while time.time() < deadline and proc.poll() is None and not cond():
        time.sleep(0.05)
    assert proc.poll() is None, f"finished before the signal: {proc.communicate()}"
    assert cond(), "the run did not reach the stage in time"


def _interrupt(proc, max_s=5.0):
    t0 = time.time()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    return proc.returncode, time.time() - t0, err


def _check_clean(rc, took, err, max_s=5.0):
    assert rc == 130, (rc, err)
    assert "interrupted" in err and "Traceback" not in err and "Fatal Python error" not in err, err
    assert took < max_s, f"exit took {took:.1f} s after the signal: it waited for the computation"


@pytest.mark.parametrize("delay", [0.3, 2.5])
def test_sigint_during_compilation_and_theory(tmp_path, delay):
    """0.3 s after the header: tracing and compiling the theory; 2.5 s: computing its tables."""
    proc = _start([*TINY, "--methods", "theory", "--P", "100,400", "--out", "run"], tmp_path)
    first = proc.stdout.readline()
    assert first.startswith("bayesattn: phase-diagram"), first
    time.sleep(delay)
    rc, took, err = _interrupt(proc)
    _check_clean(rc, took, err)


@pytest.mark.parametrize("executor", ["serial", "thread"])
def test_sigint_during_mcmc_keeps_finished_points_and_resumes(tmp_path, executor):
    """Points one after another, or two at a time on threads (the phase diagram's default), interrupted once a
    point has landed: finished files are kept as they were, every file on disk is complete, and a rerun
    computes the rest."""
    args = [
        *TINY,
        "--executor",
        executor,
        "--methods",
        "mcmc",
        "--attention",
        "softmax",
        "--P",
        "100,200",
        "--set",
        "mcmc.num_samples=1000",
        "--out",
        "run",
    ]
    pts = tmp_path / "run" / "points" / "mcmc"
    proc = _start(args, tmp_path)
    _wait_for(lambda: len(list(pts.glob("*.json"))) >= 1, proc)
    done = {p.name: p.read_bytes() for p in pts.glob("*.json")}
    rc, took, err = _interrupt(proc)
    _check_clean(rc, took, err)
    after = {p.name: p.read_bytes() for p in pts.glob("*.json")}
    assert all(after[n] == b for n, b in done.items())  # finished points kept, unchanged
    if executor == "serial":
        assert len(done) < 2  # the interrupt came while the second point was computing
    for b in after.values():
        json.loads(b)  # every file on disk is complete
    r = subprocess.run(
        [sys.executable, "-m", "bayesattn.cli", "phase-diagram", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=ENV,
    )
    assert r.returncode == 0, r.stderr
    assert len(list(pts.glob("*.json"))) == 2 and all(
        p.read_bytes() == b for p, b in ((pts / n, b) for n, b in done.items())
    )


SNIPPET = """
import json, os, signal, sys, time
from pathlib import Path
from bayesattn import files, runtime

runtime.exit_on_interrupt("bayesattn: interrupted")
real_fsync = os.fsync

def slow_fsync(fd):  # the signal arrives while the result file is being written
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(1.0)
    real_fsync(fd)

os.fsync = slow_fsync
files.write_json_atomic(Path(sys.argv[1]), {"finished": True, "data": list(range(1000))})
os.fsync = real_fsync
time.sleep(30)  # never reached: the watcher ends the process as soon as the rename is done
print("not interrupted")
"""


def test_sigint_while_writing_finishes_the_file_then_exits_130(tmp_path):
    target = tmp_path / "point.json"
    t0 = time.time()
    r = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(SNIPPET), str(target)],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=60,
    )
    assert r.returncode == 130, (r.returncode, r.stderr)
    assert "not interrupted" not in r.stdout and "Traceback" not in r.stderr
    assert json.loads(target.read_text())["finished"] is True  # written in full, under its final name
    assert not list(tmp_path.glob(".*.tmp"))
    assert time.time() - t0 < 25


def test_sigterm_exits_143(tmp_path):
    proc = _start([*TINY, "--methods", "theory", "--P", "100,400", "--out", "run"], tmp_path)
    proc.stdout.readline()
    time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143 and "Traceback" not in err, err


def test_interrupt_while_importing_exits_130_without_a_traceback(tmp_path):
    """The command's entry point (bayesattn_launcher) handles Ctrl-C before JAX is imported."""
    import signal
    import subprocess
    import sys
    import time

    code = (
        "import sys, bayesattn_launcher; sys.argv = ['bayesattn', 'phase-diagram', '--out', sys.argv[1]]; "
        "sys.exit(bayesattn_launcher.main())"
    )
    for delay in (0.2, 0.6):
        proc = subprocess.Popen(
            [sys.executable, "-c", code, str(tmp_path / f"out{delay}")],
            stderr=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
        )
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 130, (delay, proc.returncode, err[-500:])
        assert b"Traceback" not in err, err[-500:]
