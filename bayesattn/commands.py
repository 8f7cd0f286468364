"""The command line's one-shot commands: ``sample`` and ``train`` at one point of the phase-diagram config, and
``screen`` of a pretrained model or a checkpoint folder. Each imports its science when it runs."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from .experiments import EXPERIMENTS, ConfigError, get_experiment


def model_sets(args) -> list[str]:
    """The --set items that the short model options stand for."""
    sets = []
    for name in ("T", "d", "offset", "tokens", "boundary"):
        if getattr(args, name, None) is not None:
            sets.append(f"task.{name}={getattr(args, name)}")
    for name in ("sigma_A2", "sigma_V2", "sigma2"):
        if getattr(args, name, None) is not None:
            sets.append(f"prior.{name}={getattr(args, name)}")
    if getattr(args, "P", None):
        sets += args.P
    if getattr(args, "seed", None) is not None:
        sets.append(f"seed={args.seed}")
    if getattr(args, "attention", None):
        sets.append("attention=" + ("softmax,linear" if args.attention == "both" else args.attention))
    if getattr(args, "methods", None):
        sets.append(f"methods={args.methods}")
    return sets


# ------------------------------------------------------------------------------------------ commands
def _one_point(args):
    """(config, attention, P) of sample / train; each command checks its --out after its own options (so that a
    refused command leaves no folder behind), before any work."""
    from .experiments.copy_head import PhaseDiagram

    sets = model_sets(args) + list(args.set)
    if args.attention:
        sets.append(f"attention={args.attention}")
    cfg = PhaseDiagram.load_config(args.config, sets)
    P = cfg.P.grid()
    if P.size != 1:  # a config file's grid; --P itself takes one value
        raise ValueError(f"P={P.tolist()}: expected a single value for one point (give --P N)")
    return cfg, cfg.attention[0], int(P[0])


def _as_run(cfg, section: str, used: dict, init: str, inits: list[str]):
    """(the config with ``section`` replaced by what a one-point command runs, the init's key index).

    The index is the init's place in the config's own list, so that ``sample`` and ``train`` draw the keys of
    the phase diagram's point for that init; an init the config does not list takes index 0."""
    data = cfg.to_dict()
    data[section] = {**used, "inits": [init]}
    return type(cfg).load(data, source="the command line"), inits.index(init) if init in inits else 0


def sample_point(args) -> int:
    """``bayesattn sample``: the exact posterior at one (attention, P), printed and optionally saved.

    Each sampler option given on the command line is used; the others are the config's settings for this
    attention's points (``mcmc``, with ``mcmc.by_attention`` applied), so that by default the command samples as
    the phase diagram's point at that P does, from the same keys. The recorded config is the one that ran."""
    from .bayes.posterior import Posterior
    from .bayes.sampling import sample
    from .experiments.copy_head.compute import MCMC, data_record, point_data, point_keys
    from .experiments.sections import PRIOR_ONLY_METHODS
    from .files import write_json_atomic
    from .provenance import provenance
    from .runtime import check_output_file

    cfg, att, P = _one_point(args)
    given = {k: getattr(args, k) for k in ("method", "backend", "num_chains", "num_warmup", "num_samples")}
    eff = cfg.mcmc.effective(att)
    used = {k: eff[k] if v is None else v for k, v in given.items()}
    # loading the config that runs checks it, the sampler pair included, before any data is drawn
    init = args.init or ("prior" if used["method"] in PRIOR_ONLY_METHODS else eff["inits"][0])  # smc: the prior
    cfg, key_index = _as_run(cfg, "mcmc", used, init, eff["inits"])
    out = check_output_file(args.out, "--out") if args.out else None
    mc = cfg.mcmc
    data = point_data(cfg.make_task(), cfg.seed, P)
    rec = data_record(data)
    print(
        f"bayesattn: sample {att} attention, P = {P}, T = {cfg.task.T}, d = {cfg.task.d}, {mc.method} "
        f"({mc.backend}), {mc.num_chains} chains x ({mc.num_warmup} + {mc.num_samples}), {mc.inits[0]} start; "
        f"data sha256 {rec['sha256'][:12]}",
        flush=True,
    )
    post = Posterior(data, attention=att, prior=cfg.make_prior())
    s = sample(
        post,
        point_keys(cfg.seed, MCMC, P, key_index),
        method=mc.method,
        backend=mc.backend,
        num_chains=mc.num_chains,
        num_warmup=mc.num_warmup,
        num_samples=mc.num_samples,
        init=mc.inits[0],
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
                "method": mc.method,
                "init": mc.inits[0],
                "data": rec,
                "result": summ,
                "versions": prov.pop("versions"),
                "provenance": prov,
            },
        )
        print(f"bayesattn: wrote {out}")
    return 0


