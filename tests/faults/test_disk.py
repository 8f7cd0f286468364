"""A full disk or a folder that becomes unwritable mid-run: one line naming the path and the errno, status 1, every
finished point kept, nothing half-written left; an unwritable folder before the run: status 2 before any work. The
faults are injected into the one atomic write (bayesattn.files) and into the output-folder probe, as a tiny
filesystem or a read-only mount would raise them (the tests run as root, whom permissions do not stop)."""

import errno
import os

import pytest
from fault_support import folder_state, use_toy

from bayesattn import files, runtime
from bayesattn.cli import main

SETS = ["--set", "n=8", "--quiet"]


def _fail_after(monkeypatch, n_ok: int, code: int):
    """os.fsync of result files raises ``code`` after ``n_ok`` successful writes."""
    real = os.fsync
    count = {"n": 0}

    def fsync(fd):
        count["n"] += 1
        if count["n"] > n_ok:
            raise OSError(code, os.strerror(code))
        real(fd)

    monkeypatch.setattr(files.os, "fsync", fsync)


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EROFS, errno.EACCES])
def test_write_failing_mid_run_is_one_line_and_keeps_finished_points(tmp_path, monkeypatch, capsys, code):
    use_toy(monkeypatch)
    out = tmp_path / "run"
    with monkeypatch.context() as m:
        _fail_after(m, 5, code)  # run.json, the lock's note, then 3 point files
        assert main(["run", "toy", *SETS, "--out", str(out)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"[Errno {code}]" in err[0] and str(out / "points" / "squares") in err[0], err
    assert "Traceback" not in err[0]
    kept = folder_state(out)
    assert len(kept) == 3
    assert not list(out.rglob("*.tmp")), "a half-written file was left"
    assert main(["run", "toy", *SETS, "--out", str(out)]) == 0  # the disk has room again: the run resumes
    after = folder_state(out)
    assert len(after) == 8 and all(after[k] == v for k, v in kept.items())


def test_unwritable_folder_is_refused_before_any_work(tmp_path, monkeypatch, capsys):
    use_toy(monkeypatch)

    def read_only(*a, **k):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS))

    monkeypatch.setattr(runtime.tempfile, "mkstemp", read_only)
    # the compilation cache's folder is probed the same way, before the check: this test is about --out alone
    monkeypatch.setenv("BAYESATTN_CACHE_DIR", "off")
    out = tmp_path / "ro"
    assert main(["run", "toy", *SETS, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--out=" in err[0] and "Read-only file system" in err[0], err
    assert not (out / "points").exists()


def test_summary_that_cannot_be_written_keeps_every_point(tmp_path, monkeypatch, capsys):
    use_toy(monkeypatch)
    out = tmp_path / "run"
    _fail_after(monkeypatch, 2 + 8, errno.ENOSPC)  # every point file, then the summary fails
    assert main(["run", "toy", *SETS, "--out", str(out)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "summary.json" in err[0] and "[Errno 28]" in err[0], err
    assert len(folder_state(out)) == 8 and not (out / "summary.json").exists()
    assert not list(out.rglob("*.tmp"))
