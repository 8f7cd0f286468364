"""Where a drawn figure's artists fall: the figure check and the placement of legends and notes
(:mod:`bayesattn.figstyle` draws through both).

Check: :func:`check_figure` lists a drawn figure's problems from matplotlib's artist extents: a legend or text
box over a data point or line, an axis label, tick label, title or text cut by the figure's edge, overlapping
labels, text below :data:`MIN_FONT`. Placement: :func:`place` puts every box marked by :func:`mark_for_placement`
in the first corner of its axes free of data, else outside the axes on the right.
"""

from __future__ import annotations

import numpy as np

MIN_FONT = 8.0  # points, at the saved size
TOL = 1.0  # display pixels an extent may touch another by
LABEL_GID = "data-label"  # gid of a text that labels a data point on purpose (exempt from the overlap rule)
_PLACED = "_bayesattn_place"
_LOCS = ("upper right", "upper left", "lower left", "lower right", "center right", "center left")
_LOCS += ("upper center", "lower center", "center")


class FigureCheckError(AssertionError):
    """A figure failed :func:`check_figure` while the check is strict."""


def mark_for_placement(artist) -> None:
    """Let :func:`place` move ``artist`` (a legend or an anchored box) to a corner free of data."""
    setattr(artist, _PLACED, True)


# ------------------------------------------------------------------------------------------ extents
def laid_out_renderer(fig):
    """Lay out and position every artist without rasterizing (a third of a full draw), then the renderer that
    measures the texts."""
    fig.draw_without_rendering()
    return fig.canvas.get_renderer()


def _all_axes(fig):
    """The figure's axes and, after each, its inset axes (depth first), each once."""
    out, todo = [], list(fig.axes)
    while todo:
        ax = todo.pop(0)
        if ax not in out:
            out.append(ax)
            todo = list(getattr(ax, "child_axes", [])) + todo
    return out


def _sample(xy: np.ndarray, step: float = 3.0) -> np.ndarray:
    """The vertices of the polyline ``xy`` (display coordinates) and points along its segments every ``step``
    pixels (at most 400 per segment); NaN breaks it."""
    xy = np.asarray(xy, float).reshape(-1, 2)
    if len(xy) < 2:
        return xy
    a, b = xy[:-1], xy[1:]
    ok = np.all(np.isfinite(a) & np.isfinite(b), axis=1)
    a, b = a[ok], b[ok]
    n = np.minimum(np.ceil(np.linalg.norm(b - a, axis=1) / step), 400).astype(int)
    keep = n > 1
    if not keep.any():
        return xy
    a, b, n = a[keep], b[keep], n[keep]
    seg = np.repeat(np.arange(len(n)), n - 1)  # n - 1 interior points per segment
    start = np.cumsum(n - 1) - (n - 1)
    f = (np.arange(len(seg)) - start[seg] + 1) / n[seg]
    return np.concatenate([xy, a[seg] + (b[seg] - a[seg]) * f[:, None]])


def _no_line(ls) -> bool:
    return ls in ("None", "none", "", " ") or ls is None


def data_points(ax) -> np.ndarray:
    """The drawn data of ``ax`` in display coordinates: line vertices and points every 3 px along the segments
    (lines with gid :data:`LABEL_GID` left out), scatter offsets, error-bar and other line-collection segments,
    bar tops; only what falls inside the axes. Valid after a draw."""
    from matplotlib.collections import LineCollection, PathCollection
    from matplotlib.container import BarContainer

    pts = [np.zeros((0, 2))]
    for line in ax.get_lines():
        if not line.get_visible() or line.get_gid() == LABEL_GID or line.get_alpha() == 0:
            continue
        xy = line.get_transform().transform(np.asarray(line.get_xydata(), float).reshape(-1, 2))
        pts.append(xy if _no_line(line.get_linestyle()) else _sample(xy))
    for coll in ax.collections:
        if not coll.get_visible() or coll.get_gid() == LABEL_GID:
            continue
        if isinstance(coll, PathCollection):
            off = np.ma.filled(np.ma.asarray(coll.get_offsets(), float), np.nan).reshape(-1, 2)
            pts.append(coll.get_offset_transform().transform(off))
        elif isinstance(coll, LineCollection):
            tr = coll.get_transform()
            pts += [_sample(tr.transform(np.asarray(s, float).reshape(-1, 2))) for s in coll.get_segments() if len(s)]
    for cont in ax.containers:
        if isinstance(cont, BarContainer):
            for rect in cont:
                b = rect.get_window_extent()
                if b.width > 0 and b.height > 0:
                    top = b.y1 if rect.get_height() >= 0 else b.y0
                    pts.append(np.c_[np.linspace(b.x0, b.x1, 5), np.full(5, top)])
    p = np.concatenate(pts)
    p = p[np.all(np.isfinite(p), axis=1)]
    box = ax.get_window_extent()
    inside = (p[:, 0] >= box.x0) & (p[:, 0] <= box.x1) & (p[:, 1] >= box.y0) & (p[:, 1] <= box.y1)
    return p[inside]


