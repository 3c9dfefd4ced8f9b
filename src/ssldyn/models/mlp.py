"""A plain fully connected network of configurable depth (the 4-layer net of ``variational`` App. B)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, cast

import torch
from torch import Tensor, nn

from ssldyn.checks import choice, nonnegative
from ssldyn.models._sizes import check_sizes, check_widths
from ssldyn.models.activations import Activation, ActivationName, get_activation
from ssldyn.models.ensemble import EnsembleLinear, check_input_dtype
from ssldyn.models.seeding import draw_members

__all__ = ["MLP"]


class MLP(nn.Module):
    """``x -> L_depth ∘ σ ∘ ... ∘ σ ∘ L_1 (x)`` with ``depth`` linear layers and ``ensemble`` members.

    Args:
        in_dim, out_dim: input and output (embedding) dimensions.
        hidden: width of every hidden layer (int) or a list of ``depth - 1`` widths.
        depth: number of linear layers (>= 1); App. B uses 4.
        activation: name for :func:`ssldyn.models.activations.get_activation`.
        bias: biases in every layer.
        ensemble: E independent members (parameters ``(E, out, in)``).
        init: ``"torch"`` (nn.Linear default, Kaiming-uniform) or ``"normal"`` with
            ``std = gain/√fan_in``.
        seeds, generator: the seeding rule of :mod:`ssldyn.models.seeding` (member by member: all
            layers of member 0, then of member 1, …; ``seeds=[s_e]`` makes member ``e`` the
            one-member MLP built with ``seeds=[s_e]``).
        dtype, device: initialised on the CPU, then moved to ``device`` (None: CPU), so CUDA and
            CPU runs start from the same weights.

    Input ``(n, in_dim)`` or ``(E, n, in_dim)`` -> ``(E, n, out_dim)``.
    """

    def __init__(
        self,
        in_dim: int,
        out_dim: int,
        *,
        hidden: int | Sequence[int] = 64,
        depth: int = 4,
        activation: ActivationName | Activation = "relu",
        bias: bool = True,
        ensemble: int = 1,
        init: Literal["torch", "normal"] = "torch",
        gain: float = 1.0,
        seeds: Sequence[int] | None = None,
        generator: torch.Generator | None = None,
        dtype: torch.dtype | None = None,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__()
        check_sizes("MLP", in_dim=in_dim, out_dim=out_dim, depth=depth, ensemble=ensemble)
        check_widths("MLP", "hidden", [hidden] if isinstance(hidden, int) else hidden)
        widths = [hidden] * (depth - 1) if isinstance(hidden, int) else [int(h) for h in hidden]
        if len(widths) != depth - 1:
            raise ValueError(f"MLP: hidden must be an int or a list of depth-1={depth - 1} widths, got {hidden}")
        choice(init, "init", ("torch", "normal"), where="MLP")
        gain = nonnegative(gain, "gain", where="MLP")
        dims = [in_dim, *widths, out_dim]
        self.activation = get_activation(activation)
        self.ensemble = ensemble
        layers = [
            EnsembleLinear(a, b, ensemble, bias=bias, init=init, std=gain / a**0.5, dtype=dtype, draw=False)
            for a, b in zip(dims[:-1], dims[1:])
        ]
        self.layers = nn.ModuleList(layers)
        draw_members(self, ensemble, seeds=seeds, generator=generator)
        if device is not None:
            self.to(device)

    def init_member(self, e: int, g: torch.Generator | None) -> None:
        """Draw member ``e``: every layer's weight (and bias), first layer first, from ``g``."""
        for layer in self.layers:
            cast(EnsembleLinear, layer).init_member(e, g)

    def forward(self, x: Tensor) -> Tensor:
        check_input_dtype("MLP", x, cast(EnsembleLinear, self.layers[0]).weight.dtype)
        h = x
        for i, layer in enumerate(self.layers):
            h = layer(h)  # (E, n, width)
            if i < len(self.layers) - 1:
                h = self.activation(h)
        return h  # (E, n, out_dim)
