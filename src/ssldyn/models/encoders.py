"""Image encoders for SimCLR with a projection head (``variational`` Fig. 1, Remark 4.3), ensemble-batched.

A :class:`SimCLRNet` is ``backbone f`` (a small ConvNet or an MLP) followed by a projection
head ``g`` (``Linear → BN → ReLU → Linear``). Training uses ``z = g(f(x))`` in the loss;
evaluation uses the backbone features ``h = f(x)`` and discards ``g`` — the practice that
Remark 4.3 of ``variational`` mentions (Chen et al. 2020; Bordes et al. 2023).

Ensembles (docs/architecture.md): every parameter has a leading member axis E. Convolutions of the E
members run as one grouped convolution on a ``(B, E·C, H, W)`` layout; BatchNorm over
``E·C`` channels normalises each member's channels with that member's batch only, so
members never interact. Seeding (:mod:`ssldyn.models.seeding`): members are drawn one after
another (member ``e``: its backbone layers, then its head, PyTorch's default uniform init);
``seeds=[s_e]`` makes member ``e`` exactly the lone network (``ensemble=1``) built with
``seeds=[s_e]``, ``generator=g`` draws every member from ``g`` in sequence.
Inputs ``(B, C, H, W)`` are broadcast to all members; ``(E, B, C, H, W)`` gives each member
its own batch. Outputs are ``(E, B, d)``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import cast

import torch
import torch.nn.functional as F
from torch import nn

from ssldyn.models._sizes import check_sizes, check_widths
from ssldyn.models.ensemble import EnsembleLinear, check_input_dtype, uniform64_
from ssldyn.models.seeding import EnsembleMember, draw_members

__all__ = ["EnsembleConv2d", "ConvEncoder", "MLPEncoder", "ProjectionHead", "SimCLRNet", "build_simclr_net"]


class EnsembleConv2d(nn.Module):
    """E independent ``Conv2d(in, out, k, padding=k//2)`` on the ``(B, E·in, H, W)`` layout (grouped conv)."""

    def __init__(self, in_ch: int, out_ch: int, kernel: int, ensemble: int) -> None:
        super().__init__()
        self.E, self.in_ch, self.out_ch, self.kernel = ensemble, in_ch, out_ch, kernel
        self.weight = nn.Parameter(torch.empty(ensemble, out_ch, in_ch, kernel, kernel))  # (E, out, in, k, k)
        self.bias = nn.Parameter(torch.empty(ensemble, out_ch))  # (E, out)

    def init_member(self, e: int, g: torch.Generator | None) -> None:
        """``nn.Conv2d`` default init (kaiming-uniform a=√5 ⇒ bound 1/√fan_in) for member ``e``."""
        bound = 1.0 / math.sqrt(self.in_ch * self.kernel**2)
        uniform64_(self.weight[e], bound, g)
        uniform64_(self.bias[e], bound, g)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, E·in, H, W) -> (B, E·out, H, W)
        w = self.weight.reshape(self.E * self.out_ch, self.in_ch, self.kernel, self.kernel)
        return F.conv2d(x, w, self.bias.reshape(-1), padding=self.kernel // 2, groups=self.E)


def _linear(in_f: int, out_f: int, ensemble: int) -> EnsembleLinear:
    """E independent ``nn.Linear(in_f, out_f)`` layers with bias, drawn by the encoders' rule (``init="torch64"``)
    when the owning model draws its members."""
    return EnsembleLinear(in_f, out_f, ensemble, bias=True, init="torch64", draw=False)


class _EnsembleBN1d(nn.Module):
    """BatchNorm1d of each member's features over its own batch: ``(E, B, F) -> (E, B, F)``."""

    def __init__(self, features: int, ensemble: int, affine: bool = True) -> None:
        super().__init__()
        self.bn = nn.BatchNorm1d(ensemble * features, affine=affine)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        E, B, Fd = x.shape
        y = self.bn(x.transpose(0, 1).reshape(B, E * Fd))  # (B, E·F)
        return y.view(B, E, Fd).transpose(0, 1)


def _members_first(x: torch.Tensor, ensemble: int, image_dims: int) -> torch.Tensor:
    """``(B, ...)`` or ``(E, B, ...)`` -> ``(E, B, ...)`` (``image_dims`` trailing dims per sample)."""
    if x.dim() == image_dims + 1:
        return x.unsqueeze(0).expand(ensemble, *x.shape)
    if x.dim() == image_dims + 2 and x.shape[0] == ensemble:
        return x
    raise ValueError(
        f"input must be (B, ...) or ({ensemble}, B, ...) with {image_dims} sample dims, got {tuple(x.shape)}"
    )


class ConvEncoder(nn.Module):
    """Small ConvNet backbone: blocks ``conv3×3 → BN → ReLU → maxpool2`` (last block: global average pool).

    Args:
        in_channels: image channels (1 for MNIST, 3 for CIFAR-10).
        widths: channels of the conv blocks (default (32, 64, 128)).
        ensemble: members E.
        seeds, generator: the seeding rule (:mod:`ssldyn.models.seeding`); ``draw=False`` leaves
            the weights to the caller (:class:`SimCLRNet` draws backbone and head per member).
    Output: features ``(E, B, widths[-1])``.
    """

    def __init__(
        self,
        in_channels: int = 1,
        *,
        widths: Sequence[int] = (32, 64, 128),
        ensemble: int = 1,
        seeds: Sequence[int] | None = None,
        generator: torch.Generator | None = None,
        draw: bool = True,
    ) -> None:
        super().__init__()
        check_sizes("ConvEncoder", in_channels=in_channels, ensemble=ensemble)
        check_widths("ConvEncoder", "widths", widths, allow_empty=False)
        self.E, self.in_channels, self.out_dim = ensemble, in_channels, int(widths[-1])
        chans = [in_channels, *widths]
        self.convs = nn.ModuleList([EnsembleConv2d(a, b, 3, ensemble) for a, b in zip(chans[:-1], chans[1:])])
        self.bns = nn.ModuleList([nn.BatchNorm2d(ensemble * b) for b in widths])
        if draw:
            draw_members(self, ensemble, seeds=seeds, generator=generator)

    def init_member(self, e: int, g: torch.Generator | None) -> None:
        for c in self.convs:
            cast(EnsembleConv2d, c).init_member(e, g)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_input_dtype("ConvEncoder", x, cast(EnsembleConv2d, self.convs[0]).weight.dtype)
        x = _members_first(x, self.E, 3)  # (E, B, C, H, W)
        E, B, C, H, W = x.shape
        h = x.transpose(0, 1).reshape(B, E * C, H, W)  # (B, E·C, H, W)
        for i, (conv, bn) in enumerate(zip(self.convs, self.bns)):
            h = F.relu(bn(conv(h)))  # (B, E·c, h, w)
            if i < len(self.convs) - 1 and min(h.shape[-2:]) >= 2:
                h = F.max_pool2d(h, 2)
        h = h.mean(dim=(2, 3))  # (B, E·c)
        return h.view(B, E, self.out_dim).transpose(0, 1)  # (E, B, c)


class MLPEncoder(nn.Module):
    """MLP backbone on flattened pixels: ``Linear → BN → ReLU`` per hidden layer, then ``Linear``.

    Output: features ``(E, B, out_dim)``. Seeding as :class:`ConvEncoder`.
    """

    def __init__(
        self,
        in_dim: int,
        *,
        hidden: Sequence[int] = (512,),
        out_dim: int = 128,
        ensemble: int = 1,
        seeds: Sequence[int] | None = None,
        generator: torch.Generator | None = None,
        draw: bool = True,
    ) -> None:
        super().__init__()
        check_sizes("MLPEncoder", in_dim=in_dim, out_dim=out_dim, ensemble=ensemble)
        check_widths("MLPEncoder", "hidden", hidden)
        self.E, self.in_dim, self.out_dim = ensemble, in_dim, out_dim
        dims = [in_dim, *hidden, out_dim]
        self.linears = nn.ModuleList([_linear(a, b, ensemble) for a, b in zip(dims[:-1], dims[1:])])
        self.bns = nn.ModuleList([_EnsembleBN1d(h, ensemble) for h in hidden])
        if draw:
            draw_members(self, ensemble, seeds=seeds, generator=generator)

    def init_member(self, e: int, g: torch.Generator | None) -> None:
        for lin in self.linears:
            cast(EnsembleLinear, lin).init_member(e, g)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_input_dtype("MLPEncoder", x, cast(EnsembleLinear, self.linears[0]).weight.dtype)
        if x.dim() >= 4:  # images: (B, C, H, W) or (E, B, C, H, W)
            x = _members_first(x, self.E, 3)
            x = x.reshape(x.shape[0], x.shape[1], -1)  # (E, B, D)
        else:
            x = _members_first(x, self.E, 1)  # (E, B, D)
        if x.shape[-1] != self.in_dim:
            raise ValueError(f"MLPEncoder: expected {self.in_dim} input features, got {x.shape[-1]}")
        h = x
        for lin, bn in zip(self.linears[:-1], self.bns):
            h = F.relu(bn(lin(h)))  # (E, B, hidden)
        return self.linears[-1](h)  # (E, B, out)


class ProjectionHead(nn.Module):
    """SimCLR projection head ``g(h) = W₂ ReLU(BN(W₁ h))``: ``(E, B, in) -> (E, B, out)``; seeding as :class:`ConvEncoder`."""

    def __init__(
        self,
        in_dim: int,
        *,
        hidden: int = 128,
        out_dim: int = 64,
        ensemble: int = 1,
        seeds: Sequence[int] | None = None,
        generator: torch.Generator | None = None,
        draw: bool = True,
    ) -> None:
        super().__init__()
        check_sizes("ProjectionHead", in_dim=in_dim, hidden=hidden, out_dim=out_dim, ensemble=ensemble)
        self.l1 = _linear(in_dim, hidden, ensemble)
        self.bn = _EnsembleBN1d(hidden, ensemble)
        self.l2 = _linear(hidden, out_dim, ensemble)
        if draw:
            draw_members(self, ensemble, seeds=seeds, generator=generator)

    def init_member(self, e: int, g: torch.Generator | None) -> None:
        self.l1.init_member(e, g)
        self.l2.init_member(e, g)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.l2(F.relu(self.bn(self.l1(h))))


class SimCLRNet(nn.Module):
    """Backbone + projection head. ``forward`` gives the projections ``z`` (used by the loss);
    :meth:`features` gives the backbone features ``h`` used for evaluation (head discarded,
    ``variational`` Remark 4.3).

    The parts are (re)initialised here, member by member (member ``e``: backbone, then head) by
    the seeding rule of :mod:`ssldyn.models.seeding` (``seeds=`` one per member or ``generator=``).
    """

    def __init__(
        self,
        backbone: nn.Module,
        head: nn.Module | None,
        *,
        seeds: Sequence[int] | None = None,
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__()
        for name, part in (("backbone", backbone), ("head", head)):
            if part is not None and not callable(getattr(part, "init_member", None)):
                raise ValueError(f"SimCLRNet: {name} {type(part).__name__} has no init_member(e, g) (the seeding rule)")
        E = getattr(backbone, "E", None)
        if not isinstance(E, int) or E < 1:
            raise ValueError(f"SimCLRNet: backbone needs an int ensemble size E >= 1, got {E!r}")
        self.backbone, self.head = backbone, head
        self.ensemble = E
        draw_members(self, E, seeds=seeds, generator=generator)

    def init_member(self, e: int, g: torch.Generator | None) -> None:
        """Draw member ``e``: its backbone, then its head, from ``g``."""
        cast(EnsembleMember, self.backbone).init_member(e, g)
        if self.head is not None:
            cast(EnsembleMember, self.head).init_member(e, g)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """Backbone features ``h`` ``(E, B, d_h)``."""
        return self.backbone(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.backbone(x)  # (E, B, d_h)
        return self.head(h) if self.head is not None else h  # (E, B, d_z)


def build_simclr_net(
    arch: str,
    image_shape: Sequence[int],
    *,
    ensemble: int = 1,
    seeds: Sequence[int] | None = None,
    generator: torch.Generator | None = None,
    dtype: torch.dtype | None = None,
    device: torch.device | str | None = None,
    widths: Sequence[int] = (32, 64, 128),
    hidden: Sequence[int] = (512,),
    feature_dim: int = 128,
    proj_hidden: int = 128,
    proj_dim: int = 64,
    projection: bool = True,
) -> SimCLRNet:
    """A :class:`SimCLRNet` with a ``"conv"`` or ``"mlp"`` backbone for images of shape ``(C, H, W)``.

    Seeding by :mod:`ssldyn.models.seeding` (``seeds=`` one per member, or ``generator=``); drawn on
    the CPU in float32, then cast to ``dtype`` and moved to ``device``.
    """
    C, H, W = (int(s) for s in image_shape)
    if arch == "conv":
        bb: nn.Module = ConvEncoder(C, widths=widths, ensemble=ensemble, draw=False)
    elif arch == "mlp":
        bb = MLPEncoder(C * H * W, hidden=hidden, out_dim=feature_dim, ensemble=ensemble, draw=False)
    else:
        raise ValueError(f"encoder {arch!r}: allowed values are conv, mlp")
    head = (
        ProjectionHead(bb.out_dim, hidden=proj_hidden, out_dim=proj_dim, ensemble=ensemble, draw=False)
        if projection
        else None
    )
    net = SimCLRNet(bb, head, seeds=seeds, generator=generator)
    if dtype is not None or device is not None:
        net = net.to(dtype=dtype, device=device)
    return net
