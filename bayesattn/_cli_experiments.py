"""The ``bayesattn`` subcommands of the related systems, one self-contained block each (parser + command);
:mod:`bayesattn.cli` registers them. Each imports its experiment lazily, so ``bayesattn --help`` stays fast."""

from __future__ import annotations


# ---------------------------------------------------------------------------------------------------------
# `bayesattn staircase`: the staircase of issue 13 (docs/staircase.md); one self-contained block
# ---------------------------------------------------------------------------------------------------------
def _cmd_staircase(args) -> int:
    from .experiments.staircase import StaircaseConfig, run
    from .plots.staircase import draw_all

    cfg = StaircaseConfig.from_toml(args.config)
    if args.parts:
        cfg.parts = args.parts.split(",")
    if args.train_runs:
        cfg.train_only = args.train_runs.split(",")
    out = args.out or f"results/{cfg.name}"
    summary = run(cfg, out, progress=not args.quiet)
    for fig in draw_all(out):
        print(f"wrote {fig}")
    for key, e in summary.get("mcmc", {}).items():
        comp = "" if e["max_competitive"] is None else f", max competitive fraction = {e['max_competitive']:.2f}"
        print(f"{key}: P_k = {e['P_k']}{comp}")
    for r in summary.get("ratio_sweep", []):
        ratio = (
            "not in the P grid" if r["P2/P1"] is None else f"{r['P2/P1']:.2f} ((w_1/w_2)^2 = {r['ratio'] ** -2:.2f})"
        )
        print(f"{r['attention']}/H={r['heads']}/{r['init']}: w_2/w_1 = {r['ratio']:g}: P_2/P_1 = {ratio}")
    if "train" in summary:
        print(f"training stages (steps, per seed): {summary['train']['stages']} (paper: ~330, ~575)")
    if "ode" in summary:
        print(f"ODE stage times: {summary['ode']['stages']}")
    return 0


def _add_staircase(sub) -> None:
    sc = sub.add_parser(
        "staircase",
        help="the staircase: H-head posterior over P, minimal-model training, ODE",
        description="Run the staircase of docs/staircase.md (resumable: finished points are kept).",
    )
    sc.add_argument(
        "--config",
        default="staircase",
        help="a TOML file, or the name of one in phase_diagrams/staircase/ (default: staircase)",
    )
    sc.add_argument("--parts", help="comma-separated subset of mcmc,train,ode (default: the config's)")
    sc.add_argument(
        "--train-runs",
        help="comma-separated training runs to compute: main and/or the names of the "
        "config's train_variants (default: all)",
    )
    sc.add_argument("--out", help="output folder (default: results/<config name>)")
    sc.add_argument("--quiet", action="store_true", help="no progress bars")
    sc.set_defaults(func=_cmd_staircase)


