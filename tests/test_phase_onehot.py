"""The phase diagram with one-hot tokens and one attention, end to end at a tiny size: the theory point carries
the centred target's loss prediction, MCMC measures the centred held-out error, the seed statistics compare the
two, and the figures (checked strictly by the suite) say only what ran and fit one row of panels."""

from __future__ import annotations

import json

import pytest

import bayesattn.figstyle as figstyle
from bayesattn.cli import main

ONE_HOT = ["--tokens", "onehot", "--T", "16", "--d", "4", "--P", "300,3000", "--methods", "theory,mcmc"]
ONE_HOT += ["--seeds", "2", "--set", "attention=[linear]", "--set", "mcmc.num_warmup=60", "--set"]
ONE_HOT += ["mcmc.num_samples=60", "--set", "theory.num_P=30", "--set", "theory.vary_name=", "--quiet"]


@pytest.fixture(scope="module")
def one_hot_run(tmp_path_factory):
    """The tiny run's folder and the legend titles and title of every figure it drew (read before each is
    checked)."""
    titles: dict[str, list[str]] = {}
    real_save = figstyle.save

    def save(fig, out, **kw):
        titles[out.stem] = [lg.get_title().get_text() for lg in fig.legends] + [fig.get_suptitle()]
        return real_save(fig, out, **kw)

    out = tmp_path_factory.mktemp("onehot") / "run"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(figstyle, "save", save)
        assert main(["phase-diagram", *ONE_HOT, "--out", str(out)]) == 0
    return out, titles


def test_one_hot_run_compares_the_centred_error_and_draws_only_what_ran(one_hot_run):
    out, titles = one_hot_run
    theory = json.loads(next((out / "points" / "theory").glob("*.json")).read_text())
    assert theory["point"]["held_out"] == "centred target" and theory["result"]["losses"]["posterior"]
    for f in (out / "points" / "mcmc").glob("*.json"):
        for group in json.loads(f.read_text())["result"]["inits"].values():
            assert group["test_error"]["target"] == "centred" and 0 < group["test_error"]["mean"] < 1.5
    seeds = json.loads((out / "summary.json").read_text())["seeds"]["attention"]["linear"]["mcmc"]
    assert all(len(seeds[i]["test_error_against_theory"]["mean"]) == 2 for i in ("cold", "hot"))
    assert titles["fig1_order_parameter_vs_P"][0] == f"error bars: {figstyle.SD} (MCMC: of the posterior draws)"
    assert "over 2 seeds (each its own data set and chains)" in titles["fig9_seeds"][-1]
    assert "Adam" not in titles["fig8_test_error_vs_P"][0]


def test_a_strict_figure_check_that_fails_is_one_line(one_hot_run, monkeypatch, capsys):
    """With BAYESATTN_FIGURE_CHECK=error (the suite's setting, documented in bayesattn.figstyle), a figure that
    fails the check ends the command with one line and status 1, not a traceback; the points stay on disk."""
    from bayesattn.experiments.copy_head import PhaseDiagram

    out, _ = one_hot_run

    def bad(self, run_dir):
        raise figstyle.FigureCheckError("figure fig1_order_parameter_vs_P.png: legend 'x' is cut by the figure's edge")

    monkeypatch.setattr(PhaseDiagram, "figures", bad)
    capsys.readouterr()
    assert main(["figures", str(out)]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("bayesattn: error: figure fig1_order_parameter_vs_P.png: legend 'x'") and "\n" not in err
    assert "BAYESATTN_FIGURE_CHECK=error" in err and main(["check", str(out)]) == 0
