"""Matching scores χ± of learned filters (`nonlinearity` eq. 16, App. E.2 eq. 180–181).

For RF k and token a, the best match over the M filters of RF k is
``c_k(a) = max_m cos(w_km, u_a)``. With ``R_k`` the relevant tokens of position k (those
that appear at k in at least one generator):

- ``χ₊(R_k)`` = mean of ``c_k(a)`` over ``a ∈ R_k`` (eq. 16 / 180);
- ``χ₋(R_k)`` = mean of ``c_k(a)`` over ``a ∉ R_k`` (eq. 181; the paper's text divides by P,
  here — as in the protocol of issue 5 — it is the mean over the irrelevant tokens, so both
  scores lie in [−1, 1]);
- ``χ̄±`` = mean over the K RFs.

The token set follows the reference implementation's scoring (``check_result`` of
``ssl/real-dataset/bn_gen.py`` in facebookresearch/luckmatters averages, per position, over the
tokens the generators' patterns hold there, ``symbol_freq``); eq. 16's text averages ``χ₊`` over
the P candidate tokens ``R_k^g`` of RF k (dividing by P). ``R_k`` here is the subset of the
candidates some generator actually draws at k (``relevant``); a candidate no generator draws — it
appears at k only through a wildcard, as noise — counts in ``χ₋``. With few generators and large
P the two sets differ (see the README's token-experiment notes).

For a linear activation the sign of a filter is arbitrary (``h(−w·x) = −h(w·x)`` is absorbed
by the top layer), so ``absolute=True`` uses ``|cos|`` (as the reference implementation does).
"""

from __future__ import annotations

import torch

__all__ = ["best_match", "chi_scores"]


def best_match(
    W: torch.Tensor,
    embedding: torch.Tensor,
    *,
    absolute: bool | torch.Tensor = False,
    filter_mask: torch.Tensor | None = None,
    eps: float = 1e-12,
) -> torch.Tensor:
    """``c[..., k, a] = max_m cos(w_km, u_a)``.

    Args:
        W: filters ``(..., K, M, d)``.
        embedding: token embeddings ``(..., n_tokens, d)`` (rows u_a), broadcast against W's leading axes.
        absolute: use ``|cos|`` (bool, or a bool tensor over the leading axes, e.g. ``(E,)``).
        filter_mask: optional ``(..., K, M)`` with 0 for padded filters (excluded from the max).
    Returns:
        ``(..., K, n_tokens)``.
    """
    _check_filters("best_match", W, embedding)
    Wn = W / W.norm(dim=-1, keepdim=True).clamp_min(eps)  # (..., K, M, d)
    Un = embedding / embedding.norm(dim=-1, keepdim=True).clamp_min(eps)  # (..., T, d)
    cos = torch.matmul(Wn, Un.unsqueeze(-3).transpose(-1, -2))  # (..., K, M, T)
    if isinstance(absolute, torch.Tensor):
        absolute = absolute.to(torch.bool).view(*absolute.shape, 1, 1, 1)
        cos = torch.where(absolute, cos.abs(), cos)
    elif absolute:
        cos = cos.abs()
    if filter_mask is not None:
        cos = cos.masked_fill(filter_mask.unsqueeze(-1) == 0, float("-inf"))
    return cos.amax(dim=-2)  # (..., K, T)


def chi_scores(
    W: torch.Tensor,
    embedding: torch.Tensor,
    relevant: torch.Tensor,
    *,
    absolute: bool | torch.Tensor = False,
    filter_mask: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Overall scores ``(χ̄₊, χ̄₋)``, each of shape ``W.shape[:-3]`` (one per ensemble member).

    Args:
        W: filters ``(..., K, M, d)``; embedding: ``(..., n_tokens, d)``;
        relevant: bool ``(..., K, n_tokens)``, token a appears at position k in some generator.
        absolute, filter_mask: as in :func:`best_match`.
    """
    _check_filters("chi_scores", W, embedding)
    c = best_match(W, embedding, absolute=absolute, filter_mask=filter_mask)  # (..., K, T)
    rel = relevant.to(c.dtype)
    irr = 1.0 - rel
    chi_p = (c * rel).sum(-1) / rel.sum(-1).clamp_min(1.0)  # (..., K)
    chi_m = (c * irr).sum(-1) / irr.sum(-1).clamp_min(1.0)  # (..., K)
    return chi_p.mean(-1), chi_m.mean(-1)


def _check_filters(fn: str, W: torch.Tensor, embedding: torch.Tensor) -> None:
    """One ``ValueError`` naming ``fn`` unless ``W (..., K, M, d)`` and ``embedding (..., n_tokens, d)`` share ``d``
    and their leading axes broadcast (a mismatch used to fail inside ``torch.matmul``)."""
    shapes = f"got {tuple(W.shape)} and {tuple(embedding.shape)}"
    if W.dim() < 3 or embedding.dim() < 2 or W.shape[-1] != embedding.shape[-1]:
        raise ValueError(f"{fn}: W (..., K, M, d) and embedding (..., n_tokens, d) need one d, {shapes}")
    try:
        torch.broadcast_shapes(W.shape[:-3], embedding.shape[:-2])
    except RuntimeError:
        raise ValueError(f"{fn}: the leading axes (...) of W and embedding do not broadcast, {shapes}") from None
