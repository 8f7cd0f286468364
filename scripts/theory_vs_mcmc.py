"""Theory vs exact-posterior MCMC: order parameter against P (softmax m, linear u), theory branches (stable
solid, metastable dashed, spinodals dotted), the theory's posterior mean, and NUTS means of cold and hot chains.
Writes <out>/theory_vs_mcmc.json (numbers) and <out>/theory_vs_mcmc.png.

Usage: python scripts/theory_vs_mcmc.py --out results/theory_vs_mcmc [--T 8 32] [--n-P 12] [--draws 1000]
       [--boundary causal --attention softmax --T 16 32]
       [--jobs 8]   (points run in separate processes; set XLA_FLAGS/JAX_PLATFORMS in the environment)
       python scripts/theory_vs_mcmc.py --plot-only results/theory_vs_mcmc/theory_vs_mcmc.json
One data set per P (data key seed + P), the same data for the cold and the hot start.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import multiprocessing as mp
import os

import numpy as np

from bayesattn.models import ORDER_PARAMETER

SIGMA2, D_TOK = 400.0, 8
BETAS = {  # beta = P d / (2 sigma2) values that span each transition (sigma2 = 400, d = 8: P = 100 beta)
    ("softmax", 8): list(np.linspace(1.0, 14.0, 12)),
    # T = 32: coexistence window P ~ 736-748, binodal ~ 738: three points inside, dense around it
    ("softmax", 32): [3, 4, 5, 6, 6.5, 7, 7.2, 7.37, 7.42, 7.47, 7.6, 8, 10, 13, 16],
    ("softmax", 64): list(np.linspace(5.0, 14.0, 12)),
    ("linear", 8): list(np.linspace(1.0, 10.0, 12)),  # P_c = 423
    ("linear", 16): list(np.linspace(3.0, 16.0, 12)),
    ("linear", 32): list(np.linspace(8.0, 30.0, 12)),  # P_c = 1596
    # causal softmax (docs/theory.md section 10): crossovers, steepest near P ~ 400 (T = 16) and ~ 550 (T = 32)
    ("softmax", 16, "causal"): [1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 15, 20],
    ("softmax", 32, "causal"): [1, 2.5, 3.5, 4.5, 5, 5.5, 6, 6.5, 7.5, 9, 12, 18],
}


def P_grid(attention, T, tokens, n_P=0, boundary="cyclic"):
    """P values of one curve: the beta list (BETAS) as P = beta * 2 sigma2 / d for Gaussian tokens; for one-hot
    tokens beta = P (d - 1) / (2 sigma2 d) (docs/theory.md section 8), so P = beta * 2 sigma2 d / (d - 1)."""
    betas = BETAS[(attention, T) if boundary == "cyclic" else (attention, T, boundary)]
    if n_P > 0:
        betas = list(np.linspace(betas[0], betas[-1], n_P))
    per_beta = 2 * SIGMA2 / D_TOK if tokens == "gaussian" else 2 * SIGMA2 * D_TOK / (D_TOK - 1)
    return np.round(np.asarray(betas) * per_beta)


def mcmc_point(attention, T, P, warmup, draws, chains, seed, tokens="gaussian", boundary="cyclic"):
    """NUTS on the closed-form posterior at one P: cold and hot starts on the same data set."""
    import jax

    import bayesattn as ba

    prior = ba.Prior(1.0, 100.0, SIGMA2)
    task = ba.CopyTask(T=T, d=D_TOK, tokens=tokens, boundary=boundary)
    data = task.sample(jax.random.key(seed + int(P)), int(P))
    post = ba.Posterior(data, attention, prior)
    name = ORDER_PARAMETER[attention]
    res = {"attention": attention, "T": T, "P": float(P), "tokens": tokens, "boundary": boundary}
    for j, init in enumerate(("cold", "hot")):
        s = ba.sample(
            post,
            jax.random.key(seed + 100_000 + 7 * int(P) + j),
            num_chains=chains,
            num_warmup=warmup,
            num_samples=draws,
            init=init,
        )
        x = np.asarray(s.order_parameters[name])
        res[init] = float(x.mean())
        res[init + "_chain_means"] = x.mean(axis=1).tolist()
        res[init + "_sem"] = float(x.mean(axis=1).std(ddof=1) / np.sqrt(chains)) if chains > 1 else float("nan")
        res[init + "_divergent"] = int(s.diagnostics.get("num_divergent", 0))
        res[init + "_wall_s"] = float(s.diagnostics.get("wall_time_s", float("nan")))
    return res


def theory(attention, T, P, tokens="gaussian", boundary="cyclic"):
    import bayesattn as ba
    from bayesattn import theory as th

    prior = ba.Prior(1.0, 100.0, SIGMA2)
    task = ba.CopyTask(T=T, d=D_TOK, tokens=tokens, boundary=boundary)
    fine = np.linspace(P[0], P[-1], 200)
    pc = th.phase_curve(task, prior, attention, fine)
    pc_at = th.phase_curve(task, prior, attention, P)
    return pc, pc_at


def branches_at(pc, p, name):
    """Values of the theory's branches (local minima) at p, ascending."""
    return sorted(float(np.interp(p, b["P"], b[name])) for b in pc.branches if b["P"][0] <= p <= b["P"][-1])


