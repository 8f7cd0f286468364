"""The phase diagram with one-hot tokens and one attention, end to end at a tiny size: the theory point carries
the centred target's loss prediction, MCMC measures the centred held-out error, the seed statistics compare the
two, and the figures (checked strictly by the suite) say only what ran and fit one row of panels."""

from __future__ import annotations

import json

import bayesattn.figstyle as figstyle
from bayesattn.cli import main

ONE_HOT = ["--tokens", "onehot", "--T", "16", "--d", "4", "--P", "300,3000", "--methods", "theory,mcmc"]
ONE_HOT += ["--seeds", "2", "--set", "attention=[linear]", "--set", "mcmc.num_warmup=60", "--set"]
ONE_HOT += ["mcmc.num_samples=60", "--set", "theory.num_P=30", "--set", "theory.vary_name=", "--quiet"]


def test_one_hot_run_compares_the_centred_error_and_draws_only_what_ran(tmp_path, monkeypatch):
    titles: dict[str, list[str]] = {}
    real_save = figstyle.save

    def save(fig, out, **kw):  # the legend titles of every figure, before it is checked and closed
        titles[out.stem] = [lg.get_title().get_text() for lg in fig.legends]
        return real_save(fig, out, **kw)

    monkeypatch.setattr(figstyle, "save", save)
    out = tmp_path / "run"
    assert main(["phase-diagram", *ONE_HOT, "--out", str(out)]) == 0
    theory = json.loads(next((out / "points" / "theory").glob("*.json")).read_text())
    assert theory["point"]["held_out"] == "centred target" and theory["result"]["losses"]["posterior"]
    for f in (out / "points" / "mcmc").glob("*.json"):
        for group in json.loads(f.read_text())["result"]["inits"].values():
            assert group["test_error"]["target"] == "centred" and 0 < group["test_error"]["mean"] < 1.5
    seeds = json.loads((out / "summary.json").read_text())["seeds"]["attention"]["linear"]["mcmc"]
    assert all(len(seeds[i]["test_error_against_theory"]["mean"]) == 2 for i in ("cold", "hot"))
    assert titles["fig1_order_parameter_vs_P"] == [f"error bars: {figstyle.SD} (MCMC: of the posterior draws)"]
    assert "Adam" not in titles["fig8_test_error_vs_P"][0]
