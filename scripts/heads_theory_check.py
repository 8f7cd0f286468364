"""The H-head order-parameter theory against the exact posterior (docs/theory.md section 12).

Setup of experiments/staircase.py (BayesConfig defaults, phase_diagrams/staircase/staircase.toml): T = 16,
d = 8, lags 1..H with weights 0.6^k, orthogonal U_k, sigma_A2 = 1, sigma_V2 = 100, sigma2 = 400; NUTS with the
same data and keys as ``staircase.mcmc_point`` (4 chains x (500 + 1000), cold and hot starts, by default), per
draw the per-head lag
masses m_hk, the overlaps Q_hh' = <sum_s alpha_h alpha_h'>_t, and label-free summaries (the best head's mass per
lag; the heads relabelled per draw so that head k is the one taken greedily for lag k).

    python scripts/heads_theory_check.py --part mcmc     # cached: results/heads_theory/mcmc/*.json
    python scripts/heads_theory_check.py --part table    # theory (cached: results/heads_theory/theory_*.json)
                                                         # next to every cached MCMC point: table.md
    python scripts/heads_theory_check.py --part orders   # theory only, H = 2 at T = 32, 64: coexisting wells?
Rerunning skips points already on disk. The comparison over many data sets and several theory seeds runs in the
experiment itself, for softmax (the best head's mass) and linear heads (each lag's share in the heads' span, which
head rotations leave unchanged): `bayesattn staircase --config staircase_theory` (docs/results/staircase.md
section 5).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

OUT = Path("results/heads_theory")
GRID = {  # (attention, H): P values (T = 16, d = 8, ratio 0.6)
    ("softmax", 2): [200, 315, 497, 627, 784, 1237, 1806, 1951, 3076, 4851, 7650, 19024],
    ("linear", 2): [200, 315, 497, 784, 1237, 1951, 3076, 4851, 7650, 19024],
    ("softmax", 3): [315, 497, 784, 1237, 1951, 3076, 4851, 7650, 12063, 19024, 30000],
}


def draw_stats(alpha, task):
    """Per-draw m (n, H, K) and Q (n, H, H) of alpha: (n, H, T, T), and their label-free summaries
    (``heads.label_free``: sign-fixed for linear heads, relabelled greedily per lag, best head per lag)."""
    from bayesattn.bayes.theory.heads import label_free

    pats = np.stack(list(task.target_patterns.values()))  # (K, T, T)
    m = np.einsum("nhts,kts->nhk", alpha, pats) / task.T
    Q = np.einsum("nhts,ngts->nhg", alpha, alpha) / task.T
    return {"m": m, "Q": Q, **label_free(m, Q)}


def mcmc(attention, H, P, init="cold", seed=0, chains=2, warmup=300, samples=500):
    import jax

    import bayesattn as ba
    from bayesattn.experiments.staircase.bayes import hot_init, point_posterior
    from bayesattn.experiments.staircase.config import BayesConfig
    from bayesattn.provenance import package_versions

    b = BayesConfig(heads=[H], attention=[attention])
    task, prior, post, k_mcmc = point_posterior(b, attention, H, P, seed)  # the data and keys of mcmc_point
    start = "cold" if init == "cold" else hot_init(task, H, attention, prior)
    t0 = time.perf_counter()
    s = ba.sample(post, k_mcmc, num_chains=chains, num_warmup=warmup, num_samples=samples, init=start)
    wall = time.perf_counter() - t0
    L = np.asarray(s.L)  # (chains, draws, H, T, T)
    alpha = np.asarray(post.model.weights(jax.numpy.asarray(L.reshape(-1, H, task.T, task.T)), task.key_mask))
    st = draw_stats(alpha, task)
    per_chain = {k: np.asarray(v).reshape(chains, -1, *np.shape(v)[1:]).mean(axis=1) for k, v in st.items()}
    return {
        "attention": attention,
        "H": H,
        "P": P,
        "init": init,
        "seed": seed,
        "chains": chains,
        "warmup": warmup,
        "samples": samples,
        "wall_s": wall,
        "mean": {k: v.mean(axis=0).tolist() for k, v in per_chain.items()},
        "chain_means": {k: v.tolist() for k, v in per_chain.items()},
        "num_divergent": int(s.diagnostics.get("num_divergent", -1)),
        "versions": package_versions(),
    }


def run_mcmc(args):
    from bayesattn.files import write_json_atomic

    for (att, H), Ps in GRID.items():
        if args.attention and att not in args.attention or args.heads and H not in args.heads:
            continue
        for P in Ps:
            for init in args.inits:
                path = OUT / "mcmc" / f"{att}_H{H}_P{P}_{init}_c{args.chains}w{args.warmup}s{args.samples}.json"
                if path.exists():
                    continue
                r = mcmc(att, H, P, init, chains=args.chains, warmup=args.warmup, samples=args.samples)
                write_json_atomic(path, r)
                print(
                    f"{att} H={H} P={P} {init}: mass_max {np.round(r['mean']['mass_max'], 3)} ({r['wall_s']:.0f} s)",
                    flush=True,
                )


def theory(att, H, num_samples, Ps):
    """The theory at the P values Ps (cached: results/heads_theory/theory_<att>_H<H>_n<num_samples>[_P...].json)."""
    from bayesattn.bayes.theory.heads import heads_curve
    from bayesattn.files import write_json_atomic
    from bayesattn.provenance import package_versions

    tag = "" if list(Ps) == GRID[(att, H)] else "_P" + "-".join(map(str, Ps))
    path = OUT / f"theory_{att}_H{H}_n{num_samples}{tag}.json"
    if path.exists():
        return json.loads(path.read_text())
    t0 = time.perf_counter()
    c = heads_curve(Ps, heads=H, attention=att, num_samples=num_samples)
    fps = [
        [
            {k: fp[k] for k in ("x_canon", "F", "stable", "ess", "starts", "multiplicity", "residual") if k in fp}
            | {"weight": fp.get("weight")}
            for fp in fl
        ]
        for fl in c.fixed_points
    ]
    r = {
        "P": c.P.tolist(),
        "mean": {k: v.tolist() for k, v in c.mean.items()},
        "fixed": {k: v.tolist() for k, v in c.fixed.items()},
        "fixed_points": fps,
        "transitions": c.transitions,
        "config": c.config,
        "wall_s": time.perf_counter() - t0,
        "versions": package_versions(),
    }
    write_json_atomic(path, r)
    return json.loads(path.read_text())


def load_mcmc(att, H, P, args):
    out = {}
    for init in args.inits:
        path = OUT / "mcmc" / f"{att}_H{H}_P{P}_{init}_c{args.chains}w{args.warmup}s{args.samples}.json"
        if path.exists():
            out[init] = json.loads(path.read_text())
    return out


def table(args):
    """Markdown: per P the best head's mass per lag, theory / MCMC (mean of the cold and hot runs), and the
    largest |theory - MCMC|; linear also the singular values of m (invariant under rotating the heads)."""
    from bayesattn.experiments.staircase.curves import transitions

    lines = []
    for (att, H), Ps in GRID.items():
        if args.attention and att not in args.attention or args.heads and H not in args.heads:
            continue
        Ps = [P for P in Ps if P in args.P] if args.P else Ps
        th = theory(att, H, args.num_samples or (200_000 if H >= 3 else 100_000), Ps)
        K = H
        head = " | ".join(f"lag {k + 1}" for k in range(K))
        extra = " | m singular values" if att == "linear" else " | head overlap Q_01"
        lines += [
            f"**{att}, H = {H}** (theory / MCMC; MCMC = mean of cold and hot, 4 chains x (500 + 1000) each)",
            "",
            f"| P | {head}{extra} | max abs diff | cold - hot |",
            "|---" * (K + 4) + "|",
        ]
        mm = []
        for i, P in enumerate(Ps):
            runs = load_mcmc(att, H, P, args)
            if not runs:
                continue
            mc = np.mean([r["mean"]["mass_max"] for r in runs.values()], axis=0)
            mm.append(mc)
            t = np.asarray(th["mean"]["mass_max"][i])
            cells = [f"{t[k]:.3f} / {mc[k]:.3f}" for k in range(K)]
            if att == "linear":
                msv = np.mean([r["mean"]["m_sv"] for r in runs.values()], axis=0)
                tsv = np.asarray(th["mean"]["m_sv"][i])
                cells.append(", ".join(f"{a:.3f}/{b:.3f}" for a, b in zip(tsv, msv)))
                diff = max(np.max(np.abs(t - mc)), np.max(np.abs(tsv - msv)))
            else:
                q = np.mean([r["mean"]["Q_canon"][0][1] for r in runs.values()])
                tq = th["mean"]["Q_canon"][i][0][1]
                cells.append(f"{tq:.3f} / {q:.3f}")
                diff = max(np.max(np.abs(t - mc)), abs(tq - q))
            ch = "-"
            if len(runs) == 2:
                gap = np.subtract(runs["cold"]["mean"]["mass_max"], runs["hot"]["mean"]["mass_max"])
                ch = f"{np.max(np.abs(gap)):.3f}"
            flag = " (> 0.03)" if diff > 0.03 else ""
            lines.append(f"| {P} | " + " | ".join(cells) + f" | {diff:.3f}{flag} | {ch} |")
        Pm = np.asarray([P for P in Ps if load_mcmc(att, H, P, args)])
        if len(mm):
            mm = np.asarray(mm)
            pk_mc = [transitions(Pm, mm[:, k], 3.0 / 16) for k in range(K)]
            pk_th = [th["transitions"][f"lag{k + 1}"] for k in range(K)]
            fmt = lambda v: "-" if v is None else f"{v:.0f}"  # noqa: E731
            lines += [
                "",
                "P_k (best head's mass crosses 3/T, log-interpolated on this grid), theory / MCMC: "
                + ", ".join(f"lag {k + 1}: {fmt(a)} / {fmt(b)}" for k, (a, b) in enumerate(zip(pk_th, pk_mc))),
            ]
        lines += [f"(theory: {th['wall_s']:.0f} s for {len(Ps)} values of P)", ""]
    text = "\n".join(lines)
    (OUT / "table.md").write_text(text)
    print(text)


def orders(args):
    """Theory only, H = 2 softmax at larger T: are there coexisting wells (first-order jumps)? Lists, per P, the
    stable fixed points (relabelled lag masses, T F in nats) and the transitions of the label-free mean."""
    from bayesattn.bayes.theory.heads import heads_curve
    from bayesattn.files import write_json_atomic

    for T in args.T:
        tag = f"_P{args.P[0]}-{args.P[-1]}" if args.P else ""
        path = OUT / f"orders_T{T}_n{args.num_samples or 100_000}{tag}.json"
        if not path.exists():
            t0 = time.perf_counter()
            P = args.P or [int(p) for p in np.unique(np.round(np.geomspace(400, 8000, args.n_P)))]
            c = heads_curve(P, heads=2, attention="softmax", T=T, num_samples=args.num_samples or 100_000)
            write_json_atomic(
                path,
                {
                    "T": T,
                    "P": P,
                    "mass_max": c.mean["mass_max"].tolist(),
                    "transitions": c.transitions,
                    "wall_s": time.perf_counter() - t0,
                    "fixed_points": [
                        [
                            {
                                "m": np.asarray(fp["x_canon"][:4]).round(4).tolist(),
                                "TF": T * fp["F"],
                                "stable": fp["stable"],
                                "weight": fp.get("weight"),
                                "starts": fp["starts"],
                            }
                            for fp in fl
                        ]
                        for fl in c.fixed_points
                    ],
                },
            )
        r = json.loads(path.read_text())
        print(f"T = {T}: transitions {r['transitions']} ({r['wall_s']:.0f} s)")
        for P, mm, fl in zip(r["P"], r["mass_max"], r["fixed_points"]):
            wells = "; ".join(f"m={fp['m']} TF={fp['TF']:.2f} w={fp['weight']}" for fp in fl if fp["stable"])
            print(f"  P={P}: mass_max {np.round(mm, 3).tolist()} | {wells}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--part", choices=["mcmc", "table", "orders"], default="table")
    ap.add_argument("--T", nargs="*", type=int, default=[32, 64], help="--part orders: sequence lengths")
    ap.add_argument("--n-P", type=int, default=16, help="--part orders: values of P in 400..8000")
    ap.add_argument(
        "--P",
        nargs="*",
        type=int,
        default=[],
        help="--part orders: explicit values of P instead; --part table: only these of the grid",
    )
    ap.add_argument("--attention", nargs="*", default=[])
    ap.add_argument("--heads", nargs="*", type=int, default=[])
    ap.add_argument("--inits", nargs="*", default=["cold", "hot"])
    ap.add_argument("--chains", type=int, default=4)
    ap.add_argument("--warmup", type=int, default=500)
    ap.add_argument("--samples", type=int, default=1000)
    ap.add_argument(
        "--num-samples",
        type=int,
        default=None,
        help="importance rows of the softmax row law (default 100,000; 200,000 for H >= 3)",
    )
    args = ap.parse_args()
    if args.part == "mcmc":
        run_mcmc(args)
    elif args.part == "orders":
        orders(args)
    else:
        table(args)
