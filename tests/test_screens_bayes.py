"""The Bayesian copy head through the screens (bayesattn.experiments.screens.bayes)."""

import numpy as np
import pytest

from bayesattn.bayes.theory.common import first_crossing as _cross
from bayesattn.diagnostics.screens import participation_ratio
from bayesattn.experiments.screens import BayesLensConfig, Screens, ScreensConfig
from bayesattn.experiments.screens.bayes import lens
from bayesattn.experiments.screens.figures import bayes_lens_figure
from bayesattn.sweep import run_experiment


def test_lens_on_constructed_draws():
    cfg = BayesLensConfig(T=6, d=4)
    task = cfg.task()
    T, src = 6, 4  # the last query t = 5 copies key 4
    eps = np.array([0.5, 0.1, 0.0])
    alpha = np.zeros((3, T, T))
    for i, e in enumerate(eps):
        alpha[i] = e / (T - 1)
        alpha[i, np.arange(T), (np.arange(T) - 1) % T] = 1 - e
    X = np.eye(4)[np.random.default_rng(0).integers(0, 4, size=(50, T))]
    r = lens(alpha, task, X)
    np.testing.assert_allclose(r["selectivity"][:2], (1 - eps[:2]) * (T - 1) / eps[:2])
    assert r["selectivity"][2] > 1e10
    np.testing.assert_allclose(r["mass"], 1 - eps)
    # a perfect copy head outputs the source tokens themselves
    assert r["pr"][2] == pytest.approx(participation_ratio(X[:, src]))
    # uniform attention: every output row is the token histogram / T
    uni = np.full((1, T, T), 1 / T)
    assert lens(uni, task, X)["pr"][0] == pytest.approx(participation_ratio(X.mean(1)))


def test_cross():
    assert _cross([10, 100, 1000], [1.0, 10.0, 100.0], 30.0) == pytest.approx(10 ** (2 + np.log10(100) * 0 + 20 / 90))
    assert _cross([10, 100], [1.0, 2.0], 30.0) is None


@pytest.mark.slow
def test_run_small(tmp_path):
    cfg = BayesLensConfig(
        T=4,
        d=3,
        P=[20, 2000],
        mcmc={"num_chains": 1, "num_warmup": 50, "num_samples": 50},
        probe_N=32,
        theory_points=2,
    )
    config = ScreensConfig(parts=["bayes", "theory"], bayes=cfg)
    summary = run_experiment(Screens(), config, tmp_path, progress=False, figures=False)
    s = {**summary["bayes"], "theory": summary["theory"]}
    assert [p["P"] for p in s["points"]] == [20, 2000]
    th = s["theory"]["points"]
    assert [round(p["P"]) for p in th] == [20, 2000]
    assert th[1]["selectivity_median"] > th[0]["selectivity_median"]
    assert th[1]["pr_limit_mean"] > th[0]["pr_limit_mean"]
    assert s["points"][1]["selectivity_median"] > s["points"][0]["selectivity_median"]
    assert bayes_lens_figure(tmp_path).exists()


def test_pr_onehot_limit_matches_many_sequences():
    from bayesattn.experiments.screens.theory import pr_onehot_limit

    rng = np.random.default_rng(2)
    d, T, N = 5, 7, 200000
    X = np.eye(d)[rng.integers(0, d, size=(N, T))]
    for a in (np.full(T, 1 / T), rng.dirichlet(np.ones(T)), np.eye(T)[3]):
        out = np.einsum("t,ntd->nd", a, X)
        assert participation_ratio(out) == pytest.approx(float(pr_onehot_limit(np.sum(a**2), d)), rel=2e-3)
