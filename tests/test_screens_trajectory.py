"""The repetition task, the transformer trace, the trajectory experiment and `bayesattn screen` on checkpoints."""

import json

import jax
import numpy as np
import pytest

from bayesattn.cli import main
from bayesattn.diagnostics import screens as S
from bayesattn.experiments.screens import Screens
from bayesattn.experiments.screens.tools import screen_transformer
from bayesattn.experiments.screens.trajectory import circuit_convergence, pr_rise_step, trajectory_probes
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


def test_circuit_convergence_on_made_up_selectivities():
    steps = [0, 10, 20, 30, 40]
    sel = np.zeros((5, 1, 2))
    sel[2:, 0, 0] = 60.0  # head (0, 0) at >= 50x from step 20 on
    sel[[1, 2, 4], 0, 1] = 80.0  # head (0, 1) from step 10, below 50x at step 30, back at 40
    assert circuit_convergence(steps, sel) == {"heads": [[0, 0], [0, 1]], "from_step": 40}
    sel[3, 0, 1] = 50.0  # exactly at the threshold counts
    assert circuit_convergence(steps, sel) == {"heads": [[0, 0], [0, 1]], "from_step": 20}
    assert circuit_convergence(steps, np.full((5, 1, 2), 99.0))["from_step"] == 0
    assert circuit_convergence(steps, np.full((5, 1, 2), 49.9)) == {"heads": [], "from_step": None}
    assert circuit_convergence(steps, np.full((5, 1, 2), 49.9), threshold=30.0)["from_step"] == 0


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


def test_seeds_add_runs_and_their_statistics_without_touching_the_first(tmp_path):
    """``seeds = 3`` adds two training runs beside the one of ``seeds = 1`` (its point is kept, not redone), and
    the summary's seed statistics agree with each seed's own trajectory summary and with scipy's intervals."""
    from scipy import stats

    from bayesattn.experiments.screens.summary import seeds_line
    from bayesattn.experiments.screens.trajectory import summarize

    body = ['parts = ["trajectory"]', "[trajectory]"] + [f"{k} = {json.dumps(v)}" for k, v in TINY.items()]
    one, three = tmp_path / "one.toml", tmp_path / "three.toml"
    one.write_text("\n".join(['name = "tiny"'] + body))
    three.write_text("\n".join(['name = "tiny"', "seeds = 3"] + body))
    out = tmp_path / "out"
    first = run_experiment(Screens(), Screens.load_config(one), out, progress=False, figures=False)
    assert "trajectory_seeds" not in first
    more = run_experiment(Screens(), Screens.load_config(three), out, progress=False, figures=False)
    assert more["points_computed"] == 2 and more["points_resumed"] == 1
    assert more["trajectory"] == first["trajectory"]  # the first seed's run, as before
    st = more["trajectory_seeds"]
    assert [p["seed"] for p in st["seeds"]] == [0, 1, 2] and st["steps"] == TINY["steps"]
    files = {json.loads(f.read_text())["point"]["seed"]: f for f in (out / "points" / "trajectory").glob("*.json")}
    assert sorted(files) == [0, 1, 2]
    judged = []
    for p in st["seeds"]:
        res = json.loads(files[p["seed"]].read_text())["result"]
        s = summarize(res["checkpoints"], res["history"], res["record_every"])
        ind = [h for h in s["heads"] if "induction" in h["classes"]]
        assert p["induction_heads"] == [[h["layer"], h["head"]] for h in ind]
        assert p["pr_first"] == (
            all(h["pr_rise_step"] is not None and h["pr_rise_step"] <= h["crossing_step"]["induction"] for h in ind)
            if ind
            else None
        )
        # the circuit's heads: those at >= 50x at the last checkpoint, read from the point file
        last = np.array(res["checkpoints"][-1]["repeated_pair"]["selectivity"]["induction"])
        assert p["circuit_heads"] == np.argwhere(last >= 50.0).tolist()
        if p["pr_first"] is not None:
            judged.append(p["pr_first"])
    r = st["pr_first"]
    assert (r["solved"], r["seeds"]) == (sum(judged), len(judged))
    if judged:
        ci = stats.binomtest(sum(judged), len(judged)).proportion_ci(method="wilson")
        assert r["ci"] == pytest.approx([ci.low, ci.high])
    frac = [1.0 if p["circuit_from_step"] is None else p["circuit_from_step"] / TINY["steps"] for p in st["seeds"]]
    m = st["circuit_fraction"]
    assert m["seeds"] == 3 and (m["median"] is None or m["median"] == pytest.approx(np.median(frac)))
    assert seeds_line(st).startswith("3 seeds: ")


