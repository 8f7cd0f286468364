"""The training-dynamics laboratory (docs/results/dynlab.md): detectors on constructed curves, effective rank,
Hessian-vector products and Lanczos against finite differences / dense Hessians, the Markov data against its
transition matrix, the modular-addition labels, bad input, and one tiny run of each experiment."""

import time

import jax
import jax.flatten_util
import jax.numpy as jnp
import numpy as np
import pytest

from bayesattn.diagnostics.dynamics import (
    detect_spikes,
    detect_stages,
    effective_rank,
    entropy_phases,
    first_nonfinite,
    hvp,
    lanczos_top_eig,
)
from bayesattn.experiments.dynlab import Dynlab, DynlabConfig
from bayesattn.experiments.dynlab import clustering_head as ch
from bayesattn.experiments.dynlab import focus_dilution as fd
from bayesattn.experiments.dynlab.summary import group_runs


# ------------------------------------------------------------------------------------------ detectors
def test_spike_detector_finds_constructed_spikes():
    rng = np.random.default_rng(0)
    t = np.arange(600)
    loss = 0.7 * np.exp(-t / 80) + 0.01 + 0.001 * rng.random(600)
    loss[150] += 0.3  # spikes at 150, 300-302 (a 3-epoch spike counts once, at its peak 301) and 450
    loss[300:303] += np.array([0.1, 0.4, 0.2])
    loss[450] += 0.05
    assert detect_spikes(loss) == [150, 301, 450]
    smooth = 0.7 * np.exp(-t / 80) + 0.01  # a decreasing curve has none
    assert detect_spikes(smooth) == []


def test_spike_detector_ignores_nonfinite_and_reports_divergence():
    loss = np.r_[np.linspace(1, 0.1, 50), [np.nan, np.inf]]
    assert detect_spikes(loss) == []
    assert first_nonfinite(loss) == 50
    assert first_nonfinite(np.ones(3)) is None


def _piecewise(knots, values, n):
    return np.interp(np.arange(n), knots, values)


def test_stage_detector_on_constructed_cycles():
    # frozen (rank condenses) until 100, focus 100-200, dilution 200-300, focus 300-380, dilution 380-500
    n = 500
    ent = _piecewise([0, 100, 200, 300, 380, 499], [2.0, 2.0, 1.2, 1.7, 1.0, 1.5], n)
    ent += 0.005 * np.sin(np.arange(n))  # wiggles below min_drop are not phases
    rank = _piecewise([0, 40, 60, 499], [3.8, 3.8, 1.05, 2.5], n)
    st = detect_stages(ent, rank, rank_one=1.3, min_drop=0.1)
    kinds = [p["stage"] for p in st["phases"]]
    assert kinds == ["focus", "dilution", "focus", "dilution"]
    starts = [p["start"] for p in st["phases"]]
    np.testing.assert_allclose(starts, [100, 200, 300, 380], atol=3)
    assert st["cycles"] == 2
    assert st["restarts"] == [st["phases"][2]["start"]]
    lo, hi = st["condensation"]
    assert 40 < lo < 60 and abs(hi - 100) <= 3


def test_entropy_phases_monotone_curve_and_small_wiggles():
    assert [p["stage"] for p in entropy_phases(np.linspace(2, 1, 50), min_drop=0.1)] == ["focus"]
    assert entropy_phases(1 + 0.01 * np.sin(np.arange(200)), min_drop=0.1) == []


def test_effective_rank():
    u, v = np.random.default_rng(1).normal(size=(2, 5))
    assert float(effective_rank(np.outer(u, v))) == pytest.approx(1.0, abs=1e-6)
    assert float(effective_rank(np.eye(4))) == pytest.approx(4.0)
    # against the definition with numpy
    M = np.random.default_rng(2).normal(size=(6, 3))
    s = np.linalg.svd(M, compute_uv=False)
    p = s / s.sum()
    assert float(effective_rank(M)) == pytest.approx(np.exp(-np.sum(p * np.log(p))))


# ------------------------------------------------------------------------------------------ curvature
def _cluster_loss(seed=0):
    k1, k2 = jax.random.split(jax.random.key(seed))
    X, y = ch.modular_data(k1, 64, 2, 5, 12)
    w, unravel = jax.flatten_util.ravel_pytree(ch.ClusterNet(k2, 3, 12, 2, 32))
    return (lambda v: ch.loss_fn(unravel(v), X, y)), w


