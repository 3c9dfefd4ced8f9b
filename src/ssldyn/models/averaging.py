"""The averaging one-hidden-layer network of ``variational`` eq. (18)–(19).

``f(x) = Aᵀ σ(B x)`` with ``B ∈ R^{Md×D}`` trained and ``A ∈ R^{Md×d}`` fixed: column ``k`` of
``A`` is ``1/√M`` on the hidden units ``(k-1)M+1 .. kM`` and 0 elsewhere, so output coordinate
``k`` is the scaled sum of its own block of ``M`` hidden units:

    f^k(x) = (1/√M) Σ_{p=(k-1)M+1}^{kM} σ(b_p · x [+ c_p]).

Optionally a hidden bias ``c`` (equivalently a constant input coordinate 1; the paper has
none). ``invariant_init=True`` zeroes the columns of ``B`` on the last ``D - d`` coordinates,
so at t = 0 the output depends on ``(x^1..x^d)`` only (eq. 17) and is invariant to the
perturbations α ∈ P(M^⊥) of Sec. 4.2.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor, nn

from ssldyn.checks import nonnegative
from ssldyn.models._sizes import check_sizes
from ssldyn.models.activations import Activation, ActivationName, get_activation
from ssldyn.models.ensemble import EnsembleLinear, check_input_dtype
from ssldyn.models.seeding import draw_members

__all__ = ["AveragingNet", "averaging_matrix"]


def averaging_matrix(
    width: int, d: int, *, dtype: torch.dtype | None = None, device: torch.device | str | None = None
) -> Tensor:
    """``A`` of eq. (19): ``(Md, d)``, block ``k`` of rows equal to ``1/√M`` in column ``k``."""
    return torch.kron(
        torch.eye(d, dtype=dtype, device=device), torch.ones(width, 1, dtype=dtype, device=device)
    ) / math.sqrt(width)


class AveragingNet(nn.Module):
    """``f(x) = Aᵀσ(Bx)`` (eq. 18) with ``ensemble`` independent members.

    Args:
        in_dim: input dimension D.
        out_dim: embedding dimension d.
        width: M, hidden units per output coordinate (``Md`` hidden units in total).
        activation: a name of :func:`ssldyn.models.activations.get_activation` or an Activation.
        ensemble: E independent members; ``B`` has shape ``(E, Md, D)``.
        bias: add a trainable hidden bias ``c`` (E, Md).
        init_std: ``B`` (and ``c``) entries i.i.d. N(0, init_std²) (Prop. 4.4's Gaussian rows).
        invariant_init: zero ``B[:, :, d:]`` at initialisation (eq. 17).
        seeds, generator: the seeding rule of :mod:`ssldyn.models.seeding` (member by member:
            ``B[e]``, then — with ``bias`` — ``c[e]``; the bias is drawn after an unused
            ``nn.Linear``-style uniform draw of the same size, which keeps earlier seeds' weights).
        dtype, device: initialised on the CPU, then moved to ``device`` (None: CPU), so CUDA and
            CPU runs start from the same weights.

    Input ``(n, D)`` or ``(E, n, D)`` -> output ``(E, n, d)``.
    """

    def __init__(
        self,
        in_dim: int,
        out_dim: int,
        width: int,
        activation: ActivationName | Activation = "relu",
        *,
        ensemble: int = 1,
        bias: bool = False,
        init_std: float = 1.0,
        invariant_init: bool = False,
        seeds: Sequence[int] | None = None,
        generator: torch.Generator | None = None,
        dtype: torch.dtype | None = None,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__()
        check_sizes("AveragingNet", in_dim=in_dim, out_dim=out_dim, width=width, ensemble=ensemble)
        if invariant_init and in_dim < out_dim:
            raise ValueError(f"AveragingNet: invariant_init needs in_dim D >= out_dim d, got D={in_dim}, d={out_dim}")
        init_std = nonnegative(init_std, "init_std", where="AveragingNet")
        self.in_dim, self.out_dim, self.width, self.ensemble = in_dim, out_dim, width, ensemble
        self.activation = get_activation(activation)
        self.hidden = EnsembleLinear(
            in_dim, width * out_dim, ensemble, bias=bias, init="normal", std=init_std, dtype=dtype, draw=False
        )
        self.init_std = init_std
        draw_members(self, ensemble, seeds=seeds, generator=generator)
        if invariant_init:
            with torch.no_grad():
                self.hidden.weight[:, :, out_dim:] = 0.0
        self.register_buffer("A", averaging_matrix(width, out_dim, dtype=self.hidden.weight.dtype), persistent=False)
        if device is not None:
            self.to(device)

    @torch.no_grad()
    def init_member(self, e: int, g: torch.Generator | None) -> None:
        """Draw member ``e`` from ``g``: ``B[e] ~ N(0, init_std²)``, then (with a bias) ``c[e] ~ N(0, init_std²)``
        (``invariant_init`` is applied by the constructor, after every member is drawn)."""
        self.hidden.init_member(e, g)  # B[e] ~ N(0, std²) (and a uniform bias draw, replaced next)
        if self.hidden.bias is not None:
            self.hidden.bias[e].normal_(0.0, self.init_std, generator=g)

    @property
    def B(self) -> Tensor:
        """The trained weight ``(E, Md, D)``."""
        return self.hidden.weight

    @property
    def c(self) -> Tensor | None:
        """The hidden bias ``(E, Md)`` or None."""
        return self.hidden.bias

    def forward(self, x: Tensor) -> Tensor:
        check_input_dtype("AveragingNet", x, self.B.dtype)
        pre = self.hidden(x)  # (E, n, Md)
        h = self.activation(pre)  # (E, n, Md)
        E, n, _ = h.shape
        return h.view(E, n, self.out_dim, self.width).sum(-1) / math.sqrt(self.width)  # (E, n, d) = Aᵀσ(Bx)
