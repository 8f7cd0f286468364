"""What a new user hit, and the phase-diagram review items: output paths checked before
any work, file modes, bookkeeping after a resume, provenance, one-value options, per-method cache keys and
one data set per grid point."""

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest

import bayesattn as ba
from bayesattn import provenance, sweep
from bayesattn.cli import build_parser, main
from bayesattn.experiments.copy_head import PhaseDiagram, RunConfig, build_points
from bayesattn.experiments.copy_head import compute as copy_head
from bayesattn.files import write_json_atomic
from bayesattn.sweep import point_id, run_experiment

ROOT = Path(__file__).resolve().parent.parent


def _run_main(argv, capsys):
    code = main(argv)
    return code, capsys.readouterr()


# ----------------------------------------------------------------------------------------------- output paths
def _no_work(monkeypatch):
    """Make every method's work fail loudly, so a test sees whether it started."""

    def boom(*a, **k):
        raise AssertionError("work started before the output path was checked")

    monkeypatch.setattr("bayesattn.bayes.sampling.sample", boom)
    monkeypatch.setattr("bayesattn.training.train", boom)
    monkeypatch.setattr("bayesattn.sweep.run_experiment", boom)


@pytest.mark.parametrize(
    "argv",
    [
        ["sample", "--P", "1000", "--T", "8", "--out", "/proc/x.json"],
        ["train", "--P", "1000", "--T", "8", "--out", "/proc/x.json"],
        ["phase-diagram", "--methods", "theory", "--out", "/proc/forbidden"],
    ],
)
def test_unwritable_output_fails_before_any_work(argv, monkeypatch, capsys):
    _no_work(monkeypatch)
    code, cap = _run_main(argv, capsys)
    assert code == 2
    err = cap.err.strip()
    assert len(err.splitlines()) == 1 and "--out=" in err and "Traceback" not in err, err


def test_output_that_is_a_file_or_a_folder(tmp_path, monkeypatch, capsys):
    _no_work(monkeypatch)
    a_file = tmp_path / "README.md"
    a_file.write_text("not a folder")
    code, cap = _run_main(["phase-diagram", "--methods", "theory", "--out", str(a_file)], capsys)
    assert code == 2 and "is not a folder" in cap.err and len(cap.err.strip().splitlines()) == 1
    code, cap = _run_main(["sample", "--P", "50", "--out", str(tmp_path)], capsys)
    assert code == 2 and "is a folder" in cap.err
    code, cap = _run_main(["sample", "--P", "50", "--out", str(a_file / "x.json")], capsys)
    assert code == 2 and "README.md' is a file, not a folder" in cap.err
    # the library call checks too
    with pytest.raises(ValueError, match="--out="):
        run_experiment(PhaseDiagram(), RunConfig(methods=["theory"]), a_file)


# ----------------------------------------------------------------------------------------------- file modes
@pytest.mark.parametrize("mask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_atomic_write_honours_umask(tmp_path, mask, mode):
    old = os.umask(mask)
    try:
        write_json_atomic(tmp_path / "r.json", {"x": 1})
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "r.json").stat().st_mode) == mode
    assert json.loads((tmp_path / "r.json").read_text()) == {"x": 1}


# ----------------------------------------------------------------------------------------------- bookkeeping
def _fake_mcmc(point):
    import time

    time.sleep(0.3)
    m = 0.1 + point["P"] / 1000
    return {"data": {"P": point["P"]}, "inits": {"cold": {"m": {"mean": m}, "u": {"mean": m}}}}


