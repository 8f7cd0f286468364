"""Sampling benchmarks (not tests): prints a table; all ratios are measured in the same process.

    python benchmarks/bench_sampling.py                 # everything (~5-8 min on 2 shared cores)
    python benchmarks/bench_sampling.py --only joint    # one section: joint | draws | grad | sweep

Sections
- joint: ESS/s of m, marginal NUTS (blackjax, closed form, V integrated out) vs NUTS on the joint (L, V) model
  (numpyro), same data and prior, both timed without their compilation; target ratio >= 20.
- draws: seconds per 1000 NUTS iterations at T = 8, 16, 32 (d = 8, P = 1000, softmax, beta = 5), 1 chain and
  4 vmapped chains, compile time apart.
- grad: time per gradient inside the sampler (wall / gradient evaluations, T = 32) vs the float64 flop count
  of one value-and-grad (XLA's cost analysis) at the core's peak (2.6 GHz x 32 flop/cycle with AVX-512 FMA,
  an assumption printed with the result); also the same value-and-grad in a bare jitted loop, and NUTS on a
  standard normal of the same dimension (the sampler's own cost per step), so the gap can be attributed.
- sweep: 16 values of P at T = 32, d = 8, 4 chains x (500 + 1000) through bayesattn.sweep.run_sweep (one
  compilation shared by all points); target <= 180 s.
"""

from __future__ import annotations

import argparse
import tempfile
import time

import blackjax
import jax
import jax.numpy as jnp
import numpy as np
import numpyro
from numpyro.diagnostics import effective_sample_size

import bayesattn as ba
from bayesattn.sweep import run_sweep

PEAK_FLOPS_PER_CORE = 2.6e9 * 32  # 2.6 GHz Xeon, AVX-512: 8 doubles x 2 (FMA) x 2 ports per cycle


def canonical(T, d, P, beta, attention="softmax", seed=0):
    data = ba.CopyTask(T=T, d=d).sample(jax.random.key(seed), P)
    prior = ba.Prior(1.0, 100.0, P * d / (2 * beta))
    return data, prior, ba.Posterior(data, attention, prior)


def bench_joint(rows):
    """ESS/s of m, both samplers timed without compilation: the marginal's compile is reported apart by
    ba.sample; numpyro compiles inside its first run, so the joint is run twice on one MCMC object
    (numpyro's fastest CPU setting, vectorised chains) and the second, cached run is timed. Two cases: the
    small one of the distribution test, and the README's example (the joint's cost grows with P)."""
    for T, d, P, beta in ((8, 4, 200, 5.0), (8, 8, 1000, 5.0)):
        _bench_joint_case(rows, T, d, P, beta)


def _bench_joint_case(rows, T, d, P, beta):
    data, prior, post = canonical(T, d, P, beta)
    kw = dict(num_chains=4, num_warmup=500, num_samples=1000)
    marg = ba.sample(post, jax.random.key(1), **kw)
    ms = marg.summary()
    mcmc = numpyro.infer.MCMC(
        numpyro.infer.NUTS(ba.joint_model),
        num_warmup=500,
        num_samples=1000,
        num_chains=4,
        chain_method="vectorized",
        progress_bar=False,
    )
    model_kw = dict(X=data.X, Y=data.Y, task=data.task, attention="softmax", prior=prior)
    times = []
    for rep in range(2):
        t0 = time.perf_counter()
        mcmc.run(jax.random.key(2 + rep), **model_kw)
        L = jax.block_until_ready(mcmc.get_samples(group_by_chain=True)["L"])
        times.append(time.perf_counter() - t0)
    m_joint = np.asarray(post.order_parameters(L)["m"])
    ess_joint = float(effective_sample_size(m_joint))
    marg_rate = ms["m"]["ess_bulk"] / marg.diagnostics["wall_time_s"]
    joint_rate = ess_joint / times[1]
    case = f"T={T} d={d} P={P} beta={beta}, 4 chains x (500+1000)"
    rows += [
        (
            "joint",
            "marginal NUTS <m> (se), ESS, run s, compile s",
            f"{ms['m']['mean']:.4f} ({ms['m']['se']:.4f}), "
            f"{ms['m']['ess_bulk']:.0f}, {marg.diagnostics['wall_time_s']:.2f}, {marg.diagnostics['compile_time_s']:.1f}",
            case,
        ),
        (
            "joint",
            "joint numpyro NUTS <m>, ESS, run s (cached), first run s (with compile)",
            f"{m_joint.mean():.4f}, {ess_joint:.0f}, {times[1]:.2f}, {times[0]:.1f}",
            case,
        ),
        (
            "joint",
            "ESS/s ratio marginal/joint (runs without compile | both first calls)",
            f"{marg_rate / joint_rate:.0f}x | "
            f"{(ms['m']['ess_bulk'] / (marg.diagnostics['wall_time_s'] + marg.diagnostics['compile_time_s'])) / (ess_joint / times[0]):.0f}x",
            "target >= 20x",
        ),
    ]


