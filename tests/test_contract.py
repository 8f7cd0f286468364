"""The experiment contract: every system is a registered Experiment with package-data configs; a changed setting
recomputes exactly the points that depend on it (never a stale result); a seed's result does not depend on the
other seeds that share its program; bad configs are refused with one line, whatever is wrong with them."""

from __future__ import annotations

import json
import tomllib

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bayesattn.experiments import EXPERIMENTS, ConfigError, Experiment, get_experiment
from bayesattn.experiments.config import ExperimentConfig, apply_overrides, parse_value
from bayesattn.sweep import point_id, run_sweep


def test_registry_holds_seven_systems_each_a_contract():
    expected = {"phase-diagram", "three-transitions", "staircase", "sparse", "dynlab", "screens", "plateau"}
    assert set(EXPERIMENTS) == expected
    for name, cls in EXPERIMENTS.items():
        assert issubclass(cls, Experiment) and cls.name == name and cls.description
        assert issubclass(cls.Config, ExperimentConfig)
        assert cls.configs(), f"{name} ships no named config"
        for path in cls.configs().values():  # package data inside the package, not the source checkout's root
            assert "bayesattn/experiments/" in str(path).replace("\\", "/")
    with pytest.raises(ConfigError, match="experiment='nope': expected one of"):
        get_experiment("nope")


# ------------------------------------------------------------------------------------------ staleness
PLATEAU_CASE = '{attention="linear", T=4, P_over=[2.0, 4.0], gd_steps=20, adam_steps=20, records=10}'
TINY = {
    "phase-diagram": ("default", ["task.T=8", "task.d=4", "P.values=[100, 400]", "theory.vary_name="]),
    "three-transitions": ("three_transitions", ["T_values=[4]", 'attentions=["linear"]']),
    "staircase": (
        "staircase",
        ["bayes.heads=[2]", "bayes.P=[50, 400]", 'bayes.attention=["softmax"]', "train_seeds=1", "train_variants={}"],
    ),
    "sparse": (
        "sparse_emergence",
        ['parts=["grid", "bayes", "theory"]', "seeds=2", "grid=[[4, 1]]", "bayes.grid=[[4, 2]]", "bayes.P=[40]"],
    ),
    "dynlab": ("focus_dilution", ["seeds=2", "seeds_per_program=2", "settings=[{}]"]),
    "screens": ("screens_bayes", ['parts=["bayes", "theory", "trajectory"]', "bayes.P=[20, 2000]"]),
    "plateau": ("plateau", ["seeds=2", f"cases=[{PLATEAU_CASE}]", "theory_points=8"]),
}
# (a changed setting, how many points of each part it must recompute): the expectation comes from what each
# computation reads, not from how the points are built
CHANGES = [
    ("phase-diagram", "adam.lr=0.02", {"theory": 0, "mcmc": 0, "adam": 4}),
    ("phase-diagram", "mcmc.num_samples=900", {"theory": 0, "mcmc": 4, "adam": 0}),
    ("phase-diagram", "mcmc.by_attention.softmax.num_chains=3", {"theory": 0, "mcmc": 2, "adam": 0}),
    ("phase-diagram", "theory.num_P=50", {"theory": 2, "mcmc": 0, "adam": 0}),
    ("phase-diagram", "prior.sigma2=300.0", {"theory": 2, "mcmc": 4, "adam": 4}),
    ("three-transitions", "mcmc.span=1.3", {"theory": 0, "adam": 0, "mcmc": 1}),
    ("three-transitions", "adam.steps=400", {"theory": 0, "adam": 2, "mcmc": 0}),
    ("staircase", "train.steps=30", {"mcmc": 0, "theory": 0, "train": 1, "ode": 0}),
    ("staircase", "bayes.mcmc.num_samples=70", {"mcmc": 4, "theory": 0, "train": 0, "ode": 0}),
    ("staircase", "ode.t_final=500.0", {"mcmc": 0, "theory": 0, "train": 0, "ode": 1}),
    ("sparse", "bayes.mcmc.num_samples=40", {"grid": 0, "bayes": 2, "theory": 0}),
    ("sparse", "train.lr=0.002", {"grid": 2, "bayes": 0, "theory": 0}),
    ("dynlab", "equilibrium.mcmc.num_samples=100", {"train": 0, "equilibrium": 6, "theory": 0}),
    ("dynlab", "base.lr=0.4", {"train": 2, "equilibrium": 0, "theory": 0}),
    ("screens", "bayes.probe_N=64", {"trajectory": 0, "bayes": 2, "theory": 0}),
    ("screens", "bayes.prior.sigma2=20.0", {"trajectory": 0, "bayes": 2, "theory": 1}),
    # plateau: the theory reads no optimiser's settings; gd and SGLD share their steps, Adam has its own, and only
    # SGLD reads the temperature (2 seeds per method)
    ("plateau", f"cases=[{PLATEAU_CASE[:-1]}, adam_lr=0.02}}]", {"theory": 0, "runs": 2}),
    ("plateau", f"cases=[{PLATEAU_CASE[:-1]}, gd_lr=0.02}}]", {"theory": 0, "runs": 4}),
    ("plateau", "sgld_temperature=0.1", {"theory": 0, "runs": 2}),
    ("plateau", "prior.sigma2=300.0", {"theory": 1, "runs": 6}),
]