def test_hvp_against_finite_differences_of_the_gradient():
    lf, w = _cluster_loss()
    g = jax.jit(jax.grad(lf))
    hv = jax.jit(lambda w, v: hvp(lf, w, v))
    for key in jax.random.split(jax.random.key(3), 3):
        v = jax.random.normal(key, w.shape)
        eps = 1e-5
        fdiff = (g(w + eps * v) - g(w - eps * v)) / (2 * eps)
        np.testing.assert_allclose(hv(w, v), fdiff, rtol=1e-5, atol=1e-7)


def test_lanczos_top_eigenvalue_against_dense_hessian():
    lf, w = _cluster_loss(1)
    H = jax.jit(jax.hessian(lf))(w)
    top = float(np.linalg.eigvalsh(np.asarray(H))[-1])
    lam = float(jax.jit(lambda w: lanczos_top_eig(lf, w, jax.random.key(0), num_iter=40))(w))
    assert lam == pytest.approx(top, rel=1e-6)
    # a quadratic with known spectrum: exact when num_iter = n
    A = np.diag([5.0, -7.0, 2.0, 0.5])
    q = lambda x: 0.5 * x @ jnp.asarray(A) @ x
    assert float(lanczos_top_eig(q, jnp.ones(4), jax.random.key(1), num_iter=4)) == pytest.approx(5.0)


# ----------------------------------------------------------------------------------------------- data
def test_markov_transition_frequencies_match_the_matrix():
    pi, lam = [0.75, 0.19, 0.05, 0.01], 0.3
    X = np.asarray(fd.markov_sequences(jax.random.key(0), pi, lam, 4000, 50))
    P = fd.transition_matrix(pi, lam)
    np.testing.assert_allclose(P.sum(1), 1.0)
    counts = np.zeros((4, 4))
    np.add.at(counts, (X[:, :-1].ravel(), X[:, 1:].ravel()), 1)
    # chi-square goodness of fit per row: statistic below the 99.9% quantile of chi2(3) = 16.27
    for i in range(4):
        n = counts[i].sum()
        exp = n * P[i]
        stat = np.sum((counts[i] - exp) ** 2 / exp)
        assert stat < 16.27, (i, stat)
    # started from pi and pi is stationary: every position has law pi (tolerance 5 standard errors)
    freq = np.mean(X[:, 25] == 0)
    assert abs(freq - 0.75) < 5 * np.sqrt(0.75 * 0.25 / 4000)


def test_modular_addition_labels():
    X, y = ch.modular_data(jax.random.key(0), 500, 3, 5, 12)
    X, y = np.asarray(X), np.asarray(y)
    assert X.shape == (500, 12) and X.min() == 0 and X.max() == 2
    ref = np.array([sum(int(t) for t in row[:5]) % 3 for row in X])  # brute force
    np.testing.assert_array_equal(y, ref)
    assert not np.array_equal(y, X[:, :6].sum(1) % 3)  # the 6th token does not count


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"pi": [0.5, 0.4]}, "sum"),
        ({"pi": [1.2, -0.2]}, "non-negative"),
        ({"lam": 1.0}, "lam"),
        ({"lam": -0.1}, "lam"),
        ({"optimizer": "sgd2"}, "optimizer"),
    ],
)
def test_focus_dilution_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        fd.FDConfig.load(kwargs)


@pytest.mark.parametrize(
    "kwargs, match", [({"p": 1}, "p=1"), ({"k": 13}, "k=13"), ({"batch_size": 4096}, "batch_size")]
)
def test_clustering_head_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ch.ClusterConfig.load(kwargs)


def test_dynlab_config_without_an_optimizer_is_refused_naming_the_field():
    """No optimizer used to reach the settings' check and fail there with an IndexError (found by the config
    mutation property test); it is a one-line error that names the field."""
    from bayesattn.experiments.dynlab.config import DynlabConfig

    with pytest.raises(ValueError, match="optimizers=\\[\\]"):
        DynlabConfig.load({"name": "x", "experiment": "focus_dilution", "optimizers": []}, source="test")


def test_model_matches_a_numpy_forward():
    cfg = ch.ClusterConfig(n_train=32, batch_size=32)
    m = ch.ClusterNet(jax.random.key(0), 3, 12, 2, 32)
    x = np.array([0, 1, 1, 0, 1, 0, 0, 1, 1, 1, 0, 2])
    tok, pos = np.asarray(m.tok), np.asarray(m.pos)
    h = tok[x] + pos
    n = h / (np.sqrt((h**2).mean(-1, keepdims=True)) + 1e-5)
    s = n @ np.asarray(m.query) / np.sqrt(2)
    a = np.exp(s - s.max())
    a /= a.sum()
    z = a @ (n @ np.asarray(m.W_V).T)
    from scipy.special import erf

    pre = np.asarray(m.W1) @ (z / (np.sqrt((z**2).mean()) + 1e-5)) + np.asarray(m.b1)
    gelu = 0.5 * pre * (1 + erf(pre / np.sqrt(2)))
    out = z + np.asarray(m.W2) @ gelu + np.asarray(m.b2)
    np.testing.assert_allclose(m(jnp.asarray(x)), tok @ out, rtol=1e-10)
    assert cfg.num_emb == 3


