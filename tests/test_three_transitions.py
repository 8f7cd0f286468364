"""The three-transitions figure pipeline: the MCMC-transition estimator against constructed curves, and one small run of
the experiment end to end (resumable points, summary, figure)."""

import json

import numpy as np
import pytest

from bayesattn.experiments.three_transitions import ThreeTransitions, ThreeTransitionsConfig, point_config
from bayesattn.experiments.three_transitions.mcmc import crossing_search, level_crossing
from bayesattn.sweep import run_experiment


def _logistic(P, Pc, w, lo=0.02, hi=0.17):
    return lo + (hi - lo) / (1.0 + np.exp(-(np.asarray(P, float) - Pc) / w))


def test_level_crossing_interpolates_and_says_where_the_crossing_is():
    P = np.array([100.0, 200.0, 300.0, 400.0])
    x = np.array([0.0, 0.1, 0.3, 0.5])
    est, br = level_crossing(P, x, 0.2)
    assert br == (200.0, 300.0) and est == pytest.approx(250.0)
    # a dip below the level after a first crossing: the crossing is where x stays above
    est, br = level_crossing(P, [0.0, 0.3, 0.1, 0.5], 0.2)
    assert br == (300.0, 400.0) and est == pytest.approx(300.0 + 100.0 * 0.1 / 0.4)
    assert level_crossing(P, x, -1.0) == (None, "below")  # every value above: crossing below the grid
    assert level_crossing(P, x, 1.0) == (None, "above")
    with pytest.raises(ValueError, match="sorted"):
        level_crossing(P[::-1], x, 0.2)


@pytest.mark.parametrize("shift", [0.0, 40.0, -60.0])
def test_crossing_search_recovers_a_known_shift_and_a_hysteresis_bracket(shift):
    """Constructed 'samplers': the cold start's mean follows a logistic centred at Pc + shift + h, the hot
    start's at Pc + shift - h. With the level at the curve's midpoint the exact crossings are those centres; the
    search must find them to within its linear interpolation on the refined grid."""
    Pc, w, h = 900.0, 12.0, 30.0
    calls = []

    def measure(Ps, init):
        calls.append((init, list(Ps)))
        c = Pc + shift + (h if init == "cold" else -h)
        return [{"mean": float(_logistic(P, c, w))} for P in Ps]

    level = float(_logistic(0.0, 0.0, w))
    out = crossing_search(measure, Pc, level, span=1.15, grid=4, refine=4)
    exact = {"cold": Pc + shift + h, "hot": Pc + shift - h}
    for init in ("cold", "hot"):
        got = out["per_start"][init]
        assert got["bracket"][0] <= exact[init] <= got["bracket"][1]
        assert got["P"] == pytest.approx(exact[init], abs=0.15 * (got["bracket"][1] - got["bracket"][0]) + 1.0)
    assert out["P"] == pytest.approx(0.5 * (out["per_start"]["cold"]["P"] + out["per_start"]["hot"]["P"]))
    assert out["bracket"][0] < Pc + shift < out["bracket"][1]
    # round 2 runs one start only, inside its own bracket
    assert all(len(Ps) <= 4 for _, Ps in calls[2:])


def test_crossing_search_extends_the_grid_once_when_the_crossing_is_outside():
    def measure(Ps, init):
        return [{"mean": float(_logistic(P, 1100.0, 5.0))} for P in Ps]  # far above the first grid [783, 1035]

    out = crossing_search(measure, 900.0, float(_logistic(0.0, 0.0, 5.0)), span=1.15, grid=4, refine=2)
    assert out["per_start"]["cold"]["P"] == pytest.approx(1100.0, abs=20.0)
    out = crossing_search(lambda Ps, i: [{"mean": 0.0} for _ in Ps], 900.0, 0.1, span=1.15, grid=4, refine=2)
    assert out["P"] is None and "above" in out["per_start"]["cold"]["note"]


def test_point_files_hash_only_their_own_settings():
    a, b = ThreeTransitionsConfig(), ThreeTransitionsConfig(mcmc={"num_samples": 999}, workers=1)
    assert point_config(a, "adam") == point_config(b, "adam")
    assert point_config(a, "theory") == point_config(b, "theory")
    assert point_config(a, "mcmc") != point_config(b, "mcmc")
    c = ThreeTransitionsConfig(adam={"steps": 10})
    assert point_config(a, "mcmc") == point_config(c, "mcmc") and point_config(a, "adam") != point_config(c, "adam")


def test_seeds_add_the_seeded_points_and_keep_the_first_seeds():
    """seeds = 3 runs the Adam, SGLD and MCMC points for seeds 5, 6, 7; the theory's once; the points of seed 5
    are those of a one-seed run (their files are kept when seeds are added)."""
    exp = ThreeTransitions()
    one = exp.points(ThreeTransitionsConfig(seed=5))
    three = exp.points(ThreeTransitionsConfig(seed=5, seeds=3))
    for kind, pts in one.items():
        assert all(p in three[kind] for p in pts)
        seeded = kind in ("adam", "sgld", "mcmc")
        assert len(three[kind]) == (3 if seeded else 1) * len(pts)
        assert sorted({p["config"].get("seed") for p in three[kind]}) == ([5, 6, 7] if seeded else [None])


