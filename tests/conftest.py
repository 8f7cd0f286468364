"""Shared, independent numpy/scipy references for the core tests.

Nothing here calls bayesattn's numerics: attention maps, the explicit n x d design matrix Z and the
n x n Gaussian-process evidence are written from docs/model.md sections 1-2 in plain numpy, so a test that
compares the package against them checks two separate code paths.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

# Every figure a test draws is checked strictly (bayesattn.figstyle.check_figure): a legend or text over the data,
# a label cut by the figure's edge, overlapping labels or text below 8 pt fails the test instead of warning.
os.environ.setdefault("BAYESATTN_FIGURE_CHECK", "error")

# The suite compiles several hundred small programs, most of which then run for milliseconds: XLA is asked for
# little optimisation (JAX's jax_disable_most_optimizations), which shortens the compilations, in this process and
# in the processes it starts. Numbers change only by rounding (tests/test_optimisation_level.py compares a log density and
# its gradient with the fully optimised program's); set JAX_DISABLE_MOST_OPTIMIZATIONS=0 to test what users run.
os.environ.setdefault("JAX_DISABLE_MOST_OPTIMIZATIONS", "1")

# The suite's compiled programs go to one persistent cache shared by its worker processes (never the user's
# ~/.cache): the command line, called in-process by many tests, would switch the cache on anyway, and tests that
# compile the same program in the other worker load it instead. A compiled program is the same whether compiled or
# loaded, so no number depends on it.
os.environ.setdefault("BAYESATTN_CACHE_DIR", str(Path(tempfile.gettempdir()) / f"bayesattn-tests-jax-{os.getuid()}"))
if os.environ["BAYESATTN_CACHE_DIR"] != "off":
    from bayesattn.runtime import enable_compile_cache

    enable_compile_cache()


def np_attention(L, attention, key_mask):
    """alpha = a(L) in numpy. L: (T, T); key_mask: (T, T) bool."""
    L = np.asarray(L, dtype=np.float64)
    T = L.shape[-1]
    if attention == "linear":
        return np.where(key_mask, L, 0.0) / np.sqrt(T)
    alpha = np.zeros_like(L)
    for t in range(T):
        keys = np.flatnonzero(key_mask[t])
        e = np.exp(L[t, keys] - L[t, keys].max())
        alpha[t, keys] = e / e.sum()
    return alpha


def np_design(L, dataset, attention):
    """Explicit rows: Z (n, d) with z_{mu,t} = sum_s alpha_ts x_{mu,s} and Y (n, d_out), query rows only."""
    task = dataset.task
    alpha = np_attention(L, attention, task.key_mask)
    X, Y = np.asarray(dataset.X), np.asarray(dataset.Y)
    rows = np.flatnonzero(task.query_mask)
    Z = np.stack([np.stack([alpha[t] @ X[mu] for t in rows]) for mu in range(X.shape[0])])
    return Z.reshape(-1, task.d), Y[:, rows].reshape(-1, task.d_out)


def np_gp_log_evidence(Z, Y, prior):
    """Brute force: sum over output coordinates k of log N(Y[:, k]; 0, (sigma_V2/d) Z Z^T + sigma2 I)."""
    n, d = Z.shape
    if n == 0:
        return 0.0
    K = (prior.sigma_V2 / d) * Z @ Z.T + prior.sigma2 * np.eye(n)
    mvn = stats.multivariate_normal(mean=np.zeros(n), cov=K)
    return float(sum(mvn.logpdf(Y[:, k]) for k in range(Y.shape[1])))


def np_log_prior_L(L, sigma_A2):
    return float(stats.norm.logpdf(np.asarray(L), scale=np.sqrt(sigma_A2)).sum())


def strip_timings(result: dict) -> dict:
    """An MCMC point's result per init without its timings (wall and compile time differ between two runs of
    the same point; everything else must not)."""
    return {
        i: {k: v for k, v in s.items() if k != "diagnostics"}
        | {"diag": {k: v for k, v in s["diagnostics"].items() if k not in ("wall_time_s", "compile_time_s")}}
        for i, s in result["inits"].items()
    }


@pytest.fixture
def rng():
    return np.random.default_rng(20240601)


class KillProbe:
    """A kill between two parts of a long run, in process: ``module.save_loop_state`` raises KeyboardInterrupt
    once its second file is written (``saves``: the (args, kwargs) of each save). After :meth:`resume`, saves go
    through again and the result of each load of a saved state (``load_loop_state``, which the runs reach through
    :class:`~bayesattn.training.checkpoints.RunClock`) is kept in ``loaded``."""

    def __init__(self, monkeypatch, module):
        from bayesattn.training import checkpoints

        self.monkeypatch, self.module, self.checkpoints = monkeypatch, module, checkpoints
        self.real_save, self.real_load = module.save_loop_state, checkpoints.load_loop_state
        self.saves, self.loaded = [], []
        monkeypatch.setattr(module, "save_loop_state", self._save_then_die)

    def _save_then_die(self, *args, **kwargs):
        self.real_save(*args, **kwargs)
        self.saves.append((args, kwargs))
        if len(self.saves) == 2:
            raise KeyboardInterrupt

    def _load(self, *args, **kwargs):
        got = self.real_load(*args, **kwargs)
        self.loaded.append(got)
        return got

    @staticmethod
    def drop_saved_time(path) -> None:
        """Rewrite the state saved at ``path`` without the training time in its meta (``wall_s``), as versions
        before the carried time wrote it; the rest of the meta stays."""
        with np.load(path) as z:
            arrays = {k: z[k] for k in z.files}
        header = json.loads(str(arrays["header"]))
        assert "wall_s" in header["meta"]
        header["meta"] = {k: v for k, v in header["meta"].items() if k != "wall_s"}
        np.savez(path, **{**arrays, "header": np.asarray(json.dumps(header))})

    def rerun_without_saved_time(self, run, folder, pattern: str):
        """``run()`` until the kill, its saved state (the one file ``folder/pattern``) rewritten without its time,
        then resumed: the rerun's result."""
        with pytest.raises(KeyboardInterrupt):
            run()
        (saved,) = Path(folder).glob(pattern)
        self.drop_saved_time(saved)
        self.resume()
        return run()

    def resume(self) -> None:
        self.monkeypatch.setattr(self.module, "save_loop_state", self.real_save)
        self.monkeypatch.setattr(self.checkpoints, "load_loop_state", self._load)


