"""Exact NUTS against the one-hot linear-attention theory (docs/theory.md section 8.1).

One data set per P (key seed + P), NUTS from a cold (L = 0) and a hot (copy pattern) start on the same data.
Each finished point is written atomically to <out>/T<T>_P<P>.json (resumable: finished points are skipped),
with the config, PRNG seeds and package versions. Besides u = m^2/q it records the one-hot sector variables of
the draws: q, x_j^2 (the all-ones component of L), x_p^2 (the centred copy component) and w.

Usage: python scripts/onehot_linear_check.py --out results/onehot_linear --T 16 --P 1500 3000 ...
       python scripts/onehot_linear_check.py --out results/onehot_linear --summary   (table against the theory,
           and <out>/onehot_linear_vs_nuts.png: the theory's <u> over P with the NUTS points)
"""

from __future__ import annotations

import argparse
import glob
import json
import os

import numpy as np

SIGMA2, D_TOK = 400.0, 8


def sectors(L):
    """(u, q, A^2, B^2, w) per draw of L: (..., T, T) (docs/theory.md section 8.1)."""
    T = L.shape[-1]
    src = (np.arange(T) - 1) % T
    a = L[..., np.arange(T), src] / np.sqrt(T)
    r = L.sum(-1) / np.sqrt(T)
    m, q = a.mean(-1), (L**2).sum((-1, -2)) / T**2
    A = L.sum((-1, -2)) / T  # x_j = <L, 1 1^T / T>
    B = (T**1.5 * m - A) / np.sqrt(T - 1)  # x_p from m = (x_p sqrt(T-1) + x_j) / T^{3/2}
    return {"u": m**2 / q, "q": q, "A2": A**2, "B2": B**2, "w": (r**2).mean(-1)}


def point(T, P, warmup, draws, chains, seed):
    import jax

    import bayesattn as ba

    prior = ba.Prior(1.0, 100.0, SIGMA2)
    task = ba.CopyTask(T=T, d=D_TOK, tokens="onehot")
    data = task.sample(jax.random.key(seed + int(P)), int(P))
    post = ba.Posterior(data, "linear", prior)
    res = {
        "T": T,
        "P": float(P),
        "config": {
            "warmup": warmup,
            "draws": draws,
            "chains": chains,
            "seed": seed,
            "data_key": seed + int(P),
            "prior": prior.config(),
        },
        "versions": {"jax": jax.__version__},
    }
    for j, init in enumerate(("cold", "hot")):
        key = seed + 100_000 + 7 * int(P) + j
        s = ba.sample(post, jax.random.key(key), num_chains=chains, num_warmup=warmup, num_samples=draws, init=init)
        sec = sectors(np.asarray(s.L))
        res[init] = {k: float(v.mean()) for k, v in sec.items()}
        res[init]["u_chain_means"] = sec["u"].mean(axis=1).tolist()
        res[init]["key"] = key
        res[init]["divergent"] = int(s.diagnostics.get("num_divergent", 0))
        res[init]["wall_s"] = float(s.diagnostics.get("wall_time_s", float("nan")))
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="results/onehot_linear")
    ap.add_argument("--T", type=int, default=16)
    ap.add_argument("--P", type=float, nargs="*", default=[])
    ap.add_argument("--warmup", type=int, default=300)
    ap.add_argument("--draws", type=int, default=500)
    ap.add_argument("--chains", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--summary", action="store_true")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    if a.summary:
        summary(a.out)
        return
    from pathlib import Path

    from bayesattn.files import write_json_atomic
    from bayesattn.provenance import provenance

    for P in a.P:
        path = os.path.join(a.out, f"T{a.T}_P{int(P)}.json")
        if os.path.exists(path):
            continue
        r = point(a.T, P, a.warmup, a.draws, a.chains, a.seed)
        r["provenance"] = provenance()
        write_json_atomic(Path(path), r)
        print(f"T = {a.T} P = {P:.0f}: u cold {r['cold']['u']:.4f} hot {r['hot']['u']:.4f}", flush=True)


def summary(out):
    from pathlib import Path

    import bayesattn as ba
    from bayesattn import figstyle
    from bayesattn import theory as th

    rows = [json.load(open(f)) for f in sorted(glob.glob(os.path.join(out, "T*_P*.json")))]
    Ts = sorted({r["T"] for r in rows})
    fig, axes = figstyle.subplots(1, len(Ts))
    metastable = False
    from matplotlib.lines import Line2D

    for ax, T in zip(axes[0], Ts):
        pts = sorted((r for r in rows if r["T"] == T), key=lambda r: r["P"])
        P = np.array([r["P"] for r in pts])
        fine = np.linspace(P[0], P[-1], 40)
        pc = th.phase_curve(ba.CopyTask(T=T, d=D_TOK, tokens="onehot"), ba.Prior(1.0, 100.0, SIGMA2), "linear", fine)
        ax.plot(fine, pc.mean["u"], "k-", lw=1.5)
        for b, st in zip(pc.branches, ("C0--", "C3:")):
            ax.plot(b["P"], b["u"], st, lw=1)
            metastable |= st == "C3:"
        ax.plot(P, [r["cold"]["u"] for r in pts], "o", color="C1", mfc="none", ms=7)
        ax.plot(P, [r["hot"]["u"] for r in pts], "x", color="C2", ms=6)
        ax.axvline(pc.transition["P_c_exact"], color="gray", lw=0.8)
        ax.set(xlabel="P", ylabel="u", title=f"linear, one-hot, T = {T}")
    handles = [
        Line2D([], [], color="k", lw=1.5, label="theory <u>"),
        Line2D([], [], color="C0", ls="--", lw=1, label="stable maximum"),
        *([Line2D([], [], color="C3", ls=":", lw=1, label="metastable maximum")] if metastable else []),
        Line2D([], [], color="C1", ls="", marker="o", mfc="none", ms=7, label="NUTS cold (mean)"),
        Line2D([], [], color="C2", ls="", marker="x", ms=6, label="NUTS hot (mean)"),
        Line2D([], [], color="gray", lw=0.8, label="P_c (row sums)"),
    ]
    fig.legend(handles=handles, loc="outside lower center", ncol=3)
    figstyle.save(fig, Path(out) / "onehot_linear_vs_nuts.png")
    for T in Ts:
        pts = sorted((r for r in rows if r["T"] == T), key=lambda r: r["P"])
        P = np.array([r["P"] for r in pts])
        pc = th.phase_curve(ba.CopyTask(T=T, d=D_TOK, tokens="onehot"), ba.Prior(1.0, 100.0, SIGMA2), "linear", P)
        tr = {k: f"{v:.5g}" if isinstance(v, float) else v for k, v in pc.transition.items()}
        print(f"T = {T}: transition " + ", ".join(f"{k} = {v}" for k, v in tr.items()))
        print("| P | theory <u> | NUTS cold | NUTS hot | gap | theory <q> | NUTS <q> |")
        print("|---|---|---|---|---|---|---|")
        for i, r in enumerate(pts):
            mc = 0.5 * (r["cold"]["u"] + r["hot"]["u"])
            print(
                f"| {r['P']:.0f} | {pc.mean['u'][i]:.4f} | {r['cold']['u']:.4f} | {r['hot']['u']:.4f} | "
                f"{abs(pc.mean['u'][i] - mc):.4f} | {pc.mean['q'][i]:.4f} | "
                f"{0.5 * (r['cold']['q'] + r['hot']['q']):.4f} |"
            )


if __name__ == "__main__":
    main()
