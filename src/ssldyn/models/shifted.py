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
    work); inputs that are not training inputs get no offset. Training rows that are equal must
    have equal rows of ``z0`` (the wrapper is a function of ``x``; a ``ValueError`` otherwise);
    a row equal to several training rows gets one offset, the first one's (all the same).

    Per-member training inputs ``(E, n, ...)`` (one batch per member, as
    :func:`ssldyn.models.ensemble.members_input` reads them) are matched member by member: a
    row of member ``e``'s input (``(E, m, ...)``, or ``(m, ...)`` shared by the members) gets
    the offset of the equal row of member ``e``'s training inputs. Equal rows within a member
    may have different rows of ``z0`` here (clustered data with δ = 0: each sample is its own
    point of the embedding); such a wrapper accepts only the whole training input (the
    training tensor, or one equal to it) — a sub-batch would be ambiguous, and is a
    ``ValueError``.

    Args:
        model: any ``nn.Module`` ``(n, ...) -> (n, d)`` or ``(E, n, d)`` (trained).
        x: ``(n, ...)`` the training inputs (the only inputs this wrapper accepts), or ``(E, n, ...)``.
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
        per_member = x.dim() >= 3 and g0.dim() == 3 and x.shape[:2] == (g0.shape[0], g0.shape[1])  # (E, n, ...)
        if not per_member and x.shape[0] == z0.shape[-2]:  # rows of x are the samples of z0
            _raise_on_conflict(_repeated_rows_conflict(x, z0))
        self._per_member = per_member
        # per member, equal rows of x whose rows of z0 differ: only the whole training input is then well defined
        zm = z0.expand(g0.shape) if per_member else z0
        self._whole_only = per_member and any(_repeated_rows_conflict(x[e], zm[e]) for e in range(x.shape[0]))
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
        if self._is_training_input(x):
            return self.model(x) + self.offset  # (E, n, d)
        # rows of x that are training inputs get their offset, others none (a constant in w, so
        # the NTK is unchanged); written without data-dependent branches so that vmap works
        if self._per_member:
            if self._whole_only:
                raise ValueError(
                    f"ShiftedModel: built on per-member inputs {tuple(self.x_ref.shape)} with equal rows whose rows "
                    f"of z0 differ, it accepts only that whole input; got {tuple(x.shape)}"
                )
            E, n = self.x_ref.shape[:2]
            xs = x if x.dim() == self.x_ref.dim() else x.unsqueeze(0).expand(E, *x.shape)  # (E, m, ...)
            if xs.shape[0] != E or xs.shape[2:] != self.x_ref.shape[2:]:
                raise ValueError(
                    f"ShiftedModel: input must be (E={E}, m, {', '.join(map(str, self.x_ref.shape[2:]))}) or "
                    f"(m, {', '.join(map(str, self.x_ref.shape[2:]))}), got {tuple(x.shape)}"
                )
            out = self.model(x)  # (E, m, d)
            ref = self.x_ref.flatten(2)  # (E, n, F)
            match = (xs.flatten(2)[:, :, None, :] == ref[:, None, :, :]).all(-1).to(out.dtype)  # (E, m, n)
        else:
            out = self.model(x)  # (E, m, d) or (m, d)
            match = (x.flatten(1)[:, None, :] == self.x_ref.flatten(1)[None, :, :]).all(-1).to(out.dtype)  # (m, n)
        first = match * (match.cumsum(-1) == 1)  # (..., m, n): the first matching training row only
        return out + first @ self.offset  # (E, m, d)


def _repeated_rows_conflict(x: Tensor, z0: Tensor) -> tuple[int, int] | None:
    """The first pair ``(j, i)`` of equal training rows ``x_i = x_j`` with different ``z0`` rows (on any member), or
    None: ``f(x_i) = z0_i`` and ``f(x_j) = z0_j`` cannot both hold for a function of ``x``."""
    flat = x.detach().flatten(1)  # (n, F)
    n = flat.shape[0]
    if n < 2:
        return None
    _, group = torch.unique(flat, dim=0, return_inverse=True)  # (n,): the class of equal rows of each row
    rows = torch.arange(n, device=flat.device)  # (n,)
    first = torch.full((n,), n, dtype=torch.long, device=flat.device).scatter_reduce(0, group, rows, "amin")  # (n,)
    rep = first[group]  # (n,): the first training row equal to each row
    same_x = (flat[rep] == flat).all(-1)  # (n,)
    z = z0.detach()  # (..., n, d)
    zr = z[..., rep, :]  # (..., n, d)
    same_z = ((zr == z) | (zr.isnan() & z.isnan())).movedim(-2, 0).reshape(n, -1).all(-1)  # (n,)
    bad = torch.nonzero(same_x & ~same_z).flatten()  # (k,)
    if not bad.numel():
        return None
    i = int(bad[0])
    return int(rep[i]), i


def _raise_on_conflict(pair: tuple[int, int] | None) -> None:
    if pair is not None:
        j, i = pair
        raise ValueError(
            f"ShiftedModel: rows {j} and {i} of x are equal but their rows of z0 differ; the model is a function of x "
            "and cannot start at both (drop the repeated rows of x, or give them equal rows of z0)"
        )