def test_focus_dilution_forward_against_loops():
    """Causal attention with queries E W_Q and keys E W_K, written out position by position in numpy."""
    p = {k: np.asarray(v) for k, v in fd.init_params(jax.random.key(0), 4, 3, 0.7).items()}
    X = np.asarray(fd.markov_sequences(jax.random.key(1), [0.5, 0.3, 0.15, 0.05], 0.4, 2, 5))
    logits, attn = fd.forward({k: jnp.asarray(v) for k, v in p.items()}, jnp.asarray(X))
    for n in range(2):
        for t in range(5):
            q = p["E"][X[n, t]] @ p["W_Q"]
            sc = np.array([q @ (p["E"][X[n, s]] @ p["W_K"]) / np.sqrt(3) for s in range(t + 1)])
            a = np.exp(sc - sc.max())
            a /= a.sum()
            np.testing.assert_allclose(attn[n, t, : t + 1], a, rtol=1e-12)
            assert np.all(np.asarray(attn[n, t, t + 1 :]) == 0)
            o = sum(a[s] * (p["W_V"] @ p["E"][X[n, s]]) for s in range(t + 1))
            np.testing.assert_allclose(logits[n, t], o @ p["W_O"], rtol=1e-10, atol=1e-14)


# ------------------------------------------------------------------------------------------ tiny runs
CH_OPTIONS = {"block": 3, "curv_every": 3, "frames": 3, "sandbox_seqs": 8, "lanczos_iter": 5, "sandbox_seeds": 1}


def _ch_points(seeds_per_program: int) -> list[dict]:
    """The experiment's per-seed points (seeds 0, 1) of one tiny clustering-head setting."""
    cfg = DynlabConfig(
        experiment="clustering_head",
        seeds=2,
        seeds_per_program=seeds_per_program,
        base={"n_train": 64, "n_test": 64, "batch_size": 16, "epochs": 6},
        options=CH_OPTIONS,
    )
    return Dynlab().points(cfg)["train"]


def _fd_points(cfg: fd.FDConfig, seeds) -> list[dict]:
    """Per-seed focus-dilution points of one config, all seeds in one aligned block."""
    return [{"config": fd.config_dict(cfg), "seeds_per_program": len(seeds), "seed": s} for s in seeds]


def test_clustering_head_tiny_run():
    pts = _ch_points(2)
    assert [p["seed"] for p in pts] == [0, 1] and [p["sandbox"] for p in pts] == [True, False]
    runs = ch.run_block(pts)
    assert [r["seed"] for r in runs] == [0, 1]
    r = runs[0]
    assert len(r["curves"]["loss"]) == 6 and r["diverged_at"] is None
    assert 0 <= r["curves"]["mass_first_k"][-1] <= 1
    assert r["curvature"]["epoch"] == [0, 3, 5] and all(np.isfinite(r["curvature"]["lambda_max"]))
    assert len(r["sandbox"]["z"]) == 3 and np.shape(r["sandbox"]["z"][0]) == (8, 2)
    assert runs[1]["sandbox"] is None  # only the first sandbox_seeds seeds keep frames
    # seeds batched == seeds looped: seed 1 trained alone (a block of one) as beside seed 0
    (solo,) = ch.run_block([p for p in _ch_points(1) if p["seed"] == 1])
    np.testing.assert_allclose(solo["curves"]["loss"], runs[1]["curves"]["loss"], rtol=1e-9)


def test_focus_dilution_tiny_run():
    cfg = fd.FDConfig(T=6, n=16, d=4, steps=40, record_every=10, lr=0.5, init_scale=0.05)
    runs = fd.run_block(_fd_points(cfg, [0, 1]))
    r = runs[0]
    assert len(r["curves"]["loss"]) == 5 and r["step"] == [0, 10, 20, 30, 40]
    mass = np.asarray(r["curves"]["mass"])
    np.testing.assert_allclose(mass.sum(1), 1.0, rtol=1e-10)  # attention rows sum to one
    assert r["curves"]["loss"][-1] < r["curves"]["loss"][0]
    assert np.shape(r["pca"]["coords"]) == (5, 4, 2)