# ---------------------------------------------------------------------------------------------------------
# `bayesattn screen`: circuit screens of issue 14 (docs/screens.md); one self-contained block
# ---------------------------------------------------------------------------------------------------------
def _cmd_screen(args) -> int:
    from .diagnostics.screens import THRESHOLD
    from .experiments import screens as sx

    sources = [x for x in (args.model, args.directory, args.train, args.bayes) if x]
    if len(sources) != 1:
        raise ValueError(
            "screen: give exactly one of --model NAME, a checkpoint DIRECTORY, --train CONFIG or --bayes CONFIG"
        )
    if args.bayes:
        from .experiments import screens_bayes as sb

        cfg = sb.BayesLensConfig.from_toml(args.bayes)
        out = args.out or f"results/{cfg.name}"
        s = sb.run(cfg, out, progress=not args.quiet)
        print(f"wrote {sb.figure(out)}")
        for p in s["points"]:
            print(
                f"P = {p['P']}: previous-token selectivity median {p['selectivity_median']:.1f}x, "
                f"PR {p['pr_mean']:.2f} +- {p['pr_sd']:.2f} (gaussian tokens {p['pr_gaussian_mean']:.2f}), "
                f"m = {p['m']:.3f}"
            )
        print(
            f"selectivity median reaches {THRESHOLD:.0f}x at P = {s['P_selectivity_threshold']}; PR half-rise at "
            f"P = {s['P_pr_half_rise']}"
        )
        if s.get("theory"):
            th = s["theory"]
            print(
                f"theory ({len(th['points'])} P): selectivity median reaches {THRESHOLD:.0f}x at P = "
                f"{th['P_selectivity_threshold']}; many-sequence PR half-rise at P = {th['P_pr_half_rise']} "
                f"(NUTS: {s['P_pr_limit_half_rise']})"
            )
        return 0
    if args.train:
        from .experiments.screens_trajectory import TrajectoryConfig, run
        from .plots.screens import draw_all

        cfg = TrajectoryConfig.from_toml(args.train)
        out = args.out or f"results/{cfg.name}"
        s = run(cfg, out, progress=not args.quiet)
        for fig in draw_all(out):
            print(f"wrote {fig}")
        b = s["induction_bump"]
        print(
            f"training {s['train_wall_s']:.0f} s, screening {s['screen_wall_s']:.0f} s; steepest loss drop between "
            f"steps {b['steepest_drop_between']} ({b['loss_before']:.2f} -> {b['loss_after']:.2f}); first "
            f"previous-token head per layer {b['first_previous_token_head']}, first induction head (50x) "
            f"{b['first_induction_head']}"
        )
        return 0
    from .sweep import check_output_file

    out = check_output_file(args.out, "--out") if args.out else None
    runs = []
    if args.model:
        from .models.gguf_llama import load_model

        series = len(args.model) > 1  # a checkpoint series: one probe batch, the PR-integral ranking over steps
        steps = sx.series_steps(args.model, args.steps) if series else [None]
        batch = None
        for name, step in zip(args.model, steps):
            model = load_model(name)
            if batch is None:
                T = args.T or min(256, model.config.context)
                bos = model.config.bos_token_id if args.bos else None
                V = model.config.vocab
                batch = sx.probe_batch(
                    args.probe,
                    args.N,
                    T,
                    V,
                    args.seed,
                    context=model.config.context,
                    token_range=(min(100, V // 4), min(10000, V)),
                    bos=bos,
                )
            res, wall = sx.timed(sx.screen_llama, model, batch, args.chunk)
            runs.append((step, res))
            print(
                f"bayesattn: screened {res.shape[0] * res.shape[1]} heads of {model.config.name}"
                f"{f' (step {step})' if series else ''} on {args.N} {args.probe} sequences of {batch.T} tokens "
                f"in {wall:.1f} s"
            )
            del model
    else:
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
            )
            runs.append((step, sx.screen_transformer(net, batch)[0]))
    records = []
    for step, res in runs:
        if len(runs) > 1 or step is not None:
            print(f"-- checkpoint step {step}")
        for line in sx.summarize_heads(res, args.threshold):
            print(line)
        records += [({"step": step} if step is not None else {}) | r for r in res.records(args.threshold)]
    ranking = None
    if len(runs) > 1 and all(s is not None for s, _ in runs):
        ranking = sx.series_ranking(runs)
        top = ", ".join(f"L{l}H{h} {v:.3g}" for (l, h), v in zip(ranking["order"][:10], ranking["integral"]))
        print(
            f"PR-integral ranking over steps {ranking['steps'][0]}..{ranking['steps'][-1]} (elbow at rank "
            f"{ranking['elbow_k'] + 1}): {top}"
        )
    if out:
        from .plots.screens import head_maps
        from .sweep import write_json_atomic

        write_json_atomic(out, records)  # a list: one record per head (and checkpoint)
        if ranking:
            write_json_atomic(out.with_name(out.stem + "_ranking.json"), ranking)
        label = " ".join(args.model) if args.model else args.directory
        fig = head_maps(records, out.with_name(out.stem + "_maps.png"), f"{label}: {args.probe}, N={args.N}")
        print(f"bayesattn: wrote {out} and {fig}")
    return 0


def _add_screen(sub) -> None:
    sc = sub.add_parser(
        "screen",
        help="circuit screens: induction / previous-token / BOS heads of a model",
        description="Screen every head (selectivity per class, PR, detection scores) of a pretrained "
        "model (--model smollm2) or of the checkpoints in a directory; or train the small "
        "transformer of a named config and screen its checkpoints (--train). docs/screens.md",
    )
    sc.add_argument("directory", nargs="?", help="a checkpoint directory (step_*.eqx, checkpoints/, or network.eqx)")
    sc.add_argument(
        "--model",
        nargs="+",
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
        "--train",
        metavar="CONFIG",
        help="train and screen: a TOML file or a name in phase_diagrams/screens/ (e.g. screens)",
    )
    sc.add_argument(
        "--bayes",
        metavar="CONFIG",
        help="the Bayesian copy head across P: a TOML file or a name in phase_diagrams/screens/ (e.g. screens_bayes)",
    )
    sc.add_argument("--probe", default="repeated_pair", choices=["repeated_pair", "repeated_sequence"])
    sc.add_argument("--N", type=int, default=64, help="probe sequences (default 64)")
    sc.add_argument("--T", type=int, help="probe length (default: 256 for a pretrained model, the context otherwise)")
    sc.add_argument("--seed", type=int, default=0, help="probe seed")
    sc.add_argument("--bos", action="store_true", help="put the model's BOS token at position 0")
    sc.add_argument("--threshold", type=float, default=30.0, help="selectivity a head must reach (default 30)")
    sc.add_argument("--chunk", type=int, default=8, help="sequences per forward pass of a pretrained model")
    sc.add_argument("--out", help="JSON file of records (figures beside it); with --train / --bayes, the output folder")
    sc.add_argument("--quiet", action="store_true")
    sc.set_defaults(func=_cmd_screen)


# ---------------------------------------------------------------------------------------------------------
# `bayesattn dynlab`: the training-dynamics laboratory of issue 16 (docs/dynlab.md); one self-contained block
# ---------------------------------------------------------------------------------------------------------
def _cmd_dynlab(args) -> int:
    from .experiments.dynlab import DynlabConfig, run
    from .plots.dynlab import draw_all

    cfg = DynlabConfig.from_toml(args.config)
    if args.seeds is not None:
        cfg.seeds = args.seeds
        cfg.__post_init__()
    out = args.out or f"results/{cfg.name}"
    summary = run(cfg, out, progress=not args.quiet)
    if not args.no_figures:
        for fig in draw_all(out):
            print(f"wrote {fig}")
    for lab, e in summary.get("clustering_head", {}).items():
        print(
            f"{lab}: success {e['success']}/{e['runs']} (test acc > 0.98), spikes per run {e['spikes']} "
            f"(mean {e['mean_spikes']:.2f}), median lambda_max ratio at/before spike "
            f"{e['median_lambda_ratio_at_spike']}"
        )
        for d in e["diverged"]:
            print(f"  diverged: seed {d['seed']} at epoch {d['epoch']}")
    for lab, e in summary.get("focus_dilution", {}).items():
        mean = "n/a" if e["mean_cycles"] is None else f"{e['mean_cycles']:.2f}"
        print(
            f"{lab}: cycles per seed {e['cycles']} (seeds {e['seeds']}, mean {mean}), first focus at steps "
            f"{e['first_focus_step']}"
        )
        for d in e["diverged"]:
            print(f"  diverged: seed {d['seed']} at step {d['step']}")
    if "equilibrium" in summary:
        eq = summary["equilibrium"]
        print(
            "posterior-mean attention entropy vs P (NUTS): "
            + ", ".join(f"T={T} P={P}: {h:.3f}" for T, P, h in zip(eq["T"], eq["P"], eq["entropy"]))
        )
    for T, th in summary.get("equilibrium_theory", {}).items():
        print(f"theory, T={T}: " + ", ".join(f"P={P:g}: {h:.3f}" for P, h in zip(th["P"], th["posterior"])))
    return 0


def _add_dynlab(sub) -> None:
    dl = sub.add_parser(
        "dynlab",
        help="training dynamics: clustering heads, focus-dilution cycles",
        description="Run a training-dynamics experiment of docs/dynlab.md (resumable: finished "
        "points are kept) and draw its figures.",
    )
    dl.add_argument(
        "--config",
        default="clustering_head",
        help="a TOML file, or the name of one in phase_diagrams/dynlab/ (clustering_head, "
        "focus_dilution, and their _full versions; default: clustering_head)",
    )
    dl.add_argument("--seeds", type=int, help="number of seeds per setting (default: the config's)")
    dl.add_argument("--out", help="output folder (default: results/<config name>)")
    dl.add_argument("--no-figures", action="store_true", help="skip drawing figures")
    dl.add_argument("--quiet", action="store_true", help="no progress bars")
    dl.set_defaults(func=_cmd_dynlab)


# `bayesattn sparse`: sparse attention patterns of issue 15 (docs/sparse.md); one self-contained block
# ---------------------------------------------------------------------------------------------------------
def _cmd_sparse(args) -> int:
    from .experiments.sparse import SparseConfig, run
    from .plots.sparse import draw_all

    cfg = SparseConfig.from_toml(args.config)
    if args.parts:
        cfg.parts = args.parts.split(",")
    if args.seeds is not None:
        cfg.seeds = args.seeds
    cfg.validate()
    out = args.out or f"results/{cfg.name}"
    summary = run(cfg, out, progress=not args.quiet)
    for fig in draw_all(out):
        print(f"wrote {fig}")
    for part in ("grid", "heads", "head_dim", "mixer"):
        for e in summary.get(part, []):
            t = "-" if e["t_median"] is None else f"{e['t_median']:.0f} ({e['t_min']}-{e['t_max']})"
            print(
                f"{part}: {e['model']} S={e['S']} s={e['s']} H={e['heads']} head_dim={e['head_dim']}: "
                f"solved {e['solved']}/{e['seeds']}, median t* {t}, plateau {e['plateau']:.3f}, IoU {e['iou']:.2f}"
            )
    for key, e in summary.get("bayes", {}).items():
        print(f"bayes {key}: P_c = {e['P_c']} (MCMC), {summary.get('theory', {}).get(key)} (theory)")
    return 0


def _add_sparse(sub) -> None:
    sp = sub.add_parser(
        "sparse",
        help="sparse attention patterns: emergence over seeds, heads, Mixer, Bayesian P_c",
        description="Run the sparse-pattern experiment of docs/sparse.md (resumable).",
    )
    sp.add_argument(
        "--config",
        default="sparse_emergence",
        help="a TOML file, or the name of one in phase_diagrams/sparse/ (default: sparse_emergence)",
    )
    sp.add_argument(
        "--parts", help="comma-separated subset of grid,heads,head_dim,mixer,bayes,theory (default: the config's)"
    )
    sp.add_argument("--seeds", type=int, help="seeds per training point (default: the config's)")
    sp.add_argument("--out", help="output folder (default: results/<config name>)")
    sp.add_argument("--quiet", action="store_true", help="no progress bars")
    sp.set_defaults(func=_cmd_sparse)