def _fake(point):
    return {"id": point_id(point)}


@pytest.mark.parametrize("experiment, change, expected", CHANGES)
def test_a_changed_setting_recomputes_exactly_the_points_that_depend_on_it(tmp_path, experiment, change, expected):
    cls = get_experiment(experiment)
    name, sets = TINY[experiment]
    parts = lambda c: {k: v for k, v in cls().points(c).items() if v}  # noqa: E731 (a run skips empty parts)
    before, after = parts(cls.load_config(name, sets)), parts(cls.load_config(name, [*sets, change]))
    assert set(before) == set(after) == set(expected)
    for part, n in expected.items():
        folder = tmp_path / part
        run_sweep(before[part], _fake, folder, progress=False)
        stats: dict = {}
        recs = run_sweep(after[part], _fake, folder, progress=False, stats=stats)
        assert (stats["computed"], stats["resumed"]) == (n, len(after[part]) - n), (part, stats)
        assert [r["result"]["id"] for r in recs] == [point_id(p) for p in after[part]]  # never an old result


# ------------------------------------------------------------------------------------------ per-seed results
def _block_results(experiment, config, seeds):
    """The results of the training points of ``seeds`` computed as a sweep would: in the experiment's blocks."""
    cls = get_experiment(experiment)
    exp = cls()
    pts = [p for p in exp.points(config)[_train_part(experiment)] if p["seed"] in seeds]
    b = exp.batch(config, _train_part(experiment))
    groups: dict = {}
    for p in pts:
        groups.setdefault(b.key(p), []).append(p)
    out = {}
    for group in groups.values():
        for p, r in zip(group, b.many(group)):
            out[(json.dumps(p["config" if "config" in p else "train"], sort_keys=True), p["seed"])] = r
    return out


def _train_part(experiment):
    return {"sparse": "grid", "dynlab": "train"}[experiment]


DETERMINISM = {
    "dynlab-clustering": (
        "dynlab",
        "clustering_head",
        [
            "seeds=6",
            "seeds_per_program=4",
            "base.n_train=64",
            "base.n_test=64",
            "base.batch_size=16",
            "base.epochs=8",
            "options.curv_every=4",
            "options.frames=2",
            "options.sandbox_seqs=8",
            "options.lanczos_iter=3",
            "options.block=4",
            "options.sandbox_seeds=0",
        ],
    ),
    "dynlab-focus-dilution": (
        "dynlab",
        "focus_dilution",
        [
            "seeds=6",
            "seeds_per_program=4",
            "settings=[{}]",
            "base.T=6",
            "base.n=16",
            "base.d=4",
            "base.steps=40",
            "base.record_every=10",
        ],
    ),
    "sparse": (
        "sparse",
        "sparse_emergence",
        [
            'parts=["grid"]',
            "seeds=6",
            "seeds_per_program=4",
            "grid=[[4, 1]]",
            "train.width=8",
            "train.heads=2",
            "train.mlp=16",
            "train.steps=20",
            "train.tokens_per_step=64",
            "train.record_every=10",
            "train.probe=16",
            "train.warmup=5",
        ],
    ),
}


