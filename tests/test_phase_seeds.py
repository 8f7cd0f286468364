"""The phase diagram over seeds (``seeds`` >= 2): the points each seed adds, the statistics over the seeds against
numbers worked out here by hand, and the figure, on made-up point records (no sampling)."""

from __future__ import annotations

import numpy as np
import pytest

from bayesattn.experiments.copy_head import PhaseDiagram, build_points
from bayesattn.experiments.copy_head.figures_common import load_run, load_seeds
from bayesattn.experiments.copy_head.figures_seeds import fig_seeds
from bayesattn.experiments.copy_head.seeds import AWAY, seed_statistics
from bayesattn.files import point_id, write_json_atomic
from bayesattn.stats import solve_rate

GRID = [100, 200, 400, 800]
P_C = 300.0
# softmax m per seed on GRID: seeds 0-2 rise most between 200 and 400, seed 3 between 400 and 800
M = {0: [0.10, 0.12, 0.60, 0.70], 1: [0.11, 0.13, 0.62, 0.69], 2: [0.09, 0.14, 0.58, 0.71], 3: [0.10, 0.12, 0.20, 0.72]}


def _curve() -> dict:
    """A theory curve whose posterior mean is linear in log P (so that interpolating it at GRID is exact)."""
    P = np.geomspace(50, 1600, 64)
    m = (0.1 * np.log(P)).tolist()
    return {"P": P.tolist(), "mean": {"m": m}, "stable": {"m": m}, "transition": {"P_c": P_C, "order": "first"}}


def _theory() -> dict:
    """A theory point's result: the curve and a posterior test error of 1 - 0.1 log P (linear in log P)."""
    curve = _curve()
    return {"curve": curve, "losses": {"P": curve["P"], "posterior": [1.0 - v for v in curve["mean"]["m"]]}}


def _records(seeds=(0, 1, 2, 3)) -> dict[str, list[dict]]:
    point = {"attention": "softmax", "task": {"T": 8, "d": 4, "tokens": "gaussian", "boundary": "cyclic"}}
    point["prior"] = {"sigma_A2": 1.0, "sigma_V2": 100.0, "sigma2": 400.0}
    mcmc, adam = [], []
    for s in seeds:
        for P, m in zip(GRID, M[s]):
            at = {**point, "seed": s, "P": P}
            group = {"m": {"mean": m, "std": 0.05, "se": 0.01, "r_hat": 1.0, "ess_bulk": 500.0}}
            group["test_error"] = {"mean": 1.0 - m, "sem": 0.02}
            mcmc.append({"point": {**at, "method": "mcmc"}, "result": {"inits": {"cold": group}}})
            runs = {"final_order_parameters": {"m": [m + 0.1, m + 0.1]}}  # Adam: its own rise, 0.1 above
            adam.append({"point": {**at, "method": "adam"}, "result": {"inits": {"small": runs}}})
    theory = {"point": {**point, "method": "theory"}, "result": _theory()}
    return {"theory": [theory], "mcmc": mcmc, "adam": adam}


def test_each_seed_adds_its_own_sampled_points_and_the_first_are_a_one_seed_runs():
    cfg = lambda *sets: PhaseDiagram.load_config(None, ["P.values=[300, 1000]", *sets])  # noqa: E731
    ids = lambda c: {m: [point_id(p) for p in pts] for m, pts in build_points(c).items()}  # noqa: E731
    one, three = ids(cfg()), ids(cfg("seeds=3"))
    assert three["theory"] == one["theory"]
    for m in ("mcmc", "adam"):
        assert len(three[m]) == 3 * len(one[m]) and three[m][: len(one[m])] == one[m]
        # seed 0's second seed is the run of seed 1 (the same file, reused)
        assert set(ids(cfg("seed=1"))[m]) <= set(three[m]) and len(set(three[m])) == len(three[m])
    assert [p["seed"] for p in build_points(cfg("seed=4", "seeds=2"))["mcmc"]] == [4] * 4 + [5] * 4


