"""Benchmark: many chains in lockstep (ChEES-HMC) against the NUTS default; every ratio from one process.

    python benchmarks/bench_ensemble.py                       # all sections (long on 2 shared cores)
    python benchmarks/bench_ensemble.py --only ess --T 32     # one section: ess | split | floor | warmup | grad | sweep
    python benchmarks/bench_ensemble.py --only grad --K 1 4 16 64 256 1024

Sections
- ess: for each T (softmax copy task, d = 8, P = 1000, sigma2 = 400, one data set): the NUTS default (4 chains x
  (500 warm-up + 1000 draws), chains one after another on a CPU) and ``method="chees"`` with K chains in one
  vmapped program (K x (``--ess-warmup`` (500) warm-up + ``--ess-draws`` (max(100, 16000 / K)) draws)). Per
  run: the mean of m and its standard error, ESS of m (split chains), sampling wall time (warm-up included,
  compilation apart), ESS/s and its ratio to NUTS, time per chain-gradient (wall / gradient evaluations)
  against the flop count of one value-and-grad (``flops_per_grad``) at the measured float64 matmul peak of
  this process. T = 32 starts cold; T = 64 starts
  hot (P = 1000 is inside its coexistence window, docs/theory.md, where the copy branch is the stable one; a
  cold many-chain start can stay on the metastable branch, which is no speed comparison). ``--branch-starts``
  adds each ChEES run again from the theory's stable branch (``bayesattn.branch_starts`` with
  ``phase_curve``'s m at this P; the theory's time is printed apart) with each of ``--branch-warmup`` warm-up
  lengths (default: ``--ess-warmup``). ``--stored-floor`` runs each ChEES row with ``stored_floor=False`` and
  ``True`` (the warm-up's length floor from blackjax's covariance or from stored positions,
  ``bayesattn.bayes.samplers.chees_loop``; by default the sampler chooses). ``--repeats R`` runs every row R
  times with new sampler keys (the first repeat is the single run) and prints each ChEES row's ratios, their
  geometric mean and a 95% interval; ``--first-repeat F`` numbers them from F, so that a later run adds new
  repeats beside an earlier one's; ``--no-full-warmup`` leaves out the row with every chain adapting.
- split: where a long ChEES run's time goes (``bench_split``): K x (``--ess-warmup`` + ``--ess-draws``
  (1000)) against the NUTS default, the warm-up's seconds and share of the run, and the ratio the run would
  reach with a free warm-up.
- floor: what blackjax's ChEES trajectory-length floor costs per warm-up step (its full covariance update), against
  the same top eigenvalue from the window's stored positions (``bench_floor``), K = ``--chains`` at T = ``--T``.
- warmup: the ChEES warm-up alone, K = ``--chains`` chains adapting, with its length floor from blackjax's
  covariance and from stored positions (``stored_floor=False`` / ``True``, ``bench_warmup``).
- grad: time per chain-gradient of K chains' value-and-grad, ``vmap``-ed, in a bare jitted loop (no sampler),
  K = 1, 4, 16, 64, 256 at T = 32 and 64, against the flop count: the K chains' contractions with the
  statistics are one matrix-matrix product.
- sweep: the 16-point NUTS sweep of benchmarks/bench_sampling.py (T = 32, beta = 7 at P = 1000, P = 250..4000,
  cold, 4 chains x (500 + 1000)) and the same points with ChEES (``--sweep-chains`` x (``--sweep-warmup`` +
  ``--sweep-draws``)) through ``bayesattn.sweep.run_sweep``: total times, ESS of m per point and the time
  per point scaled to the NUTS point's ESS; per point |<m>_chees - <m>_nuts| in combined standard errors.
  ``--sweep-keys per-point`` (the default) folds P into each point's sampler key, as the phase diagram does.
  ``--sweep-keys shared`` gives every point the same key (the runs reported before 2026-11-30, evening):
  neighbouring points then repeat one another's Monte Carlo error, and their differences are not independent.
  Each method's sweep runs in a fresh process of its own (timed after its imports, executor start included),
  so that neither reuses the other's compilations: before 2026-12-01 both ran in this process, NUTS first,
  and the ChEES sweep found every P's data draws and statistics already compiled (~0.7 s a point).
  ``--sweep-executor thread`` computes ``--sweep-workers`` (2) points at once in threads of that process
  (one point's data, statistics and summaries overlap the other's sampling); ``dask`` runs each sweep on a
  fresh Dask LocalCluster of ``--sweep-workers`` worker processes (its start and each worker's compilations
  inside the total), ``dask-thread`` on one whose workers are threads (``bench_scaleout.fresh_sweep``).
"""