def test_mcmc_point_on_a_small_case_records_keys_and_lands_near_the_theory():
    """The real estimator (NUTS, cold and hot starts) at linear T = 4, d = 8: the theory's second-order P_c is
    652; the exact posterior's crossing is within 35% of it (T = 4 is far from the theory's large-T limit:
    measured ~516 with other settings), and both starts agree (no hysteresis in a second-order transition)."""
    from bayesattn.experiments.three_transitions.compute import _P_grid, _summary
    from bayesattn.experiments.three_transitions.mcmc import mcmc_transition

    cfg = ThreeTransitionsConfig(
        mcmc={"num_warmup": 100, "num_samples": 150, "num_chains": 1, "grid": 3, "refine": 1, "span": 1.35}
    )
    res = mcmc_transition(cfg, "linear", 4, _P_grid(cfg, 4, "linear"), _summary)
    assert res["theory_order"] == "second" and res["observable"] == "u"
    assert res["P"] == pytest.approx(res["theory"], rel=0.35)
    cold, hot = res["per_start"]["cold"]["P"], res["per_start"]["hot"]["P"]
    assert abs(cold - hot) < 0.1 * res["theory"]
    assert res["data_key"] and all(len(r["key"]) == 2 for i in ("cold", "hot") for r in res["runs"][i])
    # the level is the theory's posterior mean of u at P_c, and the chain means straddle it around the crossing
    means = [r["mean"] for r in res["runs"]["cold"]]
    assert min(means) < res["level"] < max(means)


@pytest.mark.slow
def test_small_run_end_to_end_is_resumable(tmp_path):
    """Linear attention at T = 4 (theory, Adam, NUTS), tiny settings: every point is a file with its config and
    keys; a second run computes nothing; the MCMC transition is near the theory's (second order, P_c known in
    closed form)."""
    cfg = ThreeTransitionsConfig(
        T_values=[4],
        attentions=["linear"],
        adam={"steps": 300, "grid_points": 4},
        mcmc={"num_warmup": 100, "num_samples": 150, "num_chains": 2, "grid": 3, "refine": 1, "span": 1.35},
        workers=1,
    )
    exp = ThreeTransitions()
    s1 = run_experiment(exp, cfg, tmp_path, progress=False, figures=False)
    files = sorted((tmp_path / "points").rglob("*.json"))
    assert len(files) == sum(len(v) for v in exp.points(cfg).values()) == 4
    recs = [json.loads(f.read_text()) for f in files]
    mc = next(r for r in recs if r["point"]["kind"] == "mcmc")
    assert mc["versions"] and mc["point"]["config"]["mcmc"]["num_samples"] == 150
    res = mc["result"]
    assert res["data_key"] and all(r["key"] for i in ("cold", "hot") for r in res["runs"][i])
    row = s1["table"][0]
    assert row["mcmc"]["theory"] == pytest.approx(row["theory_posterior"]["P_c"])
    assert row["mcmc"]["P"] == pytest.approx(row["mcmc"]["theory"], rel=0.35)
    mtimes = [f.stat().st_mtime_ns for f in files]
    s2 = run_experiment(exp, cfg, tmp_path, progress=False, figures=False)
    assert [f.stat().st_mtime_ns for f in files] == mtimes and s2["table"] == s1["table"]
    from bayesattn.experiments.three_transitions.figures import plot_three_transitions

    assert all(p.exists() for p in plot_three_transitions(tmp_path))


@pytest.mark.parametrize("init", ["small", "hot"])
@pytest.mark.parametrize("where", ["below round 2", "inside round 2", "above round 2"])
def test_adam_search_brackets_a_known_jump_wherever_it_falls(monkeypatch, init, where):
    """Adam's final m replaced by a step at a known P* (small init: m jumps up at P*; a hot init the same, it
    stays on the copy branch from P*): the two-round search brackets P* to within one grid step of round 2, also
    when every round-2 run lies on one side of it (the search then uses round 1's bracket end; its version 1 gave
    no P there)."""
    from bayesattn.experiments.three_transitions import compute

    cfg = ThreeTransitionsConfig(T_values=[32], attentions=["softmax"])
    calls = []

    def step(cfg, task, attention, Ps, objective, init, key, **kw):
        calls.append(np.asarray(Ps))
        return {"m": [0.2 if P >= p_star else 0.04 for P in Ps], "q": [0.0] * len(Ps), "u": [0.0] * len(Ps)}, None

    monkeypatch.setattr(compute, "_final", step)
    p_star = 1e9  # first, only to read round 1's grid around the spinodal
    first = compute.adam_transition(cfg, "softmax", 32, "joint", init)["rounds"][0]["P"]
    assert first == sorted(first) and len(first) == cfg.adam.grid_points
    lo, hi = first[3], first[4]  # round 1 will bracket the jump between these two
    p_star = {"below round 2": lo + 0.5, "inside round 2": 0.5 * (lo + hi) + 0.5, "above round 2": hi - 0.5}[where]
    calls.clear()
    res = compute.adam_transition(cfg, "softmax", 32, "joint", init)
    assert len(calls) == 2 and all(lo < P < hi for P in calls[1])
    assert res["note"] is None and res["bracket"][0] < p_star <= res["bracket"][1]
    assert res["bracket"][1] - res["bracket"][0] <= (hi - lo) / (cfg.adam.grid_points + 1) + 1.0
    assert res["P"] == pytest.approx(0.5 * sum(res["bracket"]))


