"""The Stiefel manifold ``St(n, p) = {W ∈ R^{n×p}: WᵀW = I_p}`` and the Frobenius ball: the
constraint sets of the ``grassmann`` models (Sec. 3–4, eq. 8, Prop. 2).

- :func:`polar_retract` ``X (XᵀX)^{-1/2} = U Vᵀ`` (nearest point in Frobenius norm) and
  :func:`qr_retract` (Q of ``X = QR`` with the sign fix ``diag(R) > 0``, continuous and the identity
  on the manifold); :func:`retract` picks one by name;
- :func:`random_stiefel`: Haar-uniform matrices with orthonormal columns (QR of a Gaussian with
  the sign fix, Mezzadri 2007);
- :func:`orthogonality_error`, :func:`frobenius_project`.

All functions take batched matrices ``(..., n, p)``; a "wide" matrix (n < p) is handled through
its transpose (orthonormal rows). The training steps that use them are in
:mod:`ssldyn.dynamics.manifold` (which re-exports these names).
"""

from __future__ import annotations

from typing import Literal, get_args

import torch

__all__ = [
    "RETRACTIONS",
    "Retraction",
    "polar_retract",
    "qr_retract",
    "retract",
    "random_stiefel",
    "orthogonality_error",
    "frobenius_project",
]

Retraction = Literal["polar", "qr"]
RETRACTIONS: tuple[str, ...] = get_args(Retraction)


def _tall(fn):
    """Apply ``fn`` to the tall orientation of a matrix (transpose wide ones)."""

    def wrapped(W: torch.Tensor, *args, **kw):
        if W.dim() < 2:
            raise ValueError(f"{fn.__name__}: W must be a matrix (..., n, p), got shape {tuple(W.shape)}")
        if W.shape[-2] < W.shape[-1]:
            args = tuple(a.mT if isinstance(a, torch.Tensor) else a for a in args)
            return fn(W.mT, *args, **kw).mT
        return fn(W, *args, **kw)

    wrapped.__doc__ = fn.__doc__
    wrapped.__name__ = fn.__name__
    return wrapped


@_tall
def polar_retract(X: torch.Tensor) -> torch.Tensor:
    """Polar factor ``U Vᵀ`` of ``X = U S Vᵀ`` ``(..., n, p)``: the nearest matrix with orthonormal columns."""
    X64 = X.double()  # float32 inputs are retracted in float64: WᵀW = I to ~1e-7 after casting back
    U, _, Vh = torch.linalg.svd(X64, full_matrices=False)  # (..., n, p), (..., p, p)
    return (U @ Vh).to(X.dtype)


@_tall
def qr_retract(X: torch.Tensor) -> torch.Tensor:
    """Q factor of ``X = QR`` with the sign fix ``diag(R) > 0`` ``(..., n, p)``."""
    Q, R = torch.linalg.qr(X.double(), mode="reduced")  # (..., n, p), (..., p, p), float64 as in polar
    s = torch.sign(torch.diagonal(R, dim1=-2, dim2=-1))  # (..., p)
    s = torch.where(s == 0, torch.ones_like(s), s)
    return (Q * s.unsqueeze(-2)).to(X.dtype)


def retract(X: torch.Tensor, method: Retraction = "polar") -> torch.Tensor:
    """Map ``X`` onto the Stiefel manifold with ``method`` in {"polar", "qr"}."""
    if method == "polar":
        return polar_retract(X)
    if method == "qr":
        return qr_retract(X)
    raise ValueError(f"retraction {method!r}: allowed values are {', '.join(RETRACTIONS)}")


def random_stiefel(
    n: int,
    p: int,
    *batch: int,
    generator: torch.Generator | None = None,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """Haar-uniform matrices with orthonormal columns ``(*batch, n, p)``, n ≥ p (QR of a
    Gaussian with the sign fix, Mezzadri 2007).

    Drawn with the (CPU) ``generator`` and orthonormalised on the CPU, then moved to ``device``
    (default: CPU), so every device gets the same matrices for the same seed.
    """
    if n < p:
        raise ValueError(f"random_stiefel: need n >= p for orthonormal columns, got n={n}, p={p}")
    g = torch.randn(*batch, n, p, generator=generator, dtype=torch.float64)  # (*batch, n, p) on the CPU
    return qr_retract(g).to(dtype=dtype, device=device)


def orthogonality_error(W: torch.Tensor) -> torch.Tensor:
    """``max |WᵀW − I|`` per matrix (tall orientation) ``(...)``."""
    if W.shape[-2] < W.shape[-1]:
        W = W.mT
    eye = torch.eye(W.shape[-1], dtype=W.dtype, device=W.device)
    return (W.mT @ W - eye).abs().amax((-2, -1))


def frobenius_project(W: torch.Tensor, c: float) -> torch.Tensor:
    """Project onto the Frobenius ball ``‖W‖_F ≤ c`` (Prop. 2): ``W · min(1, c/‖W‖_F)`` per matrix."""
    nrm = torch.linalg.matrix_norm(W).clamp_min(1e-30)  # (...)
    return W * torch.clamp(c / nrm, max=1.0)[..., None, None]
