"""What the phase diagram's figures share: reading a run folder back, the series' markers and colours, the
log-P axis, the panel layout and saving (PNG and PDF, through :func:`bayesattn.figstyle.save` and its check)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
from matplotlib.ticker import FixedLocator, NullFormatter, NullLocator

from ... import figstyle
from ...files import load_results

X_LABEL = {"m": "copy weight m", "u": "alignment u = m²/q", "q": "self-overlap q"}
COLORS = {"theory": "k", "cold": "tab:blue", "hot": "tab:red", "prior": "tab:purple", "small": "tab:green"}


def num(v) -> float:
    """JSON number or the strings 'nan' / 'inf' written for non-finite values -> float."""
    if v is None:
        return math.nan
    return float(v)


def arr(v) -> np.ndarray:
    """Nested JSON lists (with 'nan' / 'inf' strings or None for non-finite values) -> float array."""
    return np.asarray(v if v is not None else [], dtype=float)


def load_seeds(out_dir: str | Path) -> dict:
    """{method: {attention: {seed: [records sorted by P]}}} from a run folder, seeds in increasing order (the
    theory's points have none: seed None). Where a changed config left several records of one (method, attention,
    seed, P) (the theory: of one attention), the most recently finished is used."""
    out = Path(out_dir)
    runs: dict[str, dict[str, dict]] = {}
    for method in ("theory", "mcmc", "adam"):
        recs = load_results(out / "points" / method) if (out / "points" / method).is_dir() else []
        latest: dict = {}
        for r in sorted(recs, key=lambda r: r.get("finished_at", "")):
            p = r["point"]
            latest[(p.get("attention"), p.get("seed"), p.get("P"))] = r
        for r in latest.values():
            if "task" not in r["point"] or (method != "theory" and "inits" not in r["result"]):
                raise ValueError(
                    f"dir={str(out)!r}: {method} point files in an older layout (before per-method "
                    "points and recorded data); rerun the phase diagram into a new folder"
                )
            by_seed = runs.setdefault(method, {}).setdefault(r["point"]["attention"], {})
            by_seed.setdefault(r["point"].get("seed"), []).append(r)
    for by_att in runs.values():
        for a, by_seed in by_att.items():
            by_att[a] = {
                s: sorted(by_seed[s], key=lambda r: r["point"].get("P", 0)) for s in sorted(by_seed, key=_seed)
            }
    return runs


def _seed(s) -> int:
    return -1 if s is None else int(s)


def first_seed(seeds: dict) -> dict:
    """{method: {attention: [records sorted by P]}} of the first seed (the config seed) of :func:`load_seeds`."""
    return {
        method: {a: next(iter(by_seed.values())) for a, by_seed in by_att.items()} for method, by_att in seeds.items()
    }


def load_run(out_dir: str | Path) -> dict:
    """{method: {attention: [records sorted by P]}} of the run's first seed (the config seed; :func:`load_seeds`
    has them all)."""
    return first_seed(load_seeds(out_dir))


def inits(rec: dict) -> dict:
    """{init: result} of an MCMC or Adam point."""
    return rec["result"]["inits"]


def title_params(rec: dict, skip: str | None = None) -> str:
    """The run's task and prior in one line, without ``skip`` (the parameter a figure varies on an axis:
    'T' or 'sigma_A2')."""
    t, p = rec["point"]["task"], rec["point"]["prior"]
    task = ([] if skip == "T" else [f"T={t['T']}"]) + [f"d={t['d']}", f"{t['tokens']} tokens", t["boundary"]]
    prior = ([] if skip == "sigma_A2" else [f"σ_A²={p['sigma_A2']:g}"]) + [
        f"σ_V²={p['sigma_V2']:g}",
        f"σ²={p['sigma2']:g}",
    ]
    return ", ".join(task) + "; " + ", ".join(prior)


def save(fig, out: Path, name: str) -> list[Path]:
    """``out/name.png`` and ``.pdf``, checked (:func:`bayesattn.figstyle.check_figure`)."""
    png = figstyle.save(fig, Path(out) / f"{name}.png", pdf=True)
    return [png, png.with_suffix(".pdf")]


def log_P_axis(ax, P_lo: float, P_hi: float) -> None:
    """Log axis in P with a few plain-number ticks (no '3x10^2 4x10^2' crowding)."""
    ax.set_xscale("log")
    # 1-2-3-5 per decade over a wide range; about ten per decade over a narrow one
    mant = (1, 2, 3, 5) if P_hi / P_lo > 4 else (1, 1.5, 2, 2.5, 3, 4, 5, 6, 7, 8, 9)
    decades = range(int(np.floor(np.log10(P_lo))), int(np.ceil(np.log10(P_hi))) + 1)
    ticks = [m * 10.0**k for k in decades for m in mant if P_lo * 0.98 <= m * 10.0**k <= P_hi * 1.02]
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(lambda v, _: f"{v:g}")
    ax.xaxis.set_minor_formatter(NullFormatter())


def attention_panels(runs: dict, method: str, height: float, need: str | None = None):
    """(attentions, fig, axes) with one column per attention that has ``method`` results (and the result key
    ``need``), softmax first; None when there is nothing to draw."""
    by_att = runs.get(method, {})
    atts = [a for a in ("softmax", "linear") if a in by_att and (need is None or by_att[a][0]["result"].get(need))]
    if not atts:
        return None
    # one attention: a wider panel, so that the legend and title written for two fit above and below it
    fig, axes = figstyle.subplots(1, len(atts), panel=(max(6.0, 9.5 / len(atts)), height))
    return atts, fig, axes[0]


def order_parameter_panel(ax, x: str, title: str) -> None:
    """An order-parameter panel's y axis: its label, ``title``, room beyond 0 and 1 (a marker at u = 1, or at 0,
    sits inside the frame, not on it) and a grid."""
    ax.set_ylabel(X_LABEL[x])
    ax.set_title(title)
    ax.set_ylim(-0.05, 1.08)
    ax.grid(alpha=0.3)


def add_handles(ax, handles: dict) -> None:
    """Add ``ax``'s legend entries to ``handles`` ({label: handle}; the first of a label is kept)."""
    for h, lab in zip(*ax.get_legend_handles_labels()):
        handles.setdefault(lab, h)


# Fig 1 series: (method, init) -> marker, colour, x offset factor (keeps the four series side by side)
SERIES = {
    ("mcmc", "cold"): ("o", "tab:blue", 0.97),
    ("mcmc", "hot"): ("o", "tab:red", 0.99),
    ("mcmc", "prior"): ("o", "tab:purple", 0.98),
    ("adam", "small"): ("s", "tab:green", 1.01),
    ("adam", "hot"): ("D", "tab:brown", 1.03),
}
