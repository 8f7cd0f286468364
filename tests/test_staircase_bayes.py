"""The H-head sampler on the multi-lag copy task: it recovers the known solved configuration (one head per lag)
on a tiny problem, from a cold start and from the swapped hot start; the transition finder."""

import json

import jax
import numpy as np
import pytest

import bayesattn as ba
from bayesattn.experiments.staircase import Staircase
from bayesattn.experiments.staircase.bayes import LAG_OBSERVABLE, hot_init
from bayesattn.experiments.staircase.curves import transitions
from bayesattn.files import load_results


def test_two_heads_recover_one_lag_each():
    task = ba.MultiLagCopyTask(T=4, d=3, spans=((1,), (2,)), weights=(1.0, 0.8), rotations="orthogonal", seed=1)
    prior = ba.Prior(4.0, 100.0, 1.0)
    post = ba.Posterior(task.sample(jax.random.key(0), 400), "softmax", prior, heads=2)
    hot = hot_init(task, 2, "softmax", prior)[::-1]  # head 0 on lag 2, head 1 on lag 1: the label-swapped solution
    for init in ["cold", hot]:
        s = ba.sample(post, jax.random.key(1), num_chains=2, num_warmup=150, num_samples=100, init=init)
        op = {k: np.asarray(v) for k, v in s.order_parameters.items()}
        # label free: each lag is carried by some head with most of its mass
        assert op["mass_max:lag1"].mean() > 0.8 and op["mass_max:lag2"].mean() > 0.8
        # and by different heads in every chain (the cooperative, solved configuration)
        for c in range(2):
            h1 = np.argmax([op[f"mass_h{h}:lag1"][c].mean() for h in range(2)])
            h2 = np.argmax([op[f"mass_h{h}:lag2"][c].mean() for h in range(2)])
            assert h1 != h2
    # the exact optimum has the readout [w_1 U_1, w_2 U_2]: its posterior mean at the hot pattern is close to it
    L = hot_init(task, 2, "softmax", prior) * 3
    mean, _ = post.readout_posterior(L)
    np.testing.assert_allclose(np.asarray(mean).reshape(task.readout().shape), np.asarray(task.readout()), atol=0.15)


def test_transitions_log_interpolates():
    P = np.array([100.0, 1000.0, 10000.0])
    assert np.isclose(transitions(P, np.array([0.1, 0.3, 0.9]), 0.2), 10**2.5, rtol=1e-12)
    assert transitions(P, np.array([0.1, 0.1, 0.1]), 0.2) is None


def test_named_configs_load_and_ratio_sweep_points():
    points = Staircase().points
    names = sorted(Staircase.configs())
    assert {"staircase", "staircase_full", "staircase_ratio"} <= set(names)
    for name in names:
        Staircase.load_config(name)
    cfg = Staircase.load_config("staircase_ratio")
    pts = points(cfg)["mcmc"]
    assert len(pts) == len(cfg.bayes.ratios) * len(cfg.bayes.P) * len(cfg.bayes.attention) * len(cfg.bayes.heads)
    assert sorted({p["bayes"]["ratio"] for p in pts}) == sorted(cfg.bayes.ratios)
    # a point of the ratio sweep at the default ratio is the very point of the default config (reused on disk)
    from bayesattn.sweep import point_id

    default = {point_id(p) for p in points(Staircase.load_config("staircase"))["mcmc"]}
    shared = [p for p in pts if p["bayes"]["ratio"] == 0.6 and p["P"] in (200, 30000)]
    assert len(shared) == 2 and all(point_id(p) in default for p in shared)


def test_ratio_table_and_bad_ratio():
    from bayesattn.experiments.staircase.config import BayesConfig
    from bayesattn.experiments.staircase.curves import ratio_table

    def entry(ratio, p1, p2):
        return {"attention": "softmax", "heads": 2, "init": "cold", "ratio": ratio, "P_k": {"lag1": p1, "lag2": p2}}

    mcmc = {
        "a": entry(0.8, 500.0, 800.0),
        "b": entry(0.4, 600.0, None),
        "c": entry(0.6, 400.0, 1200.0),
        "d": {**entry(0.6, 1.0, 2.0), "heads": 3},
    }  # a lone (attention, H, init) series: not a sweep
    rows = ratio_table(mcmc)
    assert [r["ratio"] for r in rows] == [0.4, 0.6, 0.8]
    assert rows[0]["P2/P1"] is None and np.isclose(rows[1]["P2/P1"], 3.0) and np.isclose(rows[2]["P2/P1"], 1.6)
    for bad in ([], [0.5, 1.5], "x", 0.0, True):
        with pytest.raises(ValueError, match="ratio"):
            BayesConfig.load({"ratio": bad})


