"""Sweeps beyond one process (bayesattn/scaleout.py, the executors of bayesattn/sweep.py, batched MCMC):

- the same point files serially, in a process pool and on a 2-worker Dask LocalCluster (timings, host and
  executor aside), the keys folded from each point's own fields;
- a worker killed mid-sweep: its point is rerun by the scheduler, or listed as failed and computed by the
  rerun; finished points are never lost or rewritten;
- a point that raises is listed with its id and traceback in failures.jsonl, and the other points finish;
- batched MCMC (several P in one program) gives the results of one point at a time;
- the CLI rejects a wrong executor and an unreachable scheduler with one line and status 2.

The Dask clusters are real (worker processes, so points cross processes), with tiny points.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import strip_timings

import bayesattn as ba
from bayesattn import sweep
from bayesattn.cli import main
from bayesattn.experiments.copy_head.compute import MCMC, data_record, point_data, point_keys
from bayesattn.scaleout import connect, local_cluster, sweep_executor
from bayesattn.sweep import FAILURES, Batch, SweepError, point_id, read_json, run_sweep

distributed = pytest.importorskip("distributed")
import dask  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
VOLATILE = ("wall_time_s", "finished_at", "checksum")  # and provenance.hostname / provenance.executor; the
# checksum covers the result, whose diagnostics hold timings


# ----------------------------------------------------------------------------------------------- point functions
_value_and_grad = jax.jit(lambda post, L: jax.value_and_grad(post.log_density)(L))  # one compile for every P


def jax_point(point):
    """A small JAX computation whose numbers depend on keys folded from the point only: the data set of P,
    the closed-form log density and gradient at a random L."""
    task = ba.CopyTask(T=4, d=2)
    data = point_data(task, point["seed"], point["P"])
    post = ba.Posterior(data, "softmax", ba.Prior(1.0, 10.0, 4.0))
    L = jax.random.normal(point_keys(point["seed"], MCMC, point["P"], 0), (4, 4), jnp.float64)
    value, grad = _value_and_grad(post, L)
    return {"data": data_record(data), "logp": float(value), "grad": np.asarray(grad), "pid_is_not_recorded": True}


def flaky_point(point):
    """Writes a call log; raises for point P = raise_at; kills its own process (os._exit) for P = kill_at the
    first time (a marker file records that the kill happened), as a crashed or preempted worker would."""
    folder = Path(point["log"])
    with open(folder / "calls.txt", "a") as f:
        f.write(f"{point['P']}\n")
    if point["P"] == point.get("raise_at"):
        raise ArithmeticError(f"no value at P={point['P']}")
    if point["P"] == point.get("kill_at"):
        try:
            os.close(os.open(folder / "killed", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            os._exit(1)  # the worker process dies mid-point
        except FileExistsError:
            pass
    time.sleep(point.get("sleep", 0.0))
    return {"value": point["P"] ** 2}


def squares_many(points):
    return [{"value": p["P"] ** 2, "group": len(points)} for p in points]


def differing(a, b, path=""):
    """The paths of the entries where two nested records differ, with both values (for a failure's message)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for k in sorted(set(a) | set(b)) for d in differing(a.get(k), b.get(k), f"{path}/{k}")]
    return [] if a == b else [f"{path}: {a!r} != {b!r}"]


def comparable(rec):
    rec = {k: v for k, v in rec.items() if k not in VOLATILE}
    rec["provenance"] = {k: v for k, v in rec["provenance"].items() if k not in ("hostname", "executor")}
    return rec


def calls(folder):
    return sorted(int(x) for x in (Path(folder) / "calls.txt").read_text().split())


@pytest.fixture(scope="module")
def cluster2():
    """A 2-worker LocalCluster with worker processes (each behind a nanny, which restarts a killed worker),
    shared by this module's tests: (cluster, client)."""
    cluster, client = local_cluster(2)
    yield cluster, client
    client.close()
    cluster.close()


@pytest.fixture
def dask2(cluster2):
    return cluster2[1]


# ----------------------------------------------------------------------------------------------- same numbers
def test_every_executor_writes_identical_point_files(tmp_path, dask2):
    points = [{"method": "toy", "seed": 3, "P": P} for P in (5, 9, 17, 33)]
    recs = {"serial": run_sweep(points, jax_point, tmp_path / "serial", progress=False)}
    with sweep_executor("thread", 2) as pool:
        recs["thread"] = run_sweep(points, jax_point, tmp_path / "thread", executor=pool, progress=False)
    with sweep_executor("process", 2) as pool:
        recs["process"] = run_sweep(points, jax_point, tmp_path / "process", executor=pool, progress=False)
    recs["dask"] = run_sweep(points, jax_point, tmp_path / "dask", executor=dask2, progress=False)
    with sweep_executor("dask", 2, processes=False) as threads:  # Dask workers as threads of this process
        recs["dask-thread"] = run_sweep(points, jax_point, tmp_path / "dask-thread", executor=threads, progress=False)
    for name, rs in recs.items():
        assert [r["provenance"]["executor"] for r in rs] == [name.split("-")[0]] * 4
        assert all(r["provenance"]["hostname"] for r in rs)
    # the dask points ran in the workers' processes, not here
    assert {r["result"]["data"]["sha256"] for r in recs["dask"]} == {
        r["result"]["data"]["sha256"] for r in recs["serial"]
    }
    files = {name: sorted(p.name for p in (tmp_path / name).glob("*.json")) for name in recs}
    assert all(names == sorted(f"{point_id(p)}.json" for p in points) for names in files.values())
    for f in files["serial"]:
        a, *others = (comparable(read_json(tmp_path / name / f)) for name in recs)
        for name, b in zip(list(recs)[1:], others):  # bit-identical numbers, versions, code version, platform
            assert a == b, f"{f}: {name} differs from serial in {differing(a, b)}"
    # an independent reference for one point: the keys come from the point (seed, P), whoever computes it
    ref = jax_point(points[2])
    assert recs["dask"][2]["result"]["logp"] == ref["logp"]
    np.testing.assert_array_equal(recs["dask"][2]["result"]["grad"], ref["grad"])


def test_dask_workers_are_separate_processes(dask2):
    pids = set(dask2.run(os.getpid).values())
    assert len(pids) == 2 and os.getpid() not in pids


# ----------------------------------------------------------------------------------------------- failures
@pytest.mark.parametrize("where", ["serial", "thread", "dask"])
def test_a_raising_point_is_reported_and_the_sweep_goes_on(tmp_path, where, request):
    points = [{"method": "toy", "P": P, "raise_at": 2, "log": str(tmp_path)} for P in range(5)]
    with contextlib.ExitStack() as stack:
        ex = (
            request.getfixturevalue("dask2")
            if where == "dask"
            else stack.enter_context(sweep_executor("thread", 2))
            if where == "thread"
            else None
        )
        with pytest.raises(SweepError, match="1 of 5 points failed") as err:
            run_sweep(points, flaky_point, tmp_path / "out", executor=ex, progress=False)
    assert calls(tmp_path) == [0, 1, 2, 3, 4]  # every point was tried
    lines = (tmp_path / "out" / FAILURES).read_text().splitlines()
    assert len(lines) == 1 and len(err.value.failures) == 1
    fail = json.loads(lines[0])
    assert fail["id"] == point_id(points[2]) and fail["point"] == points[2]
    assert fail["error"] == "ArithmeticError: no value at P=2"
    assert "Traceback" in fail["traceback"] and "flaky_point" in fail["traceback"]
    assert fail["executor"] == where
    done = sorted(p.name for p in (tmp_path / "out").glob("*.json"))
    assert done == sorted(f"{point_id(p)}.json" for p in points if p["P"] != 2)
    for p in points:
        if p["P"] != 2:
            assert read_json(tmp_path / "out" / f"{point_id(p)}.json")["result"] == {"value": p["P"] ** 2}


def test_killed_worker_point_is_rerun_and_no_finished_point_is_touched(tmp_path, cluster2):
    """A worker process dies in the middle of a point: the scheduler reruns that point on a live worker (the
    nanny restarts the dead one); every point file is complete and written once."""
    points = [{"method": "toy", "P": P, "kill_at": 3, "sleep": 0.2, "log": str(tmp_path)} for P in range(6)]
    client = cluster2[1]
    before = set(client.run(os.getpid).values())
    recs = run_sweep(points, flaky_point, tmp_path / "out", executor=client, progress=False)
    assert (tmp_path / "killed").exists()  # the kill happened
    assert calls(tmp_path).count(3) == 2  # point 3 ran twice: killed, then rerun
    assert [r["result"]["value"] for r in recs] == [P**2 for P in range(6)]
    assert not (tmp_path / "out" / FAILURES).exists()
    assert not list((tmp_path / "out").glob(".*"))  # no temporary file left
    client.wait_for_workers(2, timeout=60)  # the nanny has restarted the killed worker: a new process
    assert len(set(client.run(os.getpid).values()) - before) == 1


def test_point_lost_for_good_is_left_for_the_rerun_which_resumes(tmp_path, cluster2):
    """With no retries allowed, the points on the killed worker fail (KilledWorker; the scheduler may have
    queued a second point there): they are listed, the others are written; the rerun computes the failed
    points only and leaves the finished files untouched."""
    points = [{"method": "toy", "P": P, "kill_at": 2, "sleep": 0.2, "log": str(tmp_path)} for P in range(5)]
    out = tmp_path / "out"
    cluster, client = cluster2
    client.wait_for_workers(2, timeout=60)
    cluster.scheduler.allowed_failures = 0  # distributed.scheduler.allowed-failures, read when it started
    try:
        with pytest.raises(SweepError, match="of 5 points failed") as err:
            run_sweep(points, flaky_point, out, executor=client, progress=False)
    finally:
        cluster.scheduler.allowed_failures = dask.config.get("distributed.scheduler.allowed-failures")
    fails = [json.loads(line) for line in (out / FAILURES).read_text().splitlines()]
    assert fails == err.value.failures and 1 <= len(fails) <= 2
    assert point_id(points[2]) in {f["id"] for f in fails}
    assert all("KilledWorker" in f["error"] and "Traceback" in f["traceback"] for f in fails)
    lost = sorted(f["point"]["P"] for f in fails)
    finished = {p.name: p.read_bytes() for p in out.glob("*.json")}
    assert sorted(finished) == sorted(f"{point_id(p)}.json" for p in points if p["P"] not in lost)
    for blob in finished.values():
        rec = json.loads(blob)
        assert rec["result"] == {"value": rec["point"]["P"] ** 2} and rec["provenance"]["executor"] == "dask"
    (tmp_path / "calls.txt").unlink()
    recs = run_sweep(points, flaky_point, out, progress=False)  # the rerun (here: serially)
    assert calls(tmp_path) == lost
    assert [r["result"]["value"] for r in recs] == [P**2 for P in range(5)]
    assert {n: (out / n).read_bytes() for n in finished} == finished  # not rewritten
    assert not (out / FAILURES).exists()  # the latest run had no failure


def test_process_pool_worker_killed_leaves_the_point_for_the_rerun(tmp_path):
    points = [{"method": "toy", "P": P, "kill_at": 1, "log": str(tmp_path)} for P in range(2)]
    with sweep_executor("process", 1) as pool:
        with pytest.raises(SweepError):
            run_sweep(points, flaky_point, tmp_path / "out", executor=pool, progress=False)
    assert "BrokenProcessPool" in (tmp_path / "out" / FAILURES).read_text()
    recs = run_sweep(points, flaky_point, tmp_path / "out", progress=False)
    assert [r["result"]["value"] for r in recs] == [0, 1]


# ----------------------------------------------------------------------------------------------- batches, progress
def test_batches_group_by_key_and_chunk(tmp_path, dask2):
    points = [{"method": "toy", "g": g, "P": P} for g in ("a", "b") for P in range(5)]
    batch = Batch(key=lambda p: p["g"], many=squares_many, size=3)
    recs = run_sweep(points, None, tmp_path, batch=batch, executor=dask2, progress=False)
    assert [r["result"]["value"] for r in recs] == [p["P"] ** 2 for p in points]
    # groups of one key, at most 3 points: a(0,1,2) a(3,4) b(0,1,2) b(3,4)
    assert [r["result"]["group"] for r in recs] == [3, 3, 3, 2, 2] * 2
    assert [r["provenance"]["batch_size"] for r in recs] == [3, 3, 3, 2, 2] * 2


def test_one_progress_bar_counts_all_points_of_all_workers(tmp_path, dask2, capsys):
    points = [{"method": "toy", "P": P} for P in range(4)]
    run_sweep(points[:1], squares_many, tmp_path, batch=Batch(lambda p: 0, squares_many, 2), progress=False)
    run_sweep(points, None, tmp_path, batch=Batch(lambda p: 0, squares_many, 2), executor=dask2, desc="toybar")
    lines = [l for l in capsys.readouterr().err.replace("\r", "\n").splitlines() if "toybar" in l]
    assert "1/4" in lines[0] and "4/4" in lines[-1]


def test_batched_mcmc_points_equal_one_point_at_a_time(tmp_path):
    """Several P of one shape in one sampler program give each point's result of mcmc_point (bit for bit on a
    CPU; wall and compile times aside). MALA keeps the compile short."""
    from bayesattn.experiments.copy_head import PhaseDiagram, RunConfig, build_points
    from bayesattn.experiments.copy_head.compute import mcmc_group_key, mcmc_point, mcmc_points
    from bayesattn.sweep import run_experiment

    cfg = RunConfig.load(
        {
            "attention": ["softmax"],
            "methods": ["mcmc"],
            "task": {"T": 4, "d": 2},
            "prior": {"sigma2": 4.0, "sigma_V2": 10.0},
            "P": {"values": [20, 40, 80]},
            "mcmc": {"method": "mala", "num_chains": 2, "num_warmup": 30, "num_samples": 8, "inits": ["cold", "hot"]},
        }
    )
    points = build_points(cfg)["mcmc"]
    assert len({mcmc_group_key(p) for p in points}) == 1
    many = mcmc_points(points)
    refs = [mcmc_point(p) for p in points]
    for got, ref in zip(many, refs):
        assert got["data"] == ref["data"]
        assert sweep.to_jsonable(strip_timings(got)) == sweep.to_jsonable(strip_timings(ref))
    # the phase-diagram job with --batch 3: one task for the 3 points, the same point files
    experiment = PhaseDiagram()
    experiment.mcmc_batch = 3
    run_experiment(experiment, cfg, tmp_path, progress=False, figures=False, log=lambda *_: None)
    for p, ref in zip(points, refs):
        rec = read_json(tmp_path / "points" / "mcmc" / f"{point_id(p)}.json")
        assert rec["provenance"]["batch_size"] == 3
        assert strip_timings(rec["result"]) == sweep.to_jsonable(strip_timings(ref))
    assert many[0]["inits"]["hot"]["m"]["mean"] != many[2]["inits"]["hot"]["m"]["mean"]
    assert mcmc_group_key({**points[0], "mcmc": {**points[0]["mcmc"], "backend": "numpyro"}}) is None
    with pytest.raises(ValueError, match="differ only in P"):
        mcmc_points([points[0], {**points[1], "seed": 5}])


def test_sample_many_checks_shapes():
    from bayesattn.bayes.batched import sample_many

    a = ba.Posterior(ba.CopyTask(T=4, d=2).sample(jax.random.key(0), 5), "softmax", ba.Prior())
    b = ba.Posterior(ba.CopyTask(T=5, d=2).sample(jax.random.key(0), 5), "softmax", ba.Prior())
    with pytest.raises(ValueError, match="same task"):
        sample_many([a, b], [jax.random.key(1), jax.random.key(2)], num_warmup=2, num_samples=4)
    with pytest.raises(ValueError, match="equally many"):
        sample_many([a], [], num_warmup=2, num_samples=4)
    with pytest.raises(ValueError, match="method='smc'"):
        sample_many([a], [jax.random.key(1)], method="smc")


# ----------------------------------------------------------------------------------------------- CLI, executors
def test_sweep_executor_rejects_bad_combinations():
    for kw, match in [
        ({"kind": "ray"}, "executor='ray'"),
        ({"kind": "serial", "workers": 2}, "workers=2"),
        ({"kind": "process", "scheduler": "tcp://h:1"}, "scheduler"),
        ({"kind": "dask", "workers": 2, "scheduler": "tcp://h:1"}, "own workers"),
        ({"kind": "dask", "workers": 0}, "workers=0"),
        ({"kind": "thread", "processes": False}, "processes=False"),
        ({"kind": "dask", "scheduler": "tcp://h:1", "processes": False}, "processes=False"),
    ]:
        with pytest.raises(ValueError, match=match):
            with sweep_executor(**kw):
                pass


def test_cli_rejects_a_wrong_executor_with_one_line(tmp_path):
    r = subprocess.run(
        [sys.executable, "-m", "bayesattn.cli", "phase-diagram", "--executor", "ray", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert "--executor" in r.stderr and "'ray'" in r.stderr and "dask" in r.stderr


def test_cli_unreachable_scheduler_one_line_status_2(tmp_path, capsys):
    t0 = time.perf_counter()
    code = main(
        [
            "phase-diagram",
            "--methods",
            "theory",
            "--scheduler",
            "tcp://127.0.0.1:9",
            "--out",
            str(tmp_path / "o"),
            "--quiet",
            "--no-figures",
        ]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert "scheduler='tcp://127.0.0.1:9'" in err[0] and "cannot connect (Connection refused)" in err[0]
    assert time.perf_counter() - t0 < 5  # a refused port fails at once, not after Dask's 5 s of retries
    t0 = time.perf_counter()
    with pytest.raises(ValueError, match=r"scheduler='tcp://no-such-host\.invalid:8786': cannot connect \("):
        connect("tcp://no-such-host.invalid:8786")  # a host that does not resolve: at once too
    assert time.perf_counter() - t0 < 5
    assert not list((tmp_path / "o").glob("points/*/*.json"))
    assert main(["phase-diagram", "--executor", "serial", "--workers", "2", "--out", str(tmp_path / "o")]) == 2
    assert "workers=2 with executor='serial'" in capsys.readouterr().err
    assert main(["phase-diagram", "--executor", "thread", "--dask-threads", "--out", str(tmp_path / "o")]) == 2
    assert "--dask-threads" in capsys.readouterr().err


def test_slurm_script_builds_a_job_script_without_slurm():
    pytest.importorskip("dask_jobqueue")
    r = subprocess.run(
        [
            sys.executable,
            "scripts/slurm_phase_diagram.py",
            "--queue",
            "short",
            "--cores",
            "4",
            "--memory",
            "16GB",
            "--walltime",
            "02:00:00",
            "--jobs",
            "3",
            "--dry-run",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert r.returncode == 0, r.stderr
    assert "#SBATCH -p short" in r.stdout and "#SBATCH -t 02:00:00" in r.stdout
    assert "#SBATCH --cpus-per-task=4" in r.stdout and "--nthreads 1" in r.stdout and "--nworkers 4" in r.stdout
    assert "3 jobs" in r.stdout


def test_cli_failed_point_exits_1_after_the_other_methods(tmp_path, monkeypatch, capsys):
    """A failing grid point: the other methods still run, then one line naming the failures file, status 1."""
    from bayesattn.experiments.copy_head import compute as copy_head

    def broken_theory(point):
        raise FloatingPointError(f"theory broke for {point['attention']}")

    ran = []
    monkeypatch.setitem(copy_head.COMPUTE, "theory", broken_theory)
    monkeypatch.setitem(copy_head.COMPUTE, "adam", lambda p: ran.append(p["P"]) or {"x": 1})
    code = main(
        [
            "phase-diagram",
            "--methods",
            "theory,adam",
            "--attention",
            "softmax",
            "--P",
            "50,100",
            "--out",
            str(tmp_path),
            "--quiet",
            "--no-figures",
        ]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and len(err) == 1 and "1 of 1 points failed" in err[0] and "failures.jsonl" in err[0], err
    assert sorted(ran) == [50, 100]  # adam ran after theory failed (its two points on two threads, in either order)
    fail = json.loads((tmp_path / "points" / "theory" / FAILURES).read_text())
    assert fail["error"] == "FloatingPointError: theory broke for softmax" and "broken_theory" in fail["traceback"]
    assert not (tmp_path / "summary.json").exists()


def test_cli_thread_executor_writes_the_serial_point_files(tmp_path, capsys, monkeypatch):
    """The phase diagram's default executor, 2 threads where the machine has 2 cores (as --executor thread): the
    MCMC point files of a serial run, executor aside. On one core the default is serial."""
    argv = [
        "phase-diagram",
        "--methods",
        "mcmc",
        "--attention",
        "softmax",
        "--T",
        "4",
        "--d",
        "2",
        "--P",
        "30,60,90",
        "--set",
        "mcmc.num_chains=2",
        "--set",
        "mcmc.num_warmup=30",
        "--set",
        "mcmc.num_samples=30",
        "--quiet",
        "--no-figures",
    ]
    assert main(argv + ["--out", str(tmp_path / "serial"), "--executor", "serial"]) == 0, capsys.readouterr().err
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    assert main(argv + ["--out", str(tmp_path / "thread")]) == 0, capsys.readouterr().err
    assert "executor: thread" in capsys.readouterr().out
    monkeypatch.setattr("os.cpu_count", lambda: 1)
    assert main(argv + ["--out", str(tmp_path / "serial")]) == 0  # resumed: nothing to compute
    assert "executor: serial" in capsys.readouterr().out
    names = sorted(p.name for p in (tmp_path / "serial" / "points" / "mcmc").glob("*.json"))
    assert len(names) == 3
    for name in names:
        a, b = (read_json(tmp_path / run / "points" / "mcmc" / name) for run in ("serial", "thread"))
        assert (a["provenance"]["executor"], b["provenance"]["executor"]) == ("serial", "thread")
        a, b = comparable(a), comparable(b)
        assert strip_timings(a.pop("result")) == strip_timings(b.pop("result")) and a == b


def test_cli_joins_a_running_scheduler(tmp_path, cluster2, capsys):
    """--scheduler tcp://HOST:PORT: the points run on that cluster's workers (their pids are recorded nowhere,
    but their processes differ from this one: the executor and the files say dask)."""
    cluster, client = cluster2
    argv = [
        "phase-diagram",
        "--methods",
        "theory",
        "--attention",
        "linear",
        "--T",
        "4",
        "--d",
        "2",
        "--P",
        "50,100",
        "--set",
        "theory.num_P=4",
        "--out",
        str(tmp_path),
        "--quiet",
        "--no-figures",
        "--scheduler",
        cluster.scheduler_address,
    ]
    assert main(argv) == 0, capsys.readouterr().err
    rec = read_json(next((tmp_path / "points" / "theory").glob("*.json")))
    assert rec["provenance"]["executor"] == "dask" and rec["result"]["curve"]["transition"]["order"] == "second"
    assert "executor: dask" in capsys.readouterr().out
    assert main(argv[:-2] + ["--executor", "dask", "--scheduler", cluster.scheduler_address, "--workers", "2"]) == 2
    assert "own workers" in capsys.readouterr().err
    # a worker's address given for the scheduler's: refused in one line, before any point
    worker = next(iter(client.scheduler_info()["workers"]))
    assert main([*argv[:-1], worker]) == 2
    assert f"scheduler={worker!r}: a Dask Worker answers there, not a scheduler" in capsys.readouterr().err


def test_a_service_that_is_not_dask_is_refused_at_once():
    """A port that accepts the connection but does not speak Dask's protocol (here a server that answers every
    connection with an HTTP error): one ValueError naming the address, at once. A Dask client given it failed with
    an unreadable message, then hung for 10 s and printed a traceback when the interpreter exited."""
    import socket
    import threading

    server = socket.create_server(("127.0.0.1", 0))

    def answer():
        with contextlib.suppress(OSError):  # the server closed at the end of the test
            while True:
                conn, _ = server.accept()
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n" * 3)
                conn.close()

    threading.Thread(target=answer, daemon=True).start()
    address = f"tcp://127.0.0.1:{server.getsockname()[1]}"
    t0 = time.perf_counter()
    with pytest.raises(ValueError, match=rf"scheduler='{address}': no Dask scheduler answers there \("):
        connect(address)
    assert time.perf_counter() - t0 < 5
    server.close()