def test_resume_keeps_total_compute_time(tmp_path, monkeypatch):
    monkeypatch.setitem(copy_head.COMPUTE, "mcmc", _fake_mcmc)
    cfg = PhaseDiagram.load_config(None, ["methods=mcmc", "attention=softmax", "P.values=[100, 200, 300]"])
    run = lambda c: run_experiment(PhaseDiagram(), c, tmp_path, progress=False, figures=False, log=lambda *_: None)  # noqa: E731
    first = run(cfg)
    assert first["points_computed"] == 3 and first["points_resumed"] == 0
    assert first["compute_time_s"] >= 0.9 and first["wall_time_s"] >= first["compute_time_s"]
    # resume with one more point: only that one is computed, the total counts all four
    second = run(cfg.replace(P=cfg.P.replace(values=[100, 200, 300, 400])))
    times = [json.loads(p.read_text())["wall_time_s"] for p in (tmp_path / "points" / "mcmc").glob("*.json")]
    assert second["points_computed"] == 1 and second["points_resumed"] == 3
    assert second["compute_time_s"] == pytest.approx(sum(times)) and second["compute_time_s"] >= 1.2
    assert second["wall_time_s"] < 1.0 + 0.3 * 2  # this run computed one point only
    saved = json.loads((tmp_path / "summary.json").read_text())
    assert saved["compute_time_s"] == pytest.approx(sum(times)) and saved["wall_time_s"] == second["wall_time_s"]


# ----------------------------------------------------------------------------------------------- provenance
def test_point_files_record_code_version_and_device(tmp_path):
    provenance.code_version.cache_clear()  # cached per process; the checkout may have moved during a long session
    rec = sweep.run_sweep([{"method": "toy", "P": 1}], lambda p: {"x": 1}, tmp_path, progress=False)[0]
    prov = rec["provenance"]
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True)
    if head.returncode == 0 and (ROOT / ".git").exists():
        assert prov["git_commit"] == head.stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True
        ).stdout.strip()
        assert prov["git_dirty"] is bool(dirty)
    assert prov["jax_backend"] == jax.default_backend()
    assert prov["jax_devices"] and prov["platform"] and rec["versions"]["jax"] == jax.__version__
    on_disk = json.loads(next(tmp_path.glob("*.json")).read_text())
    assert on_disk["provenance"] == json.loads(json.dumps(prov))