def test_ratio_figure(tmp_path):
    import json

    from bayesattn.experiments.staircase.figures import ratio_figure

    assert ratio_figure(tmp_path, tmp_path / "r.png") is None  # no summary: no figure
    rows = [
        {
            "attention": "softmax",
            "heads": 2,
            "init": "cold",
            "ratio": r,
            "P_1": 600.0,
            "P_2": 600.0 / r**2,
            "P2/P1": r**-2,
        }
        for r in (0.4, 0.6, 0.8)
    ]
    (tmp_path / "summary.json").write_text(json.dumps({"ratio_sweep": rows}))
    assert ratio_figure(tmp_path, tmp_path / "r.png").stat().st_size > 1000


def test_pattern_capture_is_a_projection_invariant_under_head_mixing():
    from bayesattn.diagnostics import pattern_capture

    rng = np.random.default_rng(0)
    T, H = 5, 3
    qm = np.ones(T, bool)
    qm[0] = False
    pat = np.roll(np.eye(T), -1, axis=1)
    alpha = rng.normal(size=(4, H, T, T))
    got = np.asarray(pattern_capture(alpha, pat, qm))
    # brute force: least-squares projection of the masked pattern on the masked heads
    A = (alpha * qm[:, None]).reshape(4, H, -1)
    p = (pat * qm[:, None]).reshape(-1)
    for n in range(4):
        coef = np.linalg.lstsq(A[n].T, p, rcond=None)[0]
        np.testing.assert_allclose(got[n], np.sum((A[n].T @ coef) ** 2) / np.sum(p**2), rtol=1e-10)
    mix = rng.normal(size=(H, H))  # any invertible mixing of the heads leaves it unchanged
    np.testing.assert_allclose(
        np.asarray(pattern_capture(np.einsum("gh,nhts->ngts", mix, alpha), pat, qm)), got, rtol=1e-8
    )
    # a head equal to the pattern captures all of it; one head: cos^2
    alpha[0, 1] = 2.5 * pat
    assert np.isclose(float(pattern_capture(alpha[:1], pat, qm)[0]), 1.0)
    a1, pm = alpha[1, :1], (pat * qm[:, None]).ravel()
    cos2 = (a1[0] * qm[:, None]).ravel() @ pm / np.linalg.norm((a1[0] * qm[:, None]).ravel()) / np.linalg.norm(pm)
    np.testing.assert_allclose(float(pattern_capture(a1, pat, qm)), cos2**2, rtol=1e-10)


def test_linear_heads_get_the_rotation_invariant_lag_observable():
    from bayesattn.diagnostics import declared

    task = ba.MultiLagCopyTask(T=4, d=2, spans=((1,), (2,)), weights=(1.0, 0.6), rotations="orthogonal")
    lin = declared(task, ba.models.AttentionModel("linear", heads=2))
    soft = declared(task, ba.models.AttentionModel("softmax", heads=2))
    assert {"capture:lag1", "capture:lag2"} <= set(lin) and not any(k.startswith("capture") for k in soft)


def test_linear_posterior_is_invariant_under_rotating_the_heads_softmax_is_not():
    task = ba.MultiLagCopyTask(T=5, d=3, spans=((1,), (2,)), weights=(1.0, 0.6), rotations="orthogonal")
    data = task.sample(jax.random.key(0), 40)
    rng = np.random.default_rng(1)
    L = rng.normal(size=(2, 5, 5))
    rot = np.array([[np.cos(0.7), -np.sin(0.7)], [np.sin(0.7), np.cos(0.7)]])
    L2 = np.einsum("gh,hts->gts", rot, L)
    dens = {}
    for kind in ("linear", "softmax"):
        post = ba.Posterior(data, kind, ba.Prior(1.0, 10.0, 0.5), heads=2)
        dens[kind] = [float(post.log_density(jax.numpy.asarray(x))) for x in (L, L2)]
    np.testing.assert_allclose(dens["linear"][0], dens["linear"][1], rtol=1e-10)
    assert abs(dens["softmax"][0] - dens["softmax"][1]) > 1e-3


