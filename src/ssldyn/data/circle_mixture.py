"""Planar data with a density, clustered in angle (``nonlinearity`` Thm. 2, Cor. 2 on the circle).

``x = r(cos φ, sin φ)`` with the angle from a von Mises mixture ``φ ~ Σ_j w_j vM(c_j, κ)`` and the
radius uniform, ``r ~ U[1 − δ, 1 + δ]`` (so ``‖x‖ ≤ C₀ = 1 + δ``, the bounded input of Thm. 2). The
planar density is ``p(x) = p_φ(φ) p_r(r) / r``.

Integrals over the population use quadrature *adapted to breakpoints*: every integrand of the
one-layer α-CL (gates ``1(wᵀx > 0)``, ``h(w*ᵀx)``) is smooth in ``φ`` except where ``φ`` crosses
``θ ± π/2`` (the planes of the weights involved). :meth:`CircleMixture.nodes` splits the circle at
the given breakpoints, cuts each arc into sub-arcs no longer than ``max_arc`` and puts
Gauss–Legendre nodes on each (and on the radius), so ``A(w)`` computed on the nodes is a smooth
function of ``θ`` — no piecewise-constant artefact of a finite batch.

Devices: tensors are built on ``device`` (default CPU) in float64.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from ssldyn.checks import positive

__all__ = ["CircleMixture"]


@functools.lru_cache(maxsize=64)
def _leggauss(n: int) -> tuple[np.ndarray, np.ndarray]:
    return np.polynomial.legendre.leggauss(n)


@functools.lru_cache(maxsize=256)
def _angle_rule(
    break_offsets: tuple[float, ...], span: tuple[float, float] | None, max_arc: float, n_gl: int
) -> tuple[np.ndarray, np.ndarray]:
    """Composite Gauss–Legendre rule (offsets, weights) on the circle or on ``span``, split at the breakpoints."""
    if span is None:
        offs = np.unique(np.mod(np.asarray(list(break_offsets) or [0.0], dtype=np.float64), 2 * math.pi))
        ends = np.append(offs[1:], offs[0] + 2 * math.pi)
    else:
        lo, hi = span
        if not 0 < hi - lo <= 2 * math.pi:
            raise ValueError(f"span: expected lo < hi <= lo + 2π, got {span}")
        inner = [o for o in break_offsets if lo < o < hi]
        offs = np.unique(np.asarray([lo, *inner], dtype=np.float64))
        ends = np.append(offs[1:], hi)
    gx, gw = _leggauss(n_gl)
    phis, wts = [], []
    for a, b in zip(offs, ends):
        n_sub = max(1, int(math.ceil((b - a) / max_arc)))
        edges = np.linspace(a, b, n_sub + 1)
        half = 0.5 * np.diff(edges)[:, None]  # (n_sub, 1)
        mid = 0.5 * (edges[1:] + edges[:-1])[:, None]
        phis.append((half * gx + mid).reshape(-1))
        wts.append((half * gw).reshape(-1))
    return np.concatenate(phis), np.concatenate(wts)


@dataclass(frozen=True)
class CircleMixture:
    """Von Mises mixture in angle × uniform radius (see module docstring).

    Attributes:
        centres: cluster centres ``c_j`` (radians).
        kappa: von Mises concentration ``κ`` (angular std ≈ ``1/√κ``).
        weights: mixture weights (None: equal).
        delta: radial half-width ``δ`` (``r ∈ [1 − δ, 1 + δ]``, ``0 < δ < 1``).
    """

    centres: tuple[float, ...]
    kappa: float
    weights: tuple[float, ...] | None = None
    delta: float = 0.1

    def __post_init__(self) -> None:
        if not self.centres:
            raise ValueError("centres: at least one cluster")
        positive(self.kappa, "kappa", where="CircleMixture")
        if not 0 < self.delta < 1:
            raise ValueError(f"delta: must lie in (0, 1), got {self.delta}")
        if self.weights is not None and (len(self.weights) != len(self.centres) or min(self.weights) < 0):
            raise ValueError("weights: one non-negative weight per centre")

    @property
    def C0(self) -> float:
        """Bound on ``‖x‖`` (Thm. 2)."""
        return 1.0 + self.delta

    def _w(self, device=None) -> Tensor:
        w = torch.tensor(self.weights or [1.0] * len(self.centres), dtype=torch.float64, device=device)
        return w / w.sum()

    def angle_density(self, phi: Tensor) -> Tensor:
        """``p_φ(φ) = Σ_j w_j exp(κ cos(φ − c_j)) / (2π I₀(κ))``, same shape as ``phi``."""
        c = torch.tensor(self.centres, dtype=torch.float64, device=phi.device)
        i0e = float(torch.special.i0e(torch.tensor(float(self.kappa), dtype=torch.float64)))
        dens = torch.exp(self.kappa * (torch.cos(phi[..., None] - c) - 1.0)) / (2 * math.pi * i0e)  # (..., J)
        return (dens * self._w(phi.device)).sum(-1)

    def max_density_on_line(self, theta: Tensor) -> Tensor:
        """``max_{wᵀx = 0} p(x)`` for ``w = (cos θ, sin θ)``: the line meets the support at angles ``θ ± π/2``
        and radii ``[1 − δ, 1 + δ]``; ``p_r(r)/r`` is largest at ``r = 1 − δ``."""
        pr = 1.0 / (2 * self.delta * (1 - self.delta))
        return torch.maximum(self.angle_density(theta + math.pi / 2), self.angle_density(theta - math.pi / 2)) * pr

    def nodes(
        self,
        theta: Tensor,
        break_offsets: Sequence[float] | Tensor,
        *,
        span: tuple[float, float] | None = None,
        max_arc: float = math.radians(3.0),
        n_gl: int = 4,
        n_r: int = 4,
    ) -> tuple[Tensor, Tensor, Tensor]:
        """Quadrature nodes of the population, adapted to breakpoints ``θ_g + o`` for ``o`` in ``break_offsets``.

        Args:
            theta: ``(G,)`` reference angles.
            break_offsets: angles (radians) relative to ``theta`` where the integrand has kinks.
            span: ``(lo, hi)`` offsets (``hi − lo ≤ 2π``): integrate over ``θ + [lo, hi]`` only (e.g. the
                active half-circle ``(−π/2, π/2)``); None: the whole circle.
            max_arc: longest sub-arc carrying one Gauss–Legendre rule.
            n_gl: Gauss–Legendre nodes per sub-arc; n_r: nodes in the radius.

        Returns:
            ``x (G, n, 2)``, probabilities ``p (G, n)`` (summing to ≈ 1), node angles ``φ (G, n)``.
        """
        key = (tuple(float(o) for o in break_offsets), None if span is None else (float(span[0]), float(span[1])))
        dphi_np, wphi_np = _angle_rule(*key, float(max_arc), int(n_gl))
        dphi = torch.tensor(dphi_np, dtype=torch.float64, device=theta.device)  # (n_φ,)
        wphi = torch.tensor(wphi_np, dtype=torch.float64, device=theta.device)
        rx, rw = _leggauss(n_r)
        r = torch.tensor(1.0 + self.delta * rx, dtype=torch.float64, device=theta.device)  # (n_r,)
        wr = torch.tensor(0.5 * rw, dtype=torch.float64, device=theta.device)  # uniform radius density
        phi = theta[:, None] + dphi[None, :]  # (G, n_φ)
        pphi = self.angle_density(phi) * wphi  # (G, n_φ)
        u = torch.stack([torch.cos(phi), torch.sin(phi)], -1)  # (G, n_φ, 2)
        x = (u[:, :, None, :] * r[None, None, :, None]).reshape(theta.shape[0], -1, 2)  # (G, n_φ·n_r, 2)
        p = (pphi[:, :, None] * wr[None, None, :]).reshape(theta.shape[0], -1)
        phis_out = phi[:, :, None].expand(-1, -1, r.shape[0]).reshape(theta.shape[0], -1)
        return x, p, phis_out
