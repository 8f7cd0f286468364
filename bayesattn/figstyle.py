"""The package's figure style, and its figure check (:mod:`bayesattn.figcheck`): every figure module draws
through this.

Style: a headless pyplot (imported on first use, so that importing bayesattn stays light) with the package's
font sizes (nothing below :data:`MIN_FONT` points at the saved size), :func:`subplots` (panel sizes, constrained
layout), :func:`legend` (placed by :func:`save` in a corner free of data, else outside the axes), :func:`note`
(a text box placed the same way), :func:`empty_panel` (says why a panel has nothing to show),
:func:`integer_ticks` (discrete axes), :func:`log_x_axis` (plain-number labels on a log axis) and the error-bar
names :data:`SEM` and :data:`SD`, which every figure with error bars writes in its legend or caption.

Check: :func:`check_figure` lists a drawn figure's problems from matplotlib's artist extents: a legend or text
box over a data point or line, an axis label, tick label, title or text cut by the figure's edge, overlapping
labels, text below :data:`MIN_FONT`. :func:`save` runs it: a problem warns once per figure (naming the figure);
with ``STRICT = True`` or the environment variable ``BAYESATTN_FIGURE_CHECK=error`` it raises
:class:`FigureCheckError` (the tests do), ``BAYESATTN_FIGURE_CHECK=off`` skips it.
"""

from __future__ import annotations

import os
import textwrap
import warnings
from pathlib import Path

import numpy as np

from .figcheck import (  # noqa: F401  (the figure check, re-exported: figstyle is the one module figures import)
    LABEL_GID,
    MIN_FONT,
    FigureCheckError,
    check_figure,
    count_in,
    data_points,
    laid_out_renderer,
    mark_for_placement,
    place,
)

DPI = 150  # PNG resolution
PANEL = (4.6, 3.4)  # one panel, inches
MIN_LONG_SIDE = 5.6  # inches: at DPI, a PNG at least 840 px on its longer side
RC = {
    "font.size": 9.0,
    "axes.titlesize": 9.0,
    "axes.labelsize": 9.0,
    "xtick.labelsize": 8.0,
    "ytick.labelsize": 8.0,
    "legend.fontsize": 8.0,
    "legend.title_fontsize": 8.0,
    "figure.titlesize": 10.0,
    "savefig.dpi": DPI,
    "legend.framealpha": 0.9,
    "axes.grid": False,
    "grid.alpha": 0.3,
}
SEM = "mean ± standard error"
SD = "mean ± 1 standard deviation"
STRICT: bool | None = None  # None: the environment variable decides
ENV = "BAYESATTN_FIGURE_CHECK"