def test_theory_part_next_to_mcmc(tmp_path):
    """The staircase's theory part (the H-head theory on the MCMC grid, one curve per attention) is written,
    summarised and drawn with the MCMC points; at a P far below the first stage both give the near-uniform
    best-head mass (softmax) and the near-chance share of each lag in the heads' span (linear)."""
    from bayesattn.experiments.staircase.config import BayesConfig, StaircaseConfig
    from bayesattn.experiments.staircase.figures import bayes_figure
    from bayesattn.sweep import run_experiment

    b = BayesConfig(
        T=8,
        d=4,
        heads=[2],
        attention=["softmax", "linear"],
        inits=["cold"],
        P=[60, 120],
        mcmc={"num_chains": 2, "num_warmup": 150, "num_samples": 150},
    )
    cfg = StaircaseConfig(parts=["mcmc", "theory"], bayes=b, theory={"num_samples": 20000})
    assert [p["attention"] for p in Staircase().points(cfg)["theory"]] == ["softmax", "linear"]
    s = run_experiment(Staircase(), cfg, tmp_path, progress=False, figures=False)
    for att, obs in (("softmax", "mass_max"), ("linear", "capture")):
        assert set(s["theory"][f"{att}/H=2/w=0.6"]["P_k"]) == {"lag1", "lag2"}
        (rec,) = [r["result"] for r in load_results(tmp_path / "points" / "theory") if r["point"]["attention"] == att]
        assert set(rec) >= {"P", obs} and not set(rec) & (set(LAG_OBSERVABLE.values()) - {obs})
        mc = s["mcmc"][f"{att}/H=2/w=0.6/cold"]["means"]
        for lag in ("lag1", "lag2"):
            assert abs(rec[obs][lag][0] - mc[f"{obs}:{lag}"][0]) < 0.03, (lag, rec, mc)
    assert bayes_figure(tmp_path, tmp_path / "f.png").stat().st_size > 1000
    with pytest.raises(ValueError, match="theory"):
        StaircaseConfig.load({"theory": {"head": [2]}})


def _ratio_records(P1, P2, seed, ratio=0.5, grid=(100, 200, 400, 800, 1600, 3200)):
    """Made-up MCMC records of one data set: lag k's mass is 0 below P_k and 1 from it on, with threshold 1, so
    the stage P_k is exactly P_k (None: never reached)."""

    def mass(Pk, P):
        return float(Pk is not None and P >= Pk)

    return [
        {
            "point": {
                "attention": "softmax",
                "heads": 2,
                "bayes": {"ratio": ratio},
                "init": "cold",
                "P": P,
                "seed": seed,
            },
            "result": {
                "threshold": {"lag1": 1.0, "lag2": 1.0},
                "means": {"mass_max:lag1": mass(P1, P), "mass_max:lag2": mass(P2, P)},
                "competitive": {"lag1": 0.0},
            },
        }
        for P in grid
    ]