def test_a_killed_focus_dilution_block_goes_on_from_its_last_save(tmp_path, kill_at_second_save):
    """A block trained with an artifacts folder (60 records, blocks of 20: saves at steps 20 and 40), killed in the
    save after its second block, leaves its state there; the rerun goes on from that save (step 40) and returns the
    uninterrupted run's records bit for bit, and the file is removed at the end. Adam, so that the optimizer's
    moments cross the cut. The training time is carried across the cut: each seed's share of it counts the killed
    process's time as saved, plus the rerun's."""
    cfg = fd.FDConfig(T=6, n=16, d=4, steps=60, record_every=1, lr=0.05, init_scale=0.05, optimizer="adam")
    points = _fd_points(cfg, [0, 1])
    whole = fd.run_block(points)
    probe = kill_at_second_save(fd)
    with pytest.raises(KeyboardInterrupt):
        fd.run_block(points, artifacts=tmp_path)
    assert [kwargs["step"] for _, kwargs in probe.saves] == [20, 40]
    saved_wall = [kwargs["meta"]["wall_s"] for _, kwargs in probe.saves]
    assert 0.0 < saved_wall[0] < saved_wall[1]
    assert len(list(tmp_path.glob("focus-*.npz"))) == 1
    probe.resume()
    t0 = time.perf_counter()
    again = fd.run_block(points, artifacts=tmp_path)
    rerun = time.perf_counter() - t0
    assert [records["loss"].shape[1] - 1 for _, records in probe.loaded] == [40]
    assert not list(tmp_path.glob("focus-*"))
    for a in again:  # two seeds in the block: each carries half of the block's time
        assert saved_wall[1] / 2 < a["train_wall_s"] < (saved_wall[1] + rerun) / 2
    for a, b in zip(again, whole):
        assert a["step"] == b["step"] and a["stages"] == b["stages"]
        for k in b["curves"]:
            np.testing.assert_array_equal(np.asarray(a["curves"][k]), np.asarray(b["curves"][k]), err_msg=k)


def test_a_block_resumed_from_a_state_without_its_time_reports_the_time_unknown(tmp_path, kill_at_second_save):
    """A saved state written without the time spent before it (by an older version) resumes as usual, but the
    block's training time is then not known: None, not the rerun's seconds alone."""
    cfg = fd.FDConfig(T=6, n=16, d=4, steps=60, record_every=1, lr=0.05, init_scale=0.05, optimizer="adam")
    points = _fd_points(cfg, [0, 1])
    probe = kill_at_second_save(fd)
    again = probe.rerun_without_saved_time(lambda: fd.run_block(points, artifacts=tmp_path), tmp_path, "focus-*.npz")
    assert [records["loss"].shape[1] - 1 for _, records in probe.loaded] == [40]
    assert [a["train_wall_s"] for a in again] == [None, None]


# ------------------------------------------------------------------------------------- driver and CLI
def test_dynlab_cli_runs_resumes_and_draws(tmp_path, capsys):
    from bayesattn.cli import main

    cfg = tmp_path / "tiny.toml"
    cfg.write_text("""name = "tiny"
experiment = "focus_dilution"
seeds = 2
seeds_per_program = 2
optimizers = ["gd", "adam"]
settings = [{}, { vocab = 3, ratio = 0.3 }]
[base]
T = 6
n = 16
d = 4
steps = 40
record_every = 10
""")
    out = tmp_path / "out"
    assert main(["dynlab", "--config", str(cfg), "--out", str(out), "--quiet"]) == 0
    text = capsys.readouterr().out
    assert "V=3" in text and "adam" in text and "cycles per seed" in text
    files = sorted(p.name for p in (out / "figures").iterdir())
    assert files == ["cycle_counts.png", "cycle_threshold.png", "cycles.png", "pca_paths.png", "stage_timelines.png"]
    pts = sorted((out / "points" / "train").glob("*.json"))
    assert len(pts) == 8  # one file per (setting, optimizer, seed)
    mtimes = [p.stat().st_mtime_ns for p in pts]
    assert main(["dynlab", "--config", str(cfg), "--out", str(out), "--quiet", "--no-figures"]) == 0  # resumes
    assert [p.stat().st_mtime_ns for p in pts] == mtimes


def test_dynlab_cli_bad_input(tmp_path, capsys):
    from bayesattn.cli import main

    cfg = tmp_path / "bad.toml"
    cfg.write_text('experiment = "focus_dilution"\nsettings = [{ pi = [0.6, 0.6] }]\n')
    assert main(["dynlab", "--config", str(cfg), "--out", str(tmp_path / "o")]) == 2
    assert "pi=[0.6, 0.6]" in capsys.readouterr().err
    cfg.write_text('experiment = "clustering_head"\n[base]\nk = 20\n')
    assert main(["dynlab", "--config", str(cfg), "--out", str(tmp_path / "o")]) == 2
    assert "k=20" in capsys.readouterr().err
    assert main(["dynlab", "--config", "no_such_config"]) == 2


