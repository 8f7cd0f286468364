"""The ``bayesattn`` command. Thin: parses arguments into a RunConfig and calls the library.

    bayesattn phase-diagram [--config NAME|PATH] [--attention softmax|linear|both] [--methods theory,mcmc,adam]
                            [--T ..] [--d ..] [--sigma-A2 ..] [--sigma-V2 ..] [--sigma2 ..] [--P a:b:n | --P v1,v2]
                            [--out DIR] [--set section.key=value ...]
                            [--workers N] [--executor serial|thread|process|dask] [--scheduler tcp://HOST:PORT]
                            [--dask-threads] [--batch N]
    bayesattn sample ...      exact-posterior sampling at one point
    bayesattn train ...       Adam / Langevin training at one point
    bayesattn figures DIR     redraw every figure from saved results

Bad arguments, and output paths that cannot be written (checked before any work), exit with status 2 and
one line on stderr. Ctrl-C (SIGINT) ends the process at once with status 130 (SIGTERM: 143), leaving every
finished point on disk; rerunning the same command resumes.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from .bayes.sampling import BACKENDS, SAMPLER_INITS
from .bayes.sampling import METHODS as SAMPLERS
from .experiments import METHODS
from .models import ATTENTIONS
from .scaleout import EXECUTORS
from .tasks.base import BOUNDARIES, TOKENS
from .training import OPTIMIZERS, TRAIN_INITS

INTERRUPTED = "bayesattn: interrupted; finished points are on disk, rerun the same command to resume"


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one clear line, status 2
        self.exit(2, f"bayesattn: error: {message}\n")


def _P_grid(text: str) -> dict:
    """'start:stop:num' (log-spaced) or 'v1,v2,...' -> GridConfig fields."""
    try:
        if ":" in text:
            start, stop, num = text.split(":")
            return {"start": float(start), "stop": float(stop), "num": int(num), "values": []}
        return {"values": [int(v) for v in text.split(",") if v.strip()]}
    except ValueError:
        raise argparse.ArgumentTypeError(f"--P={text!r}: expected start:stop:num or v1,v2,... (integers)") from None


def _one_P(text: str) -> dict:
    """One number of training sequences (for sample / train) -> GridConfig fields."""
    try:
        P = int(text)
    except ValueError:
        P = 0
    if P < 1:
        raise argparse.ArgumentTypeError(
            f"--P={text!r}: expected one positive integer (the number of training sequences)"
        )
    return {"values": [P]}


def _common_model_args(p: argparse.ArgumentParser, *, one_point: bool) -> None:
    g = p.add_argument_group("model (override the config)")
    g.add_argument("--config", help="named config in phase_diagrams/ (e.g. default, finite_size) or a TOML path")
    if one_point:
        g.add_argument("--attention", choices=ATTENTIONS, help="attention map (default: the config's first)")
    else:
        g.add_argument("--attention", choices=[*ATTENTIONS, "both"], help="attention map(s) to run")
    g.add_argument("--T", type=int, help="sequence length T (>= 2)")
    g.add_argument("--d", type=int, help="token dimension d (>= 1)")
    g.add_argument("--offset", type=int, help="copy offset, 1..T-1 (1: previous token)")
    g.add_argument("--tokens", choices=TOKENS, help="token distribution")
    g.add_argument("--boundary", choices=BOUNDARIES, help="boundary condition of the copy task")
    g.add_argument("--sigma-A2", type=float, dest="sigma_A2", help="prior variance of the attention logits")
    g.add_argument(
        "--sigma-V2", type=float, dest="sigma_V2", help="prior variance scale of the readout (V_ij ~ N(0, sigma_V2/d))"
    )
    g.add_argument("--sigma2", type=float, help="noise variance (= Langevin temperature)")
    if one_point:
        g.add_argument("--P", type=_one_P, help="the number of training sequences (one positive integer)")
    else:
        g.add_argument("--P", type=_P_grid, help="P grid: start:stop:num (log-spaced) or v1,v2,...")
    g.add_argument("--seed", type=int, help="run seed; data, sampler and training keys are folded from it")
    g.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override any config field by dotted key, e.g. --set mcmc.num_chains=4 (repeatable)",
    )


def _config_from_args(args):
    from .experiments import RunConfig

    cfg = RunConfig.from_toml(args.config) if args.config else RunConfig()
    if args.attention:
        cfg = cfg.override("attention", list(ATTENTIONS) if args.attention == "both" else [args.attention])
    for name in ("T", "d", "offset", "tokens", "boundary"):
        if getattr(args, name) is not None:
            cfg = cfg.override(f"task.{name}", getattr(args, name))
    for name in ("sigma_A2", "sigma_V2", "sigma2"):
        if getattr(args, name) is not None:
            cfg = cfg.override(f"prior.{name}", getattr(args, name))
    if args.P is not None:
        for k, v in args.P.items():
            cfg = cfg.override(f"P.{k}", v)
    if args.seed is not None:
        cfg = cfg.override("seed", args.seed)
    for item in args.set:
        if "=" not in item:
            raise ValueError(f"--set {item!r}: expected KEY=VALUE")
        k, v = item.split("=", 1)
        cfg = cfg.override(k.strip(), v.strip())
    if getattr(args, "methods", None):
        cfg = cfg.override("methods", args.methods)
    if getattr(args, "workers", None) is not None:
        cfg = cfg.override("workers", args.workers)
    return cfg.validate()


def _cmd_phase_diagram(args) -> int:
    from .experiments import run_phase_diagram
    from .scaleout import sweep_executor
    from .sweep import SweepError, prepare_output_dir

    cfg = _config_from_args(args)
    if args.batch is not None and args.batch < 1:
        raise ValueError(f"--batch={args.batch}: expected a positive integer (MCMC points per program)")
    out = prepare_output_dir(args.out or f"phase_diagrams/{cfg.name}", "--out")
    workers = args.workers
    if workers is None and args.executor in ("process", "dask") and not args.scheduler:
        workers = cfg.workers  # the config's workers, as --workers alone would use them
    if args.dask_threads and (args.executor != "dask" or args.scheduler):
        raise ValueError(
            "--dask-threads: local Dask workers as threads; expected with --executor dask and no "
            "--scheduler (an existing cluster has its own workers)"
        )
    with sweep_executor(args.executor, workers, args.scheduler, processes=not args.dask_threads) as executor:
        where = f"; executor: {args.executor or ('dask' if args.scheduler else 'default')}"
        print(
            f"bayesattn: phase diagram '{cfg.name}' -> {out}  (attention: {', '.join(cfg.attention)}; "
            f"methods: {', '.join(cfg.methods)}; P: {cfg.P.grid().tolist()}{where})",
            flush=True,
        )
        try:
            run_phase_diagram(
                cfg, out, progress=not args.quiet, figures=not args.no_figures, executor=executor, batch=args.batch or 1
            )
        except SweepError as e:
            print(f"bayesattn: {e}", file=sys.stderr)
            return 1
    print(f"bayesattn: wrote {out / 'summary.json'}" + ("" if args.no_figures else f" and {out / 'figures'}/"))
    return 0


def _one_point(args):
    """(config, attention, P, output file or None) of sample / train, the output path checked before any work."""
    from .sweep import check_output_file

    cfg = _config_from_args(args)
    P = cfg.P.grid()
    if P.size != 1:  # a config file's grid; --P itself takes one value
        raise ValueError(f"P={P.tolist()}: expected a single value for one point (give --P N)")
    out = check_output_file(args.out, "--out") if args.out else None
    return cfg, cfg.attention[0], int(P[0]), out


def _cmd_sample(args) -> int:
    from .bayes.posterior import Posterior
    from .bayes.sampling import sample
    from .experiments import MCMC, data_record, point_data, point_keys
    from .sweep import provenance, write_json_atomic

    cfg, att, P, out = _one_point(args)
    data = point_data(cfg.make_task(), cfg.seed, P)
    rec = data_record(data)
    print(
        f"bayesattn: sample {att} attention, P = {P}, T = {cfg.task.T}, d = {cfg.task.d}, {args.method} "
        f"({args.backend}), {args.init} start; data sha256 {rec['sha256'][:12]}",
        flush=True,
    )
    post = Posterior(data, attention=att, prior=cfg.make_prior())
    s = sample(
        post,
        point_keys(cfg.seed, MCMC, P, 0),
        method=args.method,
        backend=args.backend,
        num_chains=args.num_chains,
        num_warmup=args.num_warmup,
        num_samples=args.num_samples,
        init=args.init,
        progress=not args.quiet,
    )
    summ = s.summary()
    for x in ("m", "q", "u"):
        print(
            f"{x} = {summ[x]['mean']:.4f} +- {summ[x]['se']:.4f}   (ESS {summ[x]['ess_bulk']:.0f}, R-hat {summ[x]['r_hat']:.3f})"
        )
    if "log_evidence" in summ:
        print(f"log evidence (per SMC run): {summ['log_evidence']}; mode weights: {summ.get('mode_weights')}")
    diag = summ["diagnostics"]
    print(
        f"divergences: {diag.get('num_divergent')}, gradient evaluations: {diag.get('num_grad_evals')}, "
        f"wall time {float(diag.get('wall_time_s', float('nan'))):.1f} s"
    )
    if out:
        prov = provenance()
        write_json_atomic(
            out,
            {
                "config": cfg.to_dict(),
                "P": P,
                "attention": att,
                "method": args.method,
                "init": args.init,
                "data": rec,
                "result": summ,
                "versions": prov.pop("versions"),
                "provenance": prov,
            },
        )
        print(f"bayesattn: wrote {out}")
    return 0


def _cmd_train(args) -> int:
    from .experiments import ADAM, data_record, point_data, point_keys
    from .sweep import provenance, write_json_atomic
    from .training import train

    cfg, att, P, out = _one_point(args)
    data = point_data(cfg.make_task(), cfg.seed, P)
    rec = data_record(data)
    kw = {k: v for k, v in {"lr": args.lr, "steps": args.steps, "init": args.init}.items() if v is not None}
    print(
        f"bayesattn: train {att} attention, P = {P}, T = {cfg.task.T}, d = {cfg.task.d}, {args.optimizer} "
        f"from {args.init or 'small'} init; data sha256 {rec['sha256'][:12]}",
        flush=True,
    )
    t0 = time.perf_counter()
    res = train(data, cfg.make_prior(), att, point_keys(cfg.seed, ADAM, P, 0, 0), optimizer=args.optimizer, **kw)
    fin = res.final_order_parameters
    print(
        f"{att}: final m = {float(fin['m']):.4f}, q = {float(fin['q']):.4f}, u = {float(fin['u']):.4f}  "
        f"({time.perf_counter() - t0:.1f} s)"
    )
    if out:
        prov = provenance()
        write_json_atomic(
            out,
            {
                "config": cfg.to_dict(),
                "P": P,
                "attention": att,
                "data": rec,
                "result": res.to_dict(),
                "versions": prov.pop("versions"),
                "provenance": prov,
            },
        )
        print(f"bayesattn: wrote {out}")
    return 0


def _cmd_figures(args) -> int:
    from .plots import draw_all
    from .sweep import prepare_output_dir

    out = Path(args.dir)
    if not (out / "points").is_dir():
        raise ValueError(
            f"dir={str(out)!r}: no saved results there (expected {out / 'points'}/ from a phase-diagram run)"
        )
    prepare_output_dir(out / "figures", "dir")
    paths = draw_all(out)
    print(f"bayesattn: drew {len(paths)} figure files in {out / 'figures'}/")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="bayesattn",
        description="Bayesian theory of copy-head emergence: phase diagrams, exact "
        "posterior sampling and training of a single attention layer on the copy task.",
    )
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    pd = sub.add_parser(
        "phase-diagram",
        help="theory + MCMC + Adam over P; writes results, summary.json, figures",
        description="Run the theory and, where asked, sampling and training over a grid of P. "
        "With no arguments: the embedded default config.",
    )
    _common_model_args(pd, one_point=False)
    pd.add_argument(
        "--methods",
        type=lambda s: [m for m in s.split(",") if m],
        help=f"comma-separated subset of {','.join(METHODS)}",
    )
    pd.add_argument(
        "--out", help="output folder (default phase_diagrams/<config name>, relative to the current folder)"
    )
    pd.add_argument(
        "--workers",
        type=int,
        help="grid points computed in parallel: threads, processes or local Dask workers "
        "(default 1; 2 with --executor thread)",
    )
    pd.add_argument(
        "--executor",
        choices=EXECUTORS,
        help="where points run (default: serial, or process with --workers > 1; thread: points overlap in "
        "this process; README 'Run on a cluster')",
    )
    pd.add_argument(
        "--scheduler", metavar="tcp://HOST:PORT", help="join a running Dask cluster (implies --executor dask)"
    )
    pd.add_argument(
        "--dask-threads",
        action="store_true",
        help="with --executor dask: the local cluster's workers are threads of this process "
        "(LocalCluster(processes=False)), sharing its compiled programs",
    )
    pd.add_argument("--batch", type=int, help="MCMC points of one shape sampled N at a time in one program (default 1)")
    pd.add_argument("--no-figures", action="store_true", help="skip drawing figures")
    pd.add_argument("--quiet", action="store_true", help="no progress bars")
    pd.set_defaults(func=_cmd_phase_diagram)

    sp = sub.add_parser(
        "sample",
        help="sample the exact posterior over L at one point",
        description="Sample the closed-form posterior over the attention matrix at one (attention, P).",
    )
    _common_model_args(sp, one_point=True)
    sp.add_argument("--method", default="nuts", choices=SAMPLERS, help="sampler")
    sp.add_argument("--backend", default="blackjax", choices=BACKENDS, help="library")
    sp.add_argument(
        "--num-chains",
        type=int,
        default=4,
        help="independent chains, all in one compiled program: one after another on a CPU, "
        "vectorised (vmap) on a GPU or TPU",
    )
    sp.add_argument("--num-warmup", type=int, default=500, help="warm-up (adaptation) steps per chain")
    sp.add_argument("--num-samples", type=int, default=1000, help="draws per chain")
    sp.add_argument("--init", default="cold", choices=SAMPLER_INITS, help="chain initialisation")
    sp.add_argument("--out", help="write the summary to this JSON file")
    sp.add_argument("--quiet", action="store_true", help="no progress bar")
    sp.set_defaults(func=_cmd_sample)

    tp = sub.add_parser(
        "train",
        help="train the attention network at one point (Adam or Langevin)",
        description="Train L and V on the squared loss plus the prior's weight decay at one (attention, P).",
    )
    _common_model_args(tp, one_point=True)
    tp.add_argument("--optimizer", default="adam", choices=OPTIMIZERS, help="optimiser")
    tp.add_argument("--lr", type=float, help="learning rate (default: the library's)")
    tp.add_argument("--steps", type=int, help="optimisation steps (default: the library's)")
    tp.add_argument("--init", choices=TRAIN_INITS, help="initialisation of L (default small)")
    tp.add_argument("--out", help="write the result to this JSON file")
    tp.set_defaults(func=_cmd_train)

    fp = sub.add_parser(
        "figures",
        help="redraw every figure from saved results",
        description="Redraw all figures of a phase-diagram run from its saved point files.",
    )
    fp.add_argument("dir", help="output folder of a phase-diagram run")
    fp.set_defaults(func=_cmd_figures)
    from ._cli_experiments import _add_dynlab, _add_screen, _add_sparse, _add_staircase

    _add_staircase(sub)  # issue 13
    _add_screen(sub)  # issue 14
    _add_sparse(sub)  # issue 15
    _add_dynlab(sub)  # issue 16
    return p


def main(argv: list[str] | None = None) -> int:
    """Run the command line ``argv`` (None: ``sys.argv``, as the ``bayesattn`` command does).

    As a command (argv None), SIGINT / SIGTERM end the process at once with status 130 / 143 after any result
    file being written is in place (:func:`bayesattn.sweep.exit_on_interrupt`); called in-process with a list,
    an interrupt is a KeyboardInterrupt, answered with status 130."""
    if argv is None:
        from .sweep import exit_on_interrupt

        exit_on_interrupt(INTERRUPTED)
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except ValueError as e:
        print(f"bayesattn: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"\n{INTERRUPTED}", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
