"""The generalized contrastive cost of ``variational`` Definition 2.1 (eq. 4-5)."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ._common import (
    check_callable,
    check_pair,
    check_positive,
    half_sqdist,
    paired_half_sqdist,
)

__all__ = ["generalized_contrastive_loss", "GeneralizedContrastiveLoss"]


def generalized_contrastive_loss(
    z1: Tensor,
    z2: Tensor,
    *,
    psi: Callable[[Tensor], Tensor] | None = None,
    eta: Callable[[Tensor], Tensor] | None = None,
    temperature: float = 0.5,
    symmetric: bool = True,
) -> Tensor:
    r"""Generalized NT-Xent cost of ``variational`` eq. (4)-(5) on a batch.

    .. math::
        L = \frac{1}{N} \sum_{i=1}^{N}
            \Psi\!\left( \frac{\frac{1}{N}\sum_{j=1}^{N} \eta_f(T x_i, T' x_j)}
                              {\eta_f(T x_i, T' x_i)} \right),
        \qquad \eta_f(x, y) = \eta\big(\|f(x) - f(y)\|^2 / 2\big),

    with the expectations of eq. (4) replaced by batch means: ``z1[i] = f(T x_i)``,
    ``z2[j] = f(T' x_j)``. As in eq. (4) there is no indicator: ``j = i`` is part of the
    inner mean. The embeddings are used as given (eq. 4 puts the sphere constraint in the
    constraint set C, not in the loss; normalise beforehand for the NT-Xent case).

    Defaults ``Ψ(t) = log(1 + t)`` and ``η(t) = exp(-t/τ)`` give the NT-Xent relation stated
    below eq. (5); with both defaults the loss is evaluated in log space
    (``softplus(logsumexp(...))``), stable for any τ. With a user ``eta`` the ratio is
    formed directly (so keep η well scaled); with a user ``psi`` and default ``eta``,
    ``psi`` receives the ratio ``exp(log_ratio)``.

    Since ``T, T'`` are i.i.d. in eq. (4), ``symmetric=True`` (default) averages the
    estimator with the views swapped, ``(L(z1, z2) + L(z2, z1))/2``; ``symmetric=False``
    uses ``z1`` as the anchors only.

    Args:
        z1, z2: ``(N, d)`` or ``(..., N, d)`` embeddings of the two views (same shape).
        psi: Ψ, non-decreasing, applied element-wise; default ``log1p``.
        eta: η, applied element-wise to half squared distances; default ``exp(-t/τ)``.
        temperature: τ > 0 of the default η (ignored by a user ``eta``).
        symmetric: average over both view orders.

    Returns:
        Mean over anchors: a scalar, or shape ``(...)`` with ensemble axes.
    """
    fn = "generalized_contrastive_loss"
    check_pair(fn, "z1", z1, "z2", z2)
    check_callable(fn, "psi", psi)
    check_callable(fn, "eta", eta)
    tau = check_positive(fn, "temperature", temperature)
    loss = _one_direction(z1, z2, psi, eta, tau)
    if symmetric:
        loss = 0.5 * (loss + _one_direction(z2, z1, psi, eta, tau))
    return loss


def _one_direction(anchor: Tensor, other: Tensor, psi, eta, tau: float) -> Tensor:
    n = anchor.shape[-2]
    eye = torch.eye(n, dtype=torch.bool, device=anchor.device)  # (N, N)
    d_pos = paired_half_sqdist(anchor, other)  # (..., N): ‖f(Tx_i) - f(T'x_i)‖²/2
    d_all = torch.where(eye, d_pos[..., :, None], half_sqdist(anchor, other))  # (..., N, N)
    if eta is None:
        # log G_i = log (1/N) Σ_j exp(-D_ij/τ) - (-D_ii/τ)
        log_ratio = torch.logsumexp(-d_all / tau, dim=-1) - math.log(n) + d_pos / tau  # (..., N)
        values = F.softplus(log_ratio) if psi is None else psi(torch.exp(log_ratio))  # (..., N)
    else:
        ratio = eta(d_all).mean(-1) / eta(d_pos)  # (..., N)
        values = torch.log1p(ratio) if psi is None else psi(ratio)  # (..., N)
    return values.mean(-1)


class GeneralizedContrastiveLoss(nn.Module):
    """Module form of :func:`generalized_contrastive_loss`."""

    def __init__(
        self,
        *,
        psi: Callable[[Tensor], Tensor] | None = None,
        eta: Callable[[Tensor], Tensor] | None = None,
        temperature: float = 0.5,
        symmetric: bool = True,
    ) -> None:
        super().__init__()
        fn = "GeneralizedContrastiveLoss"
        self.psi = check_callable(fn, "psi", psi)
        self.eta = check_callable(fn, "eta", eta)
        self.temperature = check_positive(fn, "temperature", temperature)
        self.symmetric = bool(symmetric)

    def forward(self, z1: Tensor, z2: Tensor) -> Tensor:
        return generalized_contrastive_loss(
            z1, z2, psi=self.psi, eta=self.eta, temperature=self.temperature, symmetric=self.symmetric
        )

    def extra_repr(self) -> str:
        return f"temperature={self.temperature}, symmetric={self.symmetric}"