from __future__ import annotations

import argparse
import platform
import time

import jax
import jax.numpy as jnp
import numpy as np
from bench_scaleout import SWEEP_KINDS, fresh_sweep, in_fresh_processes  # benchmarks/, the script's own folder

import bayesattn as ba


def flops_per_grad(T: int, d: int) -> float:
    """Multiply-adds x 2 of one value of the closed form, x 3 for value-and-grad: the (T x T)^T (T x T)
    product, the two mat-vecs with the statistics (T^2 x d^2 and T^2 x d d_out) and the d x d Cholesky."""
    value = 2 * (T**3 + T * T * d * d + T * T * d * d + d**3 / 3)
    return 3 * value


def peak_flops(n: int = 256, reps: int = 20) -> float:
    """Measured float64 matmul rate of this process (one n x n x n product, best of ``reps``)."""
    a = jnp.ones((n, n))
    f = jax.jit(lambda x: x @ x)
    jax.block_until_ready(f(a))
    best = np.inf
    for _ in range(reps):
        t0 = time.perf_counter()
        jax.block_until_ready(f(a))
        best = min(best, time.perf_counter() - t0)
    return 2 * n**3 / best


def posterior(T, P, seed=0, sigma2=400.0):
    data = ba.CopyTask(T=T, d=8).sample(jax.random.key(seed), P)
    return ba.Posterior(data, "softmax", ba.Prior(1.0, 100.0, sigma2))


def run(post, key, **kw):
    s = ba.sample(post, key, **kw)
    d = s.diagnostics
    m = s.summary()["m"]
    return {
        "mean": m["mean"],
        "se": m["se"],
        "ess": d["m"]["ess_bulk"],
        "wall": d["wall_time_s"],
        "compile": d["compile_time_s"],
        "grads": d["num_grad_evals"],
        "r_hat": d["m"]["r_hat"],
    }


def sampler_key(args, offset, rep):
    """The sampler key ``seed + offset`` of repeat ``rep``: repeat 0 is the single run's key, and each later repeat
    folds its number into it."""
    key = jax.random.key(args.seed + offset)
    return jax.random.fold_in(key, rep) if rep else key