def test_named_configs_load():
    for name in (
        "clustering_head",
        "clustering_head_full",
        "focus_dilution",
        "focus_dilution_full",
        "focus_dilution_pi",
    ):
        c = Dynlab.load_config(name)
        pts = Dynlab().points(c)
        assert pts["train"], name
    fdc = Dynlab.load_config("focus_dilution")
    train = Dynlab().points(fdc)["train"]
    opts = [p["config"]["optimizer"] for p in train]
    lrs = [p["config"]["lr"] for p in train]
    # one Adam setting (its seeds one point each), at the config's Adam step
    assert opts.count("adam") == fdc.seeds and lrs[opts.index("adam")] == fdc.adam_lr
    assert len({p["label"] for p, o in zip(train, opts) if o == "adam"}) == 1


def test_diverging_run_is_reported_not_plotted(tmp_path):
    from bayesattn.experiments.dynlab.figures import cycles_figure

    cfg = fd.FDConfig(T=6, n=16, d=4, steps=30, record_every=10, lr=1e6, init_scale=1.0)
    pts = _fd_points(cfg, [0])
    (r,) = fd.run_block(pts)
    assert r["diverged_at_step"] is not None and r["diverged_at_step"] <= 30
    (rec,) = group_runs([{"point": {**pts[0], "experiment": "focus_dilution", "label": "diverging"}, "result": r}])
    import matplotlib.figure

    drawn = []
    save = matplotlib.figure.Figure.savefig

    def keep(fig, *args, **kwargs):  # the figure as saved, to read its panels
        drawn.append(fig)
        return save(fig, *args, **kwargs)

    matplotlib.figure.Figure.savefig = keep
    try:
        cycles_figure([rec], tmp_path / "c.png")  # draws the note, not the curve
    finally:
        matplotlib.figure.Figure.savefig = save
    assert (tmp_path / "c.png").exists() and drawn
    axes = drawn[0].axes
    assert not any(ax.lines for ax in axes), "a diverged run's frozen curves were drawn"
    texts = " ".join(t.get_text() for ax in axes for t in ax.texts)
    assert f"diverged (not drawn): seed 0 at {r['diverged_at_step']}" in texts


@pytest.mark.slow
def test_equilibrium_entropy_falls_with_P():
    from bayesattn.experiments.dynlab.equilibrium import equilibrium_point

    lo = equilibrium_point({"P": 4, "seed": 0, "num_warmup": 200, "num_samples": 200})
    hi = equilibrium_point({"P": 2048, "seed": 0, "num_warmup": 200, "num_samples": 200})
    assert lo["entropy"]["mean"] > hi["entropy"]["mean"]
    assert lo["entropy"]["mean"] <= np.log(8) + 1e-9


def test_summaries_exclude_diverged_runs():
    from bayesattn.experiments.dynlab.summary import cluster_summary, fd_summary

    sp = {"epoch": 5, "lambda_max": 8.0, "lambda_max_before": 2.0}
    ch_runs = [
        {"seed": 0, "success": True, "final_test_acc": 1.0, "diverged_at": None, "spikes": [sp, sp]},
        {"seed": 1, "success": False, "final_test_acc": 0.5, "diverged_at": 7, "spikes": [sp]},
    ]
    e = cluster_summary([{"point": {"label": "x"}, "result": {"runs": ch_runs}}])["x"]
    assert e["runs"] == 2 and e["success_fraction"] == 0.5 and e["spikes"] == [2]
    assert e["diverged"] == [{"seed": 1, "epoch": 7}] and e["median_lambda_ratio_at_spike"] == 4.0
    ok = {
        "seed": 0,
        "cycles": 2,
        "diverged_at_step": None,
        "stage_steps": {"phases": [{"stage": "focus", "start": 100, "end": 300}], "condensation": [10, 100]},
        "curves": {"value_entropy": [1.0, 1.0, 0.5], "rank_E": [2.0, 2.0, 2.0]},
    }
    bad = {**ok, "seed": 1, "cycles": 9, "diverged_at_step": 400}
    f = fd_summary([{"point": {"label": "y"}, "result": {"runs": [ok, bad]}}])["y"]
    assert f["cycles"] == [2] and f["mean_cycles"] == 2.0 and f["diverged"] == [{"seed": 1, "step": 400}]
    assert f["durations"] == [{"condensation": 90, "focus": 200, "dilution": None, "period": None}]
    assert f["train_wall_s"] is None  # records without their training time (older versions): not known
    timed = [{**ok, "train_wall_s": 3.0}, {**bad, "train_wall_s": 4.5}]
    f = fd_summary([{"point": {"label": "y"}, "result": {"runs": timed}}])["y"]
    assert f["train_wall_s"] == 7.5  # a diverged run's time was spent too
    f = fd_summary([{"point": {"label": "y"}, "result": {"runs": [timed[0], bad]}}])["y"]
    assert f["train_wall_s"] is None


