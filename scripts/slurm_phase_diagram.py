"""Run a phase diagram on a SLURM cluster: dask-jobqueue submits worker jobs, this process holds the scheduler.

Run it on a login node (or in a small job of its own) from a checkout with bayesattn installed on the shared
file system, so that the worker jobs import the same code:

    python scripts/slurm_phase_diagram.py --queue normal --cores 16 --memory 32GB --walltime 02:00:00 \\
        --jobs 4 --config softmax_vs_linear --out results/softmax_vs_linear \\
        --prologue "source $HOME/bayesattn/.venv/bin/activate"

Each job books ``--cores`` CPUs and runs as many single-threaded Dask workers (``--processes``, default one
per core), so 4 jobs x 16 cores compute 64 grid points at a time. The sweep is the one of ``bayesattn
phase-diagram`` (same point files, resumable: rerun the same command after a walltime kill or a preemption;
finished points are skipped, points of lost workers are rerun by Dask or computed by the rerun, and failed
points are listed in ``points/<method>/failures.jsonl``). ``--dry-run`` builds the cluster object and prints
the job script it would submit, without SLURM. Needs the ``dask`` extra and ``dask-jobqueue``.
"""

from __future__ import annotations

import argparse
import sys


def build_cluster(args):
    from dask_jobqueue import SLURMCluster

    processes = args.processes or args.cores
    kwargs = {
        "queue": args.queue,
        "cores": args.cores,
        "processes": processes,
        "memory": args.memory,
        "walltime": args.walltime,
        "job_script_prologue": args.prologue,
        "job_extra_directives": args.sbatch,
        "scheduler_options": {"dashboard_address": ":0"},
    }
    if args.account:
        kwargs["account"] = args.account
    if args.interface:
        kwargs["interface"] = args.interface
    if args.local_directory:
        kwargs["local_directory"] = args.local_directory
    return SLURMCluster(**kwargs)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    g = p.add_argument_group("SLURM jobs (one job = one node's share: --cores CPUs, --memory)")
    g.add_argument("--queue", required=True, help="partition (#SBATCH -p)")
    g.add_argument("--account", help="account to charge (#SBATCH -A)")
    g.add_argument("--cores", type=int, default=8, help="CPUs per job (default 8)")
    g.add_argument("--processes", type=int, help="Dask workers per job (default: --cores, one thread each)")
    g.add_argument("--memory", default="16GB", help="memory per job (default 16GB)")
    g.add_argument("--walltime", default="01:00:00", help="walltime per job, HH:MM:SS (default 01:00:00)")
    g.add_argument("--jobs", type=int, default=2, help="worker jobs to submit (default 2)")
    g.add_argument("--interface", help="network interface of the workers, e.g. ib0")
    g.add_argument("--local-directory", help="scratch folder on the nodes, e.g. $TMPDIR")
    g.add_argument(
        "--prologue",
        action="append",
        default=[],
        help="shell line run in each job before the worker starts, e.g. 'module load python' (repeatable)",
    )
    g.add_argument(
        "--sbatch", action="append", default=[], help="extra #SBATCH directive, e.g. '--gres=gpu:1' (repeatable)"
    )
    s = p.add_argument_group("the sweep")
    s.add_argument("--experiment", default="phase-diagram", help="the experiment to run (see `bayesattn list`)")
    s.add_argument("--config", help="a named config of the experiment or a TOML path (default: its default)")
    s.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="override a config field (repeatable)"
    )
    s.add_argument("--out", help="output folder (default results/<config name>)")
    s.add_argument("--batch", type=int, default=1, help="MCMC points of one shape per program (GPU jobs: e.g. 16)")
    s.add_argument("--dry-run", action="store_true", help="print the job script and stop (no SLURM needed)")
    args = p.parse_args(argv)
    for name in ("cores", "jobs", "batch") + (("processes",) if args.processes is not None else ()):
        if getattr(args, name) < 1:
            p.error(f"--{name}={getattr(args, name)}: expected a positive integer")

    from bayesattn.experiments import get_experiment

    experiment = get_experiment(args.experiment)()
    cfg = experiment.load_config(args.config, args.set)
    experiment.check(cfg)

    cluster = build_cluster(args)
    try:
        if args.dry_run:
            print(cluster.job_script())
            print(
                f"# would submit {args.jobs} jobs of {args.cores} cores ({args.processes or args.cores} workers "
                f"each) for config '{cfg.name}'"
            )
            return 0
        from distributed import Client

        from bayesattn.runtime import prepare_output_dir
        from bayesattn.sweep import run_experiment

        out = prepare_output_dir(args.out or f"results/{cfg.name}", "--out")
        cluster.scale(jobs=args.jobs)
        with Client(cluster) as client:
            print(
                f"scheduler {cluster.scheduler_address}: {args.jobs} jobs submitted; {experiment.name} "
                f"'{cfg.name}' -> {out}; dashboard {client.dashboard_link}",
                flush=True,
            )
            experiment.mcmc_batch = args.batch
            run_experiment(experiment, cfg, out, executor=client)
        return 0
    finally:
        cluster.close()


if __name__ == "__main__":
    sys.exit(main())
