"""Matplotlib set-up shared by all figures (headless Agg backend, consistent style)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

__all__ = ["PALETTE", "new_figure", "save_figure", "save_gif", "figure_to_rgb"]

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"]


def new_figure(ncols: int = 1, nrows: int = 1, size: tuple[float, float] = (4.2, 3.4), **kw):
    """A figure with ``nrows x ncols`` axes of ``size`` inches each; returns ``(fig, axes)``."""
    fig, axes = plt.subplots(nrows, ncols, figsize=(size[0] * ncols, size[1] * nrows), squeeze=False, **kw)
    return fig, axes


def save_figure(fig, path: str | Path, dpi: int = 110) -> Path:
    """Save as PNG (tight layout) and close the figure."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return path


def save_gif(frames: list, path: str | Path, fps: float = 8.0) -> Path:
    """Write RGB frames ``(H, W, 3)`` uint8 as a looping GIF with imageio."""
    import imageio.v2 as imageio

    path = Path(path)
    imageio.mimsave(path, frames, duration=1.0 / fps, loop=0)
    return path


def figure_to_rgb(fig):
    """Render a figure to an ``(H, W, 3)`` uint8 array (for GIF frames) and close it."""
    import numpy as np

    fig.canvas.draw()
    rgb = np.asarray(fig.canvas.buffer_rgba())[..., :3].copy()
    plt.close(fig)
    return rgb
