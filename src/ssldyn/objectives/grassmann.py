"""Losses of ``grassmann`` (Esser et al.): simple (non-)contrastive losses and the trace form.

References: ``grassmann`` eq. (1), (2), (7), (8), Proposition 3.

Conventions
-----------
- Sums over the n anchors (eq. 1-2 are sums, not means).
- ``p`` positives / ``q`` negatives per anchor: the text after eq. (7) *sums* over them,
  ``C̃ = Σ_i (Σ_j^q x_i x_j⁻ᵀ - Σ_j^p x_i x_j⁺ᵀ)``. ``reduce_pairs="sum"`` (default)
  follows it; ``reduce_pairs="mean"`` averages over the p (and q) instead. The loss and
  the contrast matrix use the same reduction, so ``trace_loss == simple_contrastive`` for
  the linear model either way.
- Linear model ``u(x) = W2ᵀ W1 x`` with ``W1 ∈ R^{h×d}``, ``W2 ∈ R^{h×z}`` (Sec. 4), so
  ``Σ_i u(x_i)ᵀ(u(x_i⁻) - u(x_i⁺)) = Tr(W2ᵀ W1 C W1ᵀ W2)``.
- Non-contrastive: eq. (2) is ``-Σ u(x_i)ᵀ u(x_i⁺)``, so its matrix is
  ``C̃ = -Σ_i x_i x_i⁺ᵀ`` (the text after eq. 7 drops the minus sign; with it,
  ``trace_loss`` equals eq. 2 and ``C`` has the negative eigenvalues Thm. 3 needs).
"""

from __future__ import annotations

from typing import Literal, get_args

import torch
from torch import Tensor, nn

from ._common import check_choice, check_tensor

__all__ = [
    "simple_contrastive",
    "non_contrastive",
    "contrast_matrix",
    "non_contrastive_matrix",
    "trace_loss",
    "scaled_trace_loss",
    "SimpleContrastiveLoss",
    "NonContrastiveLoss",
    "TraceLoss",
]

Reduction = Literal["sum", "mean"]
REDUCTIONS: tuple[str, ...] = get_args(Reduction)


def simple_contrastive(u: Tensor, u_pos: Tensor, u_neg: Tensor, *, reduce_pairs: Reduction = "sum") -> Tensor:
    r"""Simple contrastive loss of ``grassmann`` eq. (1) (Arora et al. 2019).

    .. math:: L = \sum_{i=1}^n u(x_i)^\top \big(u(x_i^-) - u(x_i^+)\big),

    with ``p`` positives / ``q`` negatives per anchor the positive and negative embeddings
    are summed (``reduce_pairs="sum"``, as in the text after eq. 7) or averaged
    (``"mean"``) over their p / q axis first.

    Args:
        u: anchor embeddings ``(n, z)`` or ``(..., n, z)``.
        u_pos: ``(..., n, z)`` (one positive each) or ``(..., n, p, z)``.
        u_neg: ``(..., n, z)`` (one negative each) or ``(..., n, q, z)``.
        reduce_pairs: ``"sum"`` | ``"mean"`` over the p / q axis.

    Returns:
        Sum over anchors: a scalar, or shape ``(...)`` with ensemble axes.
    """
    fn = "simple_contrastive"
    check_tensor(fn, "u", u)
    check_choice(fn, "reduce_pairs", reduce_pairs, REDUCTIONS)
    pos = _reduce_pairs(fn, "u_pos", u_pos, u, reduce_pairs)  # (..., n, z)
    neg = _reduce_pairs(fn, "u_neg", u_neg, u, reduce_pairs)  # (..., n, z)
    return (u * (neg - pos)).sum((-2, -1))


def non_contrastive(u: Tensor, u_pos: Tensor, *, reduce_pairs: Reduction = "sum") -> Tensor:
    r"""Simple non-contrastive loss of ``grassmann`` eq. (2): ``L = -Σ_i u(x_i)ᵀ u(x_i⁺)``.

    Args:
        u: ``(n, z)`` or ``(..., n, z)``.
        u_pos: ``(..., n, z)`` or ``(..., n, p, z)`` (reduced over p by ``reduce_pairs``).
        reduce_pairs: ``"sum"`` | ``"mean"``.

    Returns:
        Sum over anchors: a scalar, or shape ``(...)``.
    """
    fn = "non_contrastive"
    check_tensor(fn, "u", u)
    check_choice(fn, "reduce_pairs", reduce_pairs, REDUCTIONS)
    pos = _reduce_pairs(fn, "u_pos", u_pos, u, reduce_pairs)  # (..., n, z)
    return -(u * pos).sum((-2, -1))


