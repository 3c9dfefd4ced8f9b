"""A network whose outputs on a fixed training set start at a prescribed embedding.

``f(w, x_i) = z0_i + g(w, x_i) − g(w_0, x_i)`` ("centred" network): the same parameters,
Jacobians and NTK (eq. 12) as ``g``, but the embedding at t = 0 is the given ``z0`` (e.g. the
same random embedding that vanilla GD starts from, ``variational`` Fig. 5–6). The function-
space flow of Prop. 4.1 only depends on the kernel and ``z(0)``, so this isolates the
kernel's effect from the initial embedding.
"""

from __future__ import annotations


import torch
from torch import Tensor, nn

__all__ = ["ShiftedModel"]


class ShiftedModel(nn.Module):
    """Wrap ``model`` so that ``forward(x_train) = z0 + model(x_train) − model_0(x_train)``.

    Args:
        model: any ``nn.Module`` ``(n, ...) -> (n, d)`` or ``(E, n, d)`` (trained).
        x: ``(n, ...)`` the training inputs (the only inputs this wrapper accepts).
        z0: ``(n, d)`` or ``(E, n, d)`` the initial embedding.
    """

    def __init__(self, model: nn.Module, x: Tensor, z0: Tensor) -> None:
        super().__init__()
        self.model = model
        with torch.no_grad():
            g0 = model(x)
        if g0.shape[-2:] != z0.shape[-2:]:
            raise ValueError(f"ShiftedModel: z0 must have shape (n, d)={tuple(g0.shape[-2:])}, got {tuple(z0.shape)}")
        self.register_buffer("x_ref", x.detach().clone(), persistent=False)
        self.register_buffer("offset", (z0 - g0).detach(), persistent=False)  # (E, n, d)

    def forward(self, x: Tensor) -> Tensor:
        if x.shape != self.x_ref.shape:
            raise ValueError(f"ShiftedModel is defined on its training inputs {tuple(self.x_ref.shape)} only, "
                             f"got {tuple(x.shape)}")
        return self.model(x) + self.offset
