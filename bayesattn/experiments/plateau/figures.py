"""The plateau figure, from the saved files of ``bayesattn.experiments.plateau`` only, drawn and checked through
:mod:`bayesattn.figstyle`: per case, the plateau length against the distance from the transition (log axes),
gradient descent and SGLD (top, flow time) beside the theory's prediction and its asymptotic law, Adam (bottom,
steps)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator

from ... import figstyle
from ...files import load_results, read_json

COLORS = {"gd": "tab:blue", "sgld": "tab:green", "adam": "tab:red", "flow": "tab:purple", "flow_joint": "tab:brown"}
MAX_COLS = 4
NAMES = {"gd": "gd", "sgld": "SGLD", "adam": "Adam", "flow": "flow (marginal)", "flow_joint": "flow (joint)"}


def _x(P, P_star, is_ref: bool):
    P = np.asarray(P, float)
    return P if is_ref else P - P_star


def _measured(ax, case: dict, method: str, is_ref: bool) -> bool:
    """The medians and intervals of one method; False when it was not run or never crossed."""
    m = case["methods"].get(method)
    rows = [r for r in (m or {}).get("per_P", []) if r["median"] is not None]
    if not rows:
        return False
    x = _x([r["P"] for r in rows], case["P_star"], is_ref)
    med = np.array([r["median"] for r in rows])
    lo = np.array([r["ci"][0] if r["ci"] else r["median"] for r in rows])
    hi = np.array([r["ci"][1] if r["ci"] else r["median"] for r in rows])
    fit = m.get("fit") or {}
    slope = f", slope {fit['exponent']:.2f}" if fit.get("exponent") is not None else ""
    lab = f"{NAMES[method]}{slope}"
    marker = {"flow": "s", "flow_joint": "D"}.get(method, "o")  # flow and gd coincide: open squares show both
    face = "none" if method == "flow" else COLORS[method]
    ax.errorbar(
        x,
        med,
        yerr=[med - lo, hi - med],
        fmt=marker,
        color=COLORS[method],
        mfc=face,
        ms=6 if method == "flow" else 4,
        capsize=2,
        label=lab,
    )
    return True


def _panel(ax, case: dict, theory: dict, row: str) -> None:
    """Row "flow": gradient descent and SGLD in flow time beside the prediction; row "adam": Adam in steps."""
    is_ref = case["P_star_is"] == "P_ref"
    P_star = case["P_star"]
    drawn = False
    if row == "flow":
        curve = theory["curve"]
        P = np.asarray(curve["P"], float)
        t = np.asarray(curve["t_plateau"], float)
        ok = np.isfinite(t) & (_x(P, P_star, is_ref) > 0)
        ax.plot(_x(P, P_star, is_ref)[ok], t[ok], "-", color="k", lw=1.2, label="theory")
        law = np.asarray(curve.get("bottleneck", curve.get("escape", [np.nan] * len(P))), float)
        # the law is the limit P -> P_star: drawn up to 0.2 P_star away from it
        ok = np.isfinite(law) & (_x(P, P_star, is_ref) > 0) & (P <= 1.2 * P_star)
        if ok.any():
            name = "law (P - P_s)^-1/2" if case["P_star_is"] == "P_s" else "law 1/(P - P_c)"
            ax.plot(_x(P, P_star, is_ref)[ok], law[ok], "--", color="0.5", lw=1.0, label=name)
        for method in ("gd", "sgld", "flow", "flow_joint"):
            drawn |= _measured(ax, case, method, is_ref)
    else:
        drawn = _measured(ax, case, "adam", is_ref)
    if row == "adam" and not drawn:
        figstyle.empty_panel(ax, "Adam: not run, or no seed left the plateau")
        return
    ax.set_xscale("log")
    ax.set_yscale("log")
    for axis, lim in ((ax.xaxis, ax.get_xlim()), (ax.yaxis, ax.get_ylim())):
        # labelled ticks only, denser where the axis spans little more than a decade
        subs = (1.0, 2.0, 3.0, 5.0, 7.0) if lim[1] / lim[0] < 12 else (1.0, 2.0, 5.0)
        axis.set_major_locator(LogLocator(base=10.0, subs=subs))
        axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        axis.set_minor_locator(NullLocator())
    ax.set_xlabel("P" if is_ref else f"P - {case['P_star_is']}  ({case['P_star_is']} = {P_star:.0f})")
    ax.set_ylabel("plateau, flow time lr x steps" if row == "flow" else "plateau, Adam steps")
    seeds = max((m.get("seeds", 0) for m in case["methods"].values()), default=0)
    flows = [NAMES[m] for m in ("gd", "sgld", "flow", "flow_joint") if m in case["methods"]]
    what = ", ".join(flows) if row == "flow" else "Adam"
    ax.set_title(f"{case['case']}: {what}\nmedian of {seeds} seed{'s' if seeds != 1 else ''}, 95% CI")
    figstyle.legend(ax)


def draw_all(folder) -> list[Path]:
    folder = Path(folder)
    summary_file = folder / "summary.json"
    if not summary_file.exists():
        return []
    summary = read_json(summary_file)
    theory = {}
    for r in load_results(folder / "points" / "theory"):
        c = r["point"]["case"]
        theory[f"{c['attention']} T={c['T']}"] = r["result"]
    cases = [c for c in summary["cases"] if c["case"] in theory]
    if not cases:
        return []
    rows = ["flow"] + (["adam"] if any("adam" in c["methods"] for c in cases) else [])
    # at most MAX_COLS cases side by side; more go on further blocks of rows (not a strip too wide to read)
    cols = min(MAX_COLS, len(cases))
    blocks = -(-len(cases) // cols)
    fig, axes = figstyle.subplots(len(rows) * blocks, cols, panel=(4.8, 3.6))
    for j, case in enumerate(cases):
        b, col = divmod(j, cols)
        for i, row in enumerate(rows):
            _panel(axes[b * len(rows) + i, col], case, theory[case["case"]], row)
    for j in range(len(cases), blocks * cols):  # the last block's empty places
        b, col = divmod(j, cols)
        for i in range(len(rows)):
            axes[b * len(rows) + i, col].remove()
    out = figstyle.save(fig, folder / "figures" / "plateau.png", pdf=True)
    return [out, out.with_suffix(".pdf")]
