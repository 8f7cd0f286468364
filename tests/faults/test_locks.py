"""Two runs into one folder: the second stops with one line naming the first (or waits with --wait); a lock left
by a killed run is taken over by the next one, which says so."""

import json
import signal
import subprocess
import time

from fault_support import ENV, folder_state, toy_command


def _start(out, *extra):
    return subprocess.Popen(
        toy_command("--set", "n=30", "--set", "sleep=0.1", "--quiet", "--out", str(out), *extra),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
    )


def _wait_for_points(out, n, proc, timeout=120):
    deadline = time.time() + timeout
    while time.time() < deadline and proc.poll() is None:
        if len(list((out / "points" / "squares").glob("*.json"))) >= n:
            return
        time.sleep(0.05)
    raise AssertionError(
        f"no {n} points in time: {proc.poll()} {proc.communicate() if proc.poll() is not None else ''}"
    )


def test_second_run_stops_with_one_line_then_waits_with_wait(tmp_path):
    out = tmp_path / "run"
    first = _start(out)
    _wait_for_points(out, 1, first)
    second = subprocess.run(
        toy_command("--set", "n=30", "--set", "sleep=0.1", "--quiet", "--out", str(out)),
        capture_output=True,
        text=True,
        env=ENV,
        timeout=120,
    )
    err = second.stderr.strip().splitlines()
    assert second.returncode == 2 and len(err) == 1, second.stderr
    assert "another run is writing there" in err[0] and f"pid {first.pid}" in err[0]
    assert second.stdout == ""  # no start line for a run that never started
    figures = subprocess.run(
        [*toy_command()[:3], "figures", str(out)], capture_output=True, text=True, env=ENV, timeout=120
    )  # the running run draws them when it ends
    assert figures.returncode == 2 and figures.stderr.count("\n") == 1, figures.stderr
    assert f"dir={str(out)!r}: another run is writing there" in figures.stderr and f"pid {first.pid}" in figures.stderr
    assert not (out / "figures" / "toy.txt").exists()
    waiting = _start(out, "--wait")
    assert first.wait(timeout=120) == 0 and waiting.wait(timeout=120) == 0, waiting.stderr.read()
    assert len(folder_state(out)) == 30


def test_lock_of_a_killed_run_is_taken_over(tmp_path):
    out = tmp_path / "run"
    first = _start(out)
    _wait_for_points(out, 3, first)
    first.send_signal(signal.SIGKILL)
    first.wait()
    assert (out / ".bayesattn.lock.json").exists()  # its note stays behind
    second = subprocess.run(
        toy_command("--set", "n=30", "--set", "sleep=0.1", "--quiet", "--out", str(out)),
        capture_output=True,
        text=True,
        env=ENV,
        timeout=120,
    )
    assert second.returncode == 0, second.stderr
    assert "took over the lock of a run that ended without releasing it" in second.stderr
    assert f"pid {first.pid}" in second.stderr
    assert len(folder_state(out)) == 30 and json.loads((out / "summary.json").read_text())["total"] == sum(
        i * i for i in range(30)
    )


def test_temporary_files_a_kill_left_in_the_folder_are_cleared_by_the_next_run(tmp_path):
    """A SIGKILL while the lock's note, run.json or summary.json was being written leaves write_atomic's temporary
    file in the folder itself (seen once in the random-kill test); the next run, holding the lock, clears it."""
    out = tmp_path / "run"
    out.mkdir()
    stale = [out / "..bayesattn.lock.json.k1ll3d.tmp", out / ".summary.json.abc123.tmp", out / ".run.json.x.tmp"]
    for f in stale:
        f.write_text('{"half": ')
    done = subprocess.run(
        toy_command("--set", "n=3", "--quiet", "--out", str(out)), capture_output=True, text=True, env=ENV, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert not list(out.rglob("*.tmp")) and len(folder_state(out)) == 3


def test_sigterm_to_a_process_pool_run_prints_its_one_line_only(tmp_path):
    """The pool's semaphores, left by the immediate exit, are unlinked by multiprocessing's resource tracker,
    which warned about each ("leaked semaphore objects") after the command's own line: it no longer does."""
    out = tmp_path / "run"
    proc = _start(out, "--executor", "process", "--workers", "2")
    _wait_for_points(out, 2, proc)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)  # to the end of stderr: the tracker, which shares it, has ended too
    assert proc.returncode == 143, err
    assert err.strip() == "bayesattn: interrupted; finished points are on disk, rerun the same command to resume", err