def train_point(args) -> int:
    """``bayesattn train``: one training run at one (attention, P), printed and optionally saved.

    ``--steps`` and ``--init`` default to the config's ``adam`` section, and so does ``--lr`` for Adam (the other
    optimisers' default rates are the library's); the run is the phase diagram's first Adam run from that init,
    from the same key. The recorded config is the one that ran (its ``adam`` section: this one run)."""
    from .experiments.copy_head.compute import ADAM, data_record, point_data, point_keys
    from .files import write_json_atomic
    from .provenance import provenance
    from .runtime import check_output_file
    from .training import train

    cfg0, att, P = _one_point(args)
    adam = cfg0.adam
    lr = args.lr if args.lr is not None else (adam.lr if args.optimizer == "adam" else None)
    used = {**adam.model_dump(), "seeds": 1, "steps": args.steps or adam.steps}

    def as_run(rate: float):
        return _as_run(cfg0, "adam", {**used, "lr": rate}, args.init or adam.inits[0], adam.inits)

    cfg, key_index = as_run(lr or adam.lr)  # checked before any work; recorded below with the rate that ran
    out = check_output_file(args.out, "--out") if args.out else None
    data = point_data(cfg.make_task(), cfg.seed, P)
    rec = data_record(data)
    init = cfg.adam.inits[0]
    print(
        f"bayesattn: train {att} attention, P = {P}, T = {cfg.task.T}, d = {cfg.task.d}, {args.optimizer} "
        f"for {cfg.adam.steps} steps from {init} init; data sha256 {rec['sha256'][:12]}",
        flush=True,
    )
    t0 = time.perf_counter()
    res = train(
        data,
        cfg.make_prior(),
        att,
        point_keys(cfg.seed, ADAM, P, key_index, 0),
        optimizer=args.optimizer,
        lr=lr,
        steps=cfg.adam.steps,
        init=init,
        record_every=cfg.adam.record_every,
        log_records=cfg.adam.log_records,
        seed=0,
    )
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
                "config": as_run(float(res.config["lr"]))[0].to_dict(),
                "P": P,
                "attention": att,
                "optimizer": args.optimizer,
                "data": rec,
                "result": res.to_dict(),
                "versions": prov.pop("versions"),
                "provenance": prov,
            },
        )
        print(f"bayesattn: wrote {out}")
    return 0