def contrast_matrix(
    x: Tensor,
    x_pos: Tensor,
    x_neg: Tensor | None = None,
    *,
    non_contrastive: bool = False,
    reduce_pairs: Reduction = "sum",
    symmetrize: bool = True,
) -> Tensor:
    r"""Data matrix ``C`` of ``grassmann`` eq. (7).

    .. math::
        \tilde C = \sum_i x_i \Big(\sum_j^q x_{ij}^- - \sum_j^p x_{ij}^+\Big)^\top,
        \qquad C = \frac{\tilde C + \tilde C^\top}{2},

    so that ``trace_loss(W1, W2, C) == simple_contrastive(u(x), u(x⁺), u(x⁻))`` for
    ``u(x) = W2ᵀW1x``. With ``non_contrastive=True`` (``x_neg`` must be None),
    ``C̃ = -Σ_i x_i x_i⁺ᵀ`` so that the trace loss equals eq. (2) (see module notes).

    Args:
        x: anchors ``(n, d)`` or ``(..., n, d)``.
        x_pos: ``(..., n, d)`` or ``(..., n, p, d)``.
        x_neg: ``(..., n, d)`` or ``(..., n, q, d)``; required unless ``non_contrastive``.
        non_contrastive: build the matrix of eq. (2) instead of eq. (1).
        reduce_pairs: ``"sum"`` | ``"mean"`` over the p / q axis.
        symmetrize: return ``C`` (default) or the raw ``C̃``.

    Returns:
        ``(d, d)``, or ``(..., d, d)`` with ensemble axes.
    """
    fn = "contrast_matrix"
    check_tensor(fn, "x", x)
    check_choice(fn, "reduce_pairs", reduce_pairs, REDUCTIONS)
    pos = _reduce_pairs(fn, "x_pos", x_pos, x, reduce_pairs)  # (..., n, d)
    if non_contrastive:
        if x_neg is not None:
            raise ValueError(f"{fn}: x_neg must be None when non_contrastive=True")
        c_tilde = -(x.mT @ pos)  # (..., d, d)
    else:
        if x_neg is None:
            raise ValueError(f"{fn}: x_neg is required for the contrastive matrix (or set non_contrastive=True)")
        neg = _reduce_pairs(fn, "x_neg", x_neg, x, reduce_pairs)  # (..., n, d)
        c_tilde = x.mT @ (neg - pos)  # (..., d, d): Σ_i x_i (x_i⁻ - x_i⁺)ᵀ
    return 0.5 * (c_tilde + c_tilde.mT) if symmetrize else c_tilde


def non_contrastive_matrix(
    x: Tensor, x_pos: Tensor, *, reduce_pairs: Reduction = "sum", symmetrize: bool = True
) -> Tensor:
    """``C`` of the non-contrastive loss eq. (2): ``contrast_matrix(x, x_pos, non_contrastive=True)``."""
    return contrast_matrix(x, x_pos, None, non_contrastive=True, reduce_pairs=reduce_pairs, symmetrize=symmetrize)


def trace_loss(W1: Tensor, W2: Tensor, C: Tensor) -> Tensor:
    r"""General trace loss of ``grassmann`` eq. (8): ``L = Tr(W2ᵀ W1 C W1ᵀ W2)``.

    The orthogonality constraints of eq. (8) are not imposed here (that is the job of the
    manifold dynamics); see :func:`scaled_trace_loss` for the equivalent scaled form.

    Args:
        W1: ``(h, d)`` or ``(..., h, d)``.
        W2: ``(h, z)`` or ``(..., h, z)``.
        C: ``(d, d)`` or ``(..., d, d)`` (broadcast against the ensemble axes).

    Returns:
        A scalar, or shape ``(...)``.
    """
    fn = "trace_loss"
    _check_weights(fn, W1, W2, C)
    a = W2.mT @ W1  # (..., z, d): u(x) = a x
    return ((a @ C) * a).sum((-2, -1))  # Tr(a C aᵀ)


def scaled_trace_loss(W1: Tensor, W2: Tensor, C: Tensor) -> Tensor:
    r"""Scaled trace loss of ``grassmann`` Prop. 3 (form 1): ``L / (‖W2‖₂² ‖W1‖₂²)``.

    ``‖·‖₂`` is the spectral norm. The ratio is invariant to rescaling ``W1`` and ``W2``
    and equals :func:`trace_loss` when both have orthonormal columns; Prop. 3 shows that
    minimising it is equivalent to the orthogonality-constrained problem (8).

    Shapes as in :func:`trace_loss`.
    """
    fn = "scaled_trace_loss"
    _check_weights(fn, W1, W2, C)
    s1 = torch.linalg.matrix_norm(W1, ord=2)  # (...)
    s2 = torch.linalg.matrix_norm(W2, ord=2)  # (...)
    return trace_loss(W1, W2, C) / (s1 * s2).pow(2)


