"""Figures and animations (matplotlib, Agg backend), one function per figure kind."""

from ssldyn.viz.common import figure_to_rgb, new_figure, save_figure, save_gif

__all__ = ["new_figure", "save_figure", "save_gif", "figure_to_rgb"]