def bench_draws(rows):
    for T in (8, 16, 32):
        _, _, post = canonical(T, 8, 1000, 5.0)
        for chains in (1, 4):
            s = ba.sample(post, jax.random.key(3), num_chains=chains, num_warmup=500, num_samples=1000)
            dg = s.diagnostics
            per1000 = dg["wall_time_s"] / 1.5
            rows.append(
                (
                    "draws",
                    f"T={T}: s per 1000 NUTS iterations, {chains} chain(s)",
                    f"{per1000:.2f}",
                    f"compile {dg['compile_time_s']:.1f} s, {dg['num_grad_evals'] / (1500 * chains):.1f} "
                    f"grads/iter, <m> = {s.summary()['m']['mean']:.3f}",
                )
            )


def _nuts_floor(dim, num_warmup=500, num_samples=1000):
    """Seconds per gradient of blackjax NUTS (window adaptation + draws) on a standard normal of `dim`
    coordinates: the sampler's own cost per leapfrog step when the gradient is nearly free."""
    logd = lambda x: -0.5 * jnp.sum(x**2)  # noqa: E731

    @jax.jit
    def run(key):
        (state, params), winfo = blackjax.window_adaptation(blackjax.nuts, logd).run(key, jnp.zeros(dim), num_warmup)
        sampler = blackjax.nuts(logd, **params)

        def step(st, k):
            st, info = sampler.step(k, st)
            return st, info.num_integration_steps

        _, n = jax.lax.scan(step, state, jax.random.split(key, num_samples))
        return n.sum() + winfo.info.num_integration_steps.sum()  # depends on every trajectory: nothing is elided

    jax.block_until_ready(run(jax.random.key(0)))
    t0 = time.perf_counter()
    n = int(run(jax.random.key(1)))
    return (time.perf_counter() - t0) / n


def bench_grad(rows):
    T, d = 32, 8
    _, _, post = canonical(T, d, 1000, 5.0)
    L0 = jnp.asarray(ba.bayes.sampling.hot_pattern(post)) * 0.3
    vg = jax.value_and_grad(lambda L, p: p.log_density(L))
    cost = jax.jit(vg).lower(L0, post).compile().cost_analysis()
    cost = cost[0] if isinstance(cost, (list, tuple)) else cost
    flops = float(cost.get("flops", float("nan")))
    ideal = flops / PEAK_FLOPS_PER_CORE
    n = 2000

    @jax.jit
    def loop(L, p):  # n dependent calls in one program: no dispatch, the posterior a run-time argument
        def body(i, c):
            v, g = vg(c[0] + 1e-12 * c[1], p)
            return c[0], c[1] + v + g[0, 0]

        return jax.lax.fori_loop(0, n, body, (L, 0.0))[1]

    jax.block_until_ready(loop(L0, post))
    in_loop = []
    for _ in range(3):
        t0 = time.perf_counter()
        jax.block_until_ready(loop(L0, post))
        in_loop.append((time.perf_counter() - t0) / n)
    floor = _nuts_floor(T * T)

    def per_grad(**kw):
        s = ba.sample(post, jax.random.key(4), num_warmup=500, num_samples=1000, **kw)
        return s.diagnostics["wall_time_s"] / s.diagnostics["num_grad_evals"]

    one, four, four_vmap = per_grad(num_chains=1), per_grad(num_chains=4), per_grad(num_chains=4, chains_per_batch=4)
    hmc = per_grad(num_chains=4, method="hmc")
    rows += [
        ("grad", "flops of one value-and-grad (XLA cost analysis)", f"{flops:.3g}", f"T={T} d={d}"),
        ("grad", "ideal time at 1-core peak (83.2 GFLOP/s)", f"{ideal * 1e6:.2f} us", "assumed peak"),
        (
            "grad",
            "value-and-grad in a jitted loop (no sampler)",
            f"{min(in_loop) * 1e6:.1f} us",
            f"{min(in_loop) / ideal:.1f}x the ideal",
        ),
        (
            "grad",
            f"NUTS on a free gradient (standard normal, {T * T} coordinates)",
            f"{floor * 1e6:.1f} us",
            f"{floor / ideal:.1f}x the ideal: the sampler's own floor",
        ),
        ("grad", "inside NUTS, 1 chain", f"{one * 1e6:.1f} us", f"{one / ideal:.1f}x the ideal"),
        (
            "grad",
            "inside NUTS, 4 chains (default: one at a time on CPU)",
            f"{four * 1e6:.1f} us",
            f"{four / ideal:.1f}x the ideal",
        ),
        (
            "grad",
            "inside NUTS, 4 chains vmapped (chains_per_batch=4)",
            f"{four_vmap * 1e6:.1f} us",
            f"{four_vmap / ideal:.1f}x the ideal (per chain-gradient)",
        ),
        ("grad", "inside HMC (16 steps), 4 chains", f"{hmc * 1e6:.1f} us", f"{hmc / ideal:.1f}x the ideal"),
    ]


