"""Issue 20's figure, from the saved files of ``bayesattn.experiments.three_transitions`` only."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from ...files import load_results  # noqa: E402

COLORS = {"joint": "tab:green", "marginal": "tab:orange", "posterior": "k"}
LABELS = {
    "joint": "joint mode (Adam on the network)",
    "marginal": "marginal mode (V integrated out)",
    "posterior": "posterior",
}


def _num(v):
    return np.nan if v is None else float(v)


def plot_three_transitions(out_dir) -> list[Path]:
    """Left two panels: transition P vs T (softmax, linear): theory lines (binodal solid, spinodals dashed;
    crossovers dotted), Adam points (small init filled, hot init open), MCMC points (black, shifted right a
    little; the bar spans the cold and hot starts' crossings). Right: transition P vs SGLD temperature
    tau at one T (theory binodal and spinodals, joint and marginal modes at tau = 0, SGLD points)."""
    out_dir = Path(out_dir)
    recs = [r for part in sorted((out_dir / "points").iterdir()) if part.is_dir() for r in load_results(part)]
    theory, adam, mcmc, tau_th, sgld = {}, {}, {}, None, []
    for r in recs:
        p, res = r["point"], r["result"]
        if p["kind"] == "theory":
            theory[(p["attention"], p["T"])] = res
        elif p["kind"] == "adam":
            adam[(p["attention"], p["T"], p["objective"], p["init"])] = res
        elif p["kind"] == "mcmc":
            mcmc[(p["attention"], p["T"])] = res
        elif p["kind"] == "tau_theory":
            tau_th = res
        elif p["kind"] == "sgld":
            sgld.append((p, res))
    atts = [a for a in ("softmax", "linear") if any(k[0] == a for k in theory)]
    ncol = len(atts) + (tau_th is not None)
    fig, axes = plt.subplots(1, ncol, figsize=(4.6 * ncol, 4.0), squeeze=False)
    for ax, a in zip(axes[0], atts):
        Ts = sorted(T for (aa, T) in theory if aa == a)
        for kind in ("joint", "marginal", "posterior"):
            Pc = [_num(theory[(a, T)][kind]["P_c"]) for T in Ts]
            first = [theory[(a, T)][kind]["order"] == "first" for T in Ts]
            ax.plot(Ts, Pc, "-", color=COLORS[kind], label=LABELS[kind] + " (theory)")
            for i, T in enumerate(Ts):
                if not first[i] and theory[(a, T)][kind]["order"] == "crossover":
                    ax.plot([T], [Pc[i]], "o", mfc="none", color=COLORS[kind], ms=9, alpha=0.5)
            lo = [theory[(a, T)][kind]["spinodals"][0] if first[i] else np.nan for i, T in enumerate(Ts)]
            hi = [theory[(a, T)][kind]["spinodals"][1] if first[i] else np.nan for i, T in enumerate(Ts)]
            ax.plot(Ts, lo, "--", color=COLORS[kind], lw=0.8, marker="_", ms=10)
            ax.plot(Ts, hi, "--", color=COLORS[kind], lw=0.8, marker="_", ms=10)
        for obj in ("joint", "marginal"):
            for init, mfc in (("small", None), ("hot", "none")):
                pts = [(T, _num(adam[(a, T, obj, init)]["P"])) for T in Ts if (a, T, obj, init) in adam]
                if pts:
                    x, y = zip(*pts)
                    kw = {} if mfc is None else {"mfc": mfc}
                    ax.plot(
                        x,
                        y,
                        "s" if init == "small" else "D",
                        color=COLORS[obj],
                        ls="none",
                        ms=6,
                        **kw,
                        label=f"Adam, {obj}, {init} init",
                    )
        pts = [(T, mcmc[(a, T)]) for T in Ts if (a, T) in mcmc and mcmc[(a, T)]["P"] is not None]
        if pts:  # the midpoint of the cold and hot starts' crossings; the bar spans the two
            x = np.array([T for T, _ in pts], float)
            y = np.array([r["P"] for _, r in pts])
            err = np.array([[r["P"] - r["bracket"][0], r["bracket"][1] - r["P"]] for _, r in pts]).T
            ax.errorbar(
                x * 1.06,
                y,
                yerr=err,
                fmt="o",
                color="k",
                ms=5,
                capsize=3,
                label="MCMC (NUTS; bar: cold and hot starts)",
            )
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(Ts, [str(T) for T in Ts])
        ax.set_xlabel("T")
        ax.set_ylabel("transition P")
        ax.set_title(f"{a} attention")
    axes[0][0].legend(fontsize=6, loc="lower right")
    if tau_th is not None:
        ax = axes[0][-1]
        tau = np.asarray(tau_th["tau"], float)
        ax.plot(tau, [_num(v) for v in tau_th["P_c"]], "k-", label="posterior at tau (theory binodal)")
        sp = [s if len(s) == 2 else [np.nan, np.nan] for s in tau_th["spinodals"]]
        ax.plot(tau, [s[0] for s in sp], "k--", lw=0.8, label="spinodals")
        ax.plot(tau, [s[1] for s in sp], "k--", lw=0.8)
        for obj in ("joint", "marginal"):
            t = tau_th[obj]
            ax.errorbar(
                [0.0],
                [_num(t["P_c"])],
                yerr=[[_num(t["P_c"]) - t["spinodals"][0]], [t["spinodals"][1] - _num(t["P_c"])]]
                if t["spinodals"]
                else None,
                fmt="*",
                color=COLORS[obj],
                ms=10,
                capsize=3,
                label=f"{obj} mode (tau = 0)",
            )
        for p, res in sgld:
            Ps, m = np.asarray(res["P"]), np.asarray(res["m_mean"])
            thr = 0.5 * (np.nanmin(res["theory_mean_m"]) + np.nanmax(res["theory_mean_m"]))
            idx = np.flatnonzero(m > thr)
            if idx.size and idx[0] > 0:
                ax.plot(
                    [p["tau"]],
                    [0.5 * (Ps[idx[0] - 1] + Ps[idx[0]])],
                    "s" if p["init"] == "small" else "D",
                    color="tab:blue",
                    mfc=None if p["init"] == "small" else "none",
                    ms=6,
                )
        ax.set_xlabel("SGLD temperature tau (units of sigma2)")
        ax.set_ylabel("transition P")
        ax.set_title(f"softmax, T = {int(recs[0]['point']['config']['tau_T'])}: SGLD at tau")
        ax.legend(fontsize=6, loc="lower right")
    fig.tight_layout()
    fdir = out_dir / "figures"
    fdir.mkdir(parents=True, exist_ok=True)
    paths = [fdir / "three_transitions.png", fdir / "three_transitions.pdf"]
    for pth in paths:
        fig.savefig(pth, dpi=130)
    plt.close(fig)
    return paths