def pyplot():
    """matplotlib.pyplot on the Agg backend (files only; never needs a display), with the package's rcParams."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update(RC)
    return plt


def subplots(nrows: int = 1, ncols: int = 1, *, panel=PANEL, **kw):
    """(fig, axes) with axes always 2-d, constrained layout and ``panel`` inches per panel (the whole figure at
    least :data:`MIN_LONG_SIDE` inches on its longer side)."""
    w, h = ncols * panel[0], nrows * panel[1]
    if max(w, h) < MIN_LONG_SIDE:
        w, h = (MIN_LONG_SIDE, h * MIN_LONG_SIDE / w) if w >= h else (w * MIN_LONG_SIDE / h, MIN_LONG_SIDE)
    kw.setdefault("layout", "constrained")
    return pyplot().subplots(nrows, ncols, figsize=kw.pop("figsize", (w, h)), squeeze=False, **kw)


def integer_ticks(*axes) -> None:
    """Integer-only major ticks on each of ``axes`` (Axis objects: ``ax.xaxis``, ``ax.yaxis``)."""
    from matplotlib.ticker import MaxNLocator, NullLocator

    for axis in axes:
        axis.set_major_locator(MaxNLocator(integer=True))
        axis.set_minor_locator(NullLocator())


def log_x_axis(ax, values) -> None:
    """A log x axis with plain-number labels: at the decades in view where two or more fall inside the range of
    ``values``, else at the 1-2-5 numbers in it where there are three or more, else at ``values`` thinned to at
    most seven labels spread evenly in log space (a log axis' own minor labels, '3x10^1 4x10^1', crowd a narrow
    range, and a dense grid of sampled values would overlap)."""
    from matplotlib.ticker import FixedLocator, NullFormatter

    ax.set_xscale("log")
    lo, hi = min(values), max(values)
    k0, k1 = int(np.floor(np.log10(lo))), int(np.ceil(np.log10(hi)))
    decades = [10.0**k for k in range(k0, k1 + 1) if lo <= 10.0**k <= hi]
    nice = [m * 10.0**k for k in range(k0, k1 + 1) for m in (1, 2, 5) if lo <= m * 10.0**k <= hi]
    ticks = decades if len(decades) >= 2 else nice if len(nice) >= 3 else _thin_log(sorted(set(values)), 7)
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_major_formatter(lambda v, _: f"{v:g}")
    ax.xaxis.set_minor_formatter(NullFormatter())


def _thin_log(values: list, most: int) -> list:
    """``values`` (sorted, positive) thinned greedily so that neighbours are at least 1/``most`` of the log range
    apart; the first and the last are kept."""
    if len(values) <= 2:
        return values
    gap = np.log(values[-1] / values[0]) / most
    kept = [values[0]]
    for v in values[1:-1]:
        if np.log(v / kept[-1]) >= gap and np.log(values[-1] / v) >= gap:
            kept.append(v)
    return kept + [values[-1]]


def legend(ax, *args, outside: bool = False, **kw):
    """A legend that :func:`save` places in the first corner of ``ax`` free of data, else outside the axes on the
    right (``outside=True``: there at once); None when nothing in ``ax`` has a label (and no handles are given)."""
    if not args and "handles" not in kw and not ax.get_legend_handles_labels()[0]:
        return None  # nothing labelled: no empty legend box
    if outside:
        kw.update(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)
    leg = ax.legend(*args, **kw)
    if leg is not None and not outside:
        mark_for_placement(leg)
    return leg


def note(ax, text: str, **kw):
    """A text box in ``ax`` that :func:`save` places in a corner free of data (else outside on the right)."""
    from matplotlib.offsetbox import AnchoredText

    kw.setdefault("prop", {"size": RC["legend.fontsize"]})
    box = AnchoredText(text, loc="upper right", frameon=True, **kw)
    box.patch.set(alpha=0.9, edgecolor="0.8")
    ax.add_artist(box)
    mark_for_placement(box)
    return box


def empty_panel(ax, why: str) -> None:
    """A panel with nothing to draw: no ticks, and ``why`` written in it."""
    ax.set_xticks([])
    ax.set_yticks([])
    ax.text(0.5, 0.5, textwrap.fill(why, 34), ha="center", va="center", transform=ax.transAxes, color="0.3")


def check_mode() -> str:
    """'error', 'warn' or 'off': :data:`STRICT` where set (True: 'error', False: 'warn'), else the environment
    variable :data:`ENV` (default 'warn')."""
    if STRICT is not None:
        return "error" if STRICT else "warn"
    mode = os.environ.get(ENV, "warn").strip().lower()
    return mode if mode in ("error", "warn", "off") else "warn"


def save(fig, out, *, pdf: bool = False) -> Path:
    """Place the auto legends and notes, check (see the module docstring), write ``out`` as PNG at :data:`DPI`
    (and beside it a PDF when ``pdf``) with a tight bounding box, close ``fig``; returns ``out``."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    mode = check_mode()
    try:
        drawn = place(fig)
        problems = check_figure(fig, draw=not drawn) if mode != "off" else []
        fig.savefig(out, dpi=DPI, bbox_inches="tight")
        if pdf:
            fig.savefig(out.with_suffix(".pdf"), bbox_inches="tight")
    finally:
        pyplot().close(fig)
    if problems:
        msg = f"figure {out.name}: " + "; ".join(problems)
        if mode == "error":
            raise FigureCheckError(msg)
        warnings.warn(msg, stacklevel=2)
    return out
