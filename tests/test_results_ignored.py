"""A run without --out writes under results/ of the current folder; git must ignore that folder wherever it is
(checked with git itself, in a fresh repository)."""

import shutil
import subprocess

import pytest

from bayesattn.commands import DEFAULT_ROOT, ignore_results_root


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_default_result_root_is_ignored_by_git_and_a_users_file_is_kept(tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    root = tmp_path / "sub" / DEFAULT_ROOT  # a run started from a subfolder of a checkout
    (root / "default" / "points").mkdir(parents=True)
    (root / "default" / "points" / "a.json").write_text("{}")
    ignore_results_root(root)
    status = subprocess.run(["git", "status", "--porcelain"], cwd=tmp_path, capture_output=True, text=True, check=True)
    assert status.stdout == ""
    (tmp_path / "kept.txt").write_text("x")  # the check itself sees untracked files
    status = subprocess.run(["git", "status", "--porcelain"], cwd=tmp_path, capture_output=True, text=True, check=True)
    assert status.stdout.strip() == "?? kept.txt"
    # a .gitignore the user wrote is left alone
    (root / ".gitignore").write_text("mine\n")
    ignore_results_root(root)
    assert (root / ".gitignore").read_text() == "mine\n"
