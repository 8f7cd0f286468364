"""The ``bayesattn`` command: thin, no science inside. One way to run every system of the registry::

    bayesattn list                                   every experiment and its named configs
    bayesattn run EXPERIMENT [--config NAME|PATH] [--set section.key=value ...] [--out DIR]
                             [--executor serial|thread|process|dask] [--workers N] [--scheduler tcp://HOST:PORT]
                             [--dask-threads] [--wait] [--reuse DIR] [--no-figures] [--quiet]
    bayesattn figures DIR                            redraw a result folder's figures from its files
    bayesattn check DIR                              verify a result folder, computing nothing
    bayesattn archive DIR --to STORE                 keep a folder's finished points in a point store (--reuse)
    bayesattn phase-diagram [...]                    the main job: ``run phase-diagram`` with its short options
    bayesattn EXPERIMENT [...]                       ``run EXPERIMENT``, with ``--parts`` where it has parts
    bayesattn sample | train ...                     one exact-posterior sample / one training run at one point
    bayesattn screen MODEL|DIR ...                   screen the heads of a pretrained model or of checkpoints

The parser is built without importing JAX (``--help`` answers at once); every option is checked before any work
starts. Exit status: 0 done; 2 bad input (one line naming the parameter, its value and what is allowed); 1 some
points failed or a result file could not be written (one line; every finished point stays on disk); 130 / 143
interrupted by SIGINT / SIGTERM (finished points stay; rerunning the same command resumes).
"""

from __future__ import annotations

import argparse
import os
import sys
import typing

from ._validate import check_int
from .cli_options import (
    ATTENTIONS,
    Parser,
    add_point_commands,
    checked,
    command,
    model_options,
    nonempty,
    scheduler_address,
)
from .experiments import EXPERIMENTS, get_experiment
from .figstyle import ENV as FIGURE_CHECK_ENV
from .figstyle import FigureCheckError

INTERRUPTED = "bayesattn: interrupted; finished points are on disk, rerun the same command to resume"
EXECUTORS = ("serial", "thread", "process", "dask")  # bayesattn.scaleout.EXECUTORS (tests/test_cli.py checks)
# every experiment's own subcommand, an alias of `run NAME` (the phase diagram's, the main job, has its short
# options): from the registry, so a new experiment needs no line here
ALIASES = {name: name for name in EXPERIMENTS if name != "phase-diagram"}


# ------------------------------------------------------------------------------------------ shared options
def _run_options(p: argparse.ArgumentParser, experiment: str | None) -> None:
    """The options every experiment takes."""
    if experiment is None:
        p.add_argument("experiment", choices=list(EXPERIMENTS), help="the experiment to run (see `bayesattn list`)")
        default = "its default named config"
    else:
        default = f"{get_experiment(experiment).default_config!r}"
    p.add_argument(
        "--config",
        type=nonempty("--config"),
        metavar="NAME|PATH",
        help=f"a named config of the experiment (`bayesattn list`) or a TOML file (default: {default})",
    )
    p.add_argument(
        "--set",
        action="append",
        type=nonempty("--set"),
        default=[],
        metavar="KEY=VALUE",
        help="override any config field by dotted key, e.g. --set mcmc.num_chains=4; the value is a TOML "
        "literal (4, 1e-3, true, [1, 2]) or a bare word; a list field also takes a,b,c or [a,b,c] (repeatable)",
    )
    p.add_argument(
        "--out",
        type=nonempty("--out"),
        metavar="DIR",
        help="output folder (default: results/<config name>, relative to the current folder)",
    )
    p.add_argument(
        "--executor",
        choices=EXECUTORS,
        help="where points run (default: the experiment's: 2 threads for phase-diagram; for the others a process "
        "pool when the config's workers is above 1 (three-transitions: 2), else serial; process with --workers > 1; "
        "thread: points overlap in this process; dask: a local or remote Dask cluster)",
    )
    p.add_argument(
        "--workers",
        type=checked(check_int, "--workers", int, minimum=1),
        metavar="N",
        help="points computed at once: threads, processes or local Dask workers (default 1; 2 with --executor thread)",
    )
    p.add_argument(
        "--scheduler",
        type=scheduler_address,
        metavar="tcp://HOST:PORT",
        help="join a running Dask cluster (implies --executor dask)",
    )
    p.add_argument(
        "--dask-threads",
        action="store_true",
        help="with --executor dask: the local cluster's workers are threads of this process, sharing its "
        "compiled programs",
    )
    p.add_argument(
        "--wait",
        action="store_true",
        help="when another run is writing into the same folder, wait for it instead of stopping",
    )
    p.add_argument(
        "--reuse",
        action="append",
        type=nonempty("--reuse"),
        default=[],
        metavar="DIR",
        help="take finished points from DIR before computing: another run's folder or a point store "
        "(`bayesattn archive`), e.g. reference/points/sparse_anchor; a file is taken only when it holds exactly "
        "the point asked for and its checksum matches (repeatable)",
    )
    p.add_argument("--no-figures", action="store_true", help="skip drawing figures")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.add_argument(
        "--no-compile-cache",
        action="store_true",
        help="do not use JAX's persistent compilation cache (see BAYESATTN_CACHE_DIR)",
    )


def _seeds_option(p: argparse.ArgumentParser, cls) -> None:
    """``--seeds``, where the experiment's config has ``seeds``."""
    if "seeds" in cls.Config.model_fields:
        p.add_argument(
            "--seeds",
            type=checked(check_int, "--seeds", int, minimum=1),
            help="seeds per setting (default: the config's)",
        )


