"""InfoNCE / NT-Xent: the SimCLR loss and the ε-weighted variant of α-CL.

References
----------
- ``variational`` eq. (1)-(2); Chen et al. 2020 (SimCLR, NT-Xent).
- ``nonlinearity`` eq. (1) (InfoNCE with the positive weighted by ε in the denominator)
  and its reference implementation (negatives from view 1 only).
"""

from __future__ import annotations

import math
from typing import Literal, get_args

import torch
from torch import Tensor, nn

from ._common import (
    SIMILARITIES,
    Similarity,
    check_choice,
    check_nonnegative,
    check_pair,
    check_pair_masks,
    check_positive,
    similarity_matrix,
    view1_similarity,
)

__all__ = ["info_nce", "InfoNCE"]

Negatives = Literal["both", "view1"]
NEGATIVES: tuple[str, ...] = get_args(Negatives)


def info_nce(
    z1: Tensor,
    z2: Tensor,
    temperature: float = 0.5,
    *,
    eps: float = 1.0,
    similarity: Similarity = "cosine",
    negatives: Negatives = "both",
    exclude: Tensor | None = None,
    positives: Tensor | None = None,
) -> Tensor:
    r"""InfoNCE / NT-Xent loss of two views.

    With ``negatives="both"`` (SimCLR, ``variational`` eq. 1, Chen et al. 2020) the 2N
    embeddings ``z = [z1; z2]`` are all anchors; for anchor ``k`` the positive is its other
    view ``k'`` and the other 2N-2 samples are negatives:

    .. math::
        \ell_k = -\log \frac{e^{s_{kk'}/\tau}}
                 {\epsilon\, e^{s_{kk'}/\tau} + \sum_{l \ne k, k'} e^{s_{kl}/\tau}},
        \qquad L = \frac{1}{2N} \sum_{k=1}^{2N} \ell_k .

    With ``negatives="view1"`` (the token experiments of ``nonlinearity`` and its reference
    implementation) the logits are ``M_ij = s(z1_i, z1_j)/τ`` for ``i != j`` and
    ``M_ii = s(z1_i, z2_i)/τ``; each row is a cross-entropy with target ``i`` and
    ``L = (1/N) Σ_i ℓ_i`` with ``ℓ_i = -M_ii + log(ε e^{M_ii} + Σ_{j≠i} e^{M_ij})``.

    ``eps`` is the ε of ``nonlinearity`` eq. (1): the weight of the positive pair in the
    denominator. ``eps=1`` (default) is the standard NT-Xent / cross-entropy; ``eps=0``
    drops the positive from the denominator (the InfoNCE ε = 0 of α-CL, whose pairwise
    importance is :func:`~ssldyn.objectives.alpha_infonce`). Note ``nonlinearity`` eq. (1)
    additionally multiplies by τ and sums over anchors: ``L_nce = N τ · info_nce(...,
    negatives="view1", similarity="sqdist")``.

    Similarities ``s``: ``"cosine"`` ``ẑ_i·ẑ_j`` with L2-normalised embeddings (``variational``
    eq. 2); ``"sqdist"`` ``-d²_ij = -‖z_i - z_j‖²/2`` on the embeddings *as given*
    (``nonlinearity`` Sec. 2; on unit vectors it equals cosine up to a constant, so the loss
    is identical); ``"dot"`` the raw inner product ``z_i·z_j``.

    Args:
        z1, z2: embeddings of the two views, ``(N, d)`` or ``(..., N, d)`` (leading
            ensemble axes), same shape; row ``i`` of ``z1`` and ``z2`` is a positive pair.
        temperature: τ > 0.
        eps: ε >= 0, weight of the positive in the denominator.
        similarity: ``"cosine"`` | ``"sqdist"`` | ``"dot"``.
        negatives: ``"both"`` (2N anchors, 2N-2 negatives each) | ``"view1"``
            (N anchors of view 1, N-1 negatives from view 1).
        exclude: with ``negatives="view1"`` only: a bool ``(N, N)`` or ``(..., N, N)`` mask, True at ``(i, j)``
            (``i ≠ j``) where ``z1_j`` is not a negative of anchor ``i``: its term leaves the sum over ``j ≠ i``
            (``nonlinearity`` Fig. 3's caption: samples of the anchor's own generator are not negatives). None:
            every other sample is a negative.
        positives: with ``negatives="view1"`` only: a bool mask as ``exclude``, True at ``(i, j)`` (``i ≠ j``)
            where ``z1_j`` is a positive of anchor ``i`` besides ``z2_i`` (one reading of ``nonlinearity`` Fig. 3's
            caption, "inputs from the same generator are treated as positive pairs"; the paper's eq. 1 has one
            positive per anchor, so this multi-positive form is the library's). Row ``i`` then averages the
            cross-entropy over its positives ``P_i = {i'} ∪ {j: positives_ij}``, each still in the denominator
            with weight ε (the supervised contrastive loss of Khosla et al. 2020, "out" form): ``ℓ_i =
            -(1/|P_i|) Σ_{p∈P_i} M_ip + log(Σ_{p∈P_i} ε e^{M_ip} + Σ_{j∉P_i, j≠i} e^{M_ij})``. No pair may be both
            positive and excluded.

    Returns:
        The loss, reduced by a mean over anchors: a scalar for ``(N, d)`` input, shape
        ``(...)`` (one value per ensemble member) for ``(..., N, d)`` input.
    """
    fn = "info_nce"
    check_pair(fn, "z1", z1, "z2", z2, min_rows=2)
    tau = check_positive(fn, "temperature", temperature)
    eps = check_nonnegative(fn, "eps", eps)
    check_choice(fn, "similarity", similarity, SIMILARITIES)
    check_choice(fn, "negatives", negatives, NEGATIVES)
    for name, mask in (("exclude", exclude), ("positives", positives)):
        if mask is not None and negatives != "view1":
            raise ValueError(f"{fn}: {name} needs negatives='view1' (an (N, N) mask of view-1 pairs)")
    exclude, positives = check_pair_masks(fn, exclude, positives, z1)
    if negatives == "both":
        logits, pos_mask, self_mask = _two_view_logits(z1, z2, similarity, tau)
    else:
        logits, pos_mask, self_mask = _view1_logits(z1, z2, similarity, tau)
        if exclude is not None:
            self_mask = exclude  # (..., N, N): out of the denominator, as the anchor itself is in "both"
        if positives is not None:
            pos_mask = pos_mask | positives  # (..., N, N): the other view and the given positives
    return _cross_entropy_rows(logits, pos_mask, self_mask, eps).mean(-1)