def bench_ess(args, peak):
    for T in args.T:
        post = posterior(T, args.P, args.seed, args.sigma2)
        init = "cold" if T <= 32 else "hot"
        ideal = flops_per_grad(T, 8) / peak
        m = m_branch(args, T) if args.branch_starts else None
        print(
            f"\n[ess] T = {T}, d = 8, P = {args.P}, sigma2 = {args.sigma2:g}, init {init}: ideal value-and-grad "
            f"{ideal * 1e6:.2f} us"
        )
        print("| sampler | <m> +- se | ESS(m) | wall (s) | compile (s) | ESS/s | x NUTS | us / chain-grad | x ideal |")
        print("|---|---|---|---|---|---|---|---|---|")
        nuts = dict(num_chains=4, num_warmup=500, num_samples=1000, init=init)
        ratios = {}  # ChEES row -> its ratio to NUTS's ESS/s in each repeat
        for rep in range(args.first_repeat, args.first_repeat + args.repeats):
            base = run(post, sampler_key(args, 1, rep), **nuts)
            rows = {"nuts (4 x 1000)": base}
            for K in args.chains:
                n = args.ess_draws or max(100, 16000 // K)
                chees = dict(method="chees", num_chains=K, num_warmup=args.ess_warmup, num_samples=n, init=init)
                rows |= chees_rows(args, post, f"chees (K = {K} x ({args.ess_warmup} + {n}))", chees, rep)
                if m is not None:
                    rows |= branch_rows(args, post, K, n, m, rep)
            for name, r in rows.items():
                rate = r["ess"] / r["wall"]
                per = r["wall"] / r["grads"]
                ratio = rate / (base["ess"] / base["wall"])
                if r is not base:
                    ratios.setdefault(name, []).append(ratio)
                print(
                    f"| {name}{f', repeat {rep}' if args.repeats > 1 else ''} | {r['mean']:.4f} +- {r['se']:.4f} | "
                    f"{r['ess']:.0f} | {r['wall']:.1f} | {r['compile']:.1f} | {rate:.0f} | {ratio:.1f} | "
                    f"{per * 1e6:.1f} | {per / ideal:.1f} |",
                    flush=True,
                )
        if args.repeats > 1:
            print_ratio_intervals(ratios)


def print_ratio_intervals(ratios):
    """Each sampler's ratio to NUTS over the repeats: the geometric mean and a 95% interval from Student's t on
    the log ratios (each repeat pairs a ChEES run with the NUTS run beside it in time)."""
    from scipy import stats

    print("| sampler | x NUTS, each repeat | geometric mean | 95% interval |")
    print("|---|---|---|---|")
    for name, xs in ratios.items():
        logs = np.log(xs)
        half = stats.t.ppf(0.975, len(logs) - 1) * logs.std(ddof=1) / np.sqrt(len(logs))
        lo, mid, hi = np.exp(logs.mean() - half), np.exp(logs.mean()), np.exp(logs.mean() + half)
        each = ", ".join(f"{x:.2f}" for x in xs)
        print(f"| {name} | {each} | {mid:.2f} | {lo:.2f}-{hi:.2f} |", flush=True)


def chees_rows(args, post, name, chees, rep=0):
    """The ChEES run ``chees`` (keyword arguments of ``ba.sample``) and the same run with each few-chain warm-up
    of --warmup-chains, one row each; with --stored-floor each of them with ``stored_floor=False`` and ``True``
    (blackjax's covariance and the stored positions for the length floor; by default the sampler chooses)."""
    variants = {} if args.no_full_warmup and args.warmup_chains else {name: {}}
    for w in args.warmup_chains:
        variants[f"{name}, {w} adapt + {args.spread_steps} spread"] = dict(
            warmup_chains=w, spread_steps=args.spread_steps
        )
    if args.stored_floor:
        variants = {
            f"{v}, {label}": dict(opts, stored_floor=on)
            for on, label in ((False, "covariance floor"), (True, "stored floor"))
            for v, opts in variants.items()
        }
    return {v: run(post, sampler_key(args, 2, rep), **chees, **opts) for v, opts in variants.items()}


def m_branch(args, T):
    """The theory's stable-branch copy weight at (T, P, sigma2), printed with the time it took."""
    t0 = time.perf_counter()
    pc = ba.theory.phase_curve(ba.CopyTask(T=T, d=8), ba.Prior(1.0, 100.0, args.sigma2), "softmax", [float(args.P)])
    m = float(pc.stable["m"][0])
    print(f"[ess] T = {T}: theory's stable branch m = {m:.4f} ({time.perf_counter() - t0:.1f} s)", flush=True)
    return m


def branch_rows(args, post, K, n, m, rep=0):
    """ChEES K x (W + n) from branch starts, for each W of --branch-warmup, every chain adapting and each
    --warmup-chains."""
    init = ba.branch_starts(post, sampler_key(args, 3, rep), K, m)
    rows = {}
    for W in args.branch_warmup or [args.ess_warmup]:
        chees = dict(method="chees", num_chains=K, num_warmup=W, num_samples=n, init=init)
        rows |= chees_rows(args, post, f"chees (K = {K} x ({W} + {n})), branch starts", chees, rep)
    return rows


def bench_split(args, peak):
    """Where a long ChEES run's time goes: K x (W + N) and K x (W + N / 10) from the same key (the same warm-up),
    so that the N - N / 10 extra draws give the time per draw and the rest of the long run is the warm-up's. The
    last column is the ratio the long run would reach if its warm-up were free: its ESS of m over its draws' time
    alone, against the NUTS default's ESS/s."""
    for T in args.T:
        post = posterior(T, args.P, args.seed, args.sigma2)
        init = "cold" if T <= 32 else "hot"
        base = run(post, jax.random.key(args.seed + 1), num_chains=4, num_warmup=500, num_samples=1000, init=init)
        nuts = base["ess"] / base["wall"]
        print(f"\n[split] T = {T}, d = 8, P = {args.P}, sigma2 = {args.sigma2:g}, init {init}: NUTS {nuts:.1f} ESS/s")
        print("| ChEES | <m> +- se | ESS(m) | wall (s) | x NUTS | warm-up (s) | share | draws alone: x NUTS |")
        print("|---|---|---|---|---|---|---|---|")
        W, N = args.ess_warmup, args.ess_draws or 1000
        for K in args.chains:
            kw = dict(method="chees", num_chains=K, num_warmup=W, init=init)
            short = run(post, jax.random.key(args.seed + 2), num_samples=N // 10, **kw)
            long = run(post, jax.random.key(args.seed + 2), num_samples=N, **kw)
            draws = N * (long["wall"] - short["wall"]) / (N - N // 10)
            warm = long["wall"] - draws
            print(
                f"| {K} x ({W} + {N}) | {long['mean']:.4f} +- {long['se']:.4f} | {long['ess']:.0f} | "
                f"{long['wall']:.1f} | {long['ess'] / long['wall'] / nuts:.1f} | {warm:.1f} | "
                f"{warm / long['wall']:.0%} | {long['ess'] / draws / nuts:.1f} |",
                flush=True,
            )


def bench_grad(args, peak):
    for T in args.T:
        post = posterior(T, args.P, args.seed)
        ideal = flops_per_grad(T, 8) / peak
        print(
            f"\n[grad] T = {T}: vmapped value-and-grad of K chains in a jitted loop (20 calls), ideal "
            f"{ideal * 1e6:.2f} us per chain-gradient"
        )
        print("| K | us / chain-gradient | x ideal | x K = 1 |")
        print("|---|---|---|---|")
        vg = jax.vmap(jax.value_and_grad(post.log_density))
        base = None
        for K in args.K:
            L = 0.1 * jax.random.normal(jax.random.key(K), (K, T, T))

            @jax.jit
            def loop(L):
                def body(_, x):
                    v, g = vg(x)
                    return x + 1e-12 * g + 1e-12 * v[:, None, None]

                return jax.lax.fori_loop(0, 20, body, L)

            jax.block_until_ready(loop(L))
            best = np.inf
            for _ in range(3):
                t0 = time.perf_counter()
                jax.block_until_ready(loop(L))
                best = min(best, time.perf_counter() - t0)
            per = best / (20 * K)
            base = base or per
            print(f"| {K} | {per * 1e6:.1f} | {per / ideal:.1f} | {per / base:.2f} |", flush=True)


SWEEP_SIGMA2 = 1000 * 8 / (2 * 7.0)  # beta = 7 at P = 1000, as benchmarks/bench_sampling.py


def sweep_point(point: dict) -> dict:
    """compute() for run_sweep: one posterior per P (data key fixed), NUTS 4 x (500 + 1000) or ChEES."""
    post = posterior(point["T"], point["P"], point["data_seed"], point["sigma2"])
    kw = (
        dict(method="chees", num_chains=point["K"], num_warmup=point["warmup"], num_samples=point["draws"])
        if point["method"] == "chees"
        else dict(num_chains=4, num_warmup=500, num_samples=1000)
    )
    key = jax.random.key(point["sample_seed"])
    if point.get("keys") == "per-point":  # as the phase diagram does: the sampler key folded from P
        key = jax.random.fold_in(key, point["P"])
    return ba.sample(post, key, init="cold", **kw).summary()


def bench_sweep(args, peak):
    Ps = np.unique(np.round(np.geomspace(250, 4000, 16)).astype(int)).tolist()
    base = {
        "attention": "softmax",
        "T": 32,
        "sigma2": SWEEP_SIGMA2,
        "data_seed": 0,
        "sample_seed": args.sweep_seed,
        "keys": args.sweep_keys,
    }
    runs = {
        "nuts": [{**base, "method": "nuts", "P": P} for P in Ps],
        "chees": [
            {
                **base,
                "method": "chees",
                "P": P,
                "K": args.sweep_chains,
                "warmup": args.sweep_warmup,
                "draws": args.sweep_draws,
            }
            for P in Ps
        ],
    }
    recs, total = {}, {}
    kind = args.sweep_executor
    where = "serial" if kind == "serial" else f"{args.sweep_workers} {kind} workers"
    for name in args.sweep_methods:  # a fresh process per sweep: no compilation of one sweep serves the other
        (r,) = in_fresh_processes(fresh_sweep, (runs[name], sweep_point, kind, args.sweep_workers))
        total[name], recs[name] = r["s"], r["recs"]
        print(f"[sweep] {name}: {total[name]:.1f} s for {len(Ps)} points ({where}, fresh process)", flush=True)
    if len(recs) < 2:
        return
    n, c = recs["nuts"], recs["chees"]
    print(
        f"\n[sweep] 16 points T = 32, d = 8, beta = 7 at P = 1000, cold; chees K = {args.sweep_chains} x "
        f"({args.sweep_warmup} + {args.sweep_draws})"
    )
    print(
        "| P | <m> NUTS +- se | <m> ChEES +- se | (ChEES - NUTS) / se | ESS NUTS | ESS ChEES | s NUTS | s ChEES | "
        "s ChEES at NUTS's ESS |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    scaled, worst, sampled = 0.0, 0.0, 0.0
    for a, b in zip(n, c):
        ma, mb = a["result"]["m"], b["result"]["m"]
        z = (mb["mean"] - ma["mean"]) / np.hypot(ma["se"], mb["se"])
        worst = max(worst, abs(z))
        wa, wb = a["result"]["diagnostics"]["wall_time_s"], b["result"]["diagnostics"]["wall_time_s"]
        at_ess = wb * ma["ess_bulk"] / mb["ess_bulk"]
        scaled += at_ess
        sampled += wb
        print(
            f"| {a['point']['P']} | {ma['mean']:.5f} +- {ma['se']:.5f} | {mb['mean']:.5f} +- {mb['se']:.5f} | "
            f"{z:+.1f} | {ma['ess_bulk']:.0f} | {mb['ess_bulk']:.0f} | {wa:.1f} | {wb:.1f} | {at_ess:.1f} |"
        )
    print(
        f"\n[sweep] total (compile included): NUTS {total['nuts']:.1f} s, ChEES {total['chees']:.1f} s "
        f"(x {total['nuts'] / total['chees']:.1f}); ChEES sampling scaled to NUTS's ESS per point: {scaled:.1f} s "
        f"(target <= 40 s idle); largest |diff| / se {worst:.1f}"
    )
    print(
        f"[sweep] ChEES total scaled by the same ESS ratio (sum of scaled / sum of sampling times "
        f"{scaled / sampled:.2f}): {total['chees'] * scaled / sampled:.1f} s"
    )


def bench_floor(args, peak):
    """What blackjax's ChEES trajectory-length floor costs per warm-up step, and what a floor computed from stored
    positions would cost. blackjax folds every chain's position into a full dim x dim covariance at every step of
    its window (``cgl_update_batch``); the floor then needs only the top eigenvalue of that covariance, by a few
    power iterations every 32 steps. The alternative (``stored_floor=True``) keeps the window's positions and forms
    each product C v as X^T (X v) / (n - 1) from the centred positions X (n rows), never the matrix
    (``bayesattn.bayes.samplers.chees_loop.whitened_matvec``). Times per step of a window of
    ``--floor-steps`` steps in one compiled loop, both ways, with K chains at dim = T^2, and the top eigenvalues
    both ways (they must agree)."""
    from blackjax.adaptation.metric_buffers import MomentBlock, cgl_update_batch

    from bayesattn.bayes.samplers.chees_loop import stored_rows, top_eigen, whitened_matvec

    n_steps, every, iters = args.floor_steps, 32, 5
    print(f"\n[floor] a window of {n_steps} steps, power iteration ({iters} products) every {every} steps")
    print("| T | K | covariance: ms per step | positions: ms per step | x | lambda_max (both) |")
    print("|---|---|---|---|---|---|")
    for T in args.T:
        dim = T * T
        for K in args.chains:
            xs = jax.random.normal(jax.random.key(T * K), (n_steps, K, dim)) * jnp.linspace(0.5, 2.0, dim)

            @jax.jit
            def covariance(xs):
                def body(carry, x):
                    block, v, lam, i = carry
                    block = cgl_update_batch(block, x)
                    cov = block.m2 / jnp.maximum(block.count - 1.0, 1.0)
                    lam, v = jax.lax.cond(
                        i % every == 0, lambda v: top_eigen(lambda u: cov @ u, v, iters), lambda v: (lam, v), v
                    )
                    return (block, v, lam, i + 1), None

                block = MomentBlock(count=jnp.zeros(()), mean=jnp.zeros(dim), m2=jnp.zeros((dim, dim)))
                v0 = jnp.ones(dim) / jnp.sqrt(dim)
                return jax.lax.scan(body, (block, v0, jnp.ones(()), 1), xs)[0][2]

            @jax.jit
            def positions(xs):  # the package's products (chees_loop.whitened_matvec), unwhitened (D = 1)
                def body(carry, x):
                    buf, total, v, lam, i = carry
                    buf = jax.lax.dynamic_update_slice(buf, x, (i * K, 0))
                    total, n = total + x.sum(0), (i + 1) * K
                    matvec = whitened_matvec(buf, total, n, jnp.ones(dim))
                    lam, v = jax.lax.cond(
                        (i + 1) % every == 0, lambda v: top_eigen(matvec, v, iters), lambda v: (lam, v), v
                    )
                    return (buf, total, v, lam, i + 1), None

                init = (
                    jnp.zeros((stored_rows(n_steps * K, dim), dim)),
                    jnp.zeros(dim),
                    jnp.ones(dim) / jnp.sqrt(dim),
                    jnp.ones(()),
                    0,
                )
                return jax.lax.scan(body, init, xs)[0][3]

            def per_step(fn):
                """(seconds per step of the compiled loop, its top eigenvalue), timed after compiling."""
                lam = float(jax.block_until_ready(fn(xs)))
                t0 = time.perf_counter()
                jax.block_until_ready(fn(xs))
                return (time.perf_counter() - t0) / n_steps, lam

            (t_cov, lam_cov), (t_pos, lam_pos) = per_step(covariance), per_step(positions)
            print(
                f"| {T} | {K} | {t_cov * 1e3:.1f} | {t_pos * 1e3:.1f} | {t_cov / t_pos:.1f} | "
                f"{lam_cov:.4f}, {lam_pos:.4f} |",
                flush=True,
            )


def bench_warmup(args, peak):
    """The ChEES warm-up alone (``--ess-warmup`` steps, K = ``--chains`` chains, every one adapting), with the
    length floor from blackjax's covariance (``stored_floor=False``) and from stored positions (True): seconds of
    the compiled warm-up (its second call), and the adapted leapfrog steps and gradient count both ways (they must
    agree: it is the same warm-up)."""
    from bayesattn.bayes.samplers.ensemble import ENSEMBLE_OPTIONS, chees_warmup, lockstep_starts

    print(f"\n[warmup] ChEES warm-up of {args.ess_warmup} steps, sigma2 = {args.sigma2:g}")
    print("| T | K | covariance floor (s) | stored floor (s) | x | leapfrog steps | gradients |")
    print("|---|---|---|---|---|---|---|")
    for T in args.T:
        post = posterior(T, args.P, args.seed, args.sigma2)
        init = "cold" if T <= 32 else "hot"
        logdensity = lambda x: post.log_density(x.reshape(T, T))  # noqa: E731
        for K in args.chains:
            found = {}
            x0 = lockstep_starts("chees", post, jax.random.key(args.seed + 1), init, K, ENSEMBLE_OPTIONS["chees"])[0]
            x0 = x0.reshape(K, -1)
            for stored in (False, True):
                opts = dict(ENSEMBLE_OPTIONS["chees"], stored_floor=stored)

                @jax.jit
                def warm(key, x0, opts=opts):
                    _, params, (_, grads), _, _ = chees_warmup(logdensity, key, x0, K, args.ess_warmup, opts)
                    return params["integration_steps_params"][0], grads.sum()

                jax.block_until_ready(warm(jax.random.key(args.seed + 2), x0))
                t0 = time.perf_counter()
                steps, grads = jax.block_until_ready(warm(jax.random.key(args.seed + 2), x0))
                found[stored] = (time.perf_counter() - t0, float(steps), int(grads))
            (t_cov, n_cov, g_cov), (t_pos, n_pos, g_pos) = found[False], found[True]
            print(
                f"| {T} | {K} | {t_cov:.2f} | {t_pos:.2f} | {t_cov / t_pos:.2f} | {n_cov:.2f}, {n_pos:.2f} | "
                f"{g_cov}, {g_pos} |",
                flush=True,
            )


SECTIONS = {
    "ess": bench_ess,
    "split": bench_split,
    "floor": bench_floor,
    "warmup": bench_warmup,
    "grad": bench_grad,
    "sweep": bench_sweep,
}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", choices=list(SECTIONS), action="append", help="sections (default all)")
    ap.add_argument("--T", type=int, nargs="+", default=[32, 64], help="sequence lengths (ess, grad)")
    ap.add_argument("--chains", type=int, nargs="+", default=[16, 64, 256], help="ChEES chain counts K (ess)")
    ap.add_argument("--K", type=int, nargs="+", default=[1, 4, 16, 64, 256], help="chain counts (grad)")
    ap.add_argument("--P", type=int, default=1000, help="training sequences (ess, grad)")
    ap.add_argument("--seed", type=int, default=0, help="PRNG seed (data: seed, samplers: seed + 1..)")
    ap.add_argument("--sigma2", type=float, default=400.0, help="likelihood variance (ess)")
    ap.add_argument("--ess-warmup", type=int, default=500, help="ChEES warm-up steps (ess)")
    ap.add_argument(
        "--warmup-chains",
        type=int,
        nargs="*",
        default=[8],
        help="ChEES rows that adapt on this many chains, then copy them to all K (ess; none: only full warm-ups)",
    )
    ap.add_argument(
        "--repeats", type=int, default=1, help="runs of each ess row, with new sampler keys; > 1: ratio intervals"
    )
    ap.add_argument(
        "--first-repeat",
        type=int,
        default=0,
        help="number of the first repeat: repeats FIRST .. FIRST + R - 1 (new keys beside an earlier run's 0 .. FIRST - 1)",
    )
    ap.add_argument(
        "--no-full-warmup", action="store_true", help="ess: only the --warmup-chains rows, not every chain adapting"
    )
    ap.add_argument("--stored-floor", action="store_true", help="each ChEES row with stored_floor=False and True (ess)")
    ap.add_argument("--floor-steps", type=int, default=100, help="steps of the covariance window (floor)")
    ap.add_argument("--spread-steps", type=int, default=20, help="discarded steps after copying (ess)")
    ap.add_argument("--branch-starts", action="store_true", help="ChEES again from the theory's branch (ess)")
    ap.add_argument("--branch-warmup", type=int, nargs="+", default=[], help="warm-up lengths from the branch")
    ap.add_argument(
        "--ess-draws", type=int, default=None, help="ChEES draws per chain (ess; default max(100, 16000 / K))"
    )
    ap.add_argument("--sweep-methods", nargs="+", default=["nuts", "chees"], choices=["nuts", "chees"])
    ap.add_argument("--sweep-chains", type=int, default=16)
    ap.add_argument("--sweep-warmup", type=int, default=500)
    ap.add_argument("--sweep-draws", type=int, default=250)
    ap.add_argument(
        "--sweep-executor",
        choices=list(SWEEP_KINDS),
        default="serial",
        help="thread: points overlap in threads of one process; dask: a fresh LocalCluster per sweep "
        "(dask-thread: its workers are threads)",
    )
    ap.add_argument("--sweep-workers", type=int, default=2, help="threads or Dask workers (thread, dask)")
    ap.add_argument("--sweep-seed", type=int, default=1, help="sampler seed of the sweep (both methods)")
    ap.add_argument(
        "--sweep-keys",
        choices=["shared", "per-point"],
        default="per-point",
        help="shared: one sampler key at every P (the points' errors are then correlated); "
        "per-point: the key folded from P, as the phase diagram's",
    )
    args = ap.parse_args(argv)
    if args.repeats < 1:
        ap.error(f"--repeats must be at least 1, got {args.repeats}")
    if args.first_repeat < 0:
        ap.error(f"--first-repeat must be at least 0, got {args.first_repeat}")
    peak = peak_flops()
    print(
        f"{platform.processor() or platform.machine()}, jax {jax.__version__}, backend {jax.default_backend()}, "
        f"measured float64 matmul peak {peak / 1e9:.1f} GFLOP/s",
        flush=True,
    )
    for name in args.only or list(SECTIONS):
        t0 = time.perf_counter()
        SECTIONS[name](args, peak)
        print(f"[{name} done in {time.perf_counter() - t0:.0f} s]", flush=True)


if __name__ == "__main__":
    main()