def test_mcmc_seed_statistics_on_made_up_data_sets(tmp_path):
    """Six data sets with known stages at w_2/w_1 = 0.5 (and the same at 0.8: a ratio sweep): P_2/P_1 = 8, 2, 8, 16,
    2 and one P_2 outside the grid; the median is 8, 3 of the 5 found lie above (w_1/w_2)^2 = 4, the sign test of
    3 of 5 gives 1; the summary's curves are the config seed's; fewer than 4 data sets give no interval; one gives
    no statistics."""
    from bayesattn.experiments.staircase.figures import ratio_figure
    from bayesattn.experiments.staircase.seeds import mcmc_seed_statistics
    from bayesattn.experiments.staircase.summary import describe, summarize

    stages = [(200, 1600), (200, 400), (100, 800), (200, 3200), (400, 800), (400, None)]
    recs = [r for w in (0.5, 0.8) for s, (P1, P2) in enumerate(stages) for r in _ratio_records(P1, P2, 10 + s, ratio=w)]
    st = mcmc_seed_statistics(recs)
    assert st["seeds"] == list(range(10, 16))
    curve = st["curves"]["softmax/H=2/w=0.5/cold"]
    assert curve["P_k"]["lag1"] == pytest.approx([200, 200, 100, 200, 400, 400]) and curve["P_k"]["lag2"][-1] is None
    assert curve["median"]["lag1"]["median"] == pytest.approx(200) and curve["median"]["lag2"]["not_found"] == 1
    row, row_08 = st["ratio_sweep"]
    assert row["ratio"] == 0.5 and row_08["ratio"] == 0.8 and row_08["square_law"] == pytest.approx(1.5625)
    assert row["P2/P1"][:5] == pytest.approx([8.0, 2.0, 8.0, 16.0, 2.0]) and row["P2/P1"][5] is None
    assert row["median"]["median"] == pytest.approx(8.0) and row["square_law"] == 4.0
    assert row["above"] == 3 and row_08["above"] == 5
    assert row["sign_test_p"] == pytest.approx(1.0)  # 3 of 5: as likely as not
    lo, hi = row["median"]["ci"]
    assert 2.0 - 1e-9 <= lo <= 8.0 + 1e-9 and 8.0 - 1e-9 <= hi <= 16.0 + 1e-9
    assert mcmc_seed_statistics([r for r in recs if r["point"]["seed"] == 10]) is None
    few = mcmc_seed_statistics([r for r in recs if r["point"]["seed"] < 13])
    assert few["ratio_sweep"][0]["median"]["ci"] is None  # 3 data sets: no interval
    out = summarize({"mcmc": recs}, seed=11)
    assert out["mcmc"]["softmax/H=2/w=0.5/cold"]["P_k"] == pytest.approx({"lag1": 200.0, "lag2": 400.0})
    assert out["ratio_sweep"][0]["P2/P1"] == pytest.approx(2.0) and out["mcmc_seeds"] == st
    lines = describe(out)
    assert any("6 data sets" in ln and "lag1 200 [" in ln for ln in lines)
    assert any("= 0.5: P_2/P_1 8.00 [" in ln and "in 3 of 5 (sign test p = 1)" in ln for ln in lines)
    (tmp_path / "summary.json").write_text(json.dumps(out))
    assert ratio_figure(tmp_path, tmp_path / "ratio.png").exists()


def test_start_differences_over_made_up_data_sets():
    """Hysteresis over data sets: six data sets whose cold starts reach lag 1 one grid step later than their hot
    starts in five (a coexistence window) and at the same P in one; lag 2 later in three, earlier in two, and
    outside the grid for one start in one data set. The differences are exact, equal stages are not counted, and
    the sign test is the binomial one (5 of 5: p = 1/16; 3 of 5: 1)."""
    from bayesattn.experiments.staircase.summary import describe, summarize

    cold = [(200, 800), (200, 1600), (400, 800), (200, 3200), (400, 800), (200, 400)]
    hot = [(100, 400), (100, 3200), (200, 400), (100, 1600), (400, 1600), (100, None)]
    recs = []
    for s, (c, h) in enumerate(zip(cold, hot)):
        for init, (P1, P2) in (("cold", c), ("hot", h)):
            for r in _ratio_records(P1, P2, s):
                r["point"]["init"] = init
                recs.append(r)
    out = summarize({"mcmc": recs})
    lag1, lag2 = out["mcmc_seeds"]["starts"]
    assert lag1["curve"] == "softmax/H=2/w=0.5" and lag1["lag"] == "lag1"
    assert lag1["cold_minus_hot"] == pytest.approx([100, 100, 200, 100, 0, 100])
    assert (lag1["cold_later"], lag1["cold_earlier"]) == (5, 0) and lag1["sign_test_p"] == pytest.approx(1 / 16)
    assert (
        lag2["cold_minus_hot"][:5] == pytest.approx([400, -1600, 400, 1600, -800]) and lag2["cold_minus_hot"][5] is None
    )
    assert (lag2["cold_later"], lag2["cold_earlier"]) == (3, 2) and lag2["sign_test_p"] == pytest.approx(1.0)
    assert lag2["median"]["not_found"] == 1 and lag2["median"]["median"] == pytest.approx(400)
    assert any(
        "lag1: P_k cold - hot over 6 data sets +100.0 [" in ln and "later in 5, earlier in 0" in ln
        for ln in describe(out)
    )
    one_start = summarize({"mcmc": [r for r in recs if r["point"]["init"] == "cold"]})
    assert "starts" not in one_start["mcmc_seeds"]
    # two curves (w = 0.5 and 0.8), read in another order (a folder's file names, say): the same summary, key
    # order and row order included
    both = recs + [{**r, "point": {**r["point"], "bayes": {"ratio": 0.8}}} for r in recs]
    shuffled = [both[i] for i in np.random.default_rng(0).permutation(len(both))]
    assert json.dumps(summarize({"mcmc": shuffled})) == json.dumps(summarize({"mcmc": both}))


