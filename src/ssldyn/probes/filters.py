"""Measurements on learned first-layer filters (``nonlinearity`` App. E.3, Fig. 12–13).

Filters of one receptive field are ``W (M, h·w)`` (or ``(M, h, w)``). Smoothness is measured
scale-free, per filter, then averaged:

* :func:`laplacian_energy` — ``‖Δw‖² / ‖w‖²`` with the 5-point discrete Laplacian
  ``(Δw)_ij = 4w_ij − w_{i−1,j} − w_{i+1,j} − w_{i,j−1} − w_{i,j+1}`` on interior pixels: the
  high-frequency energy per unit norm (white noise: ≈ 20·(h−2)(w−2)/(hw); a constant: 0).
* :func:`total_variation` — ``(Σ|w_{i+1,j} − w_ij| + Σ|w_{i,j+1} − w_ij|) / Σ|w_ij|``.

Diversity:

* :func:`cosine_matrix` — the cosines ``w_m·w_n/(‖w_m‖‖w_n‖)`` between the rows of one or two sets of
  vectors (batched: ``(..., M, D)``), on which the measures below are built.
* :func:`pairwise_cosine` — mean cosine ``w_m·w_n/(‖w_m‖‖w_n‖)`` over pairs ``m ≠ n``
  (and the mean absolute value): near 0 = filters point in different directions.
* :func:`distinct_filters` — the number of filters whose largest |cosine| with any other filter
  of the same RF is below ``threshold`` (not a near-duplicate).
* :func:`pattern_match` — mean over filters of the largest cosine with any input patch: how
  much the filters look like parts of the data.
"""

from __future__ import annotations

import torch

from ssldyn.checks import unit_interval
from ssldyn.probes._common import ArrayLike

__all__ = [
    "laplacian_energy",
    "total_variation",
    "cosine_matrix",
    "pairwise_cosine",
    "distinct_filters",
    "pattern_match",
]


def _as_images(W, shape: tuple[int, int] | None) -> torch.Tensor:
    W = torch.as_tensor(W).detach().to(torch.float64)
    if W.dim() == 2:
        if shape is None:
            side = int(round(W.shape[1] ** 0.5))
            if side * side != W.shape[1]:
                raise ValueError(f"filters of dimension {W.shape[1]} are not square; pass shape=(h, w)")
            shape = (side, side)
        if len(shape) != 2 or shape[0] * shape[1] != W.shape[1]:
            raise ValueError(f"shape {tuple(shape)} does not hold filters of dimension {W.shape[1]} (need h·w = "
                             f"{W.shape[1]})")  # fmt: skip
        W = W.reshape(W.shape[0], *shape)
    if W.dim() != 3:
        raise ValueError(f"filters must be (M, h·w) or (M, h, w), got {tuple(W.shape)}")
    return W  # (M, h, w)


def laplacian_energy(W: ArrayLike, shape: tuple[int, int] | None = None) -> float:
    """Mean over filters of ``‖Δw‖² / ‖w‖²`` (interior 5-point Laplacian); zero filters are skipped."""
    w = _as_images(W, shape)
    lap = 4 * w[:, 1:-1, 1:-1] - w[:, :-2, 1:-1] - w[:, 2:, 1:-1] - w[:, 1:-1, :-2] - w[:, 1:-1, 2:]
    n2 = (w**2).sum((1, 2))
    ok = n2 > 0
    return float(((lap**2).sum((1, 2))[ok] / n2[ok]).mean())


def total_variation(W: ArrayLike, shape: tuple[int, int] | None = None) -> float:
    """Mean over filters of the anisotropic total variation divided by the L1 norm."""
    w = _as_images(W, shape)
    tv = (w[:, 1:] - w[:, :-1]).abs().sum((1, 2)) + (w[:, :, 1:] - w[:, :, :-1]).abs().sum((1, 2))
    n1 = w.abs().sum((1, 2))
    ok = n1 > 0
    return float((tv[ok] / n1[ok]).mean())


def cosine_matrix(A: ArrayLike, B: ArrayLike | None = None) -> torch.Tensor:
    """Cosines between the rows of ``A (..., M, D)`` and of ``B (..., N, D)`` (default ``B = A``):
    ``C[..., m, n] = a_m·b_n / (‖a_m‖‖b_n‖)``, float64 ``(..., M, N)``; a zero row has cosine 0 with every row."""

    def unit_rows(X: ArrayLike) -> torch.Tensor:
        X = torch.as_tensor(X).detach().to(torch.float64)
        return X / X.norm(dim=-1, keepdim=True).clamp_min(1e-300)  # (..., M, D)

    An = unit_rows(A)
    Bn = An if B is None else unit_rows(B)
    return An @ Bn.mT  # (..., M, N)


def _filters(W, where: str) -> torch.Tensor:
    """Filters ``(M, ...)`` flattened to float64 ``(M, D)``; a 1-D input (one filter, or no filter axis) is an error."""
    W = torch.as_tensor(W).detach().to(torch.float64)
    if W.dim() < 2:
        raise ValueError(f"{where}: filters must be (M, ...) with one row per filter, got {tuple(W.shape)}")
    return W.reshape(W.shape[0], -1)  # (M, D)


def _cos(W, where: str) -> torch.Tensor:
    return cosine_matrix(_filters(W, where))  # (M, M)


def pairwise_cosine(W: ArrayLike) -> tuple[float, float]:
    """``(mean cos, mean |cos|)`` over ordered pairs ``m ≠ n`` of filters ``(M, ...)``."""
    C = _cos(W, "pairwise_cosine")
    M = C.shape[0]
    if M < 2:
        raise ValueError("pairwise_cosine needs at least 2 filters")
    off = C[~torch.eye(M, dtype=torch.bool)]
    return float(off.mean()), float(off.abs().mean())


def distinct_filters(W: ArrayLike, threshold: float = 0.9) -> int:
    """Number of filters whose max |cos| with every other filter is ``< threshold``, ``threshold`` in [0, 1]."""
    unit_interval(threshold, "threshold", where="distinct_filters")  # a |cos|
    C = _cos(W, "distinct_filters").abs()
    C.fill_diagonal_(0.0)
    return int((C.max(1).values < threshold).sum())


def pattern_match(W: ArrayLike, patches: ArrayLike) -> float:
    """Mean over filters of ``max_x cos(w, x)`` over input patches ``(n, h·w)``."""
    W, X = _filters(W, "pattern_match"), _filters(patches, "pattern_match")  # (M, D), (n, D)
    if W.shape[1] != X.shape[1]:
        raise ValueError(f"pattern_match: filters of dimension {W.shape[1]} and patches of dimension {X.shape[1]} "
                         "differ")  # fmt: skip
    return float(cosine_matrix(W, X).max(1).values.mean())  # (M, n) -> best patch per filter
