"""Behaviour that no test pinned until the mutation run (scripts/mutation_test.sh, tests/README.md) changed
it unnoticed. Each test names the mutant it kills; references are numpy and the documented formats."""

from __future__ import annotations

import concurrent.futures as cf
from importlib import metadata

import jax
import numpy as np

import bayesattn as ba
from bayesattn import provenance
from bayesattn.sweep import point_id, run_sweep


def test_posterior_Sxy_is_the_documented_statistic():
    """posterior.py `@property Sxy` removed: Sxy[s, t] = sum_mu x_{mu,s} y_{mu,t}^T over target rows,
    (T, T, d, d_out); numpy reference."""
    data = ba.CopyTask(T=4, d=3).sample(jax.random.key(0), P=7)
    post = ba.Posterior(data, "softmax", ba.Prior())
    Y = np.asarray(data.Y) * np.asarray(data.task.query_mask, float)[None, :, None]
    ref = np.einsum("psi,ptk->stik", np.asarray(data.X), Y)
    assert post.Sxy.shape == (4, 4, 3, data.task.d_out)
    np.testing.assert_allclose(post.Sxy, ref, rtol=1e-12, atol=1e-12)


def test_point_id_is_readable_and_ends_in_a_hash():
    """sweep.py `if stem` negated: the file stem is 'method-attention-T=..-P=..-<10 hex digits>', and a
    point without those fields is named by its hash alone."""
    pid = point_id({"method": "nuts", "attention": "softmax", "T": 8, "P": 100, "seed": 3})
    stem, digest = pid.rsplit("-", 1)
    assert stem == "nuts-softmax-T=8-P=100"
    assert len(digest) == 10 and int(digest, 16) >= 0
    bare = point_id({"seed": 3})
    assert len(bare) == 10 and int(bare, 16) >= 0
    assert point_id({"seed": 4}) != bare


def square(point):
    return {"value": point["P"] ** 2}


class CountingExecutor(cf.ThreadPoolExecutor):
    def __init__(self):
        super().__init__(max_workers=2)
        self.submitted = 0

    def submit(self, *args, **kwargs):
        self.submitted += 1
        return super().submit(*args, **kwargs)


def test_sweep_uses_a_given_executor_even_with_one_worker(tmp_path):
    """sweep.py `executor is None and workers == 1` -> `or`: an executor passed in is always used."""
    points = [{"method": "toy", "P": p} for p in range(3)]
    with CountingExecutor() as ex:
        recs = run_sweep(points, square, tmp_path, workers=1, executor=ex, progress=False)
    assert ex.submitted == 3 and [r["result"]["value"] for r in recs] == [0, 1, 4]


def test_sweep_progress_bar_counts_points_and_is_on_by_default(tmp_path, capsys):
    """The default shows a progress bar counting finished points out of all points (serial and executor
    paths); a sweep whose every point is already on disk shows none (a resume printed a second, empty bar)
    (kills `progress=False` defaults and `update(2)`)."""
    points = [{"method": "toy", "P": p} for p in range(2)]
    run_sweep(points, square, tmp_path / "a", desc="toysweep")
    assert "toysweep" in capsys.readouterr().err.replace("\r", "\n").splitlines()[-1]
    run_sweep(points, square, tmp_path / "a", desc="toysweep")  # already finished: no bar
    assert "toysweep" not in capsys.readouterr().err
    ex = CountingExecutor()
    run_sweep(points, square, tmp_path / "b", desc="toysweep", executor=ex)
    ex.shutdown()
    last = capsys.readouterr().err.replace("\r", "\n").strip().splitlines()[-1]
    assert "2/2" in last, last
    run_sweep(points[:1] + [{"method": "toy", "P": 7}], square, tmp_path / "b", desc="toysweep")  # one of two to do
    last = capsys.readouterr().err.replace("\r", "\n").strip().splitlines()[-1]
    assert "2/2" in last, last


def test_versions_name_a_missing_package(monkeypatch):
    """provenance.py `except metadata.PackageNotFoundError` replaced: a package that is not installed is reported
    as such, not an error."""

    def version(name):
        if name == "blackjax":
            raise metadata.PackageNotFoundError(name)
        return "1.0"

    monkeypatch.setattr(provenance.metadata, "version", version)
    v = provenance.package_versions()
    assert v["blackjax"] == "not installed" and v["jax"] == "1.0" and "python" in v
