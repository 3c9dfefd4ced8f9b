"""Matplotlib set-up shared by all figures (headless Agg backend, consistent style)."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import TYPE_CHECKING, cast

import matplotlib

if TYPE_CHECKING:
    import numpy as np
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

__all__ = ["PALETTE", "new_figure", "save_figure", "save_gif", "figure_to_rgb"]

matplotlib.use("Agg")
import matplotlib.pyplot as plt

PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"]


def new_figure(ncols: int = 1, nrows: int = 1, *, size: tuple[float, float] = (4.2, 3.4), **kw):
    """A figure with ``nrows x ncols`` axes of ``size`` inches each; returns ``(fig, axes)``."""
    fig, axes = plt.subplots(nrows, ncols, figsize=(size[0] * ncols, size[1] * nrows), squeeze=False, **kw)
    return fig, axes


def save_figure(fig: Figure, path: str | Path, dpi: int = 110) -> Path:
    """Save as PNG (tight layout) and close the figure.

    Where matplotlib cannot apply the tight layout (axes too small for their labels, axes it
    cannot lay out), the figure is saved with a tight bounding box instead, and matplotlib's
    layout warning is not passed on (it would otherwise leak into ``ssldyn reproduce``'s output).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fig.tight_layout()
    layout = [w for w in caught if issubclass(w.category, UserWarning) and _is_layout_warning(str(w.message))]
    for w in caught:
        if w not in layout:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    fig.savefig(path, dpi=dpi, bbox_inches="tight" if layout else None)
    plt.close(fig)
    return path


def _is_layout_warning(message: str) -> bool:
    """matplotlib's "Tight layout not applied …" / "… not compatible with tight_layout …"."""
    m = message.lower()
    return "tight layout" in m or "tight_layout" in m


def save_gif(frames: list, path: str | Path, fps: float = 8.0) -> Path:
    """Write RGB frames ``(H, W, 3)`` uint8 as a looping GIF with imageio."""
    import imageio.v2 as imageio

    path = Path(path)
    imageio.mimsave(path, frames, duration=1.0 / fps, loop=0)
    return path


def figure_to_rgb(fig: Figure) -> np.ndarray:
    """Render a figure to an ``(H, W, 3)`` uint8 array (for GIF frames) and close it."""
    import numpy as np

    canvas = cast("FigureCanvasAgg", fig.canvas)  # the Agg backend, set at import
    canvas.draw()
    rgb = np.asarray(canvas.buffer_rgba())[..., :3].copy()  # (H, W, 3)
    plt.close(fig)
    return rgb