SWEEP_T, SWEEP_D, SWEEP_SIGMA2 = 32, 8, 1000 * 8 / (2 * 7.0)  # beta = 7 at P = 1000


def sweep_point(point: dict) -> dict:
    """compute() for run_sweep: one posterior per P (data key fixed), NUTS 4 x (500 + 1000)."""
    data = ba.CopyTask(T=point["T"], d=point["d"]).sample(jax.random.key(point["data_seed"]), point["P"])
    post = ba.Posterior(data, point["attention"], ba.Prior(1.0, 100.0, point["sigma2"]))
    s = ba.sample(
        post, jax.random.key(point["sample_seed"]), num_chains=4, num_warmup=500, num_samples=1000, init=point["init"]
    )
    return s.summary()


def bench_sweep(rows, out_dir=None, workers=1):
    Ps = np.unique(np.round(np.geomspace(250, 4000, 16)).astype(int)).tolist()
    points = [
        {
            "method": "nuts",
            "attention": "softmax",
            "T": SWEEP_T,
            "d": SWEEP_D,
            "P": P,
            "sigma2": SWEEP_SIGMA2,
            "init": "cold",
            "data_seed": 0,
            "sample_seed": 1,
        }
        for P in Ps
    ]
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        recs = run_sweep(points, sweep_point, out_dir or tmp, progress=False, workers=workers)
        total = time.perf_counter() - t0
    compile_s = sum(r["result"]["diagnostics"]["compile_time_s"] for r in recs)
    rhat = max(r["result"]["m"]["r_hat"] for r in recs)
    ms = ", ".join(f"{r['point']['P']}:{r['result']['m']['mean']:.3f}" for r in recs)
    rows += [
        (
            "sweep",
            f"{len(points)} points, T=32 d=8, 4 chains x (500+1000), {workers} worker(s): total s",
            f"{total:.1f}",
            f"target <= 180 s; compile {compile_s:.1f} s (once per worker)",
        ),
        ("sweep", "max R-hat(m) over points", f"{rhat:.3f}", "cold starts"),
        ("sweep", "<m> by P", ms, f"sigma2 = {SWEEP_SIGMA2:.1f}"),
    ]


SECTIONS = {"joint": bench_joint, "draws": bench_draws, "grad": bench_grad}  # and "sweep", with its own arguments


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--only",
        choices=[*SECTIONS, "sweep"],
        action="append",
        help="run only these sections (repeatable); default all",
    )
    ap.add_argument("--sweep-dir", default=None, help="keep the sweep's result files here (default: a temp dir)")
    ap.add_argument("--workers", type=int, default=1, help="sweep points run in this many worker processes")
    args = ap.parse_args()
    sections = args.only or [*SECTIONS, "sweep"]
    rows: list[tuple] = []
    for name in sections:
        t0 = time.perf_counter()
        if name == "sweep":
            bench_sweep(rows, args.sweep_dir, args.workers)
        else:
            SECTIONS[name](rows)
        print(f"[{name} done in {time.perf_counter() - t0:.0f} s]", flush=True)
    print(f"\njax {jax.__version__}, {jax.devices()[0].platform}, float64")
    print(f"{'section':8} | {'quantity':70} | {'value':>28} | note")
    for sec, q, v, note in rows:
        print(f"{sec:8} | {q:70} | {v:>28} | {note}")


if __name__ == "__main__":
    main()