def _two_view_logits(z1: Tensor, z2: Tensor, similarity: str, tau: float):
    n = z1.shape[-2]
    z = torch.cat([z1, z2], dim=-2)  # (..., 2N, d)
    logits = similarity_matrix(z, z, similarity) / tau  # (..., 2N, 2N)
    idx = torch.arange(2 * n, device=z.device)
    partner = (idx + n) % (2 * n)  # positive of anchor k is k' = k ± N
    self_mask = torch.eye(2 * n, dtype=torch.bool, device=z.device)  # (2N, 2N)
    pos_mask = torch.zeros_like(self_mask)
    pos_mask[idx, partner] = True  # (2N, 2N)
    return logits, pos_mask, self_mask


def _view1_logits(z1: Tensor, z2: Tensor, similarity: str, tau: float):
    n = z1.shape[-2]
    logits = view1_similarity(z1, z2, similarity) / tau  # (..., N, N)
    pos_mask = torch.eye(n, dtype=torch.bool, device=z1.device)  # (N, N)
    self_mask = torch.zeros_like(pos_mask)
    return logits, pos_mask, self_mask


def _cross_entropy_rows(logits: Tensor, pos_mask: Tensor, self_mask: Tensor, eps: float) -> Tensor:
    """Per-row ``-mean(pos) + log(ε Σ e^{pos} + Σ_neg e^{neg})`` with log-sum-exp -> ``(..., rows)`` (one positive
    per row, or several: ``positives`` of :func:`info_nce`)."""
    pos = (logits * pos_mask).sum(-1) / pos_mask.sum(-1)  # (..., rows): the mean over a row's positives
    denom = logits.masked_fill(self_mask, -math.inf)  # (..., rows, cols)
    if eps == 0.0:
        denom = denom.masked_fill(pos_mask, -math.inf)
    elif eps != 1.0:
        denom = denom + pos_mask.to(denom.dtype) * math.log(eps)
    return torch.logsumexp(denom, dim=-1) - pos  # (..., rows)


class InfoNCE(nn.Module):
    """Module form of :func:`info_nce`: ``InfoNCE(temperature)(z1, z2)``.

    Settings are validated at construction; ``forward(z1, z2)`` returns the loss
    (scalar, or one value per ensemble member).
    """

    def __init__(
        self,
        temperature: float = 0.5,
        *,
        eps: float = 1.0,
        similarity: Similarity = "cosine",
        negatives: Negatives = "both",
    ) -> None:
        super().__init__()
        fn = "InfoNCE"
        self.temperature = check_positive(fn, "temperature", temperature)
        self.eps = check_nonnegative(fn, "eps", eps)
        self.similarity: Similarity = check_choice(fn, "similarity", similarity, SIMILARITIES)
        self.negatives: Negatives = check_choice(fn, "negatives", negatives, NEGATIVES)

    def forward(self, z1: Tensor, z2: Tensor) -> Tensor:
        return info_nce(z1, z2, self.temperature, eps=self.eps, similarity=self.similarity, negatives=self.negatives)

    def extra_repr(self) -> str:
        return (
            f"temperature={self.temperature}, eps={self.eps}, "
            f"similarity={self.similarity!r}, negatives={self.negatives!r}"
        )