def count_in(bbox, pts: np.ndarray) -> int:
    """How many display points ``pts`` (n, 2) lie inside the box ``bbox``, shrunk by TOL pixels on each side."""
    x0, y0, x1, y1 = bbox.x0 + TOL, bbox.y0 + TOL, bbox.x1 - TOL, bbox.y1 - TOL
    return int(np.sum((pts[:, 0] > x0) & (pts[:, 0] < x1) & (pts[:, 1] > y0) & (pts[:, 1] < y1)))


def _text_extent(t, renderer):
    """A text's extent with its box (for an annotation: without its arrow, which points at data on purpose)."""
    from matplotlib.text import Annotation, Text
    from matplotlib.transforms import Bbox

    if isinstance(t, Annotation):
        t.update_positions(renderer)
    b = Text.get_window_extent(t, renderer)
    patch = t.get_bbox_patch()
    return Bbox.union([b, patch.get_window_extent(renderer)]) if patch is not None else b


def _name(ax) -> str:
    title = ax.get_title() or ax.get_ylabel() or ax.get_xlabel()
    return f"axes '{_clip(title)}'" if title else "an untitled axes"


def _shown(t) -> bool:
    return t.get_visible() and bool(t.get_text().strip())


def _boxes(fig, renderer):
    """(description, extent, the axes it belongs to or None for the figure, covers-data-rule applies) of every
    legend, text and anchored box."""
    from matplotlib.offsetbox import AnchoredOffsetbox

    out = [(f"figure legend {_short(leg)}", leg.get_window_extent(renderer), None, True) for leg in fig.legends]
    for ax in _all_axes(fig):
        if not ax.get_visible():
            continue
        leg = ax.get_legend()
        if leg is not None and leg.get_visible():
            out.append((f"legend {_short(leg)} of {_name(ax)}", leg.get_window_extent(renderer), ax, True))
        for t in ax.texts:
            if _shown(t):
                desc = f"text '{_clip(t.get_text())}' in {_name(ax)}"
                out.append((desc, _text_extent(t, renderer), ax, t.get_gid() != LABEL_GID))
        for a in ax.artists:
            if isinstance(a, AnchoredOffsetbox) and a.get_visible():
                out.append((f"text box in {_name(ax)}", a.get_window_extent(renderer), ax, True))
    return out


def _short(leg) -> str:
    labels = [t.get_text() for t in leg.get_texts()]
    return f"'{_clip(labels[0])}'..." if labels else ""


def _clip(s: str, n: int = 40) -> str:
    s = " ".join(s.split())
    return s if len(s) <= n else s[: n - 3] + "..."


def _drawn_ticks(axis):
    """The ticks ``axis`` draws (in view; not the stale ones matplotlib keeps from an earlier draw)."""
    try:
        return axis._update_ticks()
    except Exception:  # a matplotlib without it: every tick whose location is in view
        lo, hi = sorted(axis.get_view_interval())
        span = (hi - lo) * 1e-9
        locs = list(axis.get_majorticklocs()) + list(axis.get_minorticklocs())
        ticks = axis.get_major_ticks(len(axis.get_majorticklocs())) + axis.get_minor_ticks(
            len(axis.get_minorticklocs())
        )
        return [t for t, loc in zip(ticks, locs) if lo - span <= loc <= hi + span]


