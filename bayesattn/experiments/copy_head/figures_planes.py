"""Figure 3 of docs/model.md section 5: the phase diagrams in the (P, sigma_A2) or (P, T) plane, drawn from the saved
theory points of a phase-diagram run (:mod:`.figures` draws the others)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.ticker import NullLocator

from ... import figstyle
from ...models.attention import attention_kind
from .figures_common import (
    arr,
    attention_panels,
    log_P_axis,
    save,
    title_params,
)

FEW_ROWS = 8  # a plane with fewer values of the varied parameter is shaded by interpolation between them


def _plane_heat_map(fig, ax, pl: dict, att: str) -> bool:
    """The theory's posterior mean of the order parameter over (P, vary) under the transition lines. With fewer
    than :data:`FEW_ROWS` values of the varied parameter (the default's four T) the shading interpolates linearly
    between the computed rows (a flat band per row would be blocky and claim a value it never computed) and
    spans exactly the computed range; with more, one cell per grid point. True when interpolated."""
    P, v = arr(pl["P"]), arr(pl["vary_values"])
    mean = np.stack([arr(row) for row in pl["mean"]])
    name = attention_kind(att).order_parameter
    top = float(np.nanmax(mean)) if np.any(np.isfinite(mean)) else 1.0
    kw = dict(cmap="Greys", vmin=0.0, vmax=max(top, 1e-3), alpha=0.7, rasterized=True)
    smooth = 1 < len(v) < FEW_ROWS and bool(np.all(np.isfinite(mean)))
    if smooth:
        mesh = ax.pcolormesh(P, v, mean, shading="gouraud", **kw)
    else:
        # cell edges: geometric midpoints in P (log axis), midpoints in the varied parameter
        Pe = np.concatenate([[P[0] ** 1.5 / P[1] ** 0.5], np.sqrt(P[1:] * P[:-1]), [P[-1] ** 1.5 / P[-2] ** 0.5]])
        ve = (
            np.concatenate([[v[0] - 0.5 * (v[1] - v[0])], 0.5 * (v[1:] + v[:-1]), [v[-1] + 0.5 * (v[-1] - v[-2])]])
            if len(v) > 1
            else np.array([v[0] * 0.9, v[0] * 1.1])
        )
        mesh = ax.pcolormesh(Pe, ve, np.ma.masked_invalid(mean), shading="flat", **kw)
    fig.colorbar(mesh, ax=ax, label=f"posterior mean {name} (theory)", shrink=0.85, pad=0.02)
    return smooth


def _phase_labels(fig, axes_pl) -> None:
    """'uniform' at the small-P edge and 'copy' at the large-P edge of each plane, at the first height where the
    theory's posterior mean says so (below / above half its top) and the label covers no line or marker; none
    where no such spot exists. 'coexistence' between the spinodals where they are far enough apart to write in
    and the label covers nothing."""
    renderer = figstyle.laid_out_renderer(fig)
    for ax, pl in axes_pl:
        pts = figstyle.data_points(ax)
        P, v = arr(pl["P"]), arr(pl["vary_values"])
        mean = np.stack([arr(row) for row in pl["mean"]])
        half = 0.5 * float(np.nanmax(mean)) if np.any(np.isfinite(mean)) else np.nan
        to_data = ax.transAxes + ax.transData.inverted()
        style = dict(fontsize=8, va="center", color="k", bbox=dict(fc="white", ec="none", alpha=0.7, pad=1))
        for text, fx, ha, want in (("uniform", 0.02, "left", np.less), ("copy", 0.98, "right", np.greater)):
            t = ax.text(fx, 0.5, text, ha=ha, transform=ax.transAxes, **style)
            for fy in (0.5, 0.35, 0.65, 0.2, 0.8, 0.08, 0.92):
                Px, vy = to_data.transform((fx, fy))
                row = int(np.argmin(np.abs(np.log(v / vy)))) if np.all(v > 0) else int(np.argmin(np.abs(v - vy)))
                col = int(np.argmin(np.abs(np.log(P / Px))))
                t.set_position((fx, fy))
                if want(mean[row, col], half) and figstyle.count_in(t.get_window_extent(renderer), pts) == 0:
                    break
            else:
                t.remove()
        lo, hi = arr(pl.get("spinodal_low", [])), arr(pl.get("spinodal_high", []))
        wide = np.flatnonzero(np.isfinite(lo) & np.isfinite(hi) & (hi > 1.3 * lo)) if lo.size and hi.size else []
        if len(wide):
            k = int(wide[-1])
            t = ax.text(np.sqrt(lo[k] * hi[k]), v[k], "coexistence", fontsize=8, ha="center", va="bottom")
            t.set_color("tab:purple")
            if figstyle.count_in(t.get_window_extent(renderer), pts):
                t.remove()


def fig_planes(runs: dict, out: Path) -> list[Path]:
    th = runs.get("theory", {})
    if not (panels := attention_panels(runs, "theory", 4.4, need="plane")):
        return []
    atts, fig, axes = panels
    name = th[atts[0]][0]["result"]["plane"]["vary_name"]
    axes_pl, smooth = [], False
    for ax, att in zip(axes, atts):
        pl = th[att][0]["result"]["plane"]
        v = arr(pl["vary_values"])
        heat = pl.get("mean") is not None and pl.get("P") is not None
        if heat:
            smooth |= _plane_heat_map(fig, ax, pl, att)
            axes_pl.append((ax, pl))
        ax.plot(
            arr(pl["P_c"]),
            v,
            "o-",
            color="tab:orange",
            label="first-order line (binodal)" if attention_kind(att).normalised else "critical line",
        )
        if np.any(np.isfinite(arr(pl.get("spinodal_low")))):
            ax.plot(arr(pl["spinodal_low"]), v, "v--", color="tab:blue", label="lower spinodal")
            ax.plot(arr(pl["spinodal_high"]), v, "^--", color="tab:red", label="upper spinodal")
        if pl.get("crossover") is not None and np.any(np.isfinite(arr(pl["crossover"]))):
            ax.plot(arr(pl["crossover"]), v, "s:", color="tab:green", label="crossover")
        P_pl = np.concatenate(
            [arr(pl[k]) for k in ("P_c", "spinodal_low", "spinodal_high", "crossover") if pl.get(k) is not None]
        )
        P_pl = P_pl[np.isfinite(P_pl)]
        if heat:  # the heat map spans the whole P grid
            P_pl = arr(pl["P"])
        if P_pl.size:
            log_P_axis(ax, float(P_pl.min()), float(P_pl.max()))
        else:
            ax.set_xscale("log")
        if name == "T" and np.all(v > 0):  # T doubles from row to row: even spacing, a tick at each computed T
            ax.set_yscale("log", base=2)
        if len(v) <= 12:
            ax.set_yticks(v, [f"{x:g}" for x in v])
            ax.yaxis.set_minor_locator(NullLocator())
        if heat and smooth and len(v) > 1:
            ax.set_ylim(v.min(), v.max())
        ax.set_xlabel("training sequences P")
        ax.set_ylabel({"sigma_A2": "prior variance σ_A²", "T": "sequence length T"}.get(name, name))
        ax.set_title(f"{att} attention")
        ax.grid(alpha=0.3)
        figstyle.legend(ax)
    if axes_pl:
        _phase_labels(fig, axes_pl)
    what = {"sigma_A2": "σ_A²"}.get(name, name)
    shade = f"; shading interpolated between the computed {what} (ticks)" if smooth else ""
    fig.suptitle(f"Phase diagram in the (P, {what}) plane (theory{shade})\n" + title_params(th[atts[0]][0], skip=name))
    return save(fig, out, f"fig3_phase_diagram_P_{name}")