def test_seed_statistics_against_numbers_worked_out_by_hand():
    recs = _records()
    st = seed_statistics(recs, {"softmax": _theory()})
    assert st["seeds"] == [0, 1, 2, 3]
    cold = st["attention"]["softmax"]["mcmc"]["cold"]
    assert cold["rise_between"] == [[200.0, 400.0]] * 3 + [[400.0, 800.0]]
    assert cold["brackets"] == [{"between": [200.0, 400.0], "seeds": 3}, {"between": [400.0, 800.0], "seeds": 1}]
    assert cold["theory_P_c"] == P_C and cold["theory_inside"] == solve_rate(3, 4)
    want = np.median([np.sqrt(200 * 400)] * 3 + [np.sqrt(400 * 800)])
    assert cold["P_jump"]["median"] == pytest.approx(want) and cold["P_jump"]["not_found"] == 0
    at = cold["against_theory"]
    assert at["P"] == [float(P) for P in GRID]
    assert at["theory"] == pytest.approx([0.1 * np.log(P) for P in GRID], rel=1e-12)
    vals = np.array([M[s] for s in range(4)])
    assert at["mean"] == pytest.approx(vals.mean(axis=0).tolist(), rel=1e-12)
    assert at["sd_between"] == pytest.approx(vals.std(axis=0, ddof=1).tolist(), rel=1e-12)
    assert at["se_within"] == [0.01] * 4
    # every grid point lies more than AWAY from P_c = 300 (400 / 300 = 1.33), so all four count
    assert at["away"] == [True] * 4 and AWAY < 400 / 300 - 1
    gaps = vals.mean(axis=0) - 0.1 * np.log(GRID)
    k = int(np.argmax(np.abs(gaps)))
    theory_k = 0.1 * np.log(GRID[k])
    assert at["largest_gap_away"] == {
        "P": float(GRID[k]),
        "gap": pytest.approx(gaps[k], rel=1e-12),
        "relative": pytest.approx(gaps[k] / theory_k, rel=1e-12),
    }
    inside = sum(lo <= t <= hi for (lo, hi), t in zip(at["ci"], at["theory"]))
    assert at["theory_inside_away"] == solve_rate(inside, 4)
    # the held-out error 1 - m against the theory's 1 - 0.1 log P: the same gaps with the sign turned, the largest
    # by its size relative to the theory's error
    te = cold["test_error_against_theory"]
    assert te["mean"] == pytest.approx((1 - vals.mean(axis=0)).tolist(), rel=1e-12) and te["se_within"] == [0.02] * 4
    rel = -gaps / (1 - 0.1 * np.log(GRID))
    k = int(np.argmax(np.abs(rel)))
    assert te["largest_gap_away"] == {
        "P": float(GRID[k]),
        "gap": pytest.approx(-gaps[k], rel=1e-12),
        "relative": pytest.approx(rel[k], rel=1e-12),
    }
    # Adam: its own brackets, no comparison with the posterior's P_c or mean
    small = st["attention"]["softmax"]["adam"]["small"]
    assert small["brackets"] == cold["brackets"] and "theory_inside" not in small and "against_theory" not in small
    assert seed_statistics(_records(seeds=(0,)), {"softmax": _theory()}) is None


@pytest.mark.parametrize(
    "centre, bracket, same", [(280.0, [200.0, 400.0], 3), (560.0, [400.0, 800.0], 1), (None, None, 0)]
)
def test_the_theorys_own_largest_rise_on_the_grid(centre, bracket, same):
    """The theory's posterior mean read on the MCMC grid has its largest rise where its step is (a logistic in
    log P centred at ``centre``; None: flat, no rise above 0.05); the seeds whose bracket is that one are counted
    (seeds 0-2 rise between 200 and 400, seed 3 between 400 and 800) and printed."""
    from bayesattn.experiments.copy_head.seeds import describe_seeds

    th = _theory()
    P = np.asarray(th["curve"]["P"])
    th["curve"]["mean"]["m"] = (
        [0.1] * len(P) if centre is None else (0.1 + 0.6 / (1 + np.exp(-8 * np.log(P / centre)))).tolist()
    )
    cold = seed_statistics(_records(), {"softmax": th})["attention"]["softmax"]["mcmc"]["cold"]
    assert cold["theory_rise_between"] == bracket and cold["theory_same_bracket"] == solve_rate(same, 4)
    st = seed_statistics(_records(), {"softmax": th})
    (line,) = [x for x in describe_seeds(st) if x.startswith("softmax: mcmc (cold start) over 4 seeds")]
    if bracket:
        assert (
            f"own largest rise on this grid between P = {bracket[0]:.0f} and {bracket[1]:.0f}, the same in {same} of 4"
            in line
        )
    else:
        assert "the theory's mean rises by no more than 0.05 between grid points" in line