def _reduce_pairs(fn: str, name: str, v: Tensor, anchor: Tensor, how: str) -> Tensor:
    """``(..., n, z)`` stays; ``(..., n, p, z)`` is summed/averaged over p."""
    check_tensor(fn, name, v)
    if v.dtype != anchor.dtype:
        raise ValueError(f"{fn}: {name} must have dtype {anchor.dtype} like the anchors, got {v.dtype}")
    if v.shape == anchor.shape:
        return v
    if v.dim() == anchor.dim() + 1 and v.shape[:-2] == anchor.shape[:-1] and v.shape[-1] == anchor.shape[-1]:
        return v.sum(-2) if how == "sum" else v.mean(-2)
    one = ", ".join(str(s) for s in anchor.shape)
    many = ", ".join([str(s) for s in anchor.shape[:-1]] + ["p", str(anchor.shape[-1])])
    raise ValueError(
        f"{fn}: {name} must have shape ({one}) (one per anchor) or ({many}) (p per anchor), got {tuple(v.shape)}"
    )


def _check_weights(fn: str, W1: Tensor, W2: Tensor, C: Tensor) -> None:
    check_tensor(fn, "W1", W1)
    check_tensor(fn, "W2", W2)
    check_tensor(fn, "C", C)
    if W1.shape[-2] != W2.shape[-2]:
        raise ValueError(
            f"{fn}: W1 (h, d) and W2 (h, z) must share the hidden size h, got {tuple(W1.shape)} and {tuple(W2.shape)}"
        )
    if not (W1.dtype == W2.dtype == C.dtype):  # e.g. C of float64 data, a float32 network: a raw matmul error
        fix = f" (cast C with C.to({W1.dtype}))" if W1.dtype == W2.dtype else ""
        raise ValueError(f"{fn}: W1, W2 and C must have one dtype, got {W1.dtype}, {W2.dtype} and {C.dtype}{fix}")
    d = W1.shape[-1]
    if C.shape[-2:] != (d, d):
        raise ValueError(f"{fn}: C must have shape (d, d) = ({d}, {d}) matching W1 (h, d), got {tuple(C.shape)}")
    try:
        torch.broadcast_shapes(W1.shape[:-2], W2.shape[:-2], C.shape[:-2])
    except RuntimeError:
        raise ValueError(f"{fn}: the ensemble axes (...) of W1 {tuple(W1.shape)}, W2 {tuple(W2.shape)} and C "
                         f"{tuple(C.shape)} do not broadcast") from None  # fmt: skip


class SimpleContrastiveLoss(nn.Module):
    """Module form of :func:`simple_contrastive`: ``forward(u, u_pos, u_neg)``."""

    def __init__(self, *, reduce_pairs: Reduction = "sum") -> None:
        super().__init__()
        self.reduce_pairs: Reduction = check_choice("SimpleContrastiveLoss", "reduce_pairs", reduce_pairs, REDUCTIONS)

    def forward(self, u: Tensor, u_pos: Tensor, u_neg: Tensor) -> Tensor:
        return simple_contrastive(u, u_pos, u_neg, reduce_pairs=self.reduce_pairs)


class NonContrastiveLoss(nn.Module):
    """Module form of :func:`non_contrastive`: ``forward(u, u_pos)``."""

    def __init__(self, *, reduce_pairs: Reduction = "sum") -> None:
        super().__init__()
        self.reduce_pairs: Reduction = check_choice("NonContrastiveLoss", "reduce_pairs", reduce_pairs, REDUCTIONS)

    def forward(self, u: Tensor, u_pos: Tensor) -> Tensor:
        return non_contrastive(u, u_pos, reduce_pairs=self.reduce_pairs)


class TraceLoss(nn.Module):
    """Module form of :func:`trace_loss` / :func:`scaled_trace_loss`: ``forward(W1, W2, C)``."""

    def __init__(self, *, scaled: bool = False) -> None:
        super().__init__()
        self.scaled = bool(scaled)

    def forward(self, W1: Tensor, W2: Tensor, C: Tensor) -> Tensor:
        return scaled_trace_loss(W1, W2, C) if self.scaled else trace_loss(W1, W2, C)
