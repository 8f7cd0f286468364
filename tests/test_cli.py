"""The `bayesattn` command: the registry's commands (list, run, figures, check), the main job end to end on a reduced
default config, bad arguments, and the one config system every experiment shares."""

import json
import os
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import numpy as np
import pytest

import bayesattn as ba
from bayesattn.cli import main
from bayesattn.experiments import EXPERIMENTS, get_experiment
from bayesattn.experiments.config import apply_overrides
from bayesattn.experiments.copy_head import RunConfig, build_points

ROOT = Path(__file__).resolve().parent.parent
PD = get_experiment("phase-diagram")
CONFIGS = [(name, cfg) for name, cls in EXPERIMENTS.items() for cfg in sorted(cls.configs())]

# A reduced default: same structure (both attentions, theory + MCMC + Adam), tiny sizes.
SMALL = [
    "--T",
    "8",
    "--d",
    "4",
    "--P",
    "100,400",
    "--set",
    "mcmc.num_chains=2",
    "--set",
    "mcmc.num_warmup=60",
    "--set",
    "mcmc.num_samples=60",
    "--set",
    "adam.seeds=2",
    "--set",
    "adam.steps=200",
    "--set",
    "adam.record_every=20",
    "--set",
    "theory.num_P=40",
    "--set",
    "theory.vary_name=",
    "--quiet",
]


def test_default_toml_equals_builtin_default():
    with open(PD.configs()["default"], "rb") as f:
        assert RunConfig.load(tomllib.load(f)) == RunConfig()


def test_every_experiment_ships_its_default_config():
    for cls in EXPERIMENTS.values():
        assert cls.default_config in cls.configs(), cls.name


@pytest.mark.parametrize("experiment, name", CONFIGS)
def test_named_configs_are_valid_and_read_the_same_however_built(experiment, name):
    """A config built from its file, round-tripped through its dict, or rebuilt by a --set of one of its own
    values writes the same values, types included (json, not ==): otherwise its points get other names."""
    cls = get_experiment(experiment)
    cfg = cls.load_config(name)
    assert cfg.name == name
    ref = json.dumps(cfg.to_dict(), sort_keys=True)
    assert json.dumps(cls.Config.load(cfg.to_dict()).to_dict(), sort_keys=True) == ref
    assert json.dumps(cls.load_config(name, [f"name={name}"]).to_dict(), sort_keys=True) == ref
    cls().check(cfg)
    assert all(isinstance(p, dict) for pts in cls().points(cfg).values() for p in pts)