def test_the_summary_reads_the_config_seed_and_prints_the_seeds():
    exp = PhaseDiagram()
    cfg = exp.load_config(None, ["attention=softmax", "P.values=[100, 200, 400, 800]", "seeds=4"])
    recs = _records()
    summary = exp.summarize(cfg, recs)
    alone = exp.summarize(cfg, {m: [r for r in rs if r["point"].get("seed", 0) == 0] for m, rs in recs.items()})
    assert summary["transitions"] == alone["transitions"] and "seeds" not in alone
    assert summary["transitions"]["softmax"]["mcmc"]["cold"]["rise_between"] == [200.0, 400.0]
    # seed 3 as the config seed: its own bracket
    cfg3 = cfg.model_copy(update={"seed": 3})
    assert exp.summarize(cfg3, recs)["transitions"]["softmax"]["mcmc"]["cold"]["rise_between"] == [400.0, 800.0]
    lines = exp.describe(summary)
    assert any(
        line.startswith(
            "softmax: mcmc (cold start) over 4 seeds: largest rise: between P = 200 and 400 in 3, between P = 400 "
            "and 800 in 1; the theory's P_c = 300 inside in 3 of 4 [0.30, 0.95]; the theory's own largest rise"
        )
        for line in lines
    )
    assert any(
        line.startswith("softmax: mcmc (cold start), mean m over 4 data sets against the theory") for line in lines
    )


def test_the_figures_read_the_first_seed_and_draw_every_seed(tmp_path):
    recs = _records()
    for method, rs in recs.items():
        for i, r in enumerate(rs):
            write_json_atomic(tmp_path / "points" / method / f"{i:03d}.json", r)
    run = load_run(tmp_path)
    assert [r["point"]["seed"] for r in run["mcmc"]["softmax"]] == [0] * 4
    assert [r["point"]["P"] for r in run["adam"]["softmax"]] == GRID
    seeds = load_seeds(tmp_path)
    assert list(seeds["mcmc"]["softmax"]) == [0, 1, 2, 3] and list(seeds["theory"]["softmax"]) == [None]
    paths = fig_seeds(seeds, tmp_path / "figures")
    assert [p.name for p in paths] == ["fig9_seeds.png", "fig9_seeds.pdf"] and all(p.is_file() for p in paths)
    # one seed: nothing to draw
    one = {m: {a: dict(list(by.items())[:1]) for a, by in v.items()} for m, v in seeds.items()}
    assert fig_seeds(one, tmp_path / "none") == []


# ------------------------------------------------------------------------------------- other tasks of the theory
def test_a_task_the_theory_does_not_cover_is_refused_before_any_work():
    exp = PhaseDiagram()
    sets = ["task.tokens=onehot", "task.boundary=causal", "task.T=8", "task.d=4"]
    with pytest.raises(ValueError, match=r"task.tokens='onehot', task.boundary='causal' with attention='linear'"):
        exp.check(exp.load_config(None, sets))
    # without the theory there is nothing to refuse; softmax alone is covered (docs/theory.md section 10)
    exp.check(exp.load_config(None, [*sets, 'methods=["mcmc", "adam"]']))
    exp.check(exp.load_config(None, [*sets, "attention=softmax"]))


@pytest.mark.parametrize(
    "tokens, boundary, landscapes",
    [("gaussian", "cyclic", True), ("gaussian", "causal", False), ("onehot", "cyclic", False)],
)
def test_the_theory_point_holds_what_the_theory_covers(tokens, boundary, landscapes):
    """Softmax: landscapes only where the landscape's theory covers the task (Gaussian tokens, the cyclic boundary,
    as :func:`covers` says); loss predictions for every task (one-hot: the centred target's)."""
    from bayesattn.bayes.theory.common import covers
    from bayesattn.experiments.copy_head.compute import theory_point

    cfg = PhaseDiagram.load_config(
        None,
        [f"task.tokens={tokens}", f"task.boundary={boundary}", "task.T=8", "task.d=4", "attention=softmax"]
        + ["P.values=[200, 800]", "theory.num_P=6", 'theory.vary_name=""'],
    )
    point = build_points(cfg)["theory"][0]
    res = theory_point(point)
    assert res["curve"]["P"] and res["losses"]["posterior"]
    assert ("landscapes" in res) == ("grid_landscapes" in res) == landscapes == covers(cfg.make_task(), "softmax")
