"""The ``bayesattn`` command. Thin: parses arguments into a RunConfig and calls the library.

    bayesattn phase-diagram [--config NAME|PATH] [--attention softmax|linear|both] [--methods theory,mcmc,adam]
                            [--T ..] [--d ..] [--sigma-A2 ..] [--sigma-V2 ..] [--sigma2 ..] [--P a:b:n | --P v1,v2]
                            [--out DIR] [--set section.key=value ...]
    bayesattn sample ...      exact-posterior sampling at one point
    bayesattn train ...       Adam / Langevin training at one point
    bayesattn figures DIR     redraw every figure from saved results

Bad arguments exit with status 2 and one line on stderr. Ctrl-C leaves finished points on disk; rerunning
the same command resumes.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path


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


def _common_model_args(p: argparse.ArgumentParser, *, P_help: str) -> None:
    g = p.add_argument_group("model (override the config)")
    g.add_argument("--config", help="named config in phase_diagrams/ (e.g. default, finite_size) or a TOML path")
    g.add_argument("--attention", choices=["softmax", "linear", "both"], help="attention map(s) to run")
    g.add_argument("--T", type=int, help="sequence length T (>= 2)")
    g.add_argument("--d", type=int, help="token dimension d (>= 1)")
    g.add_argument("--offset", type=int, help="copy offset, 1..T-1 (1: previous token)")
    g.add_argument("--tokens", choices=["gaussian", "onehot"], help="token distribution")
    g.add_argument("--boundary", choices=["cyclic", "causal"], help="boundary condition of the copy task")
    g.add_argument("--sigma-A2", type=float, dest="sigma_A2", help="prior variance of the attention logits")
    g.add_argument("--sigma-V2", type=float, dest="sigma_V2", help="prior variance scale of the readout (V_ij ~ N(0, sigma_V2/d))")
    g.add_argument("--sigma2", type=float, help="noise variance (= Langevin temperature)")
    g.add_argument("--P", type=_P_grid, help=P_help)
    g.add_argument("--seed", type=int, help="run seed; data, sampler and training keys are folded from it")
    g.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override any config field by dotted key, e.g. --set mcmc.num_chains=4 (repeatable)")


def _config_from_args(args):
    from .experiments import RunConfig

    cfg = RunConfig.from_toml(args.config) if args.config else RunConfig()
    if args.attention:
        cfg = cfg.override("attention", ["softmax", "linear"] if args.attention == "both" else [args.attention])
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

    cfg = _config_from_args(args)
    out = Path(args.out or f"phase_diagrams/{cfg.name}")
    print(f"bayesattn: phase diagram '{cfg.name}' -> {out}  (attention: {', '.join(cfg.attention)}; "
          f"methods: {', '.join(cfg.methods)}; P: {cfg.P.grid().tolist()})", flush=True)
    run_phase_diagram(cfg, out, progress=not args.quiet, figures=not args.no_figures)
    print(f"bayesattn: wrote {out / 'summary.json'}" + ("" if args.no_figures else f" and {out / 'figures'}/"))
    return 0


def _one_point(args):
    cfg = _config_from_args(args)
    P = cfg.P.grid()
    if P.size != 1:
        raise ValueError(f"--P={P.tolist()}: expected a single value for one point")
    return cfg, int(P[0])


def _cmd_sample(args) -> int:
    from .experiments import MCMC, DATA, point_keys
    from .bayes.posterior import Posterior
    from .bayes.sampling import sample
    from .sweep import package_versions, write_json_atomic

    cfg, P = _one_point(args)
    att = cfg.attention[0]
    data = cfg.make_task().sample(point_keys(cfg.seed, DATA, P), P)
    post = Posterior(data, attention=att, prior=cfg.make_prior())
    s = sample(post, point_keys(cfg.seed, MCMC, P, 0), method=args.method, backend=args.backend,
               num_chains=args.num_chains, num_warmup=args.num_warmup, num_samples=args.num_samples,
               init=args.init, progress=not args.quiet)
    summ = s.summary()
    for x in ("m", "q", "u"):
        print(f"{x} = {summ[x]['mean']:.4f} +- {summ[x]['se']:.4f}   (ESS {summ[x]['ess_bulk']:.0f}, R-hat {summ[x]['r_hat']:.3f})")
    if "log_evidence" in summ:
        print(f"log evidence (per SMC run): {summ['log_evidence']}; mode weights: {summ.get('mode_weights')}")
    diag = summ["diagnostics"]
    print(f"divergences: {diag.get('num_divergent')}, gradient evaluations: {diag.get('num_grad_evals')}, "
          f"wall time {float(diag.get('wall_time_s', float('nan'))):.1f} s")
    if args.out:
        write_json_atomic(Path(args.out), {"config": cfg.to_dict(), "P": P, "attention": att, "method": args.method,
                                           "init": args.init, "result": summ, "versions": package_versions()})
        print(f"bayesattn: wrote {args.out}")
    return 0


def _cmd_train(args) -> int:
    from .experiments import ADAM, DATA, point_keys
    from .sweep import package_versions, write_json_atomic
    from .training import train

    cfg, P = _one_point(args)
    att = cfg.attention[0]
    task = cfg.make_task()
    data = task.sample(point_keys(cfg.seed, DATA, P), P)
    kw = {k: v for k, v in {"lr": args.lr, "steps": args.steps, "init": args.init}.items() if v is not None}
    t0 = time.perf_counter()
    res = train(data, cfg.make_prior(), att, point_keys(cfg.seed, ADAM, P, 0), optimizer=args.optimizer, **kw)
    fin = res.final_order_parameters
    print(f"final m = {float(fin['m']):.4f}, q = {float(fin['q']):.4f}, u = {float(fin['u']):.4f}  "
          f"({time.perf_counter() - t0:.1f} s)")
    if args.out:
        write_json_atomic(Path(args.out), {"config": cfg.to_dict(), "P": P, "attention": att, "result": res.to_dict(),
                                           "versions": package_versions()})
        print(f"bayesattn: wrote {args.out}")
    return 0


def _cmd_figures(args) -> int:
    from .plots import draw_all

    out = Path(args.dir)
    if not (out / "points").is_dir():
        raise ValueError(f"dir={str(out)!r}: no saved results there (expected {out / 'points'}/ from a phase-diagram run)")
    paths = draw_all(out)
    print(f"bayesattn: drew {len(paths)} figure files in {out / 'figures'}/")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="bayesattn", description="Bayesian theory of copy-head emergence: phase diagrams, exact "
                "posterior sampling and training of a single attention layer on the copy task.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    pd = sub.add_parser("phase-diagram", help="theory + MCMC + Adam over P; writes results, summary.json, figures",
                        description="Run the theory and, where asked, sampling and training over a grid of P. "
                        "With no arguments: the embedded default config.")
    _common_model_args(pd, P_help="P grid: start:stop:num (log-spaced) or v1,v2,...")
    pd.add_argument("--methods", type=lambda s: [m for m in s.split(",") if m],
                    help="comma-separated subset of theory,mcmc,adam")
    pd.add_argument("--out", help="output folder (default results/<config name>)")
    pd.add_argument("--workers", type=int, help="grid points computed in parallel processes (default 1)")
    pd.add_argument("--no-figures", action="store_true", help="skip drawing figures")
    pd.add_argument("--quiet", action="store_true", help="no progress bars")
    pd.set_defaults(func=_cmd_phase_diagram)

    sp = sub.add_parser("sample", help="sample the exact posterior over L at one point",
                        description="Sample the closed-form posterior over the attention matrix at one (attention, P).")
    _common_model_args(sp, P_help="the number of training sequences (one value)")
    sp.add_argument("--method", default="nuts", choices=["nuts", "hmc", "mala", "smc"], help="sampler")
    sp.add_argument("--backend", default="blackjax", choices=["blackjax", "numpyro"], help="library")
    sp.add_argument("--num-chains", type=int, default=4, help="chains, run vectorised")
    sp.add_argument("--num-warmup", type=int, default=500, help="warm-up (adaptation) steps per chain")
    sp.add_argument("--num-samples", type=int, default=1000, help="draws per chain")
    sp.add_argument("--init", default="cold", choices=["cold", "hot", "prior"], help="chain initialisation")
    sp.add_argument("--out", help="write the summary to this JSON file")
    sp.add_argument("--quiet", action="store_true", help="no progress bar")
    sp.set_defaults(func=_cmd_sample)

    tp = sub.add_parser("train", help="train the attention network at one point (Adam or Langevin)",
                        description="Train L and V on the squared loss plus the prior's weight decay at one (attention, P).")
    _common_model_args(tp, P_help="the number of training sequences (one value)")
    tp.add_argument("--optimizer", default="adam", choices=["adam", "langevin"], help="optimiser")
    tp.add_argument("--lr", type=float, help="learning rate (default: the library's)")
    tp.add_argument("--steps", type=int, help="optimisation steps (default: the library's)")
    tp.add_argument("--init", choices=["small", "hot"], help="initialisation of L")
    tp.add_argument("--out", help="write the result to this JSON file")
    tp.set_defaults(func=_cmd_train)

    fp = sub.add_parser("figures", help="redraw every figure from saved results",
                        description="Redraw all figures of a phase-diagram run from its saved point files.")
    fp.add_argument("dir", help="output folder of a phase-diagram run")
    fp.set_defaults(func=_cmd_figures)
    _add_staircase(sub)  # issue 13
    return p


# ---------------------------------------------------------------------------------------------------------
# `bayesattn staircase`: the staircase of issue 13 (docs/staircase.md); one self-contained block
# ---------------------------------------------------------------------------------------------------------
def _cmd_staircase(args) -> int:
    from .experiments.staircase import StaircaseConfig, run
    from .plots.staircase import draw_all

    cfg = StaircaseConfig.from_toml(args.config)
    if args.parts:
        cfg.parts = args.parts.split(",")
    out = args.out or f"results/{cfg.name}"
    summary = run(cfg, out, progress=not args.quiet)
    for fig in draw_all(out):
        print(f"wrote {fig}")
    for key, e in summary.get("mcmc", {}).items():
        print(f"{key}: P_k = {e['P_k']}, max competitive fraction = {e['max_competitive']:.2f}")
    if "train" in summary:
        print(f"training stages (steps, per seed): {summary['train']['stages']} (paper: ~330, ~575)")
    if "ode" in summary:
        print(f"ODE stage times: {summary['ode']['stages']}")
    return 0


def _add_staircase(sub) -> None:
    sc = sub.add_parser("staircase", help="the staircase: H-head posterior over P, minimal-model training, ODE",
                        description="Run the staircase of docs/staircase.md (resumable: finished points are kept).")
    sc.add_argument("--config", default="staircase",
                    help="a TOML file, or the name of one in phase_diagrams/staircase/ (default: staircase)")
    sc.add_argument("--parts", help="comma-separated subset of mcmc,train,ode (default: the config's)")
    sc.add_argument("--out", help="output folder (default: results/<config name>)")
    sc.add_argument("--quiet", action="store_true", help="no progress bars")
    sc.set_defaults(func=_cmd_staircase)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command in ("sample", "train") and args.attention == "both":
        parser.exit(2, "bayesattn: error: --attention both is only for phase-diagram\n")
    try:
        return args.func(args)
    except ValueError as e:
        print(f"bayesattn: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\nbayesattn: interrupted; finished points are on disk, rerun the same command to resume",
              file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
