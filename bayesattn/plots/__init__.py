"""Figures, drawn from saved result files only."""

from .copy_head import FIGURES, draw_all, load_run

__all__ = ["FIGURES", "draw_all", "load_run"]