def screen_models(args) -> int:
    """``bayesattn screen``: every head of a pretrained model (or GGUF checkpoint series) or of a checkpoint folder."""
    from .experiments.screens import tools as sx
    from .experiments.screens.config import ModelScreen
    from .runtime import check_output_file

    if bool(args.model) == bool(args.directory):
        raise ValueError("screen: give exactly one of --model NAME... or a checkpoint DIRECTORY")
    model_only = (("--steps", args.steps), ("--chunk", args.chunk), ("--bos", args.bos))
    given = [flag for flag, value in model_only if value] if args.directory else []
    if given:
        raise ValueError(f"{given[0]}: applies to a pretrained model (--model) only, not to a checkpoint directory")
    if args.steps is not None:  # one step per --model file, in increasing order
        sx.series_steps(args.model, args.steps)
    if args.T is not None:  # the probe's own checks of its length, before any model is loaded
        from .diagnostics.screens import PROBES

        try:
            PROBES[args.probe](1, args.T, 1000, args.seed, baseline=args.baseline)
        except ValueError as e:
            raise ValueError(f"--T={args.T}: too short for the {args.probe} probe ({e})") from None
    out = check_output_file(args.out, "--out") if args.out else None
    if args.model:
        cfg = ModelScreen.load(
            {
                "models": args.model,
                "steps": args.steps,
                "probe": args.probe,
                "N": args.N,
                "T": args.T,
                "seed": args.seed,
                "baseline": args.baseline,
                "bos": args.bos,
                "threshold": args.threshold,
                **({} if args.chunk is None else {"chunk": args.chunk}),
            },
            source="screen",
        )
        runs, batch, models = sx.screen_pretrained(cfg, progress=not args.quiet)
        for m in models:
            step = f" (step {m['step']})" if m["step"] is not None else ""
            print(
                f"bayesattn: screened {m['heads']} heads of {m['name']}{step} on {args.N} {args.probe} sequences "
                f"of {batch.T} tokens in {m['wall_s']:.1f} s"
            )
    else:
        runs = []
        for step, net in sx.load_checkpoints(args.directory):
            T = args.T or net.config.T
            batch = sx.probe_batch(
                args.probe,
                args.N,
                T,
                sx.vocab_of(net),
                args.seed,
                context=net.config.T,
                token_range=(0, sx.vocab_of(net)),
                baseline=args.baseline,
            )
            runs.append((step, sx.screen_transformer(net, batch)[0]))
    records, lines, ranking = sx.report_runs(runs, args.threshold)
    for line in lines:
        print(line)
    if ranking:
        print(sx.ranking_line(ranking))
    if out:
        from .experiments.screens.figures import head_maps
        from .files import write_json_atomic

        write_json_atomic(out, records)  # a list: one record per head (and checkpoint)
        if ranking:
            write_json_atomic(out.with_name(out.stem + "_ranking.json"), ranking)
        label = " ".join(args.model) if args.model else args.directory
        fig = head_maps(records, out.with_name(out.stem + "_maps.png"), f"{label}: {args.probe}, N={args.N}")
        print(f"bayesattn: wrote {out} and {fig}")
    return 0


def _compile_cache(args) -> None:
    from .runtime import enable_compile_cache

    enable_compile_cache(disabled=getattr(args, "no_compile_cache", False))


