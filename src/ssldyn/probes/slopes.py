"""Trends of measured curves: power laws fitted on log-log axes, and Spearman's rank correlation.

``y ≈ c · x^s`` ⇔ ``log y = s log x + log c``; :func:`loglog_fit` returns ``(s, log c)`` from the
points with finite positive ``x`` and ``y`` (others are left out: a zero error or a diverged run has
no logarithm), NaN when fewer than two are left. :func:`loglog_slope` is the slope alone.

:func:`spearman` is Spearman's ρ (the Pearson correlation of the average ranks, scipy's
``spearmanr``), with an explicit answer for a constant sample, where ρ is undefined.
"""

from __future__ import annotations

from typing import Literal, get_args

import numpy as np

from ssldyn.checks import choice
from ssldyn.probes._common import ArrayLike

__all__ = ["loglog_fit", "loglog_slope", "spearman"]

IfConstant = Literal["nan", "zero"]
IF_CONSTANT: tuple[str, ...] = get_args(IfConstant)


def loglog_fit(x: ArrayLike, y: ArrayLike) -> tuple[float, float]:
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


def loglog_slope(x: ArrayLike, y: ArrayLike) -> float:
    """The slope ``s`` of ``y ≈ c · x^s`` (:func:`loglog_fit`); NaN with fewer than two usable points."""
    return loglog_fit(x, y)[0]


def spearman(a: ArrayLike, b: ArrayLike, *, if_constant: IfConstant = "nan") -> float:
    """Spearman's rank correlation ``ρ(a, b)``: the Pearson correlation of the ranks of ``a`` and ``b``
    (ties get their average rank; :func:`scipy.stats.spearmanr`).

    Args:
        a, b: 1-D sequences of the same length ``n >= 2``.
        if_constant: the answer when ``a`` or ``b`` is constant (all tied), where ρ is undefined:
            ``"nan"`` (default), or ``"zero"`` (no order: a trend that was asked for and is absent).
    Returns:
        ρ in [−1, 1] as a float; NaN where an input holds NaN.
    """
    from scipy.stats import spearmanr

    choice(if_constant, "if_constant", IF_CONSTANT, where="spearman")
    xa, ya = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if xa.ndim != 1 or xa.shape != ya.shape or len(xa) < 2:
        raise ValueError(f"spearman: a and b must be 1-D of the same length >= 2, got {xa.shape} and {ya.shape}")
    if np.isnan(xa).any() or np.isnan(ya).any():
        return float("nan")
    if len(np.unique(xa)) == 1 or len(np.unique(ya)) == 1:  # all tied (±inf included)
        return float("nan") if if_constant == "nan" else 0.0
    return float(spearmanr(xa, ya).statistic)  # pyright: ignore[reportAttributeAccessIssue]  # scipy builds this result class at runtime
