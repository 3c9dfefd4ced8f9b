"""Dimension-collapse probes of embeddings (``grassmann`` Prop. 1, Example 1, Fig. 1).

All functions take embeddings ``(..., n, z)`` — tensors or numpy arrays, leading ensemble axes
allowed — and center them over the n points first (``center=True``), so a constant offset does not
count as a dimension. The scalar probes return a Python ``float`` for one embedding ``(n, z)`` and a
tensor ``(...)`` (one value per member) for batched input (the probe signature of
:mod:`ssldyn.dynamics`); :func:`effective_rank` returns a tensor ``(...)`` whatever the input's rank
(0-d for one embedding), as :func:`ssldyn.probes.rank.rankme` does.
"""

from __future__ import annotations

import torch

from ssldyn.probes._common import ArrayLike, as_tensor

__all__ = ["embedding_singular_values", "singular_value_ratio", "effective_rank", "dimension_coupling"]


def _centered(u, center: bool) -> torch.Tensor:
    u = as_tensor(u)
    if u.dim() < 2 or u.shape[-2] == 0 or u.shape[-1] == 0:
        raise ValueError(f"embeddings must have shape (..., n, z) with n, z >= 1, got {tuple(u.shape)}")
    if not bool(torch.isfinite(u).all()):
        raise ValueError(f"embeddings contain NaN or inf (shape {tuple(u.shape)}): a diverged run has no spectrum")
    return u - u.mean(-2, keepdim=True) if center else u


def _scalar(t: torch.Tensor) -> float | torch.Tensor:
    """One value: a Python float; one per member: the tensor."""
    return float(t) if t.dim() == 0 else t


def embedding_singular_values(u: ArrayLike, center: bool = True) -> torch.Tensor:
    """Singular values of the (centered) embedding matrix, descending ``(..., min(n, z))``."""
    return torch.linalg.svdvals(_centered(u, center))


def singular_value_ratio(u: ArrayLike, center: bool = True) -> float | torch.Tensor:
    """``σ_min / σ_max`` of the (centered) embeddings: 1 = isotropic, 0 = collapsed to fewer than z
    dimensions (for z = 2: collapsed to a line). A float for ``(n, z)``, a tensor ``(...)`` for ``(..., n, z)``."""
    s = embedding_singular_values(u, center)
    return _scalar(s[..., -1] / s[..., 0].clamp_min(torch.finfo(s.dtype).tiny))


def effective_rank(u: ArrayLike, center: bool = True) -> torch.Tensor:
    """Effective rank ``exp(H(p))`` with ``p_k = σ_k / Σσ`` (Roy & Vetterli 2007), in [1, min(n, z)].

    A tensor ``(...)`` for ``(..., n, z)`` whatever the rank of the input (0-d for one ``(n, z)``;
    ``float()`` it for one value).
    """
    s = embedding_singular_values(u, center)
    p = s / s.sum(-1, keepdim=True).clamp_min(torch.finfo(s.dtype).tiny)
    ent = -(torch.where(p > 0, p * torch.log(p), torch.zeros_like(p))).sum(-1)
    return torch.exp(ent)


def dimension_coupling(K: ArrayLike) -> tuple[float, float]:
    """Lemma 1 measured on a tangent kernel ``K[a, b, l, j] = ⟨∇u_l(x_a), ∇u_j(x_b)⟩`` ``(n, n, z, z)``.

    Returns ``(cross, spread)``: ``cross = max_{l≠j} |K_lj| / max_l |K_ll|`` (0 when output
    dimensions do not interact) and ``spread = max_{l,j} |K_ll − K_jj| / max_l |K_ll|`` (0 when
    every dimension sees the same kernel, so every dimension follows the same dynamics, Prop. 1).
    """
    K = as_tensor(K)
    if K.dim() != 4 or K.shape[0] != K.shape[1] or K.shape[2] != K.shape[3]:
        raise ValueError(f"dimension_coupling: need K of shape (n, n, z, z), got {tuple(K.shape)}")
    z = K.shape[-1]
    diag = torch.stack([K[..., l, l] for l in range(z)])  # (z, n, n)
    scale = diag.abs().amax().clamp_min(torch.finfo(K.dtype).tiny)
    off = K * (1 - torch.eye(z, dtype=K.dtype, device=K.device))
    cross = off.abs().amax() / scale
    spread = (diag[:, None] - diag[None, :]).abs().amax() / scale
    return float(cross), float(spread)
