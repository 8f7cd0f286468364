"""The sparse experiment end to end at a tiny size: points, resumable run, summary, figures, CLI errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bayesattn.cli import main
from bayesattn.experiments.sparse import Sparse
from bayesattn.experiments.sparse.summary import bayes_summary, difficulty
from bayesattn.sweep import run_experiment

TINY = dict(S=4, s=1, width=8, heads=2, mlp=16, steps=20, tokens_per_step=64, record_every=10, probe=16, warmup=5)


def tiny_config(tmp_path, **kw):
    text = f"""
name = "tiny"
parts = ["grid", "mixer", "bayes", "theory"]
seeds = 2
grid = [[4, 1]]
mixer_S = 4
mixer_s = [1]
[train]
{chr(10).join(f"{k} = {v}" for k, v in TINY.items())}
[bayes]
grid = [[4, 2]]
P = [40]
dim = 2
inits = ["cold"]
theory_P = 2
[bayes.mcmc]
num_chains = 1
num_warmup = 30
num_samples = 30
"""
    p = tmp_path / "tiny.toml"
    p.write_text(text)
    return p


def test_named_configs_load_and_validate():
    for name in ("sparse_emergence", "sparse_full"):
        cfg = Sparse.load_config(name)
        assert cfg.seeds == 16 and Sparse().points(cfg)
    full = Sparse.load_config("sparse_full")
    tc = full.train_config(S=16, s=3)
    assert (tc.width, tc.mlp, tc.heads, tc.lr, tc.steps, tc.tokens_per_step) == (128, 512, 8, 3e-4, 10000, 8192)


def test_config_errors(tmp_path):
    p = tmp_path / "bad.toml"
    p.write_text("grid = [[4, 5]]\n")
    with pytest.raises(ValueError, match="s=5"):
        Sparse.load_config(p)
    p.write_text("heads = [3]\n[train]\nwidth = 8\n")
    with pytest.raises(ValueError, match="heads=3"):
        Sparse.load_config(p)
    p.write_text("colour = 1\n")
    with pytest.raises(ValueError, match="colour"):
        Sparse.load_config(p)


def test_difficulty_and_bayes_summary():
    res = {"t_star": [10, None, 30], "plateau": [0.7, 0.69, 0.68], "iou_final": [1, 0, 1]}
    d = difficulty(res, budget=100)
    # the unsolved seed is censored at the budget: the median of (10, 30, 100)
    assert d["solved"] == 2 and d["t_median"] == 30 and (d["t_min"], d["t_max"]) == (10, 30)
    assert d["solve_ci"] == pytest.approx([0.2076, 0.9385], abs=1e-4) and d["t_ci"][0] <= 30 <= d["t_ci"][1]
    # over the solved seeds only (the replication's convention): the median of (10, 30)
    assert d["t_median_solved"] == 20
    # its bootstrap interval resamples the solved seeds alone: every resampled median lies within [10, 30]
    assert 10 <= d["t_ci_solved"][0] <= 20 <= d["t_ci_solved"][1] <= 30 and d["t_ci_solved"] != d["t_ci"]
    few = difficulty({**res, "t_star": [10, None, None]}, budget=100)
    assert few["t_median"] is None and few["t_median_solved"] == 10  # censored: >= the budget
    assert few["t_ci_solved"] is None  # one solved seed: no interval
    assert difficulty({**res, "t_star": [None, None, None]}, budget=100)["t_median_solved"] is None
    assert "in_context_gain" not in d  # the map has no states to compare
    assert "entropy" not in d and "accuracy_final" not in d  # not recorded in res
    rec = {**res, "entropy_final": [1.0, 1.5, 2.0], "history": {"step": [1, 2], "acc10": [[0.1, 0.5], [0.2, 0.9], []]}}
    full = difficulty(rec, budget=100)
    assert full["entropy"] == pytest.approx(1.5) and full["accuracy_final"] == [0.5, 0.9, None]
    ca = difficulty({**res, "state_loss": [[1.4, 1.0, 0.2], [1.2, 0.9, 0.4], [1.0, 1.0, 1.0]]}, budget=100)
    assert ca["state_loss"] == pytest.approx([1.2, 29 / 30, 1.6 / 3])
    assert ca["in_context_gain"] == pytest.approx((1.2 + 0.8 + 0.0) / 3)
    recs = [
        {"point": {"S": 8, "s": 2, "P": P, "init": i}, "result": {"mass": m}}
        for P, i, m in [(10, "cold", 0.2), (10, "hot", 0.3), (100, "cold", 0.7), (100, "hot", 0.9)]
    ]
    e = bayes_summary(recs)["S=8,s=2"]
    assert e["P"] == [10, 100] and e["mass_mean"] == pytest.approx([0.25, 0.8])
    # excess over uniform (s/S = 1/4): 0 at P = 10, (0.8 - 0.25) / 0.75 at 100; crossing 1/2 log-interpolated
    x1 = 0.55 / 0.75
    assert e["excess"] == pytest.approx([0.0, x1])
    assert e["P_c"] == pytest.approx(10 ** (1 + 0.5 / x1))


def test_tiny_run_resumes_and_draws(tmp_path, capsys):
    cfg_path = tiny_config(tmp_path)
    out = tmp_path / "out"
    assert main(["sparse", "--config", str(cfg_path), "--out", str(out), "--quiet"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["grid"][0]["seeds"] == 2 and len(summary["mixer"]) == 2
    assert set(summary["bayes"]) == {"S=4,s=2"} and summary["bayes"]["S=4,s=2"]["P"] == [40]
    printed = capsys.readouterr().out
    figs = {Path(f).name for f in summary["figures"]}
    assert {"sparse_heatmap.png", "sparse_bayes.png"} <= figs and f"{len(summary['figures'])} figure files" in printed
    assert all((out / f).is_file() for f in summary["figures"])
    files = sorted((out / "points").rglob("*.json"))
    assert len(files) == 2 + 2 * 2 + 1 + 1  # one file per seed of grid and mixer, per (P, init), per (S, s)
    assert set(summary["theory"]) == {"S=4,s=2"}
    rec = json.loads(files[0].read_text())
    assert "versions" in rec and "key" in rec["point"]
    mtimes = [f.stat().st_mtime_ns for f in files]
    again = run_experiment(Sparse(), Sparse.load_config(cfg_path), out, progress=False, figures=False)  # resumes
    assert [f.stat().st_mtime_ns for f in files] == mtimes and again["points_computed"] == 0


def test_cli_bad_input_is_one_line(tmp_path, capsys):
    p = tmp_path / "bad.toml"
    p.write_text("grid = [[4, 0]]\n")
    assert main(["sparse", "--config", str(p), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "grid.0.1=0" in err  # the field (s of the first [S, s] pair) and its value


def test_cli_bad_input_mentions_set_only_when_given(tmp_path, capsys):
    """The error line says "with --set" only when --set items were given (here none were)."""
    p = tmp_path / "bad.toml"
    p.write_text("grid = [[4, 0]]\n")
    assert main(["sparse", "--config", str(p), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "config bad.toml: grid.0.1=0" in err and "--set" not in err
    assert main(["sparse", "--config", str(p), "--set", "seeds=2", "--out", str(tmp_path / "o")]) == 2
    assert "config bad.toml with --set: grid.0.1=0" in capsys.readouterr().err


def test_comparisons_test_both_directions_and_pick_each_arms_best_lr():
    from bayesattn.experiments.sparse.summary import comparisons

    def row(model, s, lr, ts, heads=4):
        d = difficulty({"t_star": ts, "plateau": [0.0] * len(ts), "iou_final": [0.0] * len(ts)}, budget=1000)
        return {"S": 8, "s": s, "model": model, "lr": lr, "heads": heads, "head_dim": None, **d}

    rows = {
        "heads": [
            row("transformer", 2, 1e-3, [None] * 5 + [500] * 3, heads=1),
            row("transformer", 2, 1e-3, [400] * 8, 8),
        ],
        "mixer": [
            row("mixer", 3, 1e-3, [300, 310, 320, 330]),
            row("mixer", 3, 3e-3, [None, 200, 210, 220]),
            row("transformer", 3, 1e-3, [None, None, None, 900]),
        ],
    }
    out = comparisons(rows)
    heads = next(c for c in out if c["part"] == "heads")
    assert (heads["a"], heads["b"]) == ("H=8", "H=1") and heads["a_helps"]["solved"] == [8, 3]
    assert heads["a_helps"]["p_solve"] < 0.05 < heads["b_helps"]["p_solve"]
    mix = next(c for c in out if c["part"] == "mixer")
    assert mix["a"] == "mixer lr=0.001" and mix["lr_selected"]  # 4/4 solved beats 3/4
    assert mix["a_helps"]["p_faster"] < 0.05


def test_mixer_learning_rates_per_arm_make_their_own_points():
    cfg = Sparse.load_config("sparse_mixer_vs_transformer")
    pts = Sparse().points(cfg)["mixer"]
    arms = {(p["train"]["model"], p["train"]["lr"]) for p in pts}
    assert len(arms) == 6 and {p["train"]["s"] for p in pts} == set(range(3, 9))
    assert len(pts) == 6 * 6 * 16 and all(p["train"]["A"] == "per_seed" and p["train"]["S"] == 16 for p in pts)
    full = Sparse.load_config("sparse_full")
    assert {(16, 3), (32, 2), (16, 4), (32, 3)} <= {tuple(g) for g in full.grid} and full.train.A == "per_seed"
    # the CPU default, like the replication's grid: a map per seed and the replication's initialisation
    cpu = Sparse().points(Sparse.load_config("sparse_emergence"))["grid"][0]["train"]
    assert (cpu["A"], cpu["embed_std"], cpu["mlp_bias"]) == ("per_seed", 0.02, True)