def test_stage_durations_of_constructed_stages():
    from bayesattn.experiments.dynlab.summary import stage_durations

    st = {
        "condensation": [100, 900],
        "restarts": [3000],
        "phases": [
            {"stage": "dilution", "start": 0, "end": 50},
            {"stage": "focus", "start": 1000, "end": 1400},
            {"stage": "dilution", "start": 1500, "end": 2600},
            {"stage": "focus", "start": 3000, "end": 3100},
        ],
    }
    assert stage_durations(st) == {"condensation": 800, "focus": 400, "dilution": 1100, "period": 2000}
    st = {"condensation": None, "restarts": [], "phases": [{"stage": "focus", "start": 10, "end": 30}]}
    assert stage_durations(st) == {"condensation": None, "focus": 20, "dilution": None, "period": None}


def test_pi_vocab_sweep_summary_and_figures(tmp_path):
    from bayesattn.experiments.dynlab.figures import equilibrium_figure, pi_vocab_figure
    from bayesattn.experiments.dynlab.summary import fd_summary

    # one tiny real run (one compilation), its per-seed records relabelled as three settings: two pi at V = 3,
    # V = 3 and 5 at ratio 0.25 (the figure reads pi from each point's config and the runs' stages), regrouped
    # per setting as the summary and figures read them
    cfg = fd.FDConfig(T=6, n=16, d=4, steps=40, record_every=10, lr=0.5, init_scale=0.05)
    runs = fd.run_block(_fd_points(cfg, [0, 1]))
    per_seed = []
    for V, ratio in [(3, 0.25), (3, 0.6), (5, 0.25)]:
        pi = fd.geometric_pi(V, ratio)
        point = {"experiment": "focus_dilution", "label": f"V={V} r={ratio}", "config": {"pi": pi, "optimizer": "gd"}}
        per_seed += [{"point": {**point, "seed": r["seed"]}, "result": r} for r in runs]
    recs = group_runs(per_seed)
    assert [r["point"]["seeds"] for r in recs] == [[0, 1]] * 3
    summ = fd_summary(recs)
    assert len(summ) == 3 and all(len(e["durations"]) == 2 for e in summ.values())
    assert all(e["train_wall_s"] > 0 for e in summ.values())
    assert sorted(len(e["pi"]) for e in summ.values()) == [3, 3, 5]
    assert pi_vocab_figure(recs, tmp_path / "pv.png").exists()
    assert pi_vocab_figure(recs[:1], tmp_path / "none.png") is None  # nothing varies
    # the equilibrium figure with a theory line per T (records shaped as the run writes them)
    eq = [
        {"point": {"P": P, "T": T}, "result": {"entropy": {"mean": 1.0, "se": 0.01}, "uniform_entropy": np.log(T)}}
        for T in (8, 16)
        for P in (16, 256)
    ]
    th = [{"point": {"T": 8}, "result": {"P": [16, 256], "posterior": [1.1, 0.9]}}]
    assert equilibrium_figure([], eq, tmp_path / "eq.png", th).exists()
    # twelve settings (the full grid's count), some with 8 tokens: the training panel's legend goes below the
    # panels, and the figure check (an error in the tests) finds nothing cut or overlapping; a panel legend of
    # twelve long labels had squeezed the axes to nothing
    many = []
    for k in range(12):
        V, ratio = (3, 4, 6, 8)[k % 4], (0.1, 0.25, 0.5)[k % 3]
        pi = fd.geometric_pi(V, ratio)
        label = f"V={V}, pi=({', '.join(f'{x:.3g}' for x in pi)}), gd #{k}"  # as long as the run's labels
        point = {"experiment": "focus_dilution", "label": label, "config": {"optimizer": "gd"}}
        many += [{"point": {**point, "seed": r["seed"]}, "result": {**r, "pi": pi}} for r in runs]
    assert equilibrium_figure(group_runs(many), eq, tmp_path / "eq12.png", th).exists()


def test_equilibrium_points_per_T_and_theory_points():
    c = DynlabConfig(
        experiment="focus_dilution",
        seeds=1,
        seeds_per_program=1,
        equilibrium={"P": [16, 64], "T": [8, 16], "d": 4, "mcmc": {"num_chains": 2}},
    )
    points = Dynlab().points
    pts = points(c)
    assert [(p["T"], p["P"]) for p in pts["equilibrium"]] == [(8, 16), (8, 64), (16, 16), (16, 64)]
    assert [(p["T"], p["P"], p["d"]) for p in pts["theory"]] == [(8, [16, 64], 4), (16, [16, 64], 4)]
    single = points(DynlabConfig(experiment="focus_dilution", equilibrium={"P": [16], "T": 8, "d": 4}))
    assert single["equilibrium"][0]["T"] == 8 and len(single["theory"]) == 1


