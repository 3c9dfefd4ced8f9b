"""α-CL: contrastive covariance, energy, pairwise importances, quadratic loss.

Reference: ``nonlinearity`` Sec. 2, eq. (1)-(3), Lemma 1 (Tian, following Tian 2022).

Conventions
-----------
- Batch of N samples, two views: ``a[i]`` (view 1) and ``a[i']`` (view 2) are passed as
  ``a`` and ``a_pos``, both ``(..., N, p)``.
- Eq. (3) is implemented literally: the sum runs over *all* ``i, j`` including
  ``j = i``. The inter term vanishes at ``j = i``; the intra (positive-pair) term of row
  ``i`` is weighted by the full row sum ``Σ_j α_ij``. So ``α_ii`` only enters through the
  intra weight. With this convention the quadratic loss of the reference implementation
  is exactly ``-tr C_α / T`` for ``α ≡ 1`` (tested). The proof of Lemma 2 (eq. 23-24)
  uses ``Σ_{j≠i} α_ij`` instead; pass an ``α`` with zero diagonal to get that variant
  (identical as N → ∞).
- Uniform α is ``α_ij ≡ 1`` ("quadratic loss corresponds to α_ij := const", Def. 1 with
  φ ≡ 1); then ``C_α[a]`` without augmentation is exactly the (biased) covariance.
- InfoNCE α is row-normalised over ``j ≠ i`` and has a zero diagonal.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor, nn

from ssldyn.checks import integer

from ._common import (
    SIMILARITIES,
    Similarity,
    check_callable,
    check_choice,
    check_nonnegative,
    check_pair,
    check_pair_masks,
    check_positive,
    check_same_shape,
    check_tensor,
    half_sqdist,
    view1_similarity,
)

__all__ = [
    "contrastive_covariance",
    "alpha_cl_energy",
    "alpha_uniform",
    "alpha_infonce",
    "alpha_gaussian",
    "quadratic_contrastive_loss",
    "AlphaCLEnergy",
    "QuadraticContrastiveLoss",
]


# --------------------------------------------------------------------------- covariance and energy
def contrastive_covariance(
    a: Tensor,
    a_pos: Tensor,
    b: Tensor | None = None,
    b_pos: Tensor | None = None,
    *,
    alpha: Tensor | None = None,
) -> Tensor:
    r"""Contrastive covariance ``C_α[a, b]`` of ``nonlinearity`` eq. (3).

    .. math::
        \mathbb{C}_\alpha[a, b] = \frac{1}{2N^2} \sum_{i,j=1}^{N} \alpha_{ij}
        \Big[(a_i - a_j)(b_i - b_j)^\top - (a_i - a_{i'})(b_i - b_{i'})^\top\Big].

    Computed as ``(Aᵀ L B - ΔAᵀ diag(r) ΔB) / 2N²`` with ``r_i = Σ_j α_ij``,
    ``L = diag(r + c) - α - αᵀ`` (``c`` the column sums) and ``ΔA = A - A'``.
    Linear in ``α`` (no stop-gradient here).

    Args:
        a: view-1 features ``(N, p)`` or ``(..., N, p)``.
        a_pos: view-2 features ``a[i']``, same shape as ``a``.
        b, b_pos: second argument ``(..., N, q)``; default ``b = a``, ``b_pos = a_pos``
            (give both or neither).
        alpha: pairwise importance ``(N, N)`` or ``(..., N, N)``, keyword-only (as every hyperparameter of
            the package); default uniform ``α ≡ 1``. Its diagonal enters through the row sums only (see module
            notes).

    Returns:
        ``(p, q)`` matrix, or ``(..., p, q)`` with ensemble axes (sums over i, j reduced).
    """
    fn = "contrastive_covariance"
    a, a_pos, b, b_pos = _check_pairs(fn, ("a", "a_pos"), a, a_pos, b, b_pos)
    n = a.shape[-2]
    alpha = _check_alpha(fn, alpha, a)
    r, lap = _row_sums_and_laplacian(alpha)  # (..., N), (..., N, N)
    inter = a.mT @ (lap @ b)  # (..., p, q)
    intra = (a - a_pos).mT @ (r[..., :, None] * (b - b_pos))  # (..., p, q)
    return (inter - intra) / (2.0 * n * n)


def alpha_cl_energy(
    f: Tensor,
    f_pos: Tensor,
    alpha: Tensor | None = None,
    *,
    stop_gradient: bool = True,
) -> Tensor:
    r"""α-CL energy ``E_α = ½ tr C_α[f]`` (``nonlinearity`` eq. 2-3), to be *maximised*.

    .. math::
        \mathcal{E}_\alpha = \frac{1}{4N^2}\Big[\sum_{i,j}\alpha_{ij}\|f_i - f_j\|^2
            - \sum_i \Big(\sum_j \alpha_{ij}\Big)\|f_i - f_{i'}\|^2\Big].

    Eq. (2) differentiates ``E_{sg(α)}``: with ``stop_gradient=True`` (default) ``alpha`` is
    detached. For InfoNCE (``negatives="view1"``, ``similarity="sqdist"``) and
    ``α = alpha_infonce(f, f_pos, τ, eps=ε)`` this gives
    ``∇ info_nce = -(2N/τ) ∇ E_sg(α)``; for ``α ≡ 1`` the quadratic loss (sqdist) equals
    ``-2 E / T``.

    Args:
        f, f_pos: features of view 1 and 2, ``(N, p)`` or ``(..., N, p)``.
        alpha: ``(N, N)`` or ``(..., N, N)``, default uniform ``α ≡ 1``.
        stop_gradient: detach ``alpha``.

    Returns:
        A scalar, or shape ``(...)`` with ensemble axes.
    """
    fn = "alpha_cl_energy"
    f, f_pos, _, _ = _check_pairs(fn, ("f", "f_pos"), f, f_pos, None, None)
    n = f.shape[-2]
    alpha = _check_alpha(fn, alpha, f, "f")
    if stop_gradient:
        alpha = alpha.detach()
    r, lap = _row_sums_and_laplacian(alpha)  # (..., N), (..., N, N)
    inter = (f * (lap @ f)).sum((-2, -1))  # (...): tr(Fᵀ L F)
    intra = (r * (f - f_pos).pow(2).sum(-1)).sum(-1)  # (...)
    return (inter - intra) / (4.0 * n * n)


def _row_sums_and_laplacian(alpha: Tensor) -> tuple[Tensor, Tensor]:
    """``r_i = Σ_j α_ij`` ``(..., N)`` and ``L = diag(r + c) − α − αᵀ`` ``(..., N, N)`` (``c_j = Σ_i α_ij``):
    ``Σ_ij α_ij (a_i − a_j)(b_i − b_j)ᵀ = Aᵀ L B``, the inter term of eq. (3)."""
    r = alpha.sum(-1)  # (..., N): Σ_j α_ij
    c = alpha.sum(-2)  # (..., N): Σ_i α_ij
    return r, torch.diag_embed(r + c) - alpha - alpha.mT  # (..., N, N)


# --------------------------------------------------------------------------- pairwise importance
def alpha_uniform(n: int, *, dtype: torch.dtype | None = None, device: torch.device | str | None = None) -> Tensor:
    """Uniform pairwise importance ``α_ij ≡ 1`` of shape ``(n, n)`` (quadratic loss, ``nonlinearity`` Sec. 2)."""
    n = integer(n, "n", where="alpha_uniform")
    return torch.ones(n, n, dtype=dtype, device=device)


def alpha_infonce(
    z1: Tensor | None = None,
    z2: Tensor | None = None,
    temperature: float = 0.5,
    *,
    d2: Tensor | None = None,
    eps: float = 0.0,
) -> Tensor:
    r"""InfoNCE pairwise importance of ``nonlinearity`` Sec. 2 / Tian 2022.

    .. math::
        \alpha_{ij} = \frac{e^{-d_{ij}^2/\tau}}
                      {\epsilon\, e^{-d_i^2/\tau} + \sum_{k\ne i} e^{-d_{ik}^2/\tau}}
        \ (j \ne i), \qquad \alpha_{ii} = 0,

    ``d²_ij = ‖z1_i - z1_j‖²/2`` (view-1 pairs), ``d²_i = ‖z1_i - z2_i‖²/2``. With ``eps=0``
    (the paper's case) rows sum to 1. Normalised with a max-subtracted softmax (stable for any τ). Pass
    L2-normalised embeddings to match ``info_nce(similarity="cosine")``. Returned with its
    graph; :func:`alpha_cl_energy` applies the stop-gradient.

    Args:
        z1: view-1 embeddings ``(..., N, d)``; or give ``d2`` instead.
        z2: view-2 embeddings (needed when ``eps > 0``).
        temperature: τ > 0.
        d2: precomputed ``(..., N, N)`` half squared distances, off-diagonal ``d²_ij``,
            diagonal ``d²_i`` (read only when ``eps > 0``).
        eps: ε >= 0, weight of the positive in the normaliser (``nonlinearity`` eq. 1).

    Returns:
        ``(..., N, N)`` pairwise importance.
    """
    fn = "alpha_infonce"
    tau = check_positive(fn, "temperature", temperature)
    eps = check_nonnegative(fn, "eps", eps)
    d2 = _infonce_distances(fn, z1, z2, d2, eps)  # (..., N, N)
    n = d2.shape[-1]
    eye = torch.eye(n, dtype=torch.bool, device=d2.device)
    logits = (-d2 / tau).masked_fill(eye, -math.inf)  # (..., N, N)
    if eps == 0:
        return torch.softmax(logits, dim=-1)  # (..., N, N), zero diagonal
    pos = -torch.diagonal(d2, dim1=-2, dim2=-1) / tau + math.log(eps)  # (..., N): log(ε e^{-d_i²/τ})
    full = torch.softmax(torch.cat([logits, pos[..., :, None]], dim=-1), dim=-1)  # (..., N, N+1)
    return full[..., :n]  # drop the positive column


def _infonce_distances(fn, z1, z2, d2, eps) -> Tensor:
    if d2 is not None:
        if z1 is not None or z2 is not None:
            raise ValueError(f"{fn}: give either embeddings (z1, z2) or d2, not both")
        check_tensor(fn, "d2", d2, min_rows=2)
        if d2.shape[-1] != d2.shape[-2]:
            raise ValueError(f"{fn}: d2 must be square (..., N, N), got {tuple(d2.shape)}")
        return d2
    if z1 is None:
        raise ValueError(f"{fn}: z1 (view-1 embeddings) or d2 is required")
    check_tensor(fn, "z1", z1, min_rows=2)
    if z2 is None:
        if eps > 0:
            raise ValueError(f"{fn}: z2 is required when eps > 0 (the positive pair enters the normaliser)")
        return half_sqdist(z1, z1)
    check_tensor(fn, "z2", z2, min_rows=2)
    check_same_shape(fn, "z1", z1, "z2", z2)
    # d²_ij = ‖z1_i − z1_j‖²/2 off the diagonal, d²_i = ‖z1_i − z2_i‖²/2 on it: minus the view-1 "sqdist" matrix
    return -view1_similarity(z1, z2, "sqdist")  # (..., N, N)


def alpha_gaussian(
    x0: Tensor,
    temperature: float = 1.0,
    *,
    g: Callable[[Tensor], Tensor] | None = None,
) -> Tensor:
    r"""Gaussian pairwise importance of ``nonlinearity`` Lemma 1, on un-augmented inputs.

    .. math:: \alpha_{ij} = \exp\big(-\|g(x_0[i]) - g(x_0[j])\|_2^2 / 2\tau\big), \quad \alpha_{ii} = 1.

    It has kernel structure (Def. 1), hence the PSD limit of Lemma 2.

    Args:
        x0: un-augmented samples ``(N, D)`` or ``(..., N, D)``.
        temperature: τ > 0.
        g: feature map applied to ``x0`` first (default identity); Lemma 1 asks it to be
            bounded below.

    Returns:
        ``(..., N, N)``.
    """
    fn = "alpha_gaussian"
    tau = check_positive(fn, "temperature", temperature)
    check_callable(fn, "g", g)
    check_tensor(fn, "x0", x0)
    y = x0 if g is None else g(x0)  # (..., N, D')
    eye = torch.eye(y.shape[-2], dtype=torch.bool, device=y.device)
    d2 = half_sqdist(y, y).masked_fill(eye, 0.0)  # (..., N, N): ‖·‖²/2, exact 0 on the diagonal
    return torch.exp(-d2 / tau)  # ‖·‖²/(2τ) = d2/τ


# --------------------------------------------------------------------------- quadratic loss
def quadratic_contrastive_loss(
    z1: Tensor,
    z2: Tensor,
    temperature: float = 0.5,
    *,
    similarity: Similarity = "cosine",
    exclude: Tensor | None = None,
    positives: Tensor | None = None,
) -> Tensor:
    r"""Quadratic contrastive loss (constant α) of ``nonlinearity`` Sec. 2 / Sec. 5.

    .. math::
        L = -\frac{1}{NT}\sum_i M_{ii} + \frac{1}{N^2 T}\sum_{i\ne j} M_{ij},

    with the view-1 similarity matrix of the paper's reference implementation:
    ``M_ij = s(z1_i, z1_j)`` (``i ≠ j``), ``M_ii = s(z1_i, z2_i)``; ``s`` as in
    :func:`~ssldyn.objectives.info_nce` (``"cosine"`` normalises). With
    ``similarity="sqdist"`` (``M = -d²``) it is exactly ``-tr C_α[f] / T = -2 E_α / T``
    for uniform ``α ≡ 1``. Linear in ``M``, so stable for any ``T``.

    Args:
        z1, z2: ``(N, d)`` or ``(..., N, d)`` embeddings of the two views.
        temperature: T > 0.
        similarity: ``"cosine"`` | ``"sqdist"`` | ``"dot"``.
        exclude: a bool ``(N, N)`` or ``(..., N, N)`` mask, True at ``(i, j)`` (``i ≠ j``) where the pair is not
            a negative pair: its term leaves the sum over ``i ≠ j`` (the weight of the others stays
            ``1/(N² T)``). None: every pair ``i ≠ j`` is negative.
        positives: a bool mask as ``exclude``, True at ``(i, j)`` (``i ≠ j``) where ``z1_j`` is a positive of
            anchor ``i`` besides ``z2_i`` (:func:`~ssldyn.objectives.info_nce`'s ``positives``): the positive
            term of row ``i`` becomes the mean ``(1/|P_i|) Σ_{p∈P_i} M_ip`` over ``P_i = {i} ∪ {j: positives_ij}``
            and those pairs leave the negative sum (a multi-positive form of the library's; the paper's loss has
            one positive per anchor). No pair may be both positive and excluded.

    Returns:
        A scalar, or shape ``(...)`` with ensemble axes.
    """
    fn = "quadratic_contrastive_loss"
    check_pair(fn, "z1", z1, "z2", z2, min_rows=2)
    t = check_positive(fn, "temperature", temperature)
    check_choice(fn, "similarity", similarity, SIMILARITIES)
    exclude, positives = check_pair_masks(fn, exclude, positives, z1)
    n = z1.shape[-2]
    m = view1_similarity(z1, z2, similarity)  # (..., N, N)
    diag = torch.diagonal(m, dim1=-2, dim2=-1).sum(-1)  # (...): Σ_i M_ii
    pos = diag
    if positives is not None:
        k = positives.sum(-1)  # (..., N): extra positives per anchor
        pos = ((torch.diagonal(m, dim1=-2, dim2=-1) + (m * positives).sum(-1)) / (1 + k)).sum(-1)  # (...)
        exclude = positives if exclude is None else exclude | positives  # positives leave the negative sum
    if exclude is not None:
        m = m.masked_fill(exclude, 0.0)  # (..., N, N): the left-out pairs add nothing
    off = m.sum((-2, -1)) - diag  # (...): Σ_{i≠j} M_ij over the negative pairs
    return (-pos + off / n) / (n * t)


# --------------------------------------------------------------------------- checks
def _check_pairs(
    fn: str, names: tuple[str, str], a: Tensor, a_pos: Tensor, b: Tensor | None, b_pos: Tensor | None
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Validated ``(a, a_pos, b, b_pos)`` with ``b, b_pos`` defaulting to ``a, a_pos``."""
    check_pair(fn, names[0], a, names[1], a_pos)
    if (b is None) != (b_pos is None):
        raise ValueError(f"{fn}: give both b and b_pos or neither")
    if b is None or b_pos is None:
        return a, a_pos, a, a_pos
    check_pair(fn, "b", b, "b_pos", b_pos)
    if b.shape[:-1] != a.shape[:-1]:
        raise ValueError(
            f"{fn}: b must have the same leading shape (..., N) as a, got {tuple(b.shape)} and {tuple(a.shape)}"
        )
    if b.dtype != a.dtype:
        raise ValueError(f"{fn}: b and b_pos must have the dtype of a ({a.dtype}), got {b.dtype}")
    return a, a_pos, b, b_pos


def _check_alpha(fn: str, alpha: Tensor | None, a: Tensor, name: str = "a") -> Tensor:
    n = a.shape[-2]
    if alpha is None:
        return torch.ones(n, n, dtype=a.dtype, device=a.device)
    if not isinstance(alpha, Tensor) or not alpha.is_floating_point():
        raise ValueError(f"{fn}: alpha must be a floating-point tensor of shape (N, N) or (..., N, N), or None")
    if alpha.dim() < 2 or alpha.shape[-2:] != (n, n):
        raise ValueError(f"{fn}: alpha must have shape (N, N) or (..., N, N) with N={n}, got {tuple(alpha.shape)}")
    try:
        torch.broadcast_shapes(alpha.shape[:-2], a.shape[:-2])
    except RuntimeError:
        raise ValueError(f"{fn}: the ensemble axes (...) of alpha {tuple(alpha.shape)} do not broadcast against "
                         f"those of {name} {tuple(a.shape)}") from None  # fmt: skip
    return alpha.to(a.dtype)


class AlphaCLEnergy(nn.Module):
    """Module form of :func:`alpha_cl_energy`: ``forward(f, f_pos, alpha=None)``."""

    def __init__(self, *, stop_gradient: bool = True) -> None:
        super().__init__()
        self.stop_gradient = bool(stop_gradient)

    def forward(self, f: Tensor, f_pos: Tensor, alpha: Tensor | None = None) -> Tensor:
        return alpha_cl_energy(f, f_pos, alpha, stop_gradient=self.stop_gradient)


class QuadraticContrastiveLoss(nn.Module):
    """Module form of :func:`quadratic_contrastive_loss`."""

    def __init__(self, temperature: float = 0.5, *, similarity: Similarity = "cosine") -> None:
        super().__init__()
        fn = "QuadraticContrastiveLoss"
        self.temperature = check_positive(fn, "temperature", temperature)
        self.similarity: Similarity = check_choice(fn, "similarity", similarity, SIMILARITIES)

    def forward(self, z1: Tensor, z2: Tensor) -> Tensor:
        return quadratic_contrastive_loss(z1, z2, self.temperature, similarity=self.similarity)

    def extra_repr(self) -> str:
        return f"temperature={self.temperature}, similarity={self.similarity!r}"
