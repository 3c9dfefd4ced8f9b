"""Power laws: least-squares fits on log-log axes (rates of convergence, scaling with width or size).

``y ≈ c · x^s`` ⇔ ``log y = s log x + log c``; :func:`loglog_fit` returns ``(s, log c)`` from the
points with finite positive ``x`` and ``y`` (others are left out: a zero error or a diverged run has
no logarithm), NaN when fewer than two are left. :func:`loglog_slope` is the slope alone.
"""

from __future__ import annotations

import numpy as np

__all__ = ["loglog_fit", "loglog_slope"]


def loglog_fit(x, y) -> tuple[float, float]:
    """``(slope, intercept)`` of the least-squares line of ``log y`` against ``log x`` (natural logs).

    Args:
        x, y: 1-D arrays (or sequences) of the same length.
    Returns:
        ``(s, b)`` with ``log y ≈ s log x + b`` over the finite positive pairs; ``(nan, nan)`` with fewer than 2.
    """
    xa, ya = np.asarray(x, dtype=np.float64).reshape(-1), np.asarray(y, dtype=np.float64).reshape(-1)
    if xa.shape != ya.shape:
        raise ValueError(f"loglog_fit: x and y must have the same length, got {xa.shape} and {ya.shape}")
    with np.errstate(divide="ignore", invalid="ignore"):
        ok = np.isfinite(xa) & np.isfinite(ya) & (xa > 0) & (ya > 0)
    if ok.sum() < 2:
        return float("nan"), float("nan")
    lx, ly = np.log(xa[ok]), np.log(ya[ok])
    if np.ptp(lx) == 0:
        return float("nan"), float("nan")  # one x value: no slope
    s, b = np.polyfit(lx, ly, 1)
    return float(s), float(b)


def loglog_slope(x, y) -> float:
    """The slope ``s`` of ``y ≈ c · x^s`` (:func:`loglog_fit`); NaN with fewer than two usable points."""
    return loglog_fit(x, y)[0]
