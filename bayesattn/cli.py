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
import re
import sys
import typing

from ._validate import check_int, check_positive
from .experiments import EXPERIMENTS, get_experiment
from .experiments.config import MAX_SEED
from .experiments.copy_head.config import TrainInit
from .experiments.sections import MIN_KEPT_DRAWS, Backend, CopyTaskSection, Sampler, SamplerInit

INTERRUPTED = "bayesattn: interrupted; finished points are on disk, rerun the same command to resume"
EXECUTORS = ("serial", "thread", "process", "dask")  # bayesattn.scaleout.EXECUTORS (tests/test_cli.py checks)
ATTENTIONS = ("softmax", "linear")
# every experiment's own subcommand, an alias of `run NAME` (the phase diagram's, the main job, has its short
# options): from the registry, so a new experiment needs no line here
ALIASES = {name: name for name in EXPERIMENTS if name != "phase-diagram"}


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one clear line, status 2
        self.exit(2, f"bayesattn: error: {message}\n")


def _choices(literal) -> tuple:
    return typing.get_args(literal)


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
        type=_text("--config"),
        metavar="NAME|PATH",
        help=f"a named config of the experiment (`bayesattn list`) or a TOML file (default: {default})",
    )
    p.add_argument(
        "--set",
        action="append",
        type=_text("--set"),
        default=[],
        metavar="KEY=VALUE",
        help="override any config field by dotted key, e.g. --set mcmc.num_chains=4; the value is a TOML "
        "literal (4, 1e-3, true, [1, 2]) or a bare word; a list field also takes a,b,c (repeatable)",
    )
    p.add_argument(
        "--out",
        type=_text("--out"),
        metavar="DIR",
        help="output folder (default: results/<config name>, relative to the current folder)",
    )
    p.add_argument(
        "--executor",
        choices=EXECUTORS,
        help="where points run (default: the experiment's, 2 threads for phase-diagram and serial for the others; "
        "process with --workers > 1; thread: points overlap in this process; dask: a local or remote Dask cluster)",
    )
    p.add_argument(
        "--workers",
        type=_argument(check_int, "--workers", int, minimum=1),
        metavar="N",
        help="points computed at once: threads, processes or local Dask workers (default 1; 2 with --executor thread)",
    )
    p.add_argument(
        "--scheduler",
        type=_scheduler,
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
        type=_text("--reuse"),
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


def _phase_diagram_options(p: argparse.ArgumentParser) -> None:
    """The main job's short options: each is a --set of the phase-diagram config."""
    g = p.add_argument_group("phase diagram (shortcuts for --set)")
    g.add_argument("--attention", choices=[*ATTENTIONS, "both"], help="attention map(s) to run")
    g.add_argument("--methods", type=_text("--methods"), help="comma-separated subset of theory,mcmc,adam")
    _model_options(g, one_point=False)
    g.add_argument(
        "--batch",
        type=_argument(check_int, "--batch", int, minimum=1),
        metavar="N",
        help="MCMC points of one shape sampled N at a time in one program (default 1)",
    )


def _model_options(g, *, one_point: bool) -> None:
    fields = CopyTaskSection.model_fields
    g.add_argument("--T", type=int, help="sequence length T (>= 2)")
    g.add_argument("--d", type=int, help="token dimension d (>= 1)")
    g.add_argument("--offset", type=int, help="copy offset, 1..T-1 (1: previous token)")
    g.add_argument("--tokens", choices=_choices(fields["tokens"].annotation), help="token distribution")
    g.add_argument(
        "--boundary", choices=_choices(fields["boundary"].annotation), help="boundary condition of the copy task"
    )
    g.add_argument("--sigma-A2", type=float, dest="sigma_A2", help="prior variance of the attention logits")
    g.add_argument(
        "--sigma-V2", type=float, dest="sigma_V2", help="prior variance scale of the readout (V_ij ~ N(0, sigma_V2/d))"
    )
    g.add_argument("--sigma2", type=float, help="noise variance (= Langevin temperature)")
    if one_point:
        g.add_argument("--P", type=_one_P, help="the number of training sequences (one positive integer)")
    else:
        g.add_argument("--P", type=_P_grid, help="P grid: start:stop:num (log-spaced) or v1,v2,...")
    g.add_argument(
        "--seed",
        type=_argument(check_int, "--seed", int, minimum=0, maximum=MAX_SEED),
        help="run seed; data, sampler and training keys are folded from it",
    )


def _P_grid(text: str) -> list[str]:
    """'start:stop:num' (log-spaced) or 'v1,v2,...' -> --set items of the P section."""
    try:
        if ":" in text:
            start, stop, num = text.split(":")
            return [f"P.start={float(start)}", f"P.stop={float(stop)}", f"P.num={int(num)}", "P.values=[]"]
        values = [str(int(v)) for v in text.split(",") if v.strip()]
        if not values:
            raise ValueError(text)
        return [f"P.values=[{', '.join(values)}]"]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--P={text!r}: expected start:stop:num or v1,v2,... (integers)") from None


def _text(flag: str):
    """An argparse type for a text option: refused when empty, since an empty value would read as not given (an
    empty --out would write into the default folder)."""

    def parse(text: str) -> str:
        if not text.strip():
            raise argparse.ArgumentTypeError(f"{flag}={text!r}: expected a non-empty value")
        return text

    return parse


def _scheduler(text: str) -> str:
    """--scheduler: a Dask scheduler's address, PROTOCOL://HOST:PORT, checked before any connection is tried."""
    if not re.fullmatch(r"[a-z][a-z0-9+]*://[^\s/:]+:\d{1,5}", text):
        raise argparse.ArgumentTypeError(f"--scheduler={text!r}: expected a Dask scheduler's address, tcp://HOST:PORT")
    return text


def _argument(check, flag: str, convert=str, **bounds):
    """An argparse type made of one of :mod:`bayesattn._validate`'s checks: ``check(flag, convert(text),
    **bounds)``, its one-line refusal raised as the parser's error, before any work."""

    def parse(text: str):
        try:
            value = convert(text)
        except ValueError:
            value = text
        try:
            return check(flag, value, **bounds)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    return parse


def _one_P(text: str) -> list[str]:
    try:
        P = int(text)
    except ValueError:
        P = 0
    if P < 1:
        raise argparse.ArgumentTypeError(
            f"--P={text!r}: expected one positive integer (the number of training sequences)"
        )
    return [f"P.values=[{P}]"]


def _command(name: str):
    """The command ``name`` of :mod:`bayesattn.commands`, imported when it runs (the parser stays light)."""

    def run(args) -> int:
        from . import commands

        return getattr(commands, name)(args)

    return run


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="bayesattn",
        description="Bayesian theory of copy-head emergence: phase diagrams, exact "
        "posterior sampling and training of attention layers, and the related published systems.",
    )
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    ls = sub.add_parser(
        "list",
        help="every experiment and its named configs",
        description="List every experiment "
        "of the registry with its named configs (package data: found from any directory).",
    )
    ls.set_defaults(func=_command("list_command"))

    rp = sub.add_parser(
        "run",
        help="run an experiment: its grid of points, summary.json and figures",
        description="Run an experiment of the registry: every missing point (resumable), then "
        "summary.json and the figures.",
    )
    _run_options(rp, None)
    rp.set_defaults(func=_command("run_command"))

    pd = sub.add_parser(
        "phase-diagram",
        help="the main job: theory + MCMC + Adam over P (run phase-diagram)",
        description="Run the theory and, where asked, sampling and training over a grid of P "
        "(`bayesattn run phase-diagram` with short options). With no arguments: the default config.",
    )
    _run_options(pd, "phase-diagram")
    _phase_diagram_options(pd)
    pd.set_defaults(func=_command("run_command"), experiment="phase-diagram")

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
                type=_text("--parts"),
                help=f"comma-separated subset of {','.join(parts)} (default: the config's)",
            )
        if "seeds" in cls.Config.model_fields:
            ap.add_argument(
                "--seeds",
                type=_argument(check_int, "--seeds", int, minimum=1),
                help="seeds per setting (default: the config's)",
            )
        ap.set_defaults(func=_command("run_command"), experiment=name)

    fp = sub.add_parser(
        "figures",
        help="redraw a result folder's figures from its saved files",
        description="Redraw all figures of a result folder (written by `bayesattn run`) from its point files.",
    )
    fp.add_argument("dir", type=_text("dir"), help="a result folder")
    fp.set_defaults(func=_command("figures_command"))

    cp = sub.add_parser(
        "check",
        help="verify a result folder, computing nothing",
        description="Check that every point file of a result folder parses and matches its name "
        "and checksum, and list the missing points and the long training runs in flight (the step their saved "
        "state holds). Exit 0 when complete, 1 otherwise.",
    )
    cp.add_argument("dir", type=_text("dir"), help="a result folder")
    cp.set_defaults(func=_command("check_command"))

    ar = sub.add_parser(
        "archive",
        help="copy a result folder's finished points into a point store (compressed, to keep under git)",
        description="Copy the finished point files of a result folder (those of its config) into a point store, "
        "gzip-compressed, so that a long run can go on elsewhere: `bayesattn run ... --reuse STORE` takes them "
        "back, checked point by point. Records already in the store are left as they are.",
    )
    ar.add_argument("dir", type=_text("dir"), help="a result folder (written by `bayesattn run`)")
    ar.add_argument(
        "--to", type=_text("--to"), required=True, metavar="STORE", help="the point store: a folder outside DIR"
    )
    ar.set_defaults(func=_command("archive_command"))

    sp = sub.add_parser(
        "sample",
        help="sample the exact posterior over L at one point",
        description="Sample the closed-form posterior over the attention matrix at one (attention, P).",
    )
    g = sp.add_argument_group("model (override the config)")
    g.add_argument(
        "--config", type=_text("--config"), metavar="NAME|PATH", help="a named phase-diagram config or a TOML file"
    )
    g.add_argument("--attention", choices=ATTENTIONS, help="attention map (default: the config's first)")
    _model_options(g, one_point=True)
    g.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        type=_text("--set"),
        help="override any phase-diagram config field, e.g. --set prior.sigma2=100 (repeatable)",
    )
    sp.add_argument("--method", default="nuts", choices=_choices(Sampler), help="sampler")
    sp.add_argument(
        "--backend",
        default="blackjax",
        choices=_choices(Backend),
        help="library",
    )
    sp.add_argument(
        "--num-chains",
        type=_argument(check_int, "--num-chains", int, minimum=1),
        default=4,
        help="independent chains, all in one compiled program: "
        "one after another on a CPU, vectorised (vmap) on a GPU or TPU",
    )
    sp.add_argument(
        "--num-warmup",
        type=_argument(check_int, "--num-warmup", int, minimum=1),
        default=500,
        help="warm-up (adaptation) steps per chain",
    )
    sp.add_argument(
        "--num-samples",
        type=_argument(check_int, "--num-samples", int, minimum=MIN_KEPT_DRAWS),
        default=1000,
        help="draws per chain",
    )
    sp.add_argument("--init", default="cold", choices=_choices(SamplerInit), help="chain initialisation")
    sp.add_argument("--out", type=_text("--out"), help="write the summary to this JSON file")
    sp.add_argument("--quiet", action="store_true", help="no progress lines")
    sp.set_defaults(func=_command("sample_point"))

    tp = sub.add_parser(
        "train",
        help="train the attention network at one point (Adam or Langevin)",
        description="Train L and V on the squared loss plus the prior's weight decay at one (attention, P).",
    )
    g = tp.add_argument_group("model (override the config)")
    g.add_argument(
        "--config", type=_text("--config"), metavar="NAME|PATH", help="a named phase-diagram config or a TOML file"
    )
    g.add_argument("--attention", choices=ATTENTIONS, help="attention map (default: the config's first)")
    _model_options(g, one_point=True)
    g.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        type=_text("--set"),
        help="override any phase-diagram config field (repeatable)",
    )
    tp.add_argument(
        "--optimizer", default="adam", choices=("adam", "langevin", "gd"), help="optimiser (gd: plain gradient descent)"
    )
    tp.add_argument(
        "--lr", type=_argument(check_positive, "--lr", float), help="learning rate (default: the library's)"
    )
    tp.add_argument(
        "--steps",
        type=_argument(check_int, "--steps", int, minimum=1),
        help="optimisation steps (default: the library's)",
    )
    tp.add_argument("--init", choices=_choices(TrainInit), help="initialisation of L (default small)")
    tp.add_argument("--out", type=_text("--out"), help="write the result to this JSON file")
    tp.add_argument("--quiet", action="store_true", help="no progress bar")
    tp.set_defaults(func=_command("train_point"))

    sc = sub.add_parser(
        "screen",
        help="circuit screens of a pretrained model or of a checkpoint folder",
        description="Screen every head (selectivity per class, PR, detection scores) of a pretrained "
        "model (--model smollm2, or GGUF files) or of the checkpoints in a directory "
        "(docs/results/screens.md). Training and screening a small transformer, or the Bayesian copy head: "
        "`bayesattn run screens`.",
    )
    sc.add_argument(
        "directory",
        nargs="?",
        type=_text("DIRECTORY"),
        help="a checkpoint directory (step_*.eqx, checkpoints/, or network.eqx)",
    )
    sc.add_argument(
        "--model",
        nargs="+",
        type=_text("--model"),
        help="a pretrained model shipped in an installed package: smollm2 (extra "
        "'real'), or a llama GGUF file (PATH.gguf); several GGUF files: a checkpoint series, screened on "
        "one probe batch and ranked by the integral of PR over steps",
    )
    sc.add_argument(
        "--steps",
        type=int,
        nargs="+",
        help="training steps of the --model checkpoints (default: the last number in each file name)",
    )
    sc.add_argument(
        "--probe", default="repeated_pair", choices=["repeated_pair", "repeated_sequence"], help="probe batch kind"
    )
    sc.add_argument(
        "--N", type=_argument(check_int, "--N", int, minimum=1), default=64, help="probe sequences (default 64)"
    )
    sc.add_argument(
        "--T",
        type=_argument(check_int, "--T", int, minimum=2),
        help="probe length (default: 256 for a pretrained model, the context otherwise)",
    )
    sc.add_argument(
        "--seed", type=_argument(check_int, "--seed", int, minimum=0, maximum=MAX_SEED), default=0, help="probe seed"
    )
    sc.add_argument(
        "--baseline",
        default="paper",
        choices=["paper", "class_free"],
        help="the selectivity's baseline positions: the paper's fixed 50 (default) or 50 random non-target keys "
        "per sequence (class_free)",
    )
    sc.add_argument("--bos", action="store_true", help="put the model's BOS token at position 0 (with --model)")
    sc.add_argument(
        "--threshold",
        type=_argument(check_positive, "--threshold", float),
        default=30.0,
        help="selectivity a head must reach (default 30)",
    )
    sc.add_argument(
        "--chunk",
        type=_argument(check_int, "--chunk", int, minimum=1),
        help="sequences per forward pass of a pretrained model (with --model; default 8)",
    )
    sc.add_argument("--out", type=_text("--out"), help="JSON file of records (figures beside it)")
    sc.add_argument("--quiet", action="store_true", help="no progress bar")
    sc.set_defaults(func=_command("screen_models"))
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
    except KeyboardInterrupt:
        print(f"\n{INTERRUPTED}", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