def _labels(fig):
    """(description, Text) of the figure's texts (suptitle, supxlabel, fig.text), and per axes its titles and,
    where its axis is drawn, axis labels, offset texts and the tick labels drawn."""
    out = [(f"figure text '{_clip(t.get_text())}'", t) for t in fig.texts]
    for ax in _all_axes(fig):
        if not ax.get_visible():
            continue
        name = _name(ax)
        for t in (ax.title, ax._left_title, ax._right_title):
            out.append((f"title of {name}", t))
        if not ax.axison:
            continue
        for axis, xy in ((ax.xaxis, "x"), (ax.yaxis, "y")):
            if not axis.get_visible():
                continue
            out.append((f"{xy}-axis label of {name}", axis.label))
            out.append((f"{xy}-axis offset of {name}", axis.get_offset_text()))
            for tick in _drawn_ticks(axis):
                for t in (tick.label1, tick.label2):
                    out.append((f"{xy} tick label '{t.get_text()}' of {name}", t))
    return [(d, t) for d, t in out if _shown(t)]


def _small_texts(fig, labels):
    """Every drawn text with its size: labels, legend entries and titles, axes texts, anchored texts."""
    from matplotlib.offsetbox import AnchoredText

    texts = [t for _, t in labels]
    legs = list(fig.legends) + [ax.get_legend() for ax in _all_axes(fig) if ax.get_legend() is not None]
    texts += [t for leg in legs if leg.get_visible() for t in [*leg.get_texts(), leg.get_title()]]
    for ax in _all_axes(fig):
        texts += list(ax.texts)
        texts += [a.txt._text for a in ax.artists if isinstance(a, AnchoredText) and a.get_visible()]
    return [t for t in texts if _shown(t) and t.get_fontsize() < MIN_FONT - 1e-9]


def _overlap(a, b) -> bool:
    return min(a.x1, b.x1) - max(a.x0, b.x0) > TOL and min(a.y1, b.y1) - max(a.y0, b.y0) > TOL


def _inside(inner, outer) -> bool:
    return (
        inner.x0 >= outer.x0 - TOL
        and inner.y0 >= outer.y0 - TOL
        and inner.x1 <= outer.x1 + TOL
        and inner.y1 <= outer.y1 + TOL
    )


def _same_place(a, b) -> bool:
    return np.allclose(a.get_position().bounds, b.get_position().bounds)


def _few(problems: list[str], what: str, n: int = 6) -> list[str]:
    return problems if len(problems) <= n else [*problems[:n], f"and {len(problems) - n} more {what}"]


def check_figure(fig, *, draw: bool = True) -> list[str]:
    """The problems of a finished figure (empty when none), from the artists' extents after a draw:

    - a legend, text (``ax.text``, annotation: its text, not its arrow) or anchored text box covers a drawn data
      point or line of any axes it lies over (line vertices, points every 3 px along the segments, scatter
      points, error bars, bar tops; texts with gid :data:`LABEL_GID` label a point on purpose and are exempt
      from this rule only), or lies over another panel;
    - a title, axis label, tick label, legend or text reaches past the figure's edge;
    - two of them overlap;
    - a text is smaller than :data:`MIN_FONT` points.

    ``draw=False`` reuses the figure's last draw (:func:`save` does, after :func:`place` drew it and changed
    nothing that moves the layout): the check then costs a small part of a draw."""
    renderer = laid_out_renderer(fig) if draw else fig.canvas.get_renderer()
    W, H = fig.bbox.width, fig.bbox.height
    problems: list[str] = []
    axes = [ax for ax in _all_axes(fig) if ax.get_visible()]
    pts = {ax: data_points(ax) for ax in axes}
    extent = {ax: ax.get_window_extent() for ax in axes}
    boxes = _boxes(fig, renderer)
    for desc, b, own, rule in boxes:
        for ax in axes:
            if ax is not own and not _overlap(extent[ax], b):
                continue
            n = count_in(b, pts[ax]) if rule else 0
            if n:
                problems.append(f"{desc} covers {n} drawn data point(s) of {_name(ax)}")
            # over another panel: not a twin of its own axes, not the axes an inset of it lies in
            if own is not None and ax is not own and not _same_place(ax, own):
                if not _inside(extent[own], extent[ax]):
                    problems.append(f"{desc} lies over {_name(ax)}")
    labels = _labels(fig)
    items = [(d, _text_extent(t, renderer)) for d, t in labels]
    items += [(d, b) for d, b, *_ in boxes]
    cut = [d for d, b in items if b.x0 < -TOL or b.y0 < -TOL or b.x1 > W + TOL or b.y1 > H + TOL]
    problems += _few([f"{d} is cut by the figure's edge" for d in cut], "cut by the edge")
    items = [(d, b) for d, b in items if b.width > 0 and b.height > 0]
    if len(items) > 1:
        e = np.array([b.extents for _, b in items])  # x0, y0, x1, y1
        dx = np.minimum(e[:, None, 2], e[None, :, 2]) - np.maximum(e[:, None, 0], e[None, :, 0])
        dy = np.minimum(e[:, None, 3], e[None, :, 3]) - np.maximum(e[:, None, 1], e[None, :, 1])
        pairs = zip(*np.nonzero(np.triu((dx > TOL) & (dy > TOL), 1)))
        problems += _few([f"{items[i][0]} overlaps {items[j][0]}" for i, j in pairs], "overlaps")
    small = sorted({f"'{_clip(t.get_text(), 20)}' ({t.get_fontsize():g} pt)" for t in _small_texts(fig, labels)})
    if small:
        problems.append(f"text below {MIN_FONT:g} pt: " + ", ".join(small[:6]) + (" ..." if len(small) > 6 else ""))
    return problems


