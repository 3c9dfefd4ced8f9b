"""Peer objectives discussed by the papers: VICReg, BYOL / SimSiam, spectral contrastive.

References: ``variational`` App. A.1 (VICReg and BYOL are ill-posed in the same way as
NT-Xent), ``grassmann`` Remark 2 (spectral contrastive loss keeps output dims coupled);
Bardes et al. 2021, Grill et al. 2020, Chen & He 2021, HaoChen et al. 2021.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar, NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ._common import check_nonnegative, check_pair, check_positive

__all__ = [
    "VICRegTerms",
    "vicreg_terms",
    "vicreg_loss",
    "byol_loss",
    "negative_cosine",
    "spectral_contrastive_loss",
    "VICRegLoss",
    "BYOLLoss",
    "NegativeCosine",
    "SpectralContrastiveLoss",
]


class VICRegTerms(NamedTuple):
    """The three named VICReg terms, each a scalar or ``(...)`` per ensemble member."""

    invariance: Tensor
    variance: Tensor
    covariance: Tensor


def vicreg_terms(z1: Tensor, z2: Tensor, *, gamma: float = 1.0, eps: float = 1e-4) -> VICRegTerms:
    r"""Invariance, variance and covariance terms of VICReg (Bardes et al. 2021).

    As in the reference implementation (``main_vicreg.py``), for ``Z, Z' ∈ R^{N×d}``:

    - invariance ``s = (1/(N d)) Σ_i ‖z_i - z'_i‖²`` (``F.mse_loss``);
    - variance ``v = ½ [ (1/d) Σ_k relu(γ - √(Var(Z_{:,k}) + ε)) + same for Z' ]``
      (unbiased variance over the batch);
    - covariance ``c = (1/d) Σ_{k≠l} Cov(Z)_{kl}² + same for Z'`` with
      ``Cov(Z) = (Z - Z̄)ᵀ(Z - Z̄)/(N-1)``.

    The paper's equation writes ``v(Z) + v(Z')`` and ``s`` without the ``1/d``; the
    defaults (25, 25, 1) of :func:`vicreg_loss` belong to the implementation's scaling.

    Args:
        z1, z2: ``(N, d)`` or ``(..., N, d)``, ``N >= 2``.
        gamma: target standard deviation γ > 0.
        eps: ε >= 0 inside the square root.
    """
    fn = "vicreg_terms"
    check_pair(fn, "z1", z1, "z2", z2, min_rows=2)
    gamma = check_positive(fn, "gamma", gamma)
    eps = check_nonnegative(fn, "eps", eps)
    return _vicreg_terms(z1, z2, gamma, eps)


def _vicreg_terms(z1: Tensor, z2: Tensor, gamma: float, eps: float) -> VICRegTerms:
    invariance = (z1 - z2).pow(2).mean((-2, -1))  # (...)
    variance = 0.5 * (_variance_term(z1, gamma, eps) + _variance_term(z2, gamma, eps))  # (...)
    covariance = _covariance_term(z1) + _covariance_term(z2)  # (...)
    return VICRegTerms(invariance, variance, covariance)


def _variance_term(z: Tensor, gamma: float, eps: float) -> Tensor:
    std = torch.sqrt(z.var(dim=-2, correction=1) + eps)  # (..., d)
    return F.relu(gamma - std).mean(-1)  # (...)


def _covariance_term(z: Tensor) -> Tensor:
    n, d = z.shape[-2], z.shape[-1]
    zc = z - z.mean(-2, keepdim=True)  # (..., N, d)
    cov = zc.mT @ zc / (n - 1)  # (..., d, d)
    off = cov.pow(2).sum((-2, -1)) - torch.diagonal(cov, dim1=-2, dim2=-1).pow(2).sum(-1)  # (...)
    return off / d


def vicreg_loss(
    z1: Tensor,
    z2: Tensor,
    *,
    inv: float = 25.0,
    var: float = 25.0,
    cov: float = 1.0,
    gamma: float = 1.0,
    eps: float = 1e-4,
) -> Tensor:
    r"""VICReg loss ``λ s(Z, Z') + μ v + ν c`` (Bardes et al. 2021; ``variational`` App. A.1).

    Terms as in :func:`vicreg_terms`; ``inv, var, cov`` are λ, μ, ν.

    Args:
        z1, z2: embeddings of the two views, ``(N, d)`` or ``(..., N, d)``, ``N >= 2``.
        inv, var, cov: weights λ, μ, ν >= 0 (defaults of Bardes et al.).
        gamma: target standard deviation γ > 0.
        eps: ε >= 0 inside the square root of the variance term.

    Returns:
        A scalar, or shape ``(...)`` per ensemble member.
    """
    fn = "vicreg_loss"
    check_pair(fn, "z1", z1, "z2", z2, min_rows=2)
    lam = check_nonnegative(fn, "inv", inv)
    mu = check_nonnegative(fn, "var", var)
    nu = check_nonnegative(fn, "cov", cov)
    gamma = check_positive(fn, "gamma", gamma)
    eps = check_nonnegative(fn, "eps", eps)
    t = _vicreg_terms(z1, z2, gamma, eps)
    return lam * t.invariance + mu * t.variance + nu * t.covariance


def byol_loss(p: Tensor, z: Tensor, *, stop_gradient: bool = True) -> Tensor:
    r"""BYOL regression loss ``‖p̄ - z̄‖² = 2 - 2 cos(p, z)`` (Grill et al. 2020).

    ``p`` is the online prediction ``q(f(T x))``, ``z`` the target projection
    ``f(T' x)`` (``variational`` App. A.1); bars are L2 normalisations. The target is
    detached (``stop_gradient=True``). One direction only: BYOL symmetrises by adding
    ``byol_loss(p2, z1)``.

    Args:
        p, z: ``(N, d)`` or ``(..., N, d)``.
        stop_gradient: detach ``z``.

    Returns:
        Mean over the N samples: a scalar, or shape ``(...)``.
    """
    fn = "byol_loss"
    check_pair(fn, "p", p, "z", z)
    return (2.0 - 2.0 * _cosine(p, z, stop_gradient)).mean(-1)


def negative_cosine(p: Tensor, z: Tensor, *, stop_gradient: bool = True) -> Tensor:
    r"""SimSiam loss ``D(p, z) = -cos(p, sg(z))`` (Chen & He 2021, eq. 1 and 3), in ``[-1, 1]``.

    Equals ``byol_loss / 2 - 1``. One direction; SimSiam uses ``½D(p1, z2) + ½D(p2, z1)``.

    Args:
        p, z: ``(N, d)`` or ``(..., N, d)``.
        stop_gradient: detach ``z``.

    Returns:
        Mean over the N samples: a scalar, or shape ``(...)``.
    """
    fn = "negative_cosine"
    check_pair(fn, "p", p, "z", z)
    return -_cosine(p, z, stop_gradient).mean(-1)


def _cosine(p: Tensor, z: Tensor, stop_gradient: bool) -> Tensor:
    if stop_gradient:
        z = z.detach()
    return (F.normalize(p, dim=-1) * F.normalize(z, dim=-1)).sum(-1)  # (..., N)


def spectral_contrastive_loss(z1: Tensor, z2: Tensor) -> Tensor:
    r"""Spectral contrastive loss of HaoChen et al. 2021 (``grassmann`` Remark 2).

    .. math::
        L = -\frac{2}{N}\sum_i z1_i^\top z2_i
            + \frac{1}{N(N-1)}\sum_{i\ne j} \big(z1_i^\top z2_j\big)^2,

    the batch estimate of ``-2 E[f(x)ᵀf(x⁺)] + E[(f(x)ᵀf(x⁻))²]`` with the other samples'
    second views as negatives. Embeddings are used as given (no normalisation).

    Args:
        z1, z2: ``(N, d)`` or ``(..., N, d)``, ``N >= 2``.

    Returns:
        A scalar, or shape ``(...)``.
    """
    fn = "spectral_contrastive_loss"
    check_pair(fn, "z1", z1, "z2", z2, min_rows=2)
    n = z1.shape[-2]
    g = z1 @ z2.mT  # (..., N, N): z1_i·z2_j
    pos = torch.diagonal(g, dim1=-2, dim2=-1)  # (..., N)
    neg_sq = g.pow(2).sum((-2, -1)) - pos.pow(2).sum(-1)  # (...): Σ_{i≠j}
    return -2.0 * pos.mean(-1) + neg_sq / (n * (n - 1))


class VICRegLoss(nn.Module):
    """Module form of :func:`vicreg_loss`."""

    def __init__(
        self, *, inv: float = 25.0, var: float = 25.0, cov: float = 1.0, gamma: float = 1.0, eps: float = 1e-4
    ):
        super().__init__()
        fn = "VICRegLoss"
        self.inv = check_nonnegative(fn, "inv", inv)
        self.var = check_nonnegative(fn, "var", var)
        self.cov = check_nonnegative(fn, "cov", cov)
        self.gamma = check_positive(fn, "gamma", gamma)
        self.eps = check_nonnegative(fn, "eps", eps)

    def forward(self, z1: Tensor, z2: Tensor) -> Tensor:
        return vicreg_loss(z1, z2, inv=self.inv, var=self.var, cov=self.cov, gamma=self.gamma, eps=self.eps)

    def extra_repr(self) -> str:
        return f"inv={self.inv}, var={self.var}, cov={self.cov}, gamma={self.gamma}, eps={self.eps}"


class _PredictorLoss(nn.Module):
    """Module form of a loss ``fn(p, z, *, stop_gradient)`` of a prediction ``p`` and a target ``z``."""

    fn: ClassVar[Callable[..., Tensor]]

    def __init__(self, *, stop_gradient: bool = True) -> None:
        super().__init__()
        self.stop_gradient = bool(stop_gradient)

    def forward(self, p: Tensor, z: Tensor) -> Tensor:
        return type(self).fn(p, z, stop_gradient=self.stop_gradient)


class BYOLLoss(_PredictorLoss):
    """Module form of :func:`byol_loss`: ``forward(p, z)``."""

    fn = staticmethod(byol_loss)


class NegativeCosine(_PredictorLoss):
    """Module form of :func:`negative_cosine`: ``forward(p, z)``."""

    fn = staticmethod(negative_cosine)


class SpectralContrastiveLoss(nn.Module):
    """Module form of :func:`spectral_contrastive_loss`."""

    def forward(self, z1: Tensor, z2: Tensor) -> Tensor:
        return spectral_contrastive_loss(z1, z2)
