"""Evenly spread points on S¹ and S²: the symmetric measures of ``variational`` Sec. 3 (Remark 3.1, Thm. 3.2).

- :func:`circle_angles_even`, :func:`circle_points_even`: ``n`` evenly spaced points on S¹,
  ``x_k = (cos θ_k, sin θ_k)``, ``θ_k = φ + 2πk/n`` (Remark 3.1's K-point measure; for large ``n`` the
  uniform optimum of the loss of measures).
- :func:`fibonacci_sphere`: ``n`` nearly evenly spread points on S² (a Fibonacci lattice).
- :func:`regular_polytope`, :data:`POLYTOPES`: the vertices of the regular tetrahedron, octahedron,
  cube and icosahedron, on S² (symmetric measures of Thm. 3.2).

Nothing is random here; ``dtype`` (default float64) and ``device`` are keyword-only, and the points
are computed on ``device``.
"""

from __future__ import annotations

import math
from typing import Literal, get_args

import torch
from torch import Tensor

from ssldyn.checks import integer
from ssldyn.data.latent import circle_points

__all__ = ["POLYTOPES", "Polytope", "circle_angles_even", "circle_points_even", "fibonacci_sphere", "regular_polytope"]

Polytope = Literal["tetrahedron", "octahedron", "cube", "icosahedron"]
#: the names :func:`regular_polytope` accepts (4, 6, 8 and 12 vertices)
POLYTOPES: tuple[Polytope, ...] = get_args(Polytope)


def _check_count(fn: str, n: int) -> int:
    return integer(n, "n", where=fn)


def circle_angles_even(
    n: int, *, dtype: torch.dtype = torch.float64, device: torch.device | str | None = None
) -> Tensor:
    """The angles ``θ_k = 2πk/n``, ``k = 0, …, n − 1``, of ``n`` evenly spaced points on S¹: ``(n,)``."""
    n = _check_count("circle_angles_even", n)
    return 2 * math.pi * torch.arange(n, dtype=dtype, device=device) / n  # (n,)


def circle_points_even(
    n: int,
    *,
    phase: float | Tensor = 0.0,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str | None = None,
) -> Tensor:
    """``n`` evenly spaced points on S¹: ``x_k = (cos(φ + 2πk/n), sin(φ + 2πk/n))``, ``(n, 2)``.

    ``phase`` φ rotates the whole set (a number or a 0-d tensor, e.g. a random draw). With ``K``
    points this is the support of Remark 3.1's measure ``(1/K) Σ_k δ_{x_k}``; the neighbours are at
    squared distance ``2 − 2 cos(2π/n)``.
    """
    theta = phase + circle_angles_even(n, dtype=dtype, device=device)  # (n,)
    return circle_points(theta, dtype=dtype)  # (n, 2)


def fibonacci_sphere(n: int, *, dtype: torch.dtype = torch.float64, device: torch.device | str | None = None) -> Tensor:
    """``n`` nearly evenly spread points on S² (a Fibonacci lattice): ``(n, 3)``.

    With ``i = k + ½``, ``k = 0, …, n − 1``: heights ``z_k = 1 − 2i/n`` (equal areas of the zones),
    azimuths ``φ_k = π(1 + √5) i`` and ``x_k = (√(1 − z_k²) cos φ_k, √(1 − z_k²) sin φ_k, z_k)``.
    ``π(1 + √5) ≡ −π(3 − √5) (mod 2π)``: this is the mirror image (``y → −y``) of the lattice written with
    the golden angle ``π(3 − √5)``, with the same pairwise distances.
    """
    n = _check_count("fibonacci_sphere", n)
    i = torch.arange(n, dtype=dtype, device=device) + 0.5  # (n,)
    z = 1 - 2 * i / n  # (n,)
    r = torch.sqrt(1 - z**2)  # (n,)
    phi = math.pi * (1 + math.sqrt(5)) * i  # (n,)
    return torch.stack([r * phi.cos(), r * phi.sin(), z], dim=1)  # (n, 3)


def regular_polytope(
    name: Polytope, *, dtype: torch.dtype = torch.float64, device: torch.device | str | None = None
) -> Tensor:
    """The vertices ``(V, 3)`` of a regular polytope of :data:`POLYTOPES`, scaled onto S².

    Tetrahedron: ``(1, 1, 1)`` and the three sign changes of two coordinates (V = 4); octahedron:
    ``±e_1, ±e_2, ±e_3`` (V = 6); cube: ``(±1, ±1, ±1)`` (V = 8); icosahedron: the cyclic
    permutations of ``(0, ±1, ±ϕ)``, ``ϕ = (1 + √5)/2`` (V = 12). Each is divided by its norm.
    """
    if name not in POLYTOPES:
        raise ValueError(f"regular_polytope: name must be one of {', '.join(map(repr, POLYTOPES))}, got {name!r}")
    if name == "tetrahedron":
        v = torch.tensor([[1, 1, 1], [1, -1, -1], [-1, 1, -1], [-1, -1, 1]], dtype=dtype, device=device)
    elif name == "octahedron":
        v = torch.cat([torch.eye(3, dtype=dtype, device=device), -torch.eye(3, dtype=dtype, device=device)])
    elif name == "cube":
        v = torch.tensor([[a, b, c] for a in (-1, 1) for b in (-1, 1) for c in (-1, 1)], dtype=dtype, device=device)
    else:
        p = (1 + math.sqrt(5)) / 2
        ico = []
        for a in (-1, 1):
            for b in (-p, p):
                ico += [[0, a, b], [a, b, 0], [b, 0, a]]
        v = torch.tensor(ico, dtype=dtype, device=device)
    return v / v.norm(dim=1, keepdim=True)  # (V, 3)
