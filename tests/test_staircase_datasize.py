"""The staircase's data-size sweep: the nearest-teacher clock against a brute-force scan, the table that groups
training runs by their data (only runs that differ from the main run in their data), and its figure (drawn and
checked by figstyle), on synthetic records: no training runs here."""

import numpy as np
import pytest

from bayesattn.experiments.staircase.figures import datasize_figure, posterior_stages
from bayesattn.experiments.staircase.summary import (
    at_best_validation,
    data_size_table,
    leave_teacher_steps,
    nearest_teacher_steps,
    run_losses,
    seed_statistics,
    summarize,
)
from bayesattn.files import write_json_atomic


def _brute(steps, kl):
    out = []
    for k in range(2, kl.shape[1] + 1):
        hit = None
        for s, row in zip(steps, kl):
            if int(np.argmin(row)) + 1 >= k:
                hit = int(s)
                break
        out.append(hit)
    return out


@pytest.mark.parametrize("seed", range(5))
def test_nearest_teacher_steps_matches_a_scan(seed):
    rng = np.random.default_rng(seed)
    steps = np.arange(0, 400, 10)
    kl = rng.random((len(steps), 3)) + np.linspace(0, 1, len(steps))[:, None] * np.array([1.0, 0.5, 0.0])
    assert nearest_teacher_steps(steps, kl) == _brute(steps, kl)


def test_nearest_teacher_steps_never_reached():
    steps = np.arange(5)
    kl = np.tile([0.1, 0.2, 0.3], (5, 1))  # the 1-span teacher is nearest throughout
    assert nearest_teacher_steps(steps, kl) == [None, None]


def test_leave_teacher_steps_is_each_kl_curves_lowest_record():
    steps = np.arange(0, 60, 10)
    # KL_1 lowest at step 20, KL_2 at step 40, KL_3 still falling at the end (it is not reported: K - 1 curves)
    kl = np.array([[3, 3, 3], [2, 2.5, 2.6], [1, 2, 2.2], [1.5, 1, 1.8], [2, 0.5, 1], [2.5, 0.9, 0.2]])
    assert leave_teacher_steps(steps, kl) == [20, 40]
    kl[:, 1] = np.linspace(3, 0, 6)  # KL_2 lowest at the last record: the model has not left teacher 2
    assert leave_teacher_steps(steps, kl) == [20, None]


def _record(variant, seed, train, *, data="finite", lr=0.08, stages=(100, None, None), final_k=2):
    """A synthetic training record: 5 records at steps 0..40; the nearest teacher is the 2-span one from step 10
    and ``final_k`` at the end; the validation loss is lowest at step 20; a small set (< 1000) is memorised."""
    R = 5
    kl = np.tile([0.3, 0.2, 0.25], (R, 1))
    kl[0] = [0.1, 0.2, 0.3]
    kl[-1] = np.roll([0.1, 0.3, 0.4], final_k - 1)
    tc = {"train": train, "batch_size": min(train, 3000), "lr": lr, "steps": 40}
    if data == "online":
        tc["data"] = "online"
    small = train < 1000 and data == "finite"
    return {
        "point": {"method": "train", "variant": variant, "seed": seed, "train": tc},
        "result": {
            "step": list(range(0, 50, 10)),
            "kl": kl.tolist(),
            "stages": list(stages),
            "train_loss": [3.9, 3.8, 3.7, 3.6, 0.01 if small else 3.6],
            "val_loss": [3.9, 3.85, 3.8, 3.86, 12.0 if small else 3.82],
            "teacher_entropy": 3.665,
        },
    }


def test_at_best_validation_reads_the_early_stopping_step():
    best = at_best_validation(_record("main", 0, 9000, stages=(10, 30, None))["result"])
    # best validation loss at step 20: stage 1 held (10 <= 20), stage 2 not yet (30); one boundary (at 10)
    assert best == {"step": 20, "excess": pytest.approx(3.8 - 3.665), "spans_by_mass": 1, "boundaries": 1}


def test_summary_records_every_runs_losses():
    """Every training run's losses are in the summary (not only the data-size rows): the lowest validation loss
    and its step, the final losses and the teacher's entropy, read off the synthetic record by hand."""
    recs = [_record("transformer", 0, 9000), _record("small", 0, 300)]
    for r in recs:
        r["wall_time_s"] = 1.0
        r["point"]["train"].update(model="minimal", optimizer="adamw")
    losses = summarize({"train": recs})["train"]["losses"]
    assert losses[0] == {
        "best_val_step": 20,
        "best_val_loss": 3.8,
        "val_loss_final": 3.82,
        "train_loss_final": 3.6,
        "teacher_entropy": 3.665,
    }
    assert losses[1]["val_loss_final"] == 12.0 and losses[1]["train_loss_final"] == 0.01
    assert run_losses(recs[1]["result"]) == losses[1]