def test_cycles_against_the_threshold_follow_the_swings_of_the_curve():
    """A curve that falls by 0.10, rises by 0.07 and falls by 0.17 nats holds one cycle (focus then dilution) for
    every threshold up to 0.07, none above it (the rise merges into one long focus), and none at all above 0.27
    (nothing moves that much); a diverged seed is not counted."""
    from bayesattn.experiments.dynlab.stages import cycles_vs_threshold, timeline

    x = np.concatenate([np.linspace(1.0, 0.9, 11), np.linspace(0.9, 0.97, 8)[1:], np.linspace(0.97, 0.8, 18)[1:]])
    run = {"seed": 0, "diverged_at_step": None, "curves": {"value_entropy": x.tolist(), "rank_E": [2.0] * len(x)}}
    bad = {**run, "seed": 1, "diverged_at_step": 5}
    th = (0.02, 0.05, 0.069, 0.071, 0.1, 0.2, 0.3)
    cur = cycles_vs_threshold([run, bad], {"stage_signal": "value_entropy", "rank_one": 1.3}, th)
    assert cur["seeds"] == [0]
    assert cur["per_seed"] == [[1, 1, 1, 0, 0, 0, 0]]
    assert cur["mean"] == [1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0]
    st = {
        "condensation": [0, 5],
        "restarts": [30],
        "phases": [{"stage": "focus", "start": 5, "end": 10}, {"stage": "dilution", "start": 12, "end": 20}],
    }
    assert timeline({"stage_steps": st}) == [
        ("condensation", 0, 5),
        ("focus", 5, 10),
        ("dilution", 12, 20),
        ("restart", 30, 30),
    ]


def test_clustering_head_fine_tuning_continues_the_pretrained_model():
    """finetune_p: the seed's pretraining is exactly the plain run of the same seed and epochs (its final loss is
    recorded under "pretrain"), then the same model trains on new p = 3 data for finetune_epochs; the run's curves
    are that stage's. A finetune_p beyond the embedding table is refused."""
    base = {"n_train": 64, "n_test": 64, "batch_size": 16, "epochs": 6}

    def points(extra):
        cfg = DynlabConfig(
            experiment="clustering_head", seeds=1, seeds_per_program=1, base={**base, **extra}, options=CH_OPTIONS
        )
        return Dynlab().points(cfg)["train"]

    (plain,) = ch.run_block(points({}))
    ft_points = points({"finetune_p": 3, "finetune_epochs": 4})
    assert "then fine-tuned on p=3" in ft_points[0]["label"]
    (ft,) = ch.run_block(ft_points)
    assert ft["pretrain"]["final_loss"] == pytest.approx(plain["curves"]["loss"][-1], rel=1e-12)
    assert plain["pretrain"] is None
    assert len(ft["curves"]["loss"]) == 4
    with pytest.raises(ValueError, match="finetune_p=4"):
        ch.ClusterConfig(p=2, finetune_p=4)


def test_spike_windows_figure_draws_the_epochs_before_each_spike(tmp_path):
    """The close-up of the spikes (constructed records: a seed with two spikes and curvature at every epoch of
    the window, another without spikes) is drawn and passes the figure check; with no spike anywhere there is no
    figure."""
    from bayesattn.experiments.dynlab.figures_spikes import spike_windows_figure

    E = 120
    loss = np.full(E, 0.1)
    loss[[60, 100]] = 0.6  # two spikes
    run = {
        "seed": 0,
        "diverged_at": None,
        "curves": {"loss": loss.tolist(), "z_norm_min": np.linspace(1.0, 0.01, E).tolist()},
        "curvature": {"epoch": list(range(40, 101)), "lambda_max": np.geomspace(1.0, 50.0, 61).tolist()},
        "spikes": [{"epoch": 60}, {"epoch": 100}],
    }
    quiet = {**run, "seed": 1, "spikes": []}
    recs = [{"point": {"label": "p=2, k=5"}, "result": {"runs": [quiet, run]}}]
    assert spike_windows_figure(recs, tmp_path / "w.png").is_file()
    assert spike_windows_figure([{"point": {"label": "x"}, "result": {"runs": [quiet]}}], tmp_path / "n.png") is None


