"""The command line's one-shot commands: ``sample`` and ``train`` at one point of the phase-diagram config, and
``screen`` of a pretrained model or a checkpoint folder. Each imports its science when it runs."""

from __future__ import annotations

import time


def _one_point(args):
    """(config, attention, P, output file or None) of sample / train, the output path checked before any work."""
    from .cli import model_sets
    from .experiments.copy_head import PhaseDiagram
    from .runtime import check_output_file

    sets = model_sets(args) + list(args.set)
    if args.attention:
        sets.append(f"attention={args.attention}")
    cfg = PhaseDiagram.load_config(args.config, sets)
    P = cfg.P.grid()
    if P.size != 1:  # a config file's grid; --P itself takes one value
        raise ValueError(f"P={P.tolist()}: expected a single value for one point (give --P N)")
    out = check_output_file(args.out, "--out") if args.out else None
    return cfg, cfg.attention[0], int(P[0]), out


def sample_point(args) -> int:
    """``bayesattn sample``: the exact posterior at one (attention, P), printed and optionally saved."""
    from .bayes.posterior import Posterior
    from .bayes.sampling import sample
    from .experiments.copy_head.compute import MCMC, data_record, point_data, point_keys
    from .files import write_json_atomic
    from .provenance import provenance

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


def train_point(args) -> int:
    """``bayesattn train``: one training run at one (attention, P), printed and optionally saved."""
    from .experiments.copy_head.compute import ADAM, data_record, point_data, point_keys
    from .files import write_json_atomic
    from .provenance import provenance
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


def screen_models(args) -> int:
    """``bayesattn screen``: every head of a pretrained model (or GGUF checkpoint series) or of a checkpoint folder."""
    from .experiments.screens import tools as sx

    if bool(args.model) == bool(args.directory):
        raise ValueError("screen: give exactly one of --model NAME... or a checkpoint DIRECTORY")
    from .runtime import check_output_file

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
        from .experiments.screens.figures import head_maps
        from .files import write_json_atomic

        write_json_atomic(out, records)  # a list: one record per head (and checkpoint)
        if ranking:
            write_json_atomic(out.with_name(out.stem + "_ranking.json"), ranking)
        label = " ".join(args.model) if args.model else args.directory
        fig = head_maps(records, out.with_name(out.stem + "_maps.png"), f"{label}: {args.probe}, N={args.N}")
        print(f"bayesattn: wrote {out} and {fig}")
    return 0
