"""Shared helpers of the one-layer α-CL experiments (curves on the circle, angles).

:func:`angle_deg` runs on the device of its inputs; the curve helpers are numpy (CPU) and take
tensors on any device (copied to the CPU).
"""

from __future__ import annotations

import math

import numpy as np
import torch


def _host(v):
    return v.detach().cpu().numpy() if isinstance(v, torch.Tensor) else v


def angle_deg(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Angle in degrees between unit vectors (rows), ``(…, d) × (…, d) -> (…)``."""
    c = (a * b).sum(-1).clamp(-1.0, 1.0)
    return torch.rad2deg(torch.arccos(c))


def circ_sep_deg(thetas: np.ndarray) -> np.ndarray:
    """Angular separations (degrees) between consecutive sorted angles on the circle."""
    t = np.sort(np.mod(np.asarray(_host(thetas), dtype=np.float64), 2 * math.pi))
    if len(t) < 2:
        return np.zeros(0)
    d = np.diff(np.concatenate([t, t[:1] + 2 * math.pi]))
    return np.rad2deg(d)


def prominent_maxima(values, rel_prominence: float = 1e-3) -> tuple[np.ndarray, np.ndarray]:
    """Local maxima of a periodic 1-D curve whose prominence is at least ``rel_prominence·(max − min)``.

    Returns ``(indices, relative prominences)``. The prominence of a peak is how far the curve
    must descend from it before rising to a higher value (:func:`scipy.signal.find_peaks`);
    periodicity is handled by searching the middle copy of three concatenated periods. A flat
    top counts once (its middle index); a curve with ``max − min == 0`` has no maximum. The
    floor removes maxima that are quadrature or round-off ripples (e.g. a bump of relative
    height 1e-6 on a curve computed with a coarse quadrature).
    """
    from scipy.signal import find_peaks

    v = np.asarray(_host(values), dtype=np.float64)
    n = len(v)
    span = float(v.max() - v.min())
    if span <= 0:
        return np.zeros(0, dtype=int), np.zeros(0)
    ext = np.concatenate([v, v, v])
    idx, props = find_peaks(ext, prominence=rel_prominence * span, plateau_size=1)
    keep = (idx >= n) & (idx < 2 * n)
    order = np.argsort(idx[keep] - n)
    return (idx[keep] - n)[order], (props["prominences"][keep] / span)[order]