# ------------------------------------------------------------------------------------------ Langevin counterpart
def _prior_row_entropy(T: int, sigma_A2: float, n: int = 400_000) -> float:
    """The mean attention-row entropy under the prior alone, L_ts ~ N(0, sigma_A2), by plain Monte Carlo."""
    rng = np.random.default_rng(0)
    z = rng.normal(0.0, np.sqrt(sigma_A2), (n, T))
    a = np.exp(z - z.max(1, keepdims=True))
    a /= a.sum(1, keepdims=True)
    return float(-(a * np.log(a)).sum(1).mean())


def test_langevin_point_samples_the_prior_when_the_data_say_nothing():
    """At P = 1 with sigma2 = 1e4 the likelihood is flat, so the posterior is the prior: the Langevin chains'
    mean attention entropy after their warm-up must equal the prior's (an exact reference by Monte Carlo)."""
    from bayesattn.experiments.dynlab.equilibrium import langevin_point

    point = {
        "P": [1], "T": 4, "d": 2, "sigma_A2": 1.0, "sigma_V2": 100.0, "sigma2": 1e4,
        "lr": 2e-5, "steps": 3000, "init_scale": 0.01, "records": 300,
    }  # fmt: skip
    runs = [langevin_point({**point, "seed": s}) for s in range(6)]
    assert all(not r["failures"] for r in runs) and runs[0]["t"][-1] == pytest.approx(3000 * 2e-5)
    H = np.asarray([r["entropy"][0][50:] for r in runs])  # relaxation time n sigma_A2 / sigma2 = 4e-4: 20 steps
    per_seed = H.mean(1)
    se = per_seed.std(ddof=1) / np.sqrt(len(per_seed))
    ref = _prior_row_entropy(4, 1.0)
    assert abs(per_seed.mean() - ref) < 4 * se + 0.01, (per_seed.mean(), ref, se)
    assert H.max() < np.log(4) + 1e-12


def test_langevin_points_summary_and_figure(tmp_path):
    from bayesattn.experiments.dynlab.figures_langevin import langevin_figure
    from bayesattn.experiments.dynlab.summary import langevin_summary

    c = DynlabConfig(
        experiment="focus_dilution", seed=3, seeds=1, seeds_per_program=1,
        langevin={"P": [64, 512], "seeds": 6, "steps": 400, "records": 40},
    )  # fmt: skip
    pts = Dynlab().points(c)["langevin"]
    assert [p["seed"] for p in pts] == [3, 4, 5, 6, 7, 8] and pts[0]["P"] == [64, 512] and pts[0]["T"] == 8
    with pytest.raises(ValueError, match="langevin.records"):
        DynlabConfig(experiment="focus_dilution", langevin={"P": [64], "steps": 10, "records": 20})
    # constructed records: P = 64 falls straight to its end level; P = 512 dips 0.3 nats below it and comes back
    t = np.linspace(0.0, 100.0, 101)
    mono = 1.5 + 0.5 * np.exp(-t / 10)
    dip = mono - 0.3 * np.exp(-(((t - 30) / 8) ** 2))
    rng = np.random.default_rng(1)
    recs = [
        {
            "point": {**pts[0], "seed": s},
            "result": {
                "t": t.tolist(), "P": [64, 512], "failures": [], "uniform_entropy": np.log(8),
                "entropy": [(mono + 0.01 * rng.normal(size=t.size)).tolist(),
                            (dip + 0.01 * rng.normal(size=t.size)).tolist()],
                "m": [(1 - mono / 2).tolist(), (1 - dip / 2).tolist()],
            },
        }
        for s in range(6)
    ]  # fmt: skip
    eq = [{"point": {"P": 512, "T": 8}, "result": {"entropy": {"mean": 1.5, "se": 0.01}, "m": {"mean": 0.25}}}]
    lg = langevin_summary(recs, eq)
    a, b = lg["per_P"]
    assert lg["seeds"] == 6 and "nuts" in b and "nuts" not in a
    assert abs(a["undershoot"]["mean"]) < 0.03 and b["undershoot"]["mean"] == pytest.approx(0.3, abs=0.03)
    assert b["undershoot"]["t"] == pytest.approx(30, abs=2) and b["undershoot"]["seeds"] == 3
    assert [p["stage"] for p in b["phases"]["0.1"]] == ["focus", "dilution"]
    assert [p["stage"] for p in a["phases"]["0.1"]] == ["focus"]
    assert a["end"]["mean"] == pytest.approx(1.5, abs=0.01)
    assert langevin_figure(recs, eq, tmp_path / "lg.png").exists()
    failed = [{**r, "result": {**r["result"], "failures": ["diverged"]}} for r in recs]
    assert langevin_figure(failed, eq, tmp_path / "none.png") is None