def test_data_size_table_groups_runs_by_their_data_only():
    recs = [_record("main", s, 9000) for s in (0, 1)]
    recs += [_record("n100", s, 100, stages=(100, None, None), final_k=1) for s in (0, 1)]
    recs += [_record("online", 0, 3000, data="online", stages=(10, 20, None), final_k=3)]
    recs += [_record("fast", 0, 9000, lr=0.5)]  # another learning rate: not a data-size run
    rows = data_size_table(recs)
    assert [r["variant"] for r in rows] == ["n100", "main", "online"]
    assert [r["n"] for r in rows] == [100, 9000, None]
    assert rows[0]["best_spans_by_mass"] == [0, 0] and rows[2]["best_spans_by_mass"] == [2]
    assert rows[0]["train_loss_final"] == [0.01, 0.01] and rows[0]["val_loss_final"] == [12.0, 12.0]
    assert rows[1]["spans"] == 3
    assert data_size_table(recs[:2] + recs[-1:]) == []  # one data size: no table


def test_datasize_figure_is_drawn_and_checked(tmp_path):
    recs = [_record("main", s, 9000) for s in (0, 1)] + [_record("n300", s, 300, final_k=1) for s in (0, 1)]
    recs += [_record("online", 0, 3000, data="online", final_k=3)]
    summ = {
        "config": {"bayes": {"attention": ["softmax", "linear"]}},
        "data_sizes": data_size_table(recs),
        "mcmc": {
            "linear/H=3/w=0.6/cold": {"attention": "linear", "heads": 3, "init": "cold", "P_k": {"lag1": 900.0}},
            "softmax/H=3/w=0.6/cold": {"attention": "softmax", "heads": 3, "init": "cold", "P_k": {"lag1": 600.0}},
            "softmax/H=2/w=0.6/cold": {"attention": "softmax", "heads": 2, "init": "cold", "P_k": {"lag1": 610.0}},
        },
    }
    assert datasize_figure(tmp_path, tmp_path / "d.png") is None  # no summary yet
    write_json_atomic(tmp_path / "summary.json", summ)
    assert datasize_figure(tmp_path, tmp_path / "d.png").stat().st_size > 1000  # BAYESATTN_FIGURE_CHECK=error
    # beside the data sizes: the config's first attention, most heads, cold start
    assert posterior_stages(summ) == ("softmax, H = 3", [600.0])
    assert posterior_stages({**summ, "config": {"bayes": {"attention": ["linear"]}}}) == ("linear, H = 3", [900.0])


def test_describe_names_each_training_run_and_prints_plain_numbers():
    from bayesattn.experiments.staircase.summary import describe

    summ = {
        "mcmc": {"linear/H=3/w=0.6/cold": {"P_k": {"lag1": 1619.4, "lag3": 12660.2}, "max_competitive": None}},
        "train": {
            "variants": ["main", "sgd"],
            "seeds": [0, 0],
            "stages": [[100, 810, None], [None, None, None]],
            "nearest_teacher_steps": [[150, 1050], [None, None]],
        },
    }
    lines = describe(summ)
    assert "linear/H=3/w=0.6/cold: P_k = lag1 1619, lag3 12660" in lines
    assert (
        "training main, seed 0: stages by mass at steps 100, 810, -; nearest teacher reaches k = 2, 3 at 150, 1050"
        in lines
    )
    assert any(line.startswith("training sgd, seed 0") for line in lines)


def test_seed_statistics_are_censored_medians_per_variant():
    # five seeds of "main" (one never leaves teacher 2 within its 1000 steps), three of "sgd" (too few: no entry)
    variants = ["main"] * 5 + ["sgd"] * 3
    leave = [[300, 500], [320, 560], [280, None], [350, 600], [310, 590]] + [[100, 200]] * 3
    stages = [[100, 400, 700]] * 5 + [[50, None, None]] * 3
    out = seed_statistics(variants, leave, stages, [1000] * 8)
    assert set(out) == {"main"}
    m = out["main"]
    assert m["seeds"] == 5 and m["budget"] == 1000
    assert m["leave_teacher"][0]["median"] == 310.0
    assert m["leave_teacher"][1]["median"] == 590.0  # 500, 560, 590, 600 and the censored 1000
    assert m["leave_teacher"][1]["censored"] == 1
    lo, hi = m["leave_teacher"][0]["ci"]
    assert 280 <= lo <= 310 <= hi <= 350
    assert m["stages_by_mass"][2] == {**m["stages_by_mass"][2], "median": 700.0, "ci": [700.0, 700.0]}