def summarise(r):
    """Agreement numbers for one (attention, T): max |theory mean - MCMC| away from the transition, and the
    in-window landing of cold / hot chains on the two branches."""
    from bayesattn import theory as th

    pc = th.PhaseCurve.from_dict(r["curve"])
    name = ORDER_PARAMETER[r["attention"]]
    tr = pc.transition
    away, window = [], []
    for p in r["points"]:
        P = p["P"]
        inside = tr["order"] == "first" and tr["spinodals"][0] <= P <= tr["spinodals"][1]
        near = tr.get("P_c") is not None and abs(P - tr["P_c"]) < 0.06 * tr["P_c"]
        mc = 0.5 * (p["cold"] + p["hot"])
        if inside:
            window.append(
                {
                    "P": P,
                    "branches": p.get("theory_branches") or branches_at(pc, P, name),
                    "cold": p["cold"],
                    "hot": p["hot"],
                }
            )
        elif not near:
            away.append(abs(mc - p["theory_mean"]))
    return {"max_gap_away": max(away) if away else None, "n_away": len(away), "window": window, "transition": tr}


def _rounded(x):
    """``x`` with every float at 5 significant digits, for printing."""
    if isinstance(x, float):
        return float(f"{x:.5g}")
    if isinstance(x, dict):
        return {k: _rounded(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_rounded(v) for v in x]
    return x


def plot(results, path):
    """The theory's branches, stable curve and posterior mean against the NUTS means (cold and hot), one panel per
    result, in the package's figure style (checked and saved by ``figstyle.save``)."""
    from bayesattn import figstyle
    from bayesattn import theory as th

    single = len(results) == 1  # one panel: wider, and a legend of two columns that fits under it
    fig, axes = figstyle.subplots(1, len(results), panel=(5.4, 3.6) if single else (4.2, 3.4))
    for ax, r in zip(axes[0], results):
        name = ORDER_PARAMETER[r["attention"]]
        pc = th.PhaseCurve.from_dict(r["curve"])
        for k, b in enumerate(pc.branches):
            ax.plot(b["P"], b[name], "--", color="0.5", lw=1, label="theory branches" if k == 0 else None)
        ax.plot(pc.P, pc.stable[name], "-", color="k", lw=1.5, label="theory stable")
        ax.plot(pc.P, pc.mean[name], ":", color="C2", label="theory mean")
        for k, sp in enumerate(pc.transition.get("spinodals", [])):
            ax.axvline(sp, color="0.7", ls=":", label="spinodals" if k == 0 else None)
        Ps = [p["P"] for p in r["points"]]
        for init, fmt, color, mfc in (("cold", "o", "C0", None), ("hot", "s", "C3", "none")):
            ax.errorbar(
                Ps,
                [p[init] for p in r["points"]],
                yerr=[p[f"{init}_sem"] for p in r["points"]],
                fmt=fmt,
                ms=3,
                mfc=mfc,
                color=color,
                label=f"NUTS {init} ({figstyle.SEM})",
            )
        ax.set_title(
            f"{r['attention']} {r.get('boundary', 'cyclic')}, T = {r['T']}\n{r.get('tokens', 'gaussian')} tokens "
            f"({pc.transition['order']})"
        )
        ax.set_xlabel("P")
        ax.set_ylabel(f"<{name}>")
    # one legend below the panels, every label once (the spinodals appear only where a panel has them)
    seen = {}
    for ax in axes[0]:
        for h, label in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(label, h)
    fig.legend(list(seen.values()), list(seen), loc="outside lower center", ncol=2 if single else 3)
    figstyle.save(fig, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="results/theory_vs_mcmc", help="output folder")
    ap.add_argument("--T", type=int, nargs="+", default=[8, 32], help="sequence lengths")
    ap.add_argument("--attention", nargs="+", default=["softmax", "linear"], help="attention maps")
    ap.add_argument("--tokens", default="gaussian", choices=["gaussian", "onehot"], help="token distribution")
    ap.add_argument("--boundary", default="cyclic", choices=["cyclic", "causal"], help="mask (causal: softmax only)")
    ap.add_argument("--n-P", type=int, default=0, help="number of P values per curve (0: the built-in list)")
    ap.add_argument("--warmup", type=int, default=400, help="NUTS warmup steps")
    ap.add_argument("--draws", type=int, default=800, help="NUTS draws per chain")
    ap.add_argument("--chains", type=int, default=4, help="chains per start (cold and hot)")
    ap.add_argument("--seed", type=int, default=0, help="data / sampler seed")
    ap.add_argument("--jobs", type=int, default=1, help="points run in parallel processes")
    ap.add_argument("--plot-only", default=None, help="re-plot and re-summarise a saved theory_vs_mcmc.json")
    a = ap.parse_args()
    if a.plot_only:
        with open(a.plot_only) as f:
            results = json.load(f)["results"]
        for r in results:
            print(r["attention"], r["T"], json.dumps(_rounded(summarise(r))))
        plot(results, os.path.join(os.path.dirname(a.plot_only), "theory_vs_mcmc.png"))
        return
    os.makedirs(a.out, exist_ok=True)
    configs = [(att, T) for att in a.attention for T in a.T]
    grids = {(att, T): P_grid(att, T, a.tokens, a.n_P, a.boundary) for att, T in configs}
    tasks = [(att, T, float(P)) for (att, T), Ps in grids.items() for P in Ps]
    if a.jobs > 1:
        with cf.ProcessPoolExecutor(a.jobs, mp_context=mp.get_context("spawn")) as ex:
            futs = [
                ex.submit(mcmc_point, att, T, P, a.warmup, a.draws, a.chains, a.seed, a.tokens, a.boundary)
                for att, T, P in tasks
            ]
            points = []
            for f in cf.as_completed(futs):
                points.append(f.result())
                p = points[-1]
                print(
                    f"{p['attention']} T={p['T']} P={p['P']:.0f}: cold {p['cold']:.4f} hot {p['hot']:.4f}", flush=True
                )
    else:
        points = []
        for att, T, P in tasks:
            points.append(mcmc_point(att, T, P, a.warmup, a.draws, a.chains, a.seed, a.tokens, a.boundary))
            p = points[-1]
            print(f"{p['attention']} T={p['T']} P={p['P']:.0f}: cold {p['cold']:.4f} hot {p['hot']:.4f}", flush=True)
    results = []
    for att, T in configs:
        P = grids[(att, T)]
        pc, pc_at = theory(att, T, P, a.tokens, a.boundary)
        name = ORDER_PARAMETER[att]
        rows = sorted((p for p in points if p["attention"] == att and p["T"] == T), key=lambda p: p["P"])
        for i, p in enumerate(rows):
            p["theory_mean"] = float(pc_at.mean[name][i])
            p["theory_stable"] = float(pc_at.stable[name][i])
            p["theory_branches"] = branches_at(pc_at, p["P"], name)
            print(
                f"{att} T={T} P={p['P']:.0f}: theory mean {p['theory_mean']:.4f} stable {p['theory_stable']:.4f} "
                f"| MCMC cold {p['cold']:.4f} hot {p['hot']:.4f}",
                flush=True,
            )
        r = {
            "attention": att,
            "T": T,
            "tokens": a.tokens,
            "boundary": a.boundary,
            "curve": pc.to_dict(),
            "points": rows,
        }
        r["summary"] = summarise(r)
        print(att, T, json.dumps(_rounded(r["summary"])), flush=True)
        results.append(r)
    with open(os.path.join(a.out, "theory_vs_mcmc.json"), "w") as f:
        json.dump({"config": vars(a), "results": results}, f)
    plot(results, os.path.join(a.out, "theory_vs_mcmc.png"))


if __name__ == "__main__":
    main()