@pytest.mark.parametrize("case", sorted(DETERMINISM))
def test_a_seed_gives_the_same_result_alone_and_among_other_seeds(case):
    """Seeds {0, 1} asked for alone and inside a run of 6 seeds (blocks of 4), and seed 5 alone: the same curves."""
    experiment, name, sets = DETERMINISM[case]
    cfg = get_experiment(experiment).load_config(name, sets)
    alone = _block_results(experiment, cfg, {0, 1})
    five = _block_results(experiment, cfg, {5})
    together = _block_results(experiment, cfg, set(range(6)))
    assert len(together) == 6 and len(alone) == 2 and len(five) == 1
    science = lambda r: json.dumps({k: v for k, v in r.items() if not k.endswith("wall_s")}, sort_keys=True)  # noqa: E731
    for key, res in {**alone, **five}.items():
        assert science(res) == science(together[key]), key


def test_adam_sweep_runs_do_not_depend_on_the_other_seeds():
    """ba.train_sweep: the runs of seeds {0, 1} alone and among 6 seeds give the same histories, vmapped in fixed
    batches of 2 runs (one run at a time, the CPU default, is a loop over one compiled run)."""
    import jax

    import bayesattn as ba

    task, prior = ba.CopyTask(T=4, d=2), ba.Prior(1.0, 100.0, 40.0)
    for rpb in (2,):
        a = ba.train_sweep(
            task, prior, "softmax", [30, 90], [0, 1], jax.random.key(3), steps=60, record_every=20, runs_per_batch=rpb
        )
        b = ba.train_sweep(
            task,
            prior,
            "softmax",
            [30, 90],
            list(range(6)),
            jax.random.key(3),
            steps=60,
            record_every=20,
            runs_per_batch=rpb,
        )
        np.testing.assert_allclose(np.asarray(a.history["m"]), np.asarray(b.history["m"])[:, :2], rtol=0, atol=1e-12)


def test_staircase_training_seed_is_its_own_point():
    """Staircase training runs are one point per (run, seed): asking for more seeds adds points and leaves the
    first seed's point (and so its file and result) as it was."""
    cls = get_experiment("staircase")
    one = cls().points(cls.load_config("staircase", ["train_seeds=1", "train_variants={}"]))["train"]
    three = cls().points(cls.load_config("staircase", ["train_seeds=3", "train_variants={}"]))["train"]
    assert [point_id(p) for p in one] == [point_id(p) for p in three[:1]] and len(three) == 3


# ------------------------------------------------------------------------------------------ config property tests
def _leaves(data, path=()):
    for k, v in data.items():
        if isinstance(v, dict) and v:
            yield from _leaves(v, (*path, k))
        else:
            yield (*path, k)


