"""The repetition task, the transformer trace, the trajectory experiment and `bayesattn screen` on checkpoints."""

import json

import jax
import numpy as np
import pytest

from bayesattn.cli import main
from bayesattn.diagnostics import screens as S
from bayesattn.experiments.screens import Screens
from bayesattn.experiments.screens.tools import screen_transformer
from bayesattn.experiments.screens.trajectory import pr_rise_step, trajectory_probes
from bayesattn.models import Transformer, TransformerConfig
from bayesattn.models.trace import transformer_trace
from bayesattn.sweep import run_experiment
from bayesattn.tasks import RepeatedSequenceTask


def test_repeated_sequence_task_is_induction():
    task = RepeatedSequenceTask(T=30, d=12, min_period=3, max_period=10)
    tok = np.asarray(task.tokens(jax.random.key(0), 50))
    ds = task.sample(jax.random.key(0), 50)
    np.testing.assert_array_equal(np.asarray(ds.X).argmax(-1), tok[:, :-1])
    periods = set()
    for row in tok:
        n = int(np.flatnonzero(row[1:] == row[0])[0]) + 1  # distinct within a period: first repeat of token 0
        periods.add(n)
        assert len(set(row[:n].tolist())) == n
        np.testing.assert_array_equal(row[n:], row[:-n])
        for t in np.flatnonzero(task.query_mask):  # the next token follows the earlier occurrence of the current
            assert row[t + 1] == row[t - n + 1]
    assert periods <= set(range(3, 11)) and len(periods) > 3
    with pytest.raises(ValueError, match="max_period"):
        RepeatedSequenceTask(T=30, d=8, min_period=3, max_period=10)


def test_transformer_trace_matches_forward():
    cfg = TransformerConfig(T=10, width=12, layers=2, heads=3, mlp=8, d_in=6, d_out=6)
    net = Transformer(cfg, jax.random.key(0))
    x = jax.nn.one_hot(np.random.default_rng(0).integers(0, 6, 10), 6, dtype=jax.numpy.float64)
    y, attn = net(x)
    y2, attn2, heads = transformer_trace(net, x)
    np.testing.assert_allclose(y2, y, rtol=1e-12)
    np.testing.assert_allclose(attn2, attn, rtol=1e-12)
    b = net.blocks[0]
    out, _ = b.attend(cfg, b.norm1(net.embedding.embed(x) + net.pos))
    np.testing.assert_allclose(heads[0].reshape(10, -1) @ b.W_O.T, out, rtol=1e-10, atol=1e-12)


def test_pr_rise_step():
    assert pr_rise_step([0, 1, 2, 3], [2.0, 2.5, 4.0, 6.0]) == 2
    assert pr_rise_step([0, 10, 20, 30, 40], [8.0, 1.0, 3.0, 6.0, 9.0]) == 30  # climbs from the dip: 1 -> 5 at 30
    assert pr_rise_step([0, 1, 2], [5.0, 5.0, 5.0]) is None
    assert pr_rise_step([0, 1, 2], [5.0, 4.0, 3.0]) is None


TINY = {
    "T": 24,
    "vocab": 16,
    "min_period": 4,
    "max_period": 8,
    "width": 16,
    "heads": 2,
    "steps": 12,
    "batch_size": 8,
    "checkpoints": 3,
    "probe_N": 6,
    "pair_range": [4, 10],
}


def test_trajectory_and_cli_on_checkpoints(tmp_path, capsys):
    cfg_path = tmp_path / "tiny.toml"
    lines = ['name = "tiny"', 'parts = ["trajectory"]', "[trajectory]"]
    cfg_path.write_text("\n".join(lines + [f"{k} = {json.dumps(v)}" for k, v in TINY.items()]))
    cfg = Screens.load_config(cfg_path)
    out = tmp_path / "out"
    summary = run_experiment(Screens(), cfg, out, progress=False, figures=False)
    s = summary["trajectory"]
    ck = s["steps"]
    (point_file,) = (out / "points" / "trajectory").glob("*.json")  # one point: the run, all its checkpoints
    result = json.loads(point_file.read_text())["result"]
    assert ck[0] == 0 and ck[-1] == 12 and [c["step"] for c in result["checkpoints"]] == ck
    assert len(s["heads"]) == 4 and np.shape(s["bos_fraction"]) == (len(ck), 2)
    first = result["checkpoints"][0]
    assert set(first) == {"step", "repeated_pair", "repeated_sequence"}
    # the saved point equals a fresh screen of the saved checkpoint
    from bayesattn.training.checkpoints import load_checkpoint

    (run_dir,) = (out / "artifacts").glob("trajectory-*/run")  # the training run, kept beside the points
    net = load_checkpoint(run_dir / "checkpoints" / "step_00000012.eqx")
    res, _ = screen_transformer(net, trajectory_probes(cfg.trajectory)["repeated_pair"])
    last = result["checkpoints"][-1]["repeated_pair"]
    np.testing.assert_allclose(last["selectivity"]["induction"], res.selectivity["induction"], rtol=1e-10)
    # the PR-integral ranking: the heads' PR trajectories integrated by a trapezoid loop
    rk = s["ranking"]
    for (l, h), v in zip(rk["order"], rk["integral"]):
        y = [max(x - 1.0, 0.0) for x in s["heads"][2 * l + h]["pr"]]
        assert v == pytest.approx(sum(0.5 * (y[i] + y[i + 1]) * (ck[i + 1] - ck[i]) for i in range(len(ck) - 1)))
    assert rk["integral"] == sorted(rk["integral"], reverse=True) and len(rk["order"]) == 4
    # rerun: resumed from the files (nothing computed)
    again = run_experiment(Screens(), cfg, out, progress=False, figures=False)
    assert again["points_computed"] == 0 and again["trajectory"]["train_wall_s"] == s["train_wall_s"]
    # the point's file lost: the training run is loaded from its saved files, not redone, and screened again
    point_file.unlink()
    again = run_experiment(Screens(), cfg, out, progress=False, figures=False)
    assert again["points_computed"] == 1 and again["trajectory"]["train_wall_s"] == s["train_wall_s"]
    redone = json.loads(point_file.read_text())["result"]["checkpoints"]
    assert [c["step"] for c in redone] == ck
    for c0, c1 in zip(result["checkpoints"], redone):
        sel0, sel1 = c0["repeated_pair"]["selectivity"]["induction"], c1["repeated_pair"]["selectivity"]["induction"]
        np.testing.assert_allclose(sel1, sel0, rtol=1e-10)

    rec = tmp_path / "screen.json"
    assert main(["screen", str(run_dir), "--N", "5", "--out", str(rec)]) == 0
    recs = json.loads(rec.read_text())
    assert len(recs) == len(ck) * 4 and {"layer", "head", "selectivity", "pr", "classes", "step"} <= set(recs[0])
    assert set(recs[0]["selectivity"]) == set(S.CLASSES)
    assert (tmp_path / "screen_maps.png").exists()
    assert json.loads((tmp_path / "screen_ranking.json").read_text())["steps"] == ck
    capsys.readouterr()

    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["screen", str(empty)]) == 2
    assert "no checkpoints" in capsys.readouterr().err
    assert main(["screen", str(run_dir), "--T", "40"]) == 2
    assert "longer than the model's context" in capsys.readouterr().err
    assert main(["screen", "--model", "gpt-5"]) == 2
    assert "model='gpt-5'" in capsys.readouterr().err
