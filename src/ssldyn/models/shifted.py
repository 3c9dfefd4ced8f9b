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

    Rows of other inputs that equal a training input get that input's offset (so batches of
    single samples, as the per-sample Jacobians of :func:`ssldyn.kernels.empirical_ntk` use,
    work); inputs that are not training inputs get no offset.

    Args:
        model: any ``nn.Module`` ``(n, ...) -> (n, d)`` or ``(E, n, d)`` (trained).
        x: ``(n, ...)`` the training inputs (the only inputs this wrapper accepts).
        z0: ``(n, d)`` or ``(E, n, d)`` the initial embedding.
    """

    model: nn.Module
    x_ref: Tensor  # (n, ...) buffer
    offset: Tensor  # (E, n, d) or (n, d) buffer

    def __init__(self, model: nn.Module, x: Tensor, z0: Tensor) -> None:
        super().__init__()
        self.model = model
        with torch.no_grad():
            g0 = model(x)
        if g0.shape[-2:] != z0.shape[-2:]:
            raise ValueError(f"ShiftedModel: z0 must have shape (n, d)={tuple(g0.shape[-2:])}, got {tuple(z0.shape)}")
        self.register_buffer("x_ref", x.detach().clone(), persistent=False)
        self.register_buffer("offset", (z0 - g0).detach(), persistent=False)  # (E, n, d)
        # the training tensor itself (and its version): recognised without comparing values,
        # i.e. without a host sync per forward on CUDA
        self._x_src, self._x_version = x, x._version

    def _is_training_input(self, x: Tensor) -> bool:
        if x is self._x_src and x._version == self._x_version and x.device == self.x_ref.device:
            return True
        return x.shape == self.x_ref.shape and torch.equal(x, self.x_ref)

    def forward(self, x: Tensor) -> Tensor:
        out = self.model(x)  # (E, m, d)
        if self._is_training_input(x):
            return out + self.offset
        # rows of x that are training inputs get their offset, others none (a constant in w, so
        # the NTK is unchanged); written without data-dependent branches so that vmap works
        match = (x.flatten(1)[:, None, :] == self.x_ref.flatten(1)[None, :, :]).all(-1)  # (m, n)
        return out + match.to(out.dtype) @ self.offset  # (E, m, d)