WRONG = st.one_of(
    st.text(max_size=5),
    st.integers(-10, 10),
    st.floats(allow_nan=True),
    st.booleans(),
    st.lists(st.integers(-3, 3), max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    st.none(),
)
SHIPPED = [(name, cfg) for name, cls in EXPERIMENTS.items() for cfg in sorted(cls.configs())]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
@pytest.mark.parametrize("experiment, name", SHIPPED)
def test_any_mutation_of_a_shipped_config_is_accepted_or_refused_with_one_line(experiment, name, data):
    """A wrong type, an unknown key at any level, a removed section or an out-of-range value: the config either
    loads (and its points build) or is refused by a ConfigError of one line that names a field. Never another
    exception."""
    cls = get_experiment(experiment)
    with open(cls.configs()[name], "rb") as f:
        base = tomllib.load(f)
    leaves = list(_leaves(base))
    kind = data.draw(st.sampled_from(["wrong", "unknown", "remove", "range"]))
    mutated = json.loads(json.dumps(base))
    path = data.draw(st.sampled_from(leaves))
    node = mutated
    for k in path[:-1]:
        node = node[k]
    if kind == "wrong":
        node[path[-1]] = data.draw(WRONG)
    elif kind == "unknown":
        node[data.draw(st.sampled_from(["zz_unknown", "seedz", "Tt"]))] = 1
    elif kind == "remove":
        del node[path[-1]]
    else:
        node[path[-1]] = data.draw(st.sampled_from([0, -1, -0.5, 10**9, 1e300]))
    try:
        cfg = cls.Config.load(mutated, source=f"config {name}")
    except ConfigError as e:
        msg = str(e)
        assert (
            "\n" not in msg
            and msg.startswith(f"config {name}: ")
            and ("=" in msg or "unknown key" in msg or "missing" in msg)
        ), msg
        return
    if kind == "unknown":
        pytest.fail(f"an unknown key was accepted: {path}")
    cls().check(cfg)
    cls().points(cfg)


@pytest.mark.parametrize(
    "item, needle",
    [
        ("task.T=x", "task.T='x': Input should be a valid integer"),
        ("nosuch.x=1", "--set nosuch.x: unknown key 'nosuch' in the top level"),
        ("task=3", "task=3"),
        ("mcmc.inits=warm", "mcmc.inits.0='warm'"),
    ],
)
def test_set_items_are_checked_like_file_values(item, needle):
    cls = get_experiment("phase-diagram")
    with pytest.raises(ConfigError) as e:
        cls.load_config(None, [item])
    assert needle in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize(
    "experiment, item",
    [
        ("staircase", "bayes.T=1"),
        ("staircase", "train.m=0"),
        ("staircase", "train.m=inf"),
        ("staircase", "train.weight_decay=nan"),
        ("staircase", "train.weight_decay=-1"),
        ("staircase", "train.factor=1.5"),
        ("staircase", "train.factor=0"),
        ("staircase", "train.patience=-1"),
        ("staircase", "ode.seed=-1"),
        ("three-transitions", "tau.T=0"),
        ("screens", "bayes.T=-1"),
        ("sparse", "train.weight_decay=inf"),
        ("screens", "bayes.P=[]"),
        ("staircase", "train.span_lengths=[]"),
        ("sparse", "parts=[]"),
    ],
)
def test_values_that_would_fail_inside_a_point_are_refused_by_the_config(experiment, item):
    """A value the run could only fail on (or turn into NaN) later, inside a point, is refused when the config
    loads, with one line naming the field (these were accepted before)."""
    with pytest.raises(ConfigError) as e:
        get_experiment(experiment).load_config(None, [item])
    assert item in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize(
    "text, value",
    [
        ("[theory,mcmc]", ["theory", "mcmc"]),
        ('["theory", mcmc ]', ["theory", "mcmc"]),
        ("[8, 16, x]", [8, 16, "x"]),
        ("[1, 2]", [1, 2]),
        ("[ ]", []),
        ("[a,[b]]", "[a,[b]]"),
        ("cold,hot", "cold,hot"),
    ],
)
def test_a_bracketed_list_of_bare_words_is_a_list(text, value):
    """``--set methods=[theory,mcmc]`` (no quotes, as a shell user types it) is the list, not the string
    "[theory,mcmc]" split at its comma into "[theory" and "mcmc]"; a nested list stays a string (refused later)."""
    assert parse_value(text) == value


def test_bare_word_list_sets_a_list_field():
    cfg = get_experiment("phase-diagram").load_config(None, ["methods=[theory,mcmc]", "mcmc.inits=[hot]"])
    assert cfg.methods == ["theory", "mcmc"] and cfg.mcmc.inits == ["hot"]


def test_overrides_do_not_touch_the_loaded_dict():
    base = {"task": {"T": 8}}
    out = apply_overrides(get_experiment("phase-diagram").Config, base, ["task.T=16", "prior.sigma2=3.0"])
    assert base == {"task": {"T": 8}} and out == {"task": {"T": 16}, "prior": {"sigma2": 3.0}}


def test_a_finished_part_draws_its_figures_before_the_next_part_runs(tmp_path):
    """run_experiment draws a part's own figures (Experiment.part_figures) as soon as that part is done: the
    first part's figure exists while the second part's points are computed."""
    from bayesattn.sweep import run_experiment

    class TwoParts(Experiment):
        name = "two_parts"
        description = "two parts"
        Config = ExperimentConfig
        seen: list = []

        def points(self, config):
            return {"first": [{"i": 0}], "second": [{"i": 1}]}

        def compute(self, point):
            if point["i"] == 1:
                self.seen.append((tmp_path / "figures" / "first.txt").exists())
            return {"i": point["i"]}

        def summarize(self, config, records):
            return {}

        def part_figures(self, folder, part):
            path = folder / "figures" / f"{part}.txt"
            path.parent.mkdir(exist_ok=True)
            path.write_text(part)
            return [path]

    lines = []
    run_experiment(TwoParts(), ExperimentConfig(), tmp_path, progress=True, log=lines.append)
    assert TwoParts.seen == [True]
    assert "first done: figures/first.txt" in lines and "second done: figures/second.txt" in lines
