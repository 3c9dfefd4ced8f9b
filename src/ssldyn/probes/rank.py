"""RankMe: the smooth rank of a representation (Garrido, Balestriero, Najman & LeCun, ICML 2023).

For embeddings ``Z ∈ R^{n×d}`` with singular values ``σ_1 ≥ … ≥ σ_r`` (``r = min(n, d)``),

    p_k = σ_k / ‖σ‖₁ + ε,        RankMe(Z) = exp(−Σ_k p_k log p_k),        ε = 1e-7

(Garrido et al. eq. 1). The embeddings are **not** centred (as in the paper); this is what
distinguishes it from :func:`ssldyn.probes.collapse.effective_rank` (Roy & Vetterli 2007 on
centred embeddings). RankMe lies in ``[1, r]`` (up to ε): 1 for a representation collapsed to a
line through the origin, ``r`` when every singular value is equal. Garrido et al. show that it
tracks the downstream accuracy of SSL representations without labels.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from ssldyn.checks import positive
from ssldyn.probes._common import as_tensor

__all__ = ["rankme"]


def rankme(z: Any, eps: float = 1e-7) -> Tensor:
    """RankMe of embeddings ``(..., n, d)``: a float64 tensor ``(...)`` — 0-d for one ``(n, d)``, ``(E,)``
    for an ensemble ``(E, n, d)`` (the return type does not depend on the input's rank; ``float()`` it
    for one value).

    Args:
        z: a tensor or array of embeddings, ``(n, d)`` or ``(E, n, d)`` (on any device; the result is there).
        eps: the ε added to the normalised singular values (Garrido et al. use 1e-7).

    Example:
        >>> import torch
        >>> z = torch.zeros(10, 3); z[:, 0] = torch.arange(10.0)   # all mass on one direction
        >>> round(float(rankme(z)), 3)
        1.0
        >>> round(float(rankme(torch.eye(4))), 3)                  # four equal singular values
        4.0
    """
    eps = positive(eps, "eps", where="rankme")
    t = as_tensor(z)
    if t.dim() not in (2, 3):
        raise ValueError(f"rankme: embeddings must have shape (n, d) or (E, n, d), got {tuple(t.shape)}")
    if not bool(torch.isfinite(t).all()):
        raise ValueError("rankme: embeddings contain NaN or inf")
    s = torch.linalg.svdvals(t.to(torch.float64))  # (..., r)
    p = s / s.sum(-1, keepdim=True).clamp_min(torch.finfo(s.dtype).tiny) + eps  # (..., r)
    return torch.exp(-(p * torch.log(p)).sum(-1))  # (...)