def run_command(args) -> int:
    """``bayesattn run EXPERIMENT`` (and each experiment's own subcommand)."""
    from .runtime import prepare_output_dir
    from .scaleout import check_executor, check_scheduler, sweep_executor
    from .sweep import SweepError, check_reuse, run_experiment

    name = args.experiment
    cls = get_experiment(name)
    sets = list(args.set)
    if name == "phase-diagram":
        sets = model_sets(args) + sets
    if getattr(args, "parts", None) is not None:
        sets.append(f"parts={args.parts}")
    if getattr(args, "seeds", None) is not None:
        sets.append(f"seeds={args.seeds}")
    config = cls.load_config(args.config, sets)
    experiment = cls()
    if getattr(args, "batch", None) is not None:  # a positive integer: the parser checked it
        if "mcmc" not in config.methods:
            raise ValueError(
                f"--batch={args.batch}: MCMC points per program; expected with mcmc among the methods "
                f"(methods={','.join(config.methods)})"
            )
        experiment.mcmc_batch = args.batch
    _compile_cache(args)  # before a check's first compilation: JAX reads the cache settings only then
    experiment.check(config)
    workers = args.workers
    executor_kind = args.executor
    if workers is None and args.executor in ("process", "dask") and not args.scheduler:
        workers = getattr(config, "workers", None)  # the config's workers, as --workers alone would use them
    elif workers is None and args.executor is None and not args.scheduler:
        workers = getattr(config, "workers", 1)
        threads = min(experiment.default_threads, os.cpu_count() or 1)
        if workers == 1 and threads > 1:  # nothing asked for: the experiment's default executor
            executor_kind, workers = "thread", threads
    if args.dask_threads and (args.executor != "dask" or args.scheduler):
        raise ValueError(
            "--dask-threads: local Dask workers as threads; expected with --executor dask and no "
            "--scheduler (an existing cluster has its own workers)"
        )
    check_reuse(args.reuse)  # before the output folder is made, as the executor's options are
    kind = check_executor(executor_kind, workers, args.scheduler, processes=not args.dask_threads)
    if args.scheduler:  # a scheduler that does not answer, before the folder is made
        check_scheduler(args.scheduler)
    out = prepare_output_dir(args.out or Path(DEFAULT_ROOT) / config.name, "--out")
    if args.out is None:
        ignore_results_root(Path(DEFAULT_ROOT))
    with sweep_executor(executor_kind, workers, args.scheduler, processes=not args.dask_threads) as executor:
        try:
            summary = run_experiment(
                experiment,
                config,
                out,
                executor=executor,
                workers=1 if executor is not None else (workers or 1),
                progress=not args.quiet,
                figures=not args.no_figures,
                wait=args.wait,
                reuse=args.reuse,
                on_start=lambda: print(f"bayesattn: {name} '{config.name}' -> {out}  (executor: {kind})", flush=True),
            )
        except SweepError as e:
            print(f"bayesattn: {e}", file=sys.stderr)
            return 1
    figs = f" and {len(summary.get('figures', []))} figure files in {out / 'figures'}/" if not args.no_figures else ""
    print(f"bayesattn: wrote {out / 'summary.json'}{figs}")
    return 0


def _folder_experiment(folder: str):
    """(experiment class, config) of a result folder, read from its run.json."""
    from .files import read_run_info

    info, where = read_run_info(folder), str(Path(folder) / "run.json")
    try:
        cls = get_experiment(info["experiment"])
    except ConfigError as e:
        raise ConfigError(f"{where}: {e}") from None
    return cls, cls.Config.load(info["config"], source=where)


def figures_command(args) -> int:
    """``bayesattn figures DIR``."""
    from .runtime import folder_lock, prepare_output_dir
    from .sweep import verify

    cls, config = _folder_experiment(args.dir)
    if not any(r["ok"] for r in verify(cls().points(config), args.dir).values()):
        raise ValueError(
            f"dir={args.dir!r}: no finished point file of its config, nothing to draw (`bayesattn check {args.dir}`)"
        )
    prepare_output_dir(Path(args.dir) / "figures", "dir")
    # a run writing there draws its figures when it ends (and `bayesattn check` reads the folder meanwhile)
    with folder_lock(
        args.dir, name="dir", advice="it draws the figures when it ends; `bayesattn check` reads the folder meanwhile"
    ):
        paths = cls().figures(Path(args.dir))
    print(f"bayesattn: drew {len(paths)} figure files in {Path(args.dir) / 'figures'}/")
    return 0


def check_command(args) -> int:
    """``bayesattn check DIR``: 0 when complete, 1 otherwise."""
    from .sweep import verify

    cls, config = _folder_experiment(args.dir)
    report = verify(cls().points(config), args.dir)
    bad = 0
    for part, r in report.items():
        print(
            f"{part}: {len(r['ok'])} complete, {len(r['missing'])} missing, {len(r['damaged'])} damaged"
            + (f", {len(r['other'])} of other settings" if r["other"] else "")
        )
        for name in r["missing"]:
            print(f"  missing: {name}")
        for name, why in r["damaged"].items():
            print(f"  damaged: {name} {why}")
        bad += len(r["missing"]) + len(r["damaged"])
    for line in _saved_states(Path(args.dir)):
        print(line)
    print(
        f"bayesattn: {args.dir}: "
        + ("complete" if not bad else f"{bad} point files missing or damaged; rerun the same command to compute them")
    )
    return 0 if not bad else 1