def test_phase_diagram_end_to_end(tmp_path, capsys):
    out = tmp_path / "run"
    # the figures are drawn once, by `bayesattn figures` below: a run draws them at its end with the same
    # Experiment.figures(folder), from the saved results (tests/test_sparse_experiment.py checks a run's own list)
    assert main(["phase-diagram", *SMALL, "--out", str(out), "--no-figures"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["experiment"] == "phase-diagram"
    assert set(summary["transitions"]) == {"softmax", "linear"}
    # the summary's theory transitions are the library's, recomputed here on the grid the config implies
    cfg = get_experiment("phase-diagram").Config.load(summary["config"])
    P_dense = np.unique(np.round(np.geomspace(100, 400, 40)).astype(int)).astype(float)
    for att in ("softmax", "linear"):
        assert set(summary["transitions"][att]) == {"theory", "mcmc", "adam"}
        direct = ba.theory.phase_curve(cfg.make_task(), cfg.make_prior(), att, P_dense).transition
        got = summary["transitions"][att]["theory"]
        assert got["order"] == direct["order"]
        for key in set(direct) & set(got) - {"order"}:
            want = direct[key]
            assert got[key] == (want if want is None else pytest.approx(want, rel=1e-9, nan_ok=True)), (att, key)
    assert summary["versions"]["jax"] and summary["config"]["task"]["T"] == 8
    point = json.loads(next((out / "points" / "mcmc").glob("*.json")).read_text())
    assert point["point"]["seed"] == 0 and "versions" in point and "provenance" in point and "checksum" in point
    assert point["result"]["data"]["n"] == point["point"]["P"] * 8  # cyclic: every one of the T = 8 rows
    text = capsys.readouterr().out
    assert "softmax: theory:" in text and "linear: theory:" in text
    # the sampler's diagnostics: the worst R-hat and ESS of each attention's order parameter over its point files
    for att, x in (("softmax", "m"), ("linear", "u")):
        groups = [
            g[x]
            for f in (out / "points" / "mcmc").glob(f"mcmc-{att}-*.json")
            for g in json.loads(f.read_text())["result"]["inits"].values()
        ]
        dg = summary["mcmc_diagnostics"][att]
        assert dg["observable"] == x and dg["chain_groups"] == len(groups) == 2 * len(
            summary["transitions"][att]["mcmc"]["cold"]["P"]
        )
        assert dg["r_hat_max"] == max(g["r_hat"] for g in groups)
        assert dg["ess_bulk_min"] == min(g["ess_bulk"] for g in groups)
        assert f"{att}: mcmc diagnostics of {x}" in text
    assert not (out / "figures").exists() or not any((out / "figures").iterdir())
    # figures are drawn from saved results alone
    assert main(["figures", str(out)]) == 0
    figs = {p.name for p in (out / "figures").iterdir()}
    for stem in (
        "fig1_order_parameter_vs_P",
        "fig2_free_energy_landscapes",
        "fig4_posterior_mean_attention",
        "fig5_posterior_histograms",
        "fig6_training_curves",
    ):
        assert f"{stem}.png" in figs and f"{stem}.pdf" in figs
    assert f"drew {len(figs)} figure files" in capsys.readouterr().out
    # the folder checks out, and a rerun computes nothing
    assert main(["check", str(out)]) == 0
    assert "complete" in capsys.readouterr().out
    assert main(["phase-diagram", *SMALL, "--out", str(out), "--no-figures"]) == 0
    again = json.loads((out / "summary.json").read_text())
    assert again["points_computed"] == 0 and again["points_resumed"] == sum(summary["points"].values())


def test_mcmc_diagnostics_flag_a_point_over_the_thresholds():
    from bayesattn.experiments.copy_head.summary import ESS_MIN, R_HAT_MAX, mcmc_diagnostics

    def rec(P, r_hat, ess, div=0):
        group = {"m": {"r_hat": r_hat, "ess_bulk": ess}, "diagnostics": {"num_divergent": div}}
        return {"point": {"attention": "softmax", "P": P}, "result": {"inits": {"cold": group, "hot": group}}}

    good = mcmc_diagnostics([rec(100, 1.0, 500.0), rec(200, 1.01, 300.0)])["softmax"]
    assert good["met"] and good["r_hat_max"] == 1.01 and good["ess_bulk_min"] == 300.0 and good["chain_groups"] == 4
    assert good["r_hat_max_at"] == {"P": 200, "init": "cold"}
    assert good["chain_groups_failing"] == 0
    for bad in (rec(300, R_HAT_MAX + 0.01, 500.0), rec(300, 1.0, ESS_MIN - 1), rec(300, 1.0, 500.0, div=1)):
        dg = mcmc_diagnostics([rec(100, 1.0, 500.0), bad])["softmax"]
        assert not dg["met"] and dg["chain_groups_failing"] == 2  # the bad point's cold and hot groups
    nan = mcmc_diagnostics([rec(100, 1.0, 500.0), rec(300, float("nan"), float("nan"))])["softmax"]
    assert not nan["met"] and nan["r_hat_max"] is None and nan["ess_bulk_min"] is None
    assert nan["r_hat_max_at"] == {"P": 300, "init": "cold"}
    # a group without diagnostics (a result made by other code) is counted, not read
    bare = rec(400, 1.0, 500.0)
    bare["result"]["inits"]["hot"] = {"m": {"mean": 0.1}}
    part = mcmc_diagnostics([bare])["softmax"]
    assert part["chain_groups"] == 1 and part["chain_groups_without_diagnostics"] == 1 and part["met"]
    assert mcmc_diagnostics([{"point": bare["point"], "result": {"inits": {"cold": {"m": {}}}}}]) == {}
    # the printed line: an R-hat of chains that never mixed in powers of ten, not as 17 digits
    from bayesattn.experiments.copy_head.summary import describe

    huge = mcmc_diagnostics([rec(100, 82365850033869440.0, 3.0)])
    line = describe({"transitions": {"softmax": {}}, "mcmc_diagnostics": huge})[-1]
    assert "max R-hat 8.24e+16 (P = 100, cold), min bulk ESS 3 " in line and line.endswith("NOT met (2 of 2 groups)")


# slow (27 s): tests/test_user_signals.py covers an interrupted run resuming in the default suite
@pytest.mark.slow
def test_killed_run_resumes(tmp_path):
    out = tmp_path / "run"
    args = [
        sys.executable,
        "-m",
        "bayesattn.cli",
        "phase-diagram",
        *SMALL,
        "--methods",
        "mcmc",
        "--P",
        "50,100,200,400",
        "--no-figures",
        "--out",
        str(out),
    ]
    proc = subprocess.Popen(
        args,
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "JAX_PLATFORMS": "cpu"},
    )
    pts = out / "points" / "mcmc"
    deadline = time.time() + 240
    while time.time() < deadline and len(list(pts.glob("*.json"))) < 2 and proc.poll() is None:
        time.sleep(0.2)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done = {p.name: p.stat().st_mtime_ns for p in pts.glob("*.json")}
    assert 1 <= len(done) < 8, "the kill should land mid-sweep"
    r = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    after = {p.name: p.stat().st_mtime_ns for p in pts.glob("*.json")}
    assert len(after) == 8  # 2 attentions x 4 values of P
    assert not list(pts.glob(".*.tmp"))  # a half-written file left by the kill is cleared on resume
    assert all(after[n] == t for n, t in done.items()), "finished points must not be recomputed"


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["phase-diagram", "--attention", "cubic"], "--attention"),
        (["phase-diagram", "--P", "1:x:3"], "--P"),
        (["phase-diagram", "--T", "1"], "task.T=1"),
        (["phase-diagram", "--sigma2", "-1"], "prior.sigma2=-1.0"),
        (["phase-diagram", "--methods", "theory,magic"], "methods.1='magic'"),
        (["phase-diagram", "--set", "mcmc.num_chain=3"], "unknown key 'num_chain'"),
        (["phase-diagram", "--set", "mcmc.num_chains"], "expected KEY=VALUE"),
        (["phase-diagram", "--set", "mcmc.num_chains=2.5"], "mcmc.num_chains=2.5"),
        (["phase-diagram", "--config", "no_such_config"], "no_such_config"),
        (["phase-diagram", "--P", "400,100"], "P.grid=[400, 100]"),
        (["phase-diagram", "--batch", "0"], "--batch=0"),
        (["phase-diagram", "--methods", "theory", "--batch", "4"], "with mcmc among the methods (methods=theory)"),
        (["phase-diagram", "--dask-threads"], "--dask-threads"),
        (["run", "nonsense"], "invalid choice"),
        (["run", "sparse", "--set", "seeds=0"], "seeds=0"),
        (["run", "staircase", "--set", 'parts=["mcmc", "fly"]'], "parts.1='fly'"),
        (["staircase", "--parts", "foo"], "parts.0='foo'"),
        (["dynlab", "--set", "experiment=tennis"], "experiment='tennis'"),
        (["sample", "--P", "100,200"], "one positive integer"),
        (["sample", "--P", "0"], "--P='0': expected one positive integer"),
        (["train", "--P", "abc"], "--P='abc': expected one positive integer"),
        (["sample", "--attention", "both"], "--attention"),
        (["train", "--attention", "both"], "--attention"),
        (["sample", "--P", "50", "--set", "mcmc.method=gibbs"], "mcmc.method='gibbs'"),
        (["sample", "--P", "50", "--num-samples", "-1"], "--num-samples=-1: expected an integer >= 4"),
        (["sample", "--P", "50", "--num-samples", "3"], "--num-samples=3: expected an integer >= 4"),
        (["sample", "--P", "50", "--backend", "numpyro", "--method", "chees"], "backend='numpyro'"),
        (["sample", "--P", "50", "--seed", "99999999999"], "--seed=99999999999: expected an integer in 0..2147483647"),
        (["run", "plateau", "--out", ""], "--out='': expected a non-empty value"),
        (["run", "plateau", "--config", ""], "--config='': expected a non-empty value"),
        (["phase-diagram", "--P", ""], "--P=''"),
        (["phase-diagram", "--P", ",,"], "--P=',,'"),
        (["phase-diagram", "--methods", ""], "--methods=''"),
        (["phase-diagram", "--reuse", ""], "--reuse=''"),
        (["phase-diagram", "--reuse", "no_such_folder"], "--reuse='no_such_folder': not a folder"),
        (["phase-diagram", "--set", ""], "--set=''"),
        (["phase-diagram", "--workers", "0"], "--workers=0"),
        (["phase-diagram", "--scheduler", "notaurl"], "--scheduler='notaurl': expected a Dask scheduler's address"),
        (["phase-diagram", "--config", "."], "config='.': is a folder"),
        (
            ["phase-diagram", "--set", "attention=softmax,softmax"],
            "attention=['softmax', 'softmax']: expected distinct",
        ),
        (["phase-diagram", "--set", "mcmc.backend=numpyro", "--set", "mcmc.method=smc"], "numpyro has only nuts"),
        (["phase-diagram", "--set", "mcmc.num_samples=2"], "mcmc.num_samples=2: expected >= 4"),
        # refused at each point, after the run had started and written its folder
        (["phase-diagram", "--methods", "mcmc", "--P", "100000000"], "P=100000000: expected at most 8388608 sequences"),
        (["phase-diagram", "--P", "1:5:100"], "P.start=1, stop=5, num=100: only 5 distinct integers"),
        # the probe refused it after a whole training run
        (["screens", "--set", "trajectory.pair_range=[10,1000]"], "trajectory.pair_range=(10, 1000): expected 0 <= lo"),
        (["phase-diagram", "--set", "seed=4294967296"], "seed=4294967296"),
        (["phase-diagram", "--set", "name=../elsewhere"], "name='../elsewhere': expected a plain folder name"),
        (["phase-diagram", "--set", "name="], "name='': expected a plain folder name"),
        (["archive", "somewhere", "--to", ""], "--to=''"),
        (["screen", "somewhere", "--T", "0"], "--T=0"),
        (["screen", "somewhere", "--threshold", "nan"], "--threshold=nan: expected a positive finite number"),
        (["screen", "somewhere", "--chunk", "4"], "--chunk: applies to a pretrained model (--model) only"),
        (["screen", "somewhere", "--bos"], "--bos: applies to a pretrained model (--model) only"),
        (["sample", "--P", "50", "--num-chains", "0"], "--num-chains=0: expected an integer >= 1"),
        (["train", "--P", "50", "--steps", "0"], "--steps=0: expected an integer >= 1"),
        (["train", "--P", "50", "--lr", "nan"], "--lr=nan: expected a positive finite number"),
        (["train", "--P", "50", "--lr", "fast"], "--lr='fast': expected a positive finite number"),
        # refused before the output folder is made (the default results/ folder, or --out's parent)
        (["phase-diagram", "--executor", "serial", "--workers", "3"], "workers=3 with executor='serial'"),
        (["phase-diagram", "--executor", "thread", "--scheduler", "tcp://127.0.0.1:1"], "scheduler="),
        (["phase-diagram", "--scheduler", "tcp://127.0.0.1:1"], "scheduler='tcp://127.0.0.1:1': cannot connect"),
        (["sample", "--P", "50", "--method", "smc", "--backend", "numpyro", "--out", "new/x.json"], "numpyro"),
        (
            ["sample", "--P", "50", "--set", "mcmc.method=smc", "--set", "mcmc.inits=prior", "--backend", "numpyro"]
            + ["--out", "new/x.json"],
            "numpyro",
        ),
        (["sample", "--P", "50", "--set", "mcmc.method=smc", "--out", "new/x.json"], "expected inits=['prior']"),
        (["screen", "--model", "smollm2", "--steps", "1", "2", "--out", "new/x.json"], "steps=[1, 2]: expected one"),
        (["screen", "--model", "smollm2", "--T", "8"], "--T=8: too short for the repeated_pair probe (T=8"),
        (["screen", "--model", "smollm2", "--T", "14"], "--T=14: too short for the repeated_pair probe (pair_range"),
        (["screen", "somewhere", "--T", "13", "--probe", "repeated_sequence"], "--T=13: too short"),
        (["figures", "/nonexistent/folder"], "no run.json there"),
        (["check", "/nonexistent/folder"], "no run.json there"),
        (["nonsense"], "invalid choice"),
    ],
)
def test_bad_arguments_exit_2_with_one_line(argv, needle, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # nothing may be written where the test runs
    try:
        code = main(argv)
    except SystemExit as e:  # argparse's own checks
        code = e.code
    assert code == 2
    out, err = capsys.readouterr()
    err = err.strip()
    assert needle in err and len(err.splitlines()) == 1, err
    assert out == "", f"bad input must be refused before any work begins: {out!r}"
    assert not list(tmp_path.iterdir()), "bad input must be refused before anything is written"


def test_help_on_every_subcommand(capsys):
    subs = ("list", "run", "figures", "check", "sample", "train", "screen", *EXPERIMENTS)  # each experiment's alias
    for sub in subs:
        with pytest.raises(SystemExit) as e:
            main([sub, "--help"])
        assert e.value.code == 0
        assert "usage: bayesattn" in capsys.readouterr().out


def test_help_and_list_import_no_jax():
    """`bayesattn --help` and `bayesattn list` answer before JAX is imported (JAX alone takes seconds)."""
    code = (
        "import sys, contextlib, io\nfrom bayesattn.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    main(['list'])\n"
        "    try:\n        main(['run', '--help'])\n    except SystemExit:\n        pass\n"
        "print('jax' in sys.modules, 'numpy' in sys.modules)"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert r.stdout.split()[0] == "False", r.stdout


def test_list_shows_every_experiment_and_config(capsys):
    assert main(["list"]) == 0
    text = capsys.readouterr().out
    for experiment, name in CONFIGS:
        assert f"{experiment}:" in text and f"  {name} " in text


def test_list_gives_every_config_a_measured_time(capsys):
    """Every shipped config carries exactly one ``# measured:`` comment line (a time and its conditions, or "not
    measured"), and `bayesattn list` shows it on the config's line, within 120 columns."""
    for cls in EXPERIMENTS.values():
        for path in cls.configs().values():
            measured = [line for line in path.read_text().splitlines() if line.startswith("# measured:")]
            assert len(measured) == 1, f"{path.name}: {len(measured)} '# measured:' lines"
            value = measured[0].removeprefix("# measured:").strip()
            assert value.startswith("not measured") or any(c.isdigit() for c in value), f"{path.name}: {value!r}"
            assert path.read_text().startswith("# ") and not path.read_text().startswith("# measured:"), path.name
    assert main(["list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    for experiment, cls in EXPERIMENTS.items():
        for name in cls.configs():
            line = next((x for x in lines if x.split()[:1] == [name] and x.startswith("  ")), None)
            assert line is not None, f"{experiment}: {name} not listed"
            shown = line.split(None, 1)[1]
            assert shown.startswith("[") and "]" in shown, line
            value = shown[1 : shown.index("]")]
            assert value.startswith("not measured") or any(c.isdigit() for c in value), line
            assert "measured:" not in line and len(line) <= 120, line


def test_config_overrides_are_typed():
    cfg = PD.load_config(None, ["mcmc.num_chains=3", "attention=linear", "adam.inits=small,hot"])
    assert cfg.mcmc.num_chains == 3 and cfg.attention == ["linear"] and cfg.adam.inits == ["small", "hot"]
    assert cfg.to_dict()["prior"]["sigma2"] == 400.0 and isinstance(cfg.to_dict()["prior"]["sigma2"], float)
    with pytest.raises(ValueError, match="mcmc.num_chains"):
        PD.load_config(None, ["mcmc.num_chains=2.5"])
    with pytest.raises(ValueError, match="mcmc.num_chains='3'"):
        PD.load_config(None, ['mcmc.num_chains="3"'])  # a TOML string is not an integer


def test_an_optional_list_field_takes_a_comma_list():
    """``train_only: list[str] | None``: ``--set train_only=a,b`` is split like any list field (it once failed
    with "Input should be a valid list")."""
    from bayesattn.experiments.staircase import StaircaseConfig

    data = apply_overrides(
        StaircaseConfig, {"train_variants": {"n100": {"train": 100, "batch_size": 100}}}, ["train_only=main,n100"]
    )
    assert StaircaseConfig.load(data).train_only == ["main", "n100"]


def test_sample_and_train_subcommands_write_results(tmp_path, capsys):
    small = ["--P", "50", "--T", "4", "--d", "2"]
    # the sampler settings of SMALL's MCMC points (T = 8, d = 4, 2 chains of 60 + 60): the program that
    # test_phase_diagram_end_to_end compiled, not a second one
    argv = [
        "sample",
        "--P",
        "50",
        "--T",
        "8",
        "--d",
        "4",
        "--num-chains",
        "2",
        "--num-warmup",
        "60",
        "--num-samples",
        "60",
        "--quiet",
        "--init",
        "hot",
        "--out",
        str(tmp_path / "s.json"),
    ]
    assert main(argv) == 0
    s = json.loads((tmp_path / "s.json").read_text())
    assert s["init"] == "hot" and 0 < s["result"]["m"]["mean"] < 1 and s["versions"]["blackjax"]
    assert main(["train", *small, "--steps", "50", "--out", str(tmp_path / "t.json")]) == 0
    t = json.loads((tmp_path / "t.json").read_text())
    assert len(t["result"]["history"]["m"]) >= 1 and "final_order_parameters" in t["result"]
    assert "final m =" in capsys.readouterr().out


def test_sample_and_train_repeat_the_phase_diagrams_point_and_record_what_ran(tmp_path, capsys):
    """With only the model options and --set, `sample` and `train` run the phase diagram's point at that P (its
    sampler and Adam settings, its keys), here from the hot start: the same numbers as compute.mcmc_point and
    compute.adam_point; and the config they record is the one that ran, not the sections they were given."""
    from bayesattn.experiments.copy_head.compute import adam_point, mcmc_point

    sets = ["mcmc.num_chains=2", "mcmc.num_warmup=60", "mcmc.num_samples=60", "adam.steps=200", "adam.seeds=2"]
    sets += ["adam.record_every=20"]
    small = ["--P", "100", "--T", "8", "--d", "4", "--quiet", *[x for kv in sets for x in ("--set", kv)]]
    cfg = PD.load_config(None, ["task.T=8", "task.d=4", "P.values=[100]", "attention=softmax", *sets])
    mcmc, adam = build_points(cfg)["mcmc"][0], build_points(cfg)["adam"][0]
    assert main(["sample", *small, "--attention", "softmax", "--init", "hot", "--out", str(tmp_path / "s.json")]) == 0
    s = json.loads((tmp_path / "s.json").read_text())
    want = mcmc_point(mcmc)["inits"]["hot"]["m"]["mean"]
    assert s["result"]["m"]["mean"] == want and s["init"] == "hot"
    assert s["config"]["mcmc"] == {**s["config"]["mcmc"], "num_chains": 2, "num_warmup": 60, "inits": ["hot"]}
    assert main(["train", *small, "--attention", "softmax", "--init", "hot", "--out", str(tmp_path / "t.json")]) == 0
    t = json.loads((tmp_path / "t.json").read_text())
    runs = adam_point(adam)["inits"]["hot"]
    assert t["result"]["final_order_parameters"]["m"] == runs["final_order_parameters"]["m"][0]
    assert (t["config"]["adam"]["steps"], t["config"]["adam"]["seeds"], t["config"]["adam"]["inits"]) == (
        200,
        1,
        ["hot"],
    )
    # given options win, and what is recorded follows them: a langevin run records the library's rate it used
    argv = ["train", *small, "--steps", "30", "--optimizer", "langevin", "--out", str(tmp_path / "l.json")]
    assert main(argv) == 0
    lg = json.loads((tmp_path / "l.json").read_text())
    assert lg["config"]["adam"]["steps"] == 30 == lg["result"]["config"]["steps"]
    assert lg["config"]["adam"]["lr"] == lg["result"]["config"]["lr"] != cfg.adam.lr and lg["optimizer"] == "langevin"
    assert "chains x (60 + 60)" in capsys.readouterr().out


def test_softmax_vs_linear_samples_softmax_with_chees_and_linear_with_nuts():
    cfg = PD.load_config("softmax_vs_linear")
    assert cfg.mcmc.effective("softmax")["method"] == "chees" and cfg.mcmc.effective("linear")["method"] == "nuts"


def test_mcmc_by_attention_overrides_one_attention_only():
    """[mcmc.by_attention.softmax] changes the softmax points' sampler settings (and names) and nothing else;
    a TOML table and --set build the same config."""
    from bayesattn.sweep import point_id

    cfg = RunConfig()  # NUTS for both attentions
    over = PD.load_config(None, ["mcmc.by_attention.softmax.method=chees", "mcmc.by_attention.softmax.num_chains=16"])
    plain, pts = build_points(cfg)["mcmc"], build_points(over)["mcmc"]
    assert [p["attention"] for p in plain] == [p["attention"] for p in pts]
    for a, b in zip(plain, pts):
        if a["attention"] == "linear":
            assert point_id(a) == point_id(b) and b["mcmc"] == a["mcmc"]
        else:
            assert point_id(a) != point_id(b)
            assert b["mcmc"] == {**a["mcmc"], "method": "chees", "num_chains": 16}
    table = cfg.to_dict()
    table["mcmc"]["by_attention"] = {"softmax": {"method": "chees", "num_chains": 16}}
    same = json.dumps(RunConfig.load(table).to_dict(), sort_keys=True)
    assert same == json.dumps(over.to_dict(), sort_keys=True)
    assert [point_id(p) for p in build_points(RunConfig.load(table))["mcmc"]] == [point_id(p) for p in pts]


@pytest.mark.parametrize(
    "item,message",
    [
        ("mcmc.by_attention.relu.method=chees", "mcmc.by_attention.relu='relu': Input should be 'softmax' or 'linear'"),
        ("mcmc.by_attention.softmax.steps=3", "mcmc.by_attention.softmax.steps: unknown key"),
        ("mcmc.by_attention.softmax.num_chains=many", "mcmc.by_attention.softmax.num_chains='many'"),
        ("mcmc.by_attention.linear.num_chains=0", "mcmc.by_attention.linear.num_chains=0"),
        ("mcmc.by_attention.softmax.method=gibbs", "mcmc.by_attention.softmax.method='gibbs'"),
    ],
)
def test_mcmc_by_attention_bad_input_names_the_field(item, message):
    with pytest.raises(ValueError) as e:
        PD.load_config(None, [item])
    assert message in str(e.value)


def test_phase_diagram_samples_each_attention_with_its_own_settings(tmp_path):
    """End to end: softmax points run ChEES with 4 chains, linear points the [mcmc] section's NUTS with 2."""
    out = tmp_path / "run"
    args = [
        *SMALL,
        "--set",
        "methods=mcmc",
        "--set",
        "mcmc.inits=cold",
        "--set",
        "mcmc.by_attention.softmax.method=chees",
        "--set",
        "mcmc.by_attention.softmax.num_chains=4",
        "--no-figures",
        "--out",
        str(out),
    ]
    assert main(["phase-diagram", *args]) == 0
    recs = [json.loads(f.read_text()) for f in (out / "points" / "mcmc").glob("*.json")]
    assert sorted(r["point"]["attention"] for r in recs) == ["linear", "linear", "softmax", "softmax"]
    for r in recs:
        chains = len(r["result"]["inits"]["cold"]["m"]["chain_means"])
        assert (r["point"]["mcmc"]["method"], chains) == (
            ("chees", 4) if r["point"]["attention"] == "softmax" else ("nuts", 2)
        )


def test_compilation_cache_is_on_by_default_and_can_be_moved_or_turned_off(tmp_path, monkeypatch):
    """The command line keeps JAX's compiled programs in BAYESATTN_CACHE_DIR (default ~/.cache/bayesattn/jax): a
    run fills it and a second run finds its programs there; `--no-compile-cache` and BAYESATTN_CACHE_DIR=off use none.
    The cache does not depend on what the run computes: one attention's theory keeps the cold start short."""
    args = [
        "phase-diagram",
        "--T",
        "4",
        "--d",
        "2",
        "--P",
        "50,100",
        "--attention",
        "linear",
        "--methods",
        "theory",
        "--set",
        "theory.num_P=20",
        "--set",
        "theory.vary_name=",
        "--quiet",
        "--no-figures",
    ]
    argv = [sys.executable, "-m", "bayesattn.cli", *args]
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "BAYESATTN_CACHE_DIR": str(tmp_path / "cache")}
    # fresh processes: a cache that starts empty, then one that finds its programs on disk
    r = subprocess.run([*argv, "--out", str(tmp_path / "a")], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    cached = sorted(p.name for p in (tmp_path / "cache").iterdir())
    assert cached, "the first run left no compiled program in the cache"
    r = subprocess.run([*argv, "--out", str(tmp_path / "b")], capture_output=True, text=True, env=env)
    assert r.returncode == 0 and sorted(p.name for p in (tmp_path / "cache").iterdir()) == cached  # all reused
    # --no-compile-cache: the command itself (in this process) must not switch the cache on in another folder
    from bayesattn.runtime import enable_compile_cache

    try:
        with monkeypatch.context() as m:
            m.setenv("BAYESATTN_CACHE_DIR", str(tmp_path / "c"))
            assert main([*args, "--no-compile-cache", "--out", str(tmp_path / "d")]) == 0
        assert not (tmp_path / "c").exists()
    finally:
        enable_compile_cache()  # the suite's own cache again, had the flag been ignored


def test_compilation_cache_folder(monkeypatch, tmp_path):
    from bayesattn.runtime import compile_cache_dir

    monkeypatch.setenv("BAYESATTN_CACHE_DIR", "off")
    assert compile_cache_dir() is None
    monkeypatch.setenv("BAYESATTN_CACHE_DIR", str(tmp_path / "x"))
    assert compile_cache_dir() == tmp_path / "x"
    monkeypatch.delenv("BAYESATTN_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert compile_cache_dir() == tmp_path / "xdg" / "bayesattn" / "jax"
