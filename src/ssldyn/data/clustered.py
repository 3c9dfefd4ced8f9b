"""Clustered data of ``variational`` Sec. 4.2 (eq. 16) and the toy sets of Fig. 5 / Fig. 6.

Eq. (16): ``N <= d`` mutually orthogonal centers ``ξ_q`` in the first ``d`` coordinates of
``R^D`` (the "manifold" M), samples ``x_i = ξ_{γ(i)} + ε_i`` with ``‖ε_i‖ < δ``. The noise is
either anywhere in ``R^D`` (``noise="ball"``) or restricted to the orthogonal complement
``M^⊥`` = the last ``D - d`` coordinates (``noise="orthogonal"``: the perturbation α of
Sec. 4.2, to which an eq.-17 map is invariant). Cluster sizes are given explicitly, so
imbalanced clusters (Remark 4.4) are one argument away.

Devices: random draws always come from the (CPU) ``generator`` on the CPU, then the result is
moved to ``device`` (default CPU), so a CUDA run sees exactly the data of a CPU run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor

from ssldyn.checks import choice, nonnegative, positive
from ssldyn.data.sphere import regular_polytope

__all__ = ["ClusteredData", "clustered_data", "ball_noise", "four_clusters_2d", "clusters_3d"]


@dataclass
class ClusteredData:
    """A labelled clustered sample.

    Attributes:
        x: ``(n, D)`` samples, ordered by cluster (cluster ``q`` occupies a contiguous block).
        labels: ``(n,)`` long, the cluster index γ(i) of each sample.
        centers: ``(N, D)`` cluster centers ξ_q.
        sizes: the ``N`` cluster sizes ``n_q - n_{q-1}``.
        delta: noise radius δ (``‖ε_i‖ < δ``).
        d: dimension of the signal subspace M (first ``d`` coordinates).
    """

    x: Tensor
    labels: Tensor
    centers: Tensor
    sizes: list[int]
    delta: float
    d: int

    @property
    def n(self) -> int:
        return int(self.x.shape[0])

    @property
    def ratios(self) -> Tensor:
        """``(N,)`` cluster size ratios ``(n_q - n_{q-1}) / n`` of Thm. 4.5."""
        s = torch.tensor(self.sizes, dtype=self.x.dtype, device=self.x.device)
        return s / s.sum()

    @property
    def device(self) -> torch.device:
        return self.x.device

    def to(self, device: torch.device | str | None) -> ClusteredData:
        """A copy with ``x``, ``labels`` and ``centers`` on ``device`` (None: unchanged)."""
        if device is None:
            return self
        return ClusteredData(
            self.x.to(device), self.labels.to(device), self.centers.to(device), list(self.sizes), self.delta, self.d
        )


def ball_noise(
    n: int,
    dim: int,
    radius: float,
    *,
    generator: torch.Generator | None = None,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
) -> Tensor:
    """``(n, dim)`` points uniform in the open ball of ``radius`` (direction × radius·U^{1/dim}).

    Drawn on the CPU from ``generator``, then moved to ``device`` (None: CPU).
    """
    radius = nonnegative(radius, "radius", where="ball_noise")
    g = torch.randn(n, dim, generator=generator, dtype=torch.float64)
    g = g / g.norm(dim=1, keepdim=True).clamp_min(1e-300)
    r = torch.rand(n, 1, generator=generator, dtype=torch.float64) ** (1.0 / dim)
    return (radius * r * g * (1 - 1e-12)).to(dtype=dtype, device=device)  # strictly inside


def clustered_data(
    sizes: Sequence[int],
    d: int,
    D: int,
    delta: float,
    *,
    center_norm: float = 1.0,
    noise: Literal["ball", "orthogonal"] = "ball",
    rotate: bool = False,
    generator: torch.Generator | None = None,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
) -> ClusteredData:
    """Samples of eq. (16): ``x_i = ξ_q + ε_i`` with ``ξ_q ⊥ ξ_{q'}`` in the first ``d`` coordinates.

    Args:
        sizes: cluster sizes ``[n_1 - n_0, ..., n_N - n_{N-1}]`` (each >= 1), ``N <= d``.
        d: signal dimension (the centers live in ``span(e_1..e_d)``); also the embedding
            dimension of the averaging network of eq. (18).
        D: ambient dimension, ``D >= d`` (``D > d`` for ``noise="orthogonal"``).
        delta: noise radius δ >= 0; ε_i is uniform in the ball ``‖ε‖ < δ``.
        center_norm: ``‖ξ_q‖`` (the same for all q).
        noise: ``"ball"`` (ε anywhere in R^D) or ``"orthogonal"`` (ε in the last ``D - d``
            coordinates only, the perturbation α ∈ P(M^⊥)).
        rotate: rotate the orthonormal centers by a random orthogonal map of the first ``d``
            coordinates (default: ``ξ_q = center_norm · e_q``).
        generator: CPU generator of the draws; device: where ``x``, ``labels`` and ``centers``
            are put afterwards (None: CPU).
    """
    sizes = [int(s) for s in sizes]
    if not sizes or any(s < 1 for s in sizes):
        raise ValueError(f"clustered_data: sizes must be a non-empty list of integers >= 1, got {sizes}")
    if not (1 <= len(sizes) <= d <= D):
        raise ValueError(f"clustered_data: need 1 <= N <= d <= D, got N={len(sizes)}, d={d}, D={D}")
    choice(noise, "noise", ("ball", "orthogonal"), where="clustered_data")
    if noise == "orthogonal" and D == d:
        raise ValueError("clustered_data: noise='orthogonal' needs D > d (a non-empty complement M^⊥)")
    center_norm = positive(center_norm, "center_norm", where="clustered_data")
    N = len(sizes)
    basis = torch.eye(d, dtype=torch.float64)
    if rotate:
        q, _ = torch.linalg.qr(torch.randn(d, d, generator=generator, dtype=torch.float64))
        basis = q.T
    centers = torch.zeros(N, D, dtype=torch.float64)
    centers[:, :d] = center_norm * basis[:N]  # (N, D), orthogonal rows
    labels = _cluster_labels(sizes)  # (n,)
    n = labels.numel()
    eps = torch.zeros(n, D, dtype=torch.float64)
    if noise == "ball":
        eps = ball_noise(n, D, delta, generator=generator, dtype=torch.float64)
    else:
        eps[:, d:] = ball_noise(n, D - d, delta, generator=generator, dtype=torch.float64)
    x = centers[labels] + eps  # (n, D)
    return ClusteredData(x.to(dtype), labels, centers.to(dtype), sizes, float(delta), d).to(device)


def _cluster_labels(sizes: Sequence[int]) -> Tensor:
    """``γ(i)`` of samples ordered by cluster: ``sizes[q]`` copies of ``q`` for ``q = 0 .. N − 1``, long ``(n,)``."""
    return torch.cat([torch.full((s,), q, dtype=torch.long) for q, s in enumerate(sizes)])  # (n,)


def _from_centers(
    centers: Tensor,
    n_per_cluster: int | Sequence[int],
    delta: float,
    generator: torch.Generator | None,
    dtype: torch.dtype,
    device: torch.device | str | None = None,
) -> ClusteredData:
    N, D = centers.shape
    sizes = [n_per_cluster] * N if isinstance(n_per_cluster, int) else [int(s) for s in n_per_cluster]
    if len(sizes) != N or any(s < 1 for s in sizes):
        raise ValueError(f"need {N} cluster sizes >= 1, got {sizes}")
    labels = _cluster_labels(sizes)  # (n,)
    x = centers[labels] + ball_noise(labels.numel(), D, delta, generator=generator, dtype=torch.float64)
    return ClusteredData(x.to(dtype), labels, centers.to(dtype), sizes, float(delta), D).to(device)


def four_clusters_2d(
    n_per_cluster: int | Sequence[int] = 25,
    *,
    delta: float = 0.5,
    generator: torch.Generator | None = None,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
) -> ClusteredData:
    """The 2-D data of ``variational`` Fig. 5: four clusters centred on the x-axis at −3, −1, 1, 3.

    The paper does not state the spread; here each point is uniform in a disc of radius
    ``delta`` (default 0.5, so the discs do not touch) around its center.
    """
    centers = torch.tensor([[-3.0, 0.0], [-1.0, 0.0], [1.0, 0.0], [3.0, 0.0]], dtype=torch.float64)
    return _from_centers(centers, n_per_cluster, delta, generator, dtype, device)


def clusters_3d(
    n_per_cluster: int | Sequence[int] = 25,
    *,
    delta: float = 0.5,
    radius: float = 2.0,
    generator: torch.Generator | None = None,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
) -> ClusteredData:
    """A 3-D clustered set for ``variational`` Fig. 6 (rows 4–6); the paper does not specify it.

    Our choice: four clusters centred at the vertices of a regular tetrahedron inscribed in
    the sphere of ``radius`` (default 2, pairwise center distance ≈ 3.27), each point uniform
    in a ball of radius ``delta`` around its center — the 3-D analogue of Fig. 5's four
    well-separated clusters, with no cluster on a ray through another.
    """
    v = regular_polytope("tetrahedron")  # (4, 3) float64: (1, 1, 1) and its sign changes of two coordinates, /√3
    return _from_centers(radius * v, n_per_cluster, delta, generator, dtype, device)