def test_code_version_outside_a_checkout_is_unknown(tmp_path):
    shutil.copytree(ROOT / "bayesattn", tmp_path / "bayesattn", ignore=shutil.ignore_patterns("__pycache__"))
    r = subprocess.run(
        [sys.executable, "-c", "import json, bayesattn.provenance as s; print(json.dumps(s.code_version()))"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
    )
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == {"git_commit": "unknown", "git_dirty": "unknown"}


# ----------------------------------------------------------------------------------------------- options
def test_one_point_commands_offer_only_their_choices():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command").choices
    for name in ("sample", "train"):
        att = next(a for a in sub[name]._actions if a.dest == "attention")
        assert list(att.choices) == list(ba.models.ATTENTIONS)
    pd_att = next(a for a in sub["phase-diagram"]._actions if a.dest == "attention")
    assert list(pd_att.choices) == [*ba.models.ATTENTIONS, "both"]
    method = next(a for a in sub["sample"]._actions if a.dest == "method")
    assert list(method.choices) == list(ba.bayes.sampling.METHODS)
    out = next(a for a in sub["phase-diagram"]._actions if a.dest == "out")
    assert "results/<config name>" in out.help


def test_the_configs_sampler_pairs_are_the_registrys():
    """The config's table of methods per backend (checked without importing JAX) is the sampler registry's."""
    from bayesattn.bayes.samplers import SAMPLERS
    from bayesattn.experiments.sections import BACKEND_METHODS

    registry = {b: sorted(m for m, bb in SAMPLERS if bb == b) for _, b in SAMPLERS}
    assert {b: sorted(m) for b, m in BACKEND_METHODS.items()} == registry


def test_the_configs_prior_only_methods_are_the_registrys():
    """The methods the config holds to inits=['prior'] are those whose sampler starts from the prior."""
    from bayesattn.bayes.samplers import SAMPLERS
    from bayesattn.experiments.sections import PRIOR_ONLY_METHODS

    assert sorted({m for (m, _), s in SAMPLERS.items() if s.default_init == "prior"}) == sorted(PRIOR_ONLY_METHODS)


def _cli_error(argv, capsys) -> str:
    code, cap = _run_main(argv, capsys)
    err = cap.err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, (code, err)
    return err


@pytest.mark.parametrize(
    "content", [[1, 2], {"config": {}}, {"experiment": "plateau"}, {"experiment": 3, "config": {}}]
)
def test_a_folder_whose_run_json_is_not_a_runs_record_is_refused_in_one_line(tmp_path, capsys, content):
    """check, figures and archive read run.json; one that is not a run's record (a list, a key missing, a key of
    the wrong type) is refused naming the folder, not answered with a traceback."""
    (tmp_path / "run.json").write_text(json.dumps(content))
    for argv in (["check", str(tmp_path)], ["figures", str(tmp_path)], ["archive", str(tmp_path), "--to", "store"]):
        assert "its run.json is not a run's record" in _cli_error(argv, capsys)


def test_figures_of_a_folder_without_points_say_so(tmp_path, capsys):
    from bayesattn.experiments import get_experiment

    cfg = get_experiment("plateau").load_config(None, [])
    write_json_atomic(tmp_path / "run.json", {"experiment": "plateau", "config": cfg.to_dict()})
    assert "no finished point file of its config, nothing to draw" in _cli_error(["figures", str(tmp_path)], capsys)
    assert not (tmp_path / "figures").exists()


def test_a_folder_of_another_experiment_is_refused_before_any_point(tmp_path, monkeypatch, capsys):
    """--out naming a folder that holds another experiment's run is refused before any work, its run.json left as
    it was; a folder of the same experiment (another config of it) is where a rerun goes on."""
    before = {"experiment": "plateau", "config": {}, "point_files": {}}
    write_json_atomic(tmp_path / "run.json", before)

    def boom(*a, **k):
        raise AssertionError("work started in another experiment's folder")

    monkeypatch.setattr(sweep, "run_sweep", boom)
    err = _cli_error(["phase-diagram", "--methods", "theory", "--out", str(tmp_path)], capsys)
    assert "holds a run of the experiment 'plateau'" in err
    assert json.loads((tmp_path / "run.json").read_text()) == before


def test_train_says_which_attention(capsys):
    assert main(["train", "--P", "50", "--T", "4", "--d", "2", "--steps", "20", "--attention", "linear"]) == 0
    out = capsys.readouterr().out
    assert "train linear attention, P = 50" in out and "linear: final m =" in out


# -------------------------------------------------------------------------------------------- review items
def test_cache_key_of_a_point_depends_only_on_its_method():
    cfg = lambda *sets: PhaseDiagram.load_config(None, ["P.values=[300, 1000]", *sets])  # noqa: E731
    ids = lambda c: {m: [point_id(p) for p in pts] for m, pts in build_points(c).items()}  # noqa: E731
    a = ids(cfg())
    b = ids(cfg("adam.lr=0.02"))
    assert a["theory"] == b["theory"] and a["mcmc"] == b["mcmc"] and a["adam"] != b["adam"]
    c = ids(cfg("mcmc.num_samples=900"))
    assert a["theory"] == c["theory"] and a["adam"] == c["adam"] and a["mcmc"] != c["mcmc"]
    d = ids(cfg("seed=5"))
    assert a["theory"] == d["theory"] and a["mcmc"] != d["mcmc"] and a["adam"] != d["adam"]
    e = ids(cfg("task.T=16"))
    assert all(set(a[m]).isdisjoint(e[m]) for m in a)
    f = ids(cfg("prior.sigma2=300.0"))
    assert all(set(a[m]).isdisjoint(f[m]) for m in a)
    # the theory depends on the P range, a sampled point only on its own P
    g = ids(cfg("P.values=[300, 1000, 2000]"))
    assert a["theory"] != g["theory"] and set(a["mcmc"]) < set(g["mcmc"])


def test_every_method_at_a_point_sees_the_same_recorded_data():
    cfg = PhaseDiagram.load_config(
        None,
        [
            "attention=softmax",
            "seed=3",
            "task.T=4",
            "task.d=2",
            "P.values=[60]",
            "mcmc.num_chains=1",
            "mcmc.num_warmup=20",
            "mcmc.num_samples=20",
            "adam.seeds=2",
            "adam.steps=30",
            "adam.record_every=10",
        ],
    )
    pts = build_points(cfg)
    mc = copy_head.mcmc_point(pts["mcmc"][0])
    ad = copy_head.adam_point(pts["adam"][0])
    data = cfg.make_task().sample(copy_head.point_keys(3, copy_head.DATA, 60), 60)  # the documented key rule
    X, Y = np.asarray(data.X), np.asarray(data.Y)
    import hashlib

    h = hashlib.sha256()
    for a in (X, Y):
        h.update(str(a.shape).encode())
        h.update(np.ascontiguousarray(a).tobytes())
    assert mc["data"]["sha256"] == ad["data"]["sha256"] == h.hexdigest()
    assert mc["data"]["n"] == 60 * 4
    # Adam's runs are ba.train on exactly that data set, from the documented keys
    for i, init in enumerate(cfg.adam.inits):
        for r in range(2):
            ref = ba.train(
                data,
                cfg.make_prior(),
                "softmax",
                copy_head.point_keys(3, copy_head.ADAM, 60, i, r),
                steps=30,
                lr=cfg.adam.lr,
                init=init,
                record_every=10,
            )
            got = ad["inits"][init]["final_order_parameters"]["m"][r]
            assert got == pytest.approx(ref.final_order_parameters["m"], rel=1e-10)
    # a different seed gives different data, recorded as such
    other = copy_head.data_record(copy_head.point_data(cfg.make_task(), 4, 60))
    assert other["sha256"] != mc["data"]["sha256"]


def test_figures_draw_the_latest_record_of_a_point(tmp_path):
    from bayesattn.experiments.copy_head.figures_common import load_run

    folder = tmp_path / "points" / "theory"
    # the newer record sorts first by file name: the choice must come from finished_at
    for name, when, v in (("a.json", "2026-01-02T00:00:00", "new"), ("b.json", "2026-01-01T00:00:00", "old")):
        write_json_atomic(
            folder / name,
            {
                "point": {"method": "theory", "attention": "softmax", "task": {}},
                "result": {"v": v},
                "finished_at": when,
            },
        )
    assert [r["result"]["v"] for r in load_run(tmp_path)["theory"]["softmax"]] == ["new"]


def test_worker_processes_write_warnings_as_one_line():
    """A warning raised in a process-pool worker (runtime.worker_init, as --executor process uses) is one line,
    like the parent's, not Python's two-line form with the source line."""
    # the worker calls warnings.warn itself (a UserWarning): no module of this suite (which imports JAX) to load
    # in the parent and in the spawned worker
    code = (
        "import concurrent.futures as cf, multiprocessing as mp, warnings\n"
        "from bayesattn.runtime import worker_init\n"
        "if __name__ == '__main__':\n"
        "    with cf.ProcessPoolExecutor(1, mp_context=mp.get_context('spawn'), initializer=worker_init) as ex:\n"
        "        list(ex.map(warnings.warn, ['a test warning\\nover two lines']))\n"
    )
    root = Path(__file__).resolve().parents[1]
    r = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert lines == [lines[0]] and lines[0].startswith(
        "bayesattn: warning: a test warning over two lines (UserWarning,"
    )


def test_figures_and_check_name_the_folder_whose_run_json_names_an_unknown_experiment(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"experiment": "nosuch", "config": {}}))
    for command in ("figures", "check"):
        code, cap = _run_main([command, str(run)], capsys)
        err = cap.err.strip()
        assert code == 2 and len(err.splitlines()) == 1, err
        assert f"{run / 'run.json'}: experiment='nosuch': expected one of phase-diagram" in err


def test_sample_with_smc_starts_from_the_prior_and_records_it(tmp_path, capsys):
    """`sample --method smc` over a config whose inits are cold and hot runs from the prior and says so (SMC takes
    no other start); an explicit --init hot is refused before any data is drawn."""
    small = ["sample", "--P", "20", "--T", "4", "--d", "2", "--method", "smc", "--num-chains", "1", "--quiet"]
    code, cap = _run_main([*small, "--num-samples", "16", "--out", str(tmp_path / "s.json")], capsys)
    assert code == 0, cap.err
    rec = json.loads((tmp_path / "s.json").read_text())
    assert rec["init"] == "prior" and rec["config"]["mcmc"]["inits"] == ["prior"]
    assert rec["result"]["config"]["init"] == "prior" and "prior start" in cap.out
    err = _cli_error([*small, "--init", "hot", "--out", str(tmp_path / "t.json")], capsys)
    assert "draws its particles from the prior" in err and not (tmp_path / "t.json").exists()
