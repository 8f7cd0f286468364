"""The package's figure set-up: a headless pyplot imported on first use (so that importing bayesattn stays light),
and saving a finished figure."""

from __future__ import annotations

from pathlib import Path


def pyplot():
    """matplotlib.pyplot on the Agg backend (files only; never needs a display)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save(fig, out: Path, dpi: int = 80) -> Path:
    """Lay out, write to ``out`` and close ``fig``; returns ``out``."""
    fig.tight_layout()
    fig.savefig(out, dpi=dpi)
    pyplot().close(fig)
    return out
