"""The three-transitions figure, from the saved files of ``bayesattn.experiments.three_transitions`` only, drawn and checked
through :mod:`bayesattn.figstyle`."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ... import figstyle
from ...files import load_results, read_json
from ...stats import fmt_ci
from .summary import WITHIN, sgld_jump

COLORS = {"joint": "tab:green", "marginal": "tab:orange", "posterior": "k"}
LABELS = {
    "joint": "joint mode (Adam on the network)",
    "marginal": "marginal mode (V integrated out)",
    "posterior": "posterior",
}
SGLD_COLOR = "tab:blue"
MARKER = {"small": "s", "hot": "D"}  # Adam and SGLD: small init filled square, hot init open diamond


def _num(v):
    return np.nan if v is None else float(v)


def _read(out_dir: Path):
    """The run's point results by kind; of the seeded kinds, the lowest seed's (the config's ``seed``: the run the
    summary's table gives)."""
    recs = [r for part in sorted((out_dir / "points").iterdir()) if part.is_dir() for r in load_results(part)]
    first = min((r["point"]["config"]["seed"] for r in recs if "seed" in r["point"].get("config", {})), default=None)
    recs = [r for r in recs if r["point"].get("config", {}).get("seed", first) == first]
    theory, adam, mcmc, tau, sgld = {}, {}, {}, None, []
    for r in recs:
        p, res = r["point"], r["result"]
        if p["kind"] == "theory":
            theory[(p["attention"], p["T"])] = res
        elif p["kind"] == "adam":
            adam[(p["attention"], p["T"], p["objective"], p["init"])] = res
        elif p["kind"] == "mcmc":
            mcmc[(p["attention"], p["T"])] = res
        elif p["kind"] == "tau_theory":
            tau = r
        elif p["kind"] == "sgld":
            sgld.append((p, res))
    return theory, adam, mcmc, tau, sgld


def _tau_T(rec: dict):
    """The T of the SGLD panel, from the tau-theory point's config (older files: ``tau_T``)."""
    c = rec["point"].get("config", {})
    return (c.get("tau") or {}).get("T", c.get("tau_T"))


def _T_panel(ax, a: str, theory: dict, adam: dict, mcmc: dict) -> None:
    """Transition P vs T for one attention: the theory's three transitions (lines; their spinodals dashed with
    end ticks where first order; an open circle where it is a crossover, no sharp transition), Adam's measured
    transitions (filled square: small init, open diamond: hot init), MCMC's (black, shifted right a little)."""
    Ts = sorted(T for (aa, T) in theory if aa == a)
    for kind in ("joint", "marginal", "posterior"):
        res = [theory[(a, T)][kind] for T in Ts]
        Pc = [_num(r["P_c"]) for r in res]
        first = [r["order"] == "first" for r in res]
        ax.plot(Ts, Pc, "-", color=COLORS[kind], label=f"theory: {LABELS[kind]}")
        cross = [(T, p) for T, p, r in zip(Ts, Pc, res) if r["order"] == "crossover"]
        if cross:
            x, y = zip(*cross)
            ax.plot(x, y, "o", mfc="none", color=COLORS[kind], ms=9, alpha=0.5, ls="none")
        for side in (0, 1):
            s = [r["spinodals"][side] if f and len(r["spinodals"]) == 2 else np.nan for r, f in zip(res, first)]
            ax.plot(Ts, s, "--", color=COLORS[kind], lw=0.8, marker="_", ms=10)
    for obj in ("joint", "marginal"):
        for init in ("small", "hot"):
            pts = [(T, _num(adam[(a, T, obj, init)]["P"])) for T in Ts if (a, T, obj, init) in adam]
            if pts:
                x, y = zip(*pts)
                kw = {"mfc": "none"} if init == "hot" else {}
                ax.plot(x, y, MARKER[init], color=COLORS[obj], ls="none", ms=6, label=f"Adam, {obj}, {init} init", **kw)
    pts = [(T, mcmc[(a, T)]) for T in Ts if (a, T) in mcmc and mcmc[(a, T)].get("P") is not None]
    if pts:  # the midpoint of the cold and hot starts' crossings; the bar spans the two
        x = np.array([T for T, _ in pts], float)
        y = np.array([r["P"] for _, r in pts], float)
        lo = np.array([r["bracket"][0] for _, r in pts], float)
        hi = np.array([r["bracket"][1] for _, r in pts], float)
        apart = float(np.max((hi - lo) / y))
        ax.errorbar(x * 1.06, y, yerr=[y - lo, hi - y], fmt="o", color="k", ms=4, capsize=4, label=_mcmc_label(apart))
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(Ts, [str(T) for T in Ts])
    ax.xaxis.set_minor_locator(figstyle_null())
    ax.set_xlabel("sequence length T")
    ax.set_ylabel("transition P")
    ax.set_title(f"{a} attention")


def _mcmc_label(apart: float) -> str:
    """MCMC's legend entry; where the cold and hot starts' crossings are too close for the bar to show beyond
    the marker (on a log axis, a few per cent), it says how close."""
    if apart < 0.1:
        return f"MCMC (NUTS): midpoint of the cold- and hot-start crossings (they differ by ≤ {apart:.0%})"
    return "MCMC (NUTS): midpoint of the cold- and hot-start crossings (bar: the two)"


def figstyle_null():
    from matplotlib.ticker import NullLocator

    return NullLocator()


def _tau_panel(ax, tau_rec: dict, sgld: list) -> None:
    """Transition P vs the SGLD temperature tau at one T: the theory's posterior binodal and spinodals at tau,
    the joint and marginal modes at tau = 0 (stars, bars: their spinodals), SGLD's measured crossings."""
    tau_th = tau_rec["result"]
    tau = np.asarray(tau_th["tau"], float)
    ax.plot(tau, [_num(v) for v in tau_th["P_c"]], "k-", label="theory: posterior at tau (binodal)")
    sp = [s if len(s) == 2 else [np.nan, np.nan] for s in tau_th["spinodals"]]
    ax.plot(tau, [s[0] for s in sp], "k--", lw=0.8, label="theory: posterior's spinodals at tau")
    ax.plot(tau, [s[1] for s in sp], "k--", lw=0.8)
    for obj in ("joint", "marginal"):
        t = tau_th[obj]
        Pc = _num(t["P_c"])
        err = [[Pc - t["spinodals"][0]], [t["spinodals"][1] - Pc]] if t["spinodals"] else None
        ax.errorbar([0.0], [Pc], yerr=err, fmt="*", color=COLORS[obj], ms=10, capsize=3, label=f"{obj} mode (tau = 0)")
    for p, res in sgld:
        br = sgld_jump(res)
        if br is not None:
            kw = {"mfc": "none"} if p["init"] == "hot" else {}
            y = 0.5 * (br[0] + br[1])
            ax.plot([p["tau"]], [y], MARKER[p["init"]], color=SGLD_COLOR, ms=6, label=f"SGLD, {p['init']} init", **kw)
    ax.set_xlabel("SGLD temperature tau (units of σ²)")
    ax.set_ylabel("transition P")
    T = _tau_T(tau_rec)
    ax.set_title(f"softmax, T = {T}: SGLD at tau" if T is not None else "softmax: SGLD at tau")


def _legend(fig, axes) -> None:
    """One legend below the panels for every kind of mark drawn (the panels' data fill their corners)."""
    from matplotlib.lines import Line2D

    handles: dict = {}
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(lab, h)
    drawn = [ln for ax in axes for ln in ax.get_lines()]
    if any(ln.get_linestyle() == "--" and ln.get_color() != "k" and np.isfinite(ln.get_ydata()).any() for ln in drawn):
        handles["theory: spinodals of a first-order transition (dashed, colour of its line)"] = Line2D(
            [], [], ls="--", lw=0.8, marker="_", ms=10, color="0.4"
        )
    if any(ln.get_marker() == "o" and ln.get_alpha() == 0.5 for ln in drawn):
        handles["theory: crossover, no sharp transition (open circle, colour of its line)"] = Line2D(
            [], [], ls="none", marker="o", mfc="none", ms=9, alpha=0.5, color="0.4"
        )
    if handles:
        # three columns where they fit the figure's width, else fewer (one panel: a 5.6-inch figure)
        renderer = fig.canvas.get_renderer()
        for ncol in (3, 2, 1):
            leg = fig.legend(list(handles.values()), list(handles), loc="outside lower center", ncol=ncol)
            if ncol == 1 or leg.get_window_extent(renderer).width <= fig.bbox.width:
                break
            leg.remove()


def plot_three_transitions(out_dir) -> list[Path]:
    """Left panels: transition P vs T (softmax, linear): theory lines (the three transitions; spinodals dashed,
    crossovers open circles), Adam points (small init filled, hot init open), MCMC points (black, shifted right a
    little; the bar spans the cold and hot starts' crossings). Right: transition P vs SGLD temperature tau at
    one T (theory binodal and spinodals, joint and marginal modes at tau = 0, SGLD points). One legend below
    all panels names every mark."""
    out_dir = Path(out_dir)
    theory, adam, mcmc, tau_rec, sgld = _read(out_dir)
    atts = [a for a in ("softmax", "linear") if any(k[0] == a for k in theory)]
    ncol = len(atts) + (tau_rec is not None)
    fig, axes = figstyle.subplots(1, max(ncol, 1), panel=(4.6, 3.8))
    axes = list(axes[0])
    if not ncol:
        figstyle.empty_panel(axes[0], "no theory or SGLD points in this run folder yet")
    for ax, a in zip(axes, atts):
        _T_panel(ax, a, theory, adam, mcmc)
    if tau_rec is not None:
        _tau_panel(axes[-1], tau_rec, sgld)
    _legend(fig, axes)
    png = figstyle.save(fig, out_dir / "figures" / "three_transitions.png", pdf=True)
    return [png, png.with_suffix(".pdf")]


def plot_seeds(out_dir) -> list[Path]:
    """From summary.json, when the run has several seeds: each measured transition's P over its theory value, one
    dot per seed (a cross at the edge: not found), its median and 95% bootstrap interval (square), and the band
    within which it counts as matching the theory; (a) Adam against the zero-temperature modes, (b) NUTS against
    the posterior. No seeds' statistics: no figure (an empty list)."""
    out_dir = Path(out_dir)
    summary = out_dir / "summary.json"
    st = read_json(summary).get("seeds") if summary.exists() else None
    if not st:
        return []
    groups = [
        (
            "adam",
            "(a) Adam / zero-temperature theory",
            lambda r: f"{r['attention']} T={r['T']} {r['objective']}, {r['init']}",
        ),
        ("mcmc", "(b) NUTS / posterior theory", lambda r: f"{r['attention']} T={r['T']}"),
    ]
    rows = max(len(st[m]["transitions"]) for m, _, _ in groups)
    fig, axes = figstyle.subplots(1, 2, panel=(4.4, max(2.6, 0.7 + 0.24 * rows)))
    for ax, (method, title, label) in zip(axes[0], groups):
        trans = st[method]["transitions"]
        ax.axvspan(1 - WITHIN, 1 + WITHIN, color="0.9", lw=0, label=f"within {WITHIN:.0%} of the theory")
        ax.axvline(1.0, color="0.5", lw=0.8)
        lo, hi = 1 - 3 * WITHIN, 1 + 3 * WITHIN
        for y, r in enumerate(trans):
            ratio = np.array([np.nan if P is None else P / r["theory"] for P in r["P"]], float)
            lo, hi = min(lo, np.nanmin(ratio, initial=lo)), max(hi, np.nanmax(ratio, initial=hi))
            jitter = np.linspace(-0.2, 0.2, ratio.size)
            ax.plot(ratio, y + jitter, "o", color="tab:blue", alpha=0.6, ms=3.5)
            med = r["ratio"]
            if med["median"] is not None and med["ci"] is not None:
                err = [[med["median"] - med["ci"][0]], [med["ci"][1] - med["median"]]]
                ax.errorbar([med["median"]], [y + 0.35], xerr=err, fmt="s", color="k", ms=4, capsize=2)
        pad = 0.02 * (hi - lo)
        for y, r in enumerate(trans):
            n = sum(P is None for P in r["P"])
            if n:
                ax.plot([hi + pad] * n, y + np.linspace(-0.2, 0.2, n), "x", color="tab:red", ms=4)
        w = st[method]["within"]
        ax.set_yticks(range(len(trans)), [label(r) for r in trans])
        ax.set(
            xlim=(lo - 2 * pad, hi + 3 * pad),
            ylim=(len(trans) - 0.4, -0.6),
            xlabel="measured P / theory P",
            title=f"{title}\n{w['solved']} of {w['seeds']} within {WITHIN:.0%} {fmt_ci(w['ci'])}",
        )
    figstyle.legend(axes[0][1], outside=True)
    fig.suptitle(f"{len(st['seeds'])} seeds: dots, one per seed; squares, median and 95% interval; x, not found")
    return [figstyle.save(fig, out_dir / "figures" / "three_transitions_seeds.png")]