def _rec(kind, seed, result, **point):
    return {"point": {"kind": kind, **point, "config": {"seed": seed}}, "result": result}


def test_seed_statistics_on_made_up_transitions(tmp_path):
    """Made-up points with known answers: Adam at 100, 104 and 110 against a theory of 100 (2 of 3 within 5%,
    median ratio 1.04); a crossover's hot init (not run) left out; NUTS found in 2 seeds of 3; SGLD's jump from
    its m per P; one seed alone gives no statistics."""
    from bayesattn.experiments.three_transitions import ThreeTransitions
    from bayesattn.experiments.three_transitions.figures import plot_seeds
    from bayesattn.experiments.three_transitions.summary import seed_statistics, sgld_jump, summarize

    adam = dict(attention="softmax", T=32, objective="joint")
    sgld = {"P": [300.0, 340.0, 380.0], "m_mean": [0.0, 0.05, 0.5], "theory_mean_m": [0.0, 0.2, 0.4], "theory_P_c": 360}
    recs = []
    for s, P, mc in ((0, 100.0, 500.0), (1, 104.0, None), (2, 110.0, 560.0)):
        recs.append(_rec("adam", s, {"P": P, "theory": 100.0, "rounds": [{}]}, **adam, init="small"))
        recs.append(_rec("adam", s, {"P": None, "theory": 90.0, "rounds": []}, **adam, init="hot"))
        recs.append(_rec("mcmc", s, {"P": mc, "theory": 500.0}, attention="linear", T=8))
        recs.append(_rec("sgld", s, sgld, tau=0.1, init="hot"))
    assert sgld_jump(sgld) == (340.0, 380.0)
    assert sgld_jump({**sgld, "m_mean": [0.5, 0.5, 0.5]}) is None  # above the level from the first P
    assert seed_statistics([r for r in recs if r["point"]["config"]["seed"] == 0]) is None
    st = seed_statistics(recs)
    assert st["seeds"] == [0, 1, 2]
    (a,) = st["adam"]["transitions"]  # the hot init of a crossover is not a transition
    assert a["init"] == "small" and a["P"] == [100.0, 104.0, 110.0] and a["ratio"]["median"] == pytest.approx(1.04)
    assert a["within"]["solved"] == 2 and a["within"]["seeds"] == 3 and a["not_found"] == 0
    lo, hi = a["ratio"]["ci"]
    assert 1.0 <= lo <= 1.04 <= hi <= 1.10
    assert [p["within"] for p in st["adam"]["within_per_seed"]] == [1, 1, 0]
    (m,) = st["mcmc"]["transitions"]
    assert m["not_found"] == 1 and m["within"]["solved"] == 1 and m["ratio"]["median"] == pytest.approx(1.06)
    (g,) = st["sgld"]["transitions"]
    assert g["P"] == [360.0] * 3 and g["ratio"]["ci"] == [1.0, 1.0] and "within" not in g
    # the table is the config seed's; the statistics go into the summary, its printed lines and a figure
    out = summarize(recs, seed=7)  # a seed without points: an empty table
    assert out["table"] == [] and out["seeds"] == st
    line = ThreeTransitions().describe({"table": [], "seeds": st})[-1]
    assert "Adam 2 of 3" in line and "NUTS 1 of 3" in line and "per seed 0-1 of 1" in line
    (tmp_path / "summary.json").write_text(json.dumps({"seeds": st}))
    assert [p.name for p in plot_seeds(tmp_path)] == ["three_transitions_seeds.png"]
    (tmp_path / "summary.json").write_text(json.dumps({"table": []}))
    assert plot_seeds(tmp_path) == []


def test_the_figure_reads_the_first_seeds_points(tmp_path):
    """With several seeds in a folder the main figure draws the lowest seed's points (the summary's table), not
    whichever file comes last by name; points without a seed (the theory's) are read as they are."""
    from bayesattn.experiments.three_transitions.figures import _read

    adam = dict(attention="softmax", T=32, objective="joint", init="small")
    for name, rec in {
        "a.json": _rec("adam", 3, {"P": 100.0}, **adam),
        "b.json": _rec("adam", 4, {"P": 200.0}, **adam),  # last by name
        "c.json": {"point": {"kind": "theory", "attention": "softmax", "T": 32, "config": {}}, "result": {"x": 1}},
    }.items():
        folder = tmp_path / "points" / rec["point"]["kind"]
        folder.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(json.dumps(rec))
    theory, adam_points, *_ = _read(tmp_path)
    assert adam_points == {("softmax", 32, "joint", "small"): {"P": 100.0}} and theory[("softmax", 32)] == {"x": 1}
