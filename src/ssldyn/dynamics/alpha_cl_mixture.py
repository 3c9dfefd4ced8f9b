"""``A(w)`` of one ReLU filter for a Gaussian-mixture population, in closed form (``nonlinearity`` Sec. 3).

For a finite batch (or a discrete population) ``A(w) = C_α[x̃^w]`` is piecewise constant in ``w``:
it jumps when a sample crosses the plane ``wᵀx = 0``, so its local roughness ``ρ`` (Sec. 3.2) is
0 almost everywhere and its Lipschitz constant ``L`` (Sec. 3.3) is infinite. Smoothing every
atom with isotropic Gaussian noise gives data with a density, for which ``A(w)`` is smooth and
``ρ``, ``L`` are finite — the setting in which Thm. 1-3 say something non-trivial.

Population: ``x ~ Σ_c p_c N(μ_c, σ² I)`` in ``R^d``; uniform α, no augmentation, ``N → ∞``
(Cor. 1), so ``A(w) = V[x̃^w]`` with ``x̃^w = x·1(wᵀx > 0)``. For one component and unit ``w``,
with ``a = wᵀμ/σ``, ``Φ``/``φ`` the standard normal cdf/pdf and ``x = μ + σn``::

    E[1(wᵀx > 0)]      = Φ(a)
    E[x 1(wᵀx > 0)]    = μ Φ(a) + σ φ(a) w
    E[x xᵀ 1(wᵀx > 0)] = (μμᵀ + σ²I) Φ(a) + σ φ(a)(μwᵀ + wμᵀ) − σ² a φ(a) wwᵀ

(``t = wᵀn ~ N(0, 1)``: ``E[t 1(t > −a)] = φ(a)``, ``E[t² 1(t > −a)] = Φ(a) − aφ(a)``), and
``A(w) = Σ_c p_c E_c[x xᵀ 1] − m mᵀ`` with ``m = Σ_c p_c E_c[x 1]``.

Devices: runs on the device of ``w``; ``means`` and ``probs`` are moved there.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor

from ssldyn.checks import positive

__all__ = ["gaussian_mixture_relu_A", "gaussian_mixture_A_fn", "population_contrastive_covariance"]


def gaussian_mixture_relu_A(w: Tensor, means: Tensor, probs: Tensor, sigma: float) -> Tensor:
    """``A(w) = V[x · 1(wᵀx > 0)]`` for ``x ~ Σ_c p_c N(μ_c, σ²I)`` (closed form, see module docstring).

    Args:
        w: ``(d,)`` or ``(E, d)`` filters (normalised here: ``A`` depends on the direction only).
        means: ``(C, d)`` component means ``μ_c``.
        probs: ``(C,)`` component probabilities (sum 1).
        sigma: noise standard deviation ``σ > 0``.

    Returns:
        ``(d, d)`` or ``(E, d, d)``.
    """
    sigma = positive(sigma, "sigma", where="gaussian_mixture_relu_A")
    if means.dim() != 2 or probs.shape != means.shape[:1]:
        raise ValueError(f"means (C, d) and probs (C,): got {tuple(means.shape)} and {tuple(probs.shape)}")
    single = w.dim() == 1
    wb = w.reshape(-1, w.shape[-1])
    wb = wb / wb.norm(dim=-1, keepdim=True)  # (E, d)
    mu = means.to(device=wb.device, dtype=wb.dtype)  # (C, d)
    p = probs.to(device=wb.device, dtype=wb.dtype)  # (C,)
    d = wb.shape[-1]
    a = wb @ mu.T / sigma  # (E, C)
    cdf = 0.5 * (1 + torch.erf(a / math.sqrt(2)))  # (E, C): Φ(a)
    pdf = torch.exp(-0.5 * a * a) / math.sqrt(2 * math.pi)  # (E, C): φ(a)
    pc, pp = p * cdf, p * pdf  # (E, C)
    second = torch.einsum("ec,ci,cj->eij", pc, mu, mu)  # (E, d, d): Σ p Φ μμᵀ
    eye = torch.eye(d, dtype=wb.dtype, device=wb.device)
    second = second + sigma**2 * pc.sum(-1)[:, None, None] * eye
    mv = pp @ mu  # (E, d): Σ p φ μ
    second = second + sigma * (mv[:, :, None] * wb[:, None, :] + wb[:, :, None] * mv[:, None, :])
    second = second - sigma**2 * (pp * a).sum(-1)[:, None, None] * (wb[:, :, None] * wb[:, None, :])
    m = pc @ mu + sigma * pp.sum(-1, keepdim=True) * wb  # (E, d)
    A = second - m[:, :, None] * m[:, None, :]
    return A[0] if single else A


def gaussian_mixture_A_fn(means: Tensor, probs: Tensor, sigma: float) -> Callable[[Tensor], Tensor]:
    """The map ``w -> A(w)`` (``(E, d) -> (E, d, d)``) of :func:`gaussian_mixture_relu_A`, for the probes."""

    def A_fn(w: Tensor) -> Tensor:
        return gaussian_mixture_relu_A(w, means, probs, sigma)

    return A_fn


def population_contrastive_covariance(a: Tensor, p: Tensor, kernel: Tensor | None = None) -> Tensor:
    """Large-batch limit of ``C_α[a]`` (eq. 3, no augmentation) for a weighted population.

    With ``α_ij = K(x_i, x_j)`` a function of the samples, ``C_α[a] → ½ E[K(x, y)(a(x) − a(y))(a(x) − a(y))ᵀ]
    = E[k̄(x) a aᵀ] − E_{x,y}[K(x, y) a(x) a(y)ᵀ]`` with ``k̄(x) = E_y K(x, y)`` (proof of Lemma 2); for
    uniform α (``kernel=None``) this is the weighted covariance ``V[a]`` (Cor. 1).

    Args:
        a: ``(..., n, q)`` values at the population's nodes.
        p: ``(..., n)`` node probabilities (summing to 1 over ``n``).
        kernel: ``(..., n, n)`` pairwise importance between nodes, or None (uniform α).

    Returns:
        ``(..., q, q)``.
    """
    pa = p[..., :, None] * a  # (..., n, q)
    if kernel is None:
        m = pa.sum(-2)  # (..., q)
        return pa.mT @ a - m[..., :, None] * m[..., None, :]
    kbar = (kernel @ p[..., :, None]).squeeze(-1)  # (..., n)
    first = (pa * kbar[..., :, None]).mT @ a  # E[k̄ a aᵀ]
    second = pa.mT @ kernel @ pa  # E[K a a'ᵀ]
    return first - second