def _saved_states(folder: Path) -> list[str]:
    """One line per long training run in flight in ``folder``: a state it saved between parts or blocks
    (``artifacts/*.npz``, removed when the run ends), with the step it was saved at (of how many), the training
    time before it and when it was written; what a state saved by an older version lacks is left out."""
    from .training.checkpoints import saved_progress

    lines = []
    for path in sorted((folder / "artifacts").glob("*.npz")):
        got = saved_progress(path)
        if got is None:  # another kind of file (a checkpoint of a screens trajectory)
            continue
        wall, steps = got["meta"].get("wall_s"), got["meta"].get("steps")
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(path.stat().st_mtime))
        lines.append(
            f"in progress: {path.relative_to(folder)} saved at step {got['step']}"
            + (f" of {steps}" if isinstance(steps, int) else "")
            + (f" after {wall:.0f} s of training" if isinstance(wall, (int, float)) else "")
            + f" ({when}); the rerun goes on from there"
        )
    return lines


def archive_command(args) -> int:
    """``bayesattn archive DIR --to STORE``."""
    from .store import archive_points

    c = archive_points(args.dir, args.to)
    print(
        f"bayesattn: {args.to}: {c['written']} point files written, {c['unchanged']} unchanged"
        + (f"; {c['missing']} not computed yet" if c["missing"] else "")
        + (f"; {c['damaged']} damaged in {args.dir}, not copied (`bayesattn check {args.dir}`)" if c["damaged"] else "")
    )
    return 0


DEFAULT_ROOT = "results"  # where a run writes without --out: results/<config name>, relative to the current folder


def ignore_results_root(root: Path) -> None:
    """Make git ignore the default result root wherever a command writes it: a ``.gitignore`` holding ``*`` (which
    ignores the folder, itself included), written once, never over a file the user put there."""
    from .files import write_atomic

    ignore = root / ".gitignore"
    if not ignore.exists():
        write_atomic(ignore, lambda f: f.write(b"# written by bayesattn: results are not source files\n*\n"))


LIST_WIDTH = 120  # columns of a `bayesattn list` line


def list_command(args) -> int:
    """``bayesattn list``: every experiment, then one line per named config: its name, its measured run time (the
    config's ``# measured:`` comment) and what it computes (its first comment line, cut to fit the line)."""
    lines = []
    for cls in EXPERIMENTS.values():
        lines.append(f"{cls.name}: {cls.description}")
        configs = sorted(cls.configs().items())
        measured = [f"[{_measured(path) or 'not measured'}]" for _, path in configs]
        names = max((len(name) for name, _ in configs), default=0)  # one experiment's configs share columns
        width = max(map(len, measured), default=0)
        for (name, path), shown in zip(configs, measured, strict=True):
            head = f"  {name:<{names}}  {shown:<{width}}  "
            lines.append(head + _cut(_first_comment(path), max(LIST_WIDTH - len(head), 30)))
    sys.stdout.write("\n".join(lines) + "\n")
    sys.stdout.flush()  # here, so that a closed pipe is met inside the command line's handler (cli.main)
    return 0


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3].rstrip() + "..."


def _first_comment(path: Path) -> str:
    """The first comment line of a TOML file: what the config computes (never its ``# measured:`` line)."""
    for line in path.read_text().splitlines():
        if line.startswith("#") and not line.startswith("# measured:"):
            return line.lstrip("# ").strip()
    return ""


def _measured(path: Path) -> str:
    """A config's measured run time and the conditions it was measured under: its ``# measured:`` comment line."""
    for line in path.read_text().splitlines():
        if line.startswith("# measured:"):
            return line.removeprefix("# measured:").strip()
    return ""