def test_branches_of_the_two_starts():
    """Each chain on one side of the stage threshold (0.5 here): at P = 100 the cold chains stay below while the
    hot ones stay above in data set 0 (split), one cold chain crosses in data set 1 (mixed), the other way round
    in data set 2 (reverse); at P = 200 every chain is above. A record without its chains' means gives none."""
    from bayesattn.experiments.staircase.seeds import branches
    from bayesattn.experiments.staircase.summary import describe, summarize

    chains = {
        (0, 100): ([0.1, 0.2], [0.9, 0.8]),
        (1, 100): ([0.1, 0.7], [0.9, 0.8]),
        (2, 100): ([0.9, 0.8], [0.1, 0.2]),
    }
    recs = []
    for s in range(3):
        for P in (100, 200):
            cold, hot = chains.get((s, P), ([0.9, 0.9], [0.9, 0.9]))
            for init, cm in (("cold", cold), ("hot", hot)):
                point = {"attention": "softmax", "heads": 2, "bayes": {"ratio": 0.6}, "init": init, "P": P, "seed": s}
                obs = {"mass_max:lag1": {"chain_means": cm, "se": 0.01}}
                res = {"threshold": {"lag1": 0.5}, "means": {"mass_max:lag1": float(np.mean(cm))}, "observables": obs}
                recs.append({"point": point, "result": {**res, "competitive": {"lag1": 0.0}}})
    b = branches(recs, "lag1")
    assert b == {"P": [100, 200], "data_sets": [3, 3], "split": [1, 0], "reverse": [1, 0], "mixed": [1, 0]}
    (row,) = summarize({"mcmc": recs})["mcmc_seeds"]["starts"]
    assert row["branches"] == b
    line = "cold chains below the threshold and hot above at P = 100 (1 of 3); one start's chains on both sides at P = 100 (1 of 3)"
    assert any(line in ln for ln in describe(summarize({"mcmc": recs})))
    del recs[0]["result"]["observables"]
    assert branches(recs, "lag1") is None