def _made_up_run(seed, cross, rise, bos_at=None):
    """A trajectory record of one layer and two heads over steps 0..40: head (0, 1)'s induction selectivity
    jumps to 100x at step ``cross`` (None: never), its PR dips to 1 at step 10 and climbs to 9 at ``rise``."""
    steps = [0, 10, 20, 30, 40]
    checkpoints = []
    for s in steps:
        sel = {c: [[1.0, 1.0]] for c in S.CLASSES}
        sel["induction"] = [[1.0, 100.0 if cross is not None and s >= cross else 1.0]]
        if s == bos_at:
            sel["bos"] = [[40.0, 1.0]]  # head (0, 0) a BOS head at this checkpoint only
        pr = 5.0 if s == 0 else (9.0 if s >= rise else 1.0)
        checkpoints.append(
            {
                "step": s,
                "repeated_pair": {"selectivity": sel, "pr": [[3.0, pr]]},
                "repeated_sequence": {"copy_loss": 1.0},
            }
        )
    history = {"step": steps, "loss": [4.0, 3.0, 2.0, 1.0, 0.5]}
    result = {"checkpoints": checkpoints, "history": history, "record_every": 10}
    return {"point": {"part": "trajectory", "trajectory": {"steps": 40}, "seed": seed}, "result": result}


def _summary(run):
    from bayesattn.experiments.screens.trajectory import summarize

    res = run["result"]
    return summarize(res["checkpoints"], res["history"], res["record_every"])


def test_seed_statistics_count_the_seeds_where_pr_comes_first(tmp_path):
    from bayesattn.experiments.screens.figures import seeds_figure
    from bayesattn.experiments.screens.summary import seed_statistics, seeds_line

    runs = [
        _made_up_run(2, None, 20),
        _made_up_run(0, 30, 20),
        _made_up_run(1, 30, 40),
        _made_up_run(3, 20, 20, bos_at=10),
    ]
    st = seed_statistics(runs, [_summary(r) for r in runs])
    assert [p["seed"] for p in st["seeds"]] == [0, 1, 2, 3]
    assert [p["pr_first"] for p in st["seeds"]] == [True, False, None, True]
    assert [p["crossing_steps"] for p in st["seeds"]] == [[30], [30], [], [20]]
    assert [p["circuit_from_step"] for p in st["seeds"]] == [30, 30, None, 20]
    assert (st["pr_first"]["solved"], st["pr_first"]["seeds"]) == (2, 3)  # the seed without a head is not judged
    # fractions of the 40 steps, the seed without a circuit at 1: median of (0.75, 0.75, 1, 0.5)
    assert st["circuit_fraction"]["median"] == pytest.approx(0.75)
    assert st["loss_halfway_step"]["median"] == pytest.approx(20.0)
    # the made-up heads cross 30x and 50x at the same step (100x), so both sets are held from it
    assert [p["class_from_step"] for p in st["seeds"]] == [30, 30, None, 20] and st["circuits"] == 3
    assert [p["induction_final_max"] for p in st["seeds"]] == [100.0, 100.0, 1.0, 100.0]
    assert [p["bos_fraction_max"] for p in st["seeds"]] == [0.0, 0.0, 0.0, 0.5]
    line = seeds_line(st)
    assert "in 2 of 3 seeds" in line and "held from 75% [" in line and "forms in 3 of 4 seeds" in line
    # the printed lines: the first seed's run (seed 0, whose head passes 50x at step 30), then the seeds' line
    from bayesattn.experiments.screens.summary import describe, summarize

    runs[1]["result"].update(train_wall_s=1.0, screen_wall_s=1.0, probes={})
    first, seeds = describe(summarize({"trajectory": runs}))
    assert first.endswith(
        "first previous-token head (30x): none in layer 0; first induction head (50x): step 30 in layer 0"
    )
    assert seeds == line
    (tmp_path / "summary.json").write_text(json.dumps({"trajectory_seeds": st}))
    assert seeds_figure(tmp_path).name == "trajectory_seeds.png"  # drawn and passed the figure check