@pytest.fixture
def kill_at_second_save(monkeypatch):
    """``kill_at_second_save(module)``: a :class:`KillProbe` on the module that saves a long run's state."""
    return lambda module: KillProbe(monkeypatch, module)


def pytest_collection_modifyitems(session, config, items):
    """Run the Dask tests (tests/test_scaleout.py) last: a closed Dask client leaves its event-loop thread
    running in the test process, and the other tests need not share the process with it. (A crash first
    suspected on it came from the compiled-program maps: see ``_release_compiled_programs``.)"""
    items.sort(key=lambda item: item.nodeid.startswith("tests/test_scaleout.py"))


def _mapped_regions() -> int:
    try:
        with open("/proc/self/maps") as f:
            return sum(1 for _ in f)
    except OSError:  # not Linux
        return 0


@pytest.fixture(autouse=True, scope="module")
def _release_compiled_programs():
    """Drop JAX's compiled programs after a test module once the process maps more than 20 000 memory regions.
    One process runs the whole suite, and every compiled XLA:CPU program keeps its code mapped; without this a
    full run approaches the kernel's vm.max_map_count (65530 here) and a late compile crashes (seen twice, in
    different tests: regions grew 6734 -> 8813 over three modules). Clearing only past the threshold keeps the
    compiled programs that later modules reuse."""
    yield
    n = _mapped_regions()
    if n > 20000:
        import gc

        import jax

        jax.clear_caches()
        gc.collect()
        n = _mapped_regions()
    if os.environ.get("BAYESATTN_REPORT_MAPS"):
        print(f"\n[maps after module: {n}]")