def test_theory_comparison_over_made_up_data_sets(tmp_path):
    """Six data sets with known stages (as above) against a made-up theory at 0.5 on every lag with a binodal at
    P = 400: at each P the mean over the data sets is the fraction whose stage has been reached, its gap to the
    theory that minus 0.5; P = 400 is not counted; the figure draws the curve; one data set gives no comparison
    and no figure."""
    from bayesattn.experiments.staircase.figures import theory_seeds_figure
    from bayesattn.experiments.staircase.summary import describe, summarize

    stages = [(200, 1600), (200, 400), (100, 800), (200, 3200), (400, 800), (400, None)]
    grid = (100, 200, 400, 800, 1600, 3200)
    recs = [r for s, (P1, P2) in enumerate(stages) for r in _ratio_records(P1, P2, s, grid=grid)]
    for r in recs:  # each run's own standard error
        r["result"]["observables"] = {k: {"se": 0.01} for k in r["result"]["means"]}
    theory = {
        "point": {"method": "theory", "attention": "softmax", "heads": 2, "bayes": {"ratio": 0.5}, "seed": 0},
        "result": {
            "P": list(grid),
            "mass_max": {"lag1": [0.5] * 6, "lag2": [0.5] * 6},
            "P_k": {"lag1": None, "lag2": None},
            "coexistence_P": [400.0],
            "binodals": [400.0],
        },
    }
    out = summarize({"mcmc": recs, "theory": [theory]})
    at = out["mcmc_seeds"]["curves"]["softmax/H=2/w=0.5/cold"]["against_theory"]
    reached = {
        lag: [[float(Pk is not None and P >= Pk) for P in grid] for Pk in ks]
        for lag, ks in (("lag1", [s[0] for s in stages]), ("lag2", [s[1] for s in stages]))
    }
    for lag in ("lag1", "lag2"):
        expect = np.mean(reached[lag], axis=0)
        assert at[lag]["mean"] == pytest.approx(expect.tolist()) and at[lag]["theory"] == pytest.approx([0.5] * 6)
        assert at[lag]["away"] == [True, True, False, True, True, True]
        assert at[lag]["se_within"] == pytest.approx([0.01] * 6)
        gaps = np.abs(expect - 0.5)
        gaps[2] = -1  # the binodal's point is not counted
        assert at[lag]["largest_gap_away"]["P"] == grid[int(np.argmax(gaps))]
    # lag 1 at P = 100: 1 of 6 reached (mean 1/6), all reached from 800: the largest gap is 0.5 there
    assert at["lag1"]["largest_gap_away"]["gap"] == pytest.approx(0.5)
    lines = describe(out)
    assert any("best head's mass on lag1 over 6 data sets against the theory" in ln for ln in lines)
    (tmp_path / "summary.json").write_text(json.dumps(out))
    assert theory_seeds_figure(tmp_path, tmp_path / "theory_seeds.png").exists()

    # the theory with three importance-sampling seeds, 0.4, 0.5 and 0.6 on every lag: the same mean, so the same
    # gaps; the agreement is now the Welch interval of the two means, which holds 0 where the mean over the data
    # sets is within its reach of 0.5; every seed's P_k is kept
    def seeded(s, v):
        mass = {lag: [v] * 6 for lag in ("lag1", "lag2")}
        return {"point": {**theory["point"], "seed": s}, "result": {**theory["result"], "mass_max": mass}}

    three = summarize({"mcmc": recs, "theory": [seeded(2, 0.6), theory, seeded(1, 0.4)]})
    at3 = three["mcmc_seeds"]["curves"]["softmax/H=2/w=0.5/cold"]["against_theory"]["lag1"]
    assert at3["mean"] == at["lag1"]["mean"] and at3["theory"] == pytest.approx([0.5] * 6)
    assert at3["theory_runs"] == 3 and at3["theory_sd"] == pytest.approx([0.1] * 6)
    for m, c in zip(at3["mean"], at3["gap_ci"]):
        assert c[0] < m - 0.5 < c[1]
    assert at3["gap_ci"][0][1] - at3["gap_ci"][0][0] > at["lag1"]["ci"][0][1] - at["lag1"]["ci"][0][0]
    assert three["theory"]["softmax/H=2/w=0.5"]["P_k_seeds"] == {"lag1": [None] * 3, "lag2": [None] * 3}
    assert any("Welch 95% interval (the theory over 3 seeds) holds 0" in ln for ln in describe(three))
    (tmp_path / "summary.json").write_text(json.dumps(three))
    assert theory_seeds_figure(tmp_path, tmp_path / "theory_seeds3.png").exists()
    # linear heads: the same numbers as the lag's share in the heads' span ("capture"), compared alike
    lin = [
        {
            "point": {**r["point"], "attention": "linear"},
            "result": {
                **r["result"],
                "means": {k.replace("mass_max", "capture"): v for k, v in r["result"]["means"].items()},
                "observables": {k.replace("mass_max", "capture"): v for k, v in r["result"]["observables"].items()},
            },
        }
        for r in recs
    ]
    lin_theory = {
        "point": {**theory["point"], "attention": "linear"},
        "result": {
            **{k: v for k, v in theory["result"].items() if k != "mass_max"},
            "capture": theory["result"]["mass_max"],
        },
    }
    out_lin = summarize({"mcmc": lin, "theory": [lin_theory]})
    assert out_lin["mcmc_seeds"]["curves"]["linear/H=2/w=0.5/cold"]["against_theory"] == at
    assert any("share in the heads' span of lag1 over 6 data sets against the theory" in ln for ln in describe(out_lin))
    out_one = summarize({"mcmc": [r for r in recs if r["point"]["seed"] == 0], "theory": [theory]})
    assert "mcmc_seeds" not in out_one  # one data set: no statistics, no comparison
    (tmp_path / "summary.json").write_text(json.dumps(out_one))
    assert theory_seeds_figure(tmp_path, tmp_path / "none.png") is None