# ------------------------------------------------------------------------------------------ placement
def _set_loc(artist, loc: str) -> None:
    if hasattr(artist, "set_loc"):
        artist.set_loc(loc)
    else:  # AnchoredOffsetbox
        from matplotlib.offsetbox import AnchoredOffsetbox

        artist.loc = AnchoredOffsetbox.codes[loc]


def _placed(fig):
    """(axes, artist) of every legend and note still to place."""
    out = []
    for ax in _all_axes(fig):
        leg = ax.get_legend()
        for a in ([leg] if leg is not None else []) + list(ax.artists):
            if getattr(a, _PLACED, False):
                out.append((ax, a))
    return out


def _obstacles(fig, ax, renderer, placing):
    """What a box placed in ``ax`` must not cover: the data of every axes over ``ax`` (``ax``, its twins and
    insets), the insets themselves, and the texts and boxes of ``ax`` not being placed."""
    from matplotlib.offsetbox import AnchoredOffsetbox

    box = ax.get_window_extent()
    over = [
        a
        for a in _all_axes(fig)
        if a.get_visible()
        and _overlap(a.get_window_extent(), box)
        and (a is ax or not _inside(box, a.get_window_extent()) or _same_place(a, ax))
    ]  # not the axes an inset ax lies in
    pts = np.concatenate([data_points(a) for a in over])
    fixed = [a.get_window_extent() for a in over if a is not ax and not _same_place(a, ax)]
    for a in over:
        fixed += [_text_extent(t, renderer) for t in a.texts if _shown(t)]
        leg = a.get_legend()
        fixed += [leg.get_window_extent(renderer)] if leg is not None and id(leg) not in placing else []
        boxes = [b for b in a.artists if isinstance(b, AnchoredOffsetbox) and id(b) not in placing]
        fixed += [b.get_window_extent(renderer) for b in boxes if b.get_visible()]
    return pts, fixed


def place(fig) -> bool:
    """Put every :func:`legend` and :func:`note` in the first corner of its axes where it covers no data, no
    inset and no other text or box; where none is free, outside the axes on the right (the layout then makes
    room, and the others are placed again on the new axes sizes). True when the figure's last draw still holds
    (it drew, and moved nothing outside after)."""
    todo = _placed(fig)
    outside: dict = {}
    drawn = False
    for _ in range(3):
        if not todo:
            return drawn
        renderer = laid_out_renderer(fig)
        drawn = True
        placing = {id(a) for _, a in todo}
        moved = []
        cache: dict = {}
        for ax, a in todo:
            if ax not in cache:
                cache[ax] = _obstacles(fig, ax, renderer, placing)
            pts, fixed = cache[ax]
            for loc in _LOCS:
                _set_loc(a, loc)
                b = a.get_window_extent(renderer)
                if count_in(b, pts) == 0 and not any(_overlap(b, o) for o in fixed):
                    fixed.append(b)
                    break
            else:
                moved.append((ax, a))
        for ax, a in moved:
            k = outside.get(ax, 0)
            outside[ax] = k + 1
            # the first outside box at the top on the right, the next at the bottom
            _set_loc(a, "upper left" if k % 2 == 0 else "lower left")
            a.set_bbox_to_anchor((1.02, 1.0 if k % 2 == 0 else 0.0), transform=ax.transAxes)
            setattr(a, _PLACED, False)
            drawn = False
        todo = [(ax, a) for ax, a in todo if getattr(a, _PLACED, False)] if moved else []
    return drawn