def _phase_diagram_options(p: argparse.ArgumentParser) -> None:
    """The main job's short options: each is a --set of the phase-diagram config."""
    g = p.add_argument_group("phase diagram (shortcuts for --set)")
    g.add_argument("--attention", choices=[*ATTENTIONS, "both"], help="attention map(s) to run")
    g.add_argument("--methods", type=nonempty("--methods"), help="comma-separated subset of theory,mcmc,adam")
    model_options(g, one_point=False)
    g.add_argument(
        "--batch",
        type=checked(check_int, "--batch", int, minimum=1),
        metavar="N",
        help="MCMC points of one shape sampled N at a time in one program (default 1)",
    )


def build_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="bayesattn",
        description="Bayesian theory of copy-head emergence: phase diagrams, exact "
        "posterior sampling and training of attention layers, and the related published systems.",
    )
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser)

    ls = sub.add_parser(
        "list",
        help="every experiment and its named configs",
        description="List every experiment "
        "of the registry with its named configs (package data: found from any directory).",
    )
    ls.set_defaults(func=command("list_command"))

    rp = sub.add_parser(
        "run",
        help="run an experiment: its grid of points, summary.json and figures",
        description="Run an experiment of the registry: every missing point (resumable), then "
        "summary.json and the figures.",
    )
    _run_options(rp, None)
    rp.set_defaults(func=command("run_command"))

    pd = sub.add_parser(
        "phase-diagram",
        help="the main job: theory + MCMC + Adam over P (run phase-diagram)",
        description="Run the theory and, where asked, sampling and training over a grid of P "
        "(`bayesattn run phase-diagram` with short options). With no arguments: the default config.",
    )
    _run_options(pd, "phase-diagram")
    _phase_diagram_options(pd)
    _seeds_option(pd, EXPERIMENTS["phase-diagram"])
    pd.set_defaults(func=command("run_command"), experiment="phase-diagram")

    for alias, name in ALIASES.items():
        if name not in EXPERIMENTS:
            continue
        cls = EXPERIMENTS[name]
        ap = sub.add_parser(
            alias,
            help=f"{cls.description} (run {name})",
            description=f"{cls.description}. The same as `bayesattn run {name}`.",
        )
        _run_options(ap, name)
        parts = (
            typing.get_args(typing.get_args(cls.Config.model_fields["parts"].annotation)[0])
            if "parts" in cls.Config.model_fields
            else ()
        )
        if parts:
            ap.add_argument(
                "--parts",
                type=nonempty("--parts"),
                help=f"comma-separated subset of {','.join(parts)} (default: the config's)",
            )
        _seeds_option(ap, cls)
        ap.set_defaults(func=command("run_command"), experiment=name)

    fp = sub.add_parser(
        "figures",
        help="redraw a result folder's figures from its saved files",
        description="Redraw all figures of a result folder (written by `bayesattn run`) from its point files.",
    )
    fp.add_argument("dir", type=nonempty("dir"), help="a result folder")
    fp.set_defaults(func=command("figures_command"))

    cp = sub.add_parser(
        "check",
        help="verify a result folder, computing nothing",
        description="Check that every point file of a result folder parses and matches its name "
        "and checksum, and list the missing points and the long training runs in flight (the step their saved "
        "state holds). Exit 0 when complete, 1 otherwise.",
    )
    cp.add_argument("dir", type=nonempty("dir"), help="a result folder")
    cp.set_defaults(func=command("check_command"))

    ar = sub.add_parser(
        "archive",
        help="copy a result folder's finished points into a point store (compressed, to keep under git)",
        description="Copy the finished point files of a result folder (those of its config) into a point store, "
        "gzip-compressed, so that a long run can go on elsewhere: `bayesattn run ... --reuse STORE` takes them "
        "back, checked point by point. Records already in the store are left as they are.",
    )
    ar.add_argument("dir", type=nonempty("dir"), help="a result folder (written by `bayesattn run`)")
    ar.add_argument(
        "--to", type=nonempty("--to"), required=True, metavar="STORE", help="the point store: a folder outside DIR"
    )
    ar.set_defaults(func=command("archive_command"))

    add_point_commands(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    """Run the command line ``argv`` (None: ``sys.argv``, as the ``bayesattn`` command does).

    As a command (argv None), SIGINT / SIGTERM end the process at once with status 130 / 143 after any result
    file being written is in place (:func:`bayesattn.runtime.exit_on_interrupt`); called in-process with a list,
    an interrupt is a KeyboardInterrupt, answered with status 130."""
    if argv is None:
        from .runtime import exit_on_interrupt, warnings_as_lines

        exit_on_interrupt(INTERRUPTED)
        warnings_as_lines()

    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except ValueError as e:  # bad input, found before any work (ConfigError, FolderInUse included)
        print(f"bayesattn: error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `bayesattn list | head`: the reader has gone, which is not an error of the command
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # Python's own flush at exit goes nowhere
        return 0
    except OSError as e:  # a result file that could not be written (a full disk, a folder made read-only)
        where = f"{e.filename}: " if e.filename else ""
        print(
            f"bayesattn: error: {where}[Errno {e.errno}] {e.strerror}; every finished point is on disk, rerun "
            "the same command to resume",
            file=sys.stderr,
        )
        return 1
    except FigureCheckError as e:  # only with BAYESATTN_FIGURE_CHECK=error (the tests' setting): one line, no trace
        print(f"bayesattn: error: {e} (the figure check is strict: {FIGURE_CHECK_ENV}=error)", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"\n{INTERRUPTED}", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
