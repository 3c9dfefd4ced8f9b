"""Ensemble-batched building blocks (docs/architecture.md, "Models and ensembles").

Parameters carry a leading ensemble axis ``E``; forward maps ``(E, B, ...) -> (E, B, ...)``
and a plain ``(B, ...)`` input is broadcast to all members. Members never interact, so
element-wise optimizers train E independent networks exactly like E separate runs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal, get_args

import torch
from torch import nn

from ssldyn.checks import choice, nonnegative
from ssldyn.models._sizes import check_sizes
from ssldyn.models.seeding import draw_members

__all__ = ["broadcast_members", "members_input", "check_input_dtype", "EnsembleLinear"]

Init = Literal["torch", "torch64", "normal"]
INITS: tuple[str, ...] = get_args(Init)


def uniform64_(t: torch.Tensor, bound: float, g: torch.Generator | None) -> None:
    """In place: ``t ← U(−bound, bound)`` drawn in float64 from ``g``, then rounded to ``t``'s dtype (so a float32
    and a float64 model drawn from one seed hold the same weights up to rounding)."""
    with torch.no_grad():
        t.copy_((torch.rand(t.shape, generator=g, dtype=torch.float64) * 2 - 1).to(t.dtype) * bound)


def broadcast_members(x: torch.Tensor, ensemble: int) -> torch.Tensor:
    """``(B, ...)`` -> ``(E, B, ...)`` (a view); ``(E, B, ...)`` is checked and returned."""
    if x.dim() >= 3 and x.shape[0] == ensemble:
        return x
    return x.unsqueeze(0).expand(ensemble, *x.shape)


def check_input_dtype(model: str, x: torch.Tensor, dtype: torch.dtype) -> None:
    """One ``ValueError`` naming ``model`` if the input's dtype is not the parameters' ``dtype`` (no silent cast:
    the package's data loaders default to float64, the models to float32). Under ``torch.autocast`` on the
    input's device the dtypes may differ (autocast casts the products), so nothing is checked there."""
    if x.dtype == dtype or torch.is_autocast_enabled(x.device.type):
        return
    fix = f"cast the input (x.to({dtype}))"
    if x.is_floating_point():
        fix += f" or build the model with dtype={x.dtype}"
    raise ValueError(f"{model}: input dtype {x.dtype} differs from the parameters' dtype {dtype}; {fix}")


def members_input(
    model: str,
    x: torch.Tensor,
    ensemble: int,
    features: int,
    *,
    axis: Literal["d", "in"] = "d",
    dtype: torch.dtype | None = None,
) -> torch.Tensor:
    """The input of an ensemble layer: ``(B, features)`` shared by the members (:func:`broadcast_members`, a
    view) or ``(E, B, features)``, one batch per member; anything else is one error naming ``model``, and so is
    an input whose dtype is not the parameters' ``dtype`` (:func:`check_input_dtype`; None: not checked)."""
    xe = broadcast_members(x, ensemble)  # (E, B, features)
    if xe.dim() != 3 or xe.shape[-1] != features:
        raise ValueError(f"{model}: input must be (B, {axis}={features}) or (E={ensemble}, B, {axis}={features}), "
                         f"got {tuple(x.shape)}")  # fmt: skip
    if dtype is not None:
        check_input_dtype(model, x, dtype)
    return xe


class EnsembleLinear(nn.Module):
    """E independent linear maps: ``y[e] = x[e] @ weight[e].T (+ bias[e])``.

    weight: (E, out, in); bias: (E, out) or None. Input (E, B, in) or (B, in) -> (E, B, out).
    Initialisation per member matches ``nn.Linear`` (Kaiming-uniform with a=√5, i.e. weight and bias
    ``U(−1/√in, 1/√in)``) when ``init="torch"``; ``init="torch64"`` draws the same law in float64 and
    rounds it to the parameters' dtype (:func:`uniform64_`, the image encoders' rule); ``init="normal"``
    draws the weight from N(0, std²) (the bias, if any, ``nn.Linear``'s uniform). Members are drawn
    by the seeding rule of :mod:`ssldyn.models.seeding` (``seeds=`` one per member, or ``generator=``
    drawing member 0's weight and bias, then member 1's, …); ``draw=False`` leaves them to the caller
    (:meth:`init_member`, for models that draw a whole member across several layers).
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        ensemble: int = 1,
        *,
        bias: bool = False,
        init: Init = "torch",
        std: float = 1.0,
        seeds: Sequence[int] | None = None,
        generator: torch.Generator | None = None,
        dtype: torch.dtype | None = None,
        device: torch.device | str | None = None,
        draw: bool = True,
    ) -> None:
        super().__init__()
        check_sizes("EnsembleLinear", in_features=in_features, out_features=out_features, ensemble=ensemble)
        choice(init, "init", INITS)
        self.ensemble, self.in_features, self.out_features = ensemble, in_features, out_features
        self.init, self.std = init, nonnegative(std, "std", where="EnsembleLinear")
        self.weight = nn.Parameter(torch.empty(ensemble, out_features, in_features, dtype=dtype))
        self.bias = nn.Parameter(torch.empty(ensemble, out_features, dtype=dtype)) if bias else None
        if draw:
            self.reset_parameters(seeds=seeds, generator=generator)
        if device is not None:
            self.to(device)

    @torch.no_grad()
    def reset_parameters(self, *, seeds: Sequence[int] | None = None, generator: torch.Generator | None = None) -> None:
        """Draw every member anew by the seeding rule (:func:`ssldyn.models.seeding.draw_members`)."""
        draw_members(self, self.ensemble, seeds=seeds, generator=generator)

    @torch.no_grad()
    def init_member(self, e: int, generator: torch.Generator | None) -> None:
        """Draw member ``e``'s weight, then its bias, from ``generator``."""
        bound = 1.0 / math.sqrt(self.in_features)
        if self.init == "torch64":
            uniform64_(self.weight[e], bound, generator)
            if self.bias is not None:
                uniform64_(self.bias[e], bound, generator)
            return
        if self.init == "torch":
            self.weight[e].uniform_(-bound, bound, generator=generator)
        else:
            self.weight[e].normal_(0.0, self.std, generator=generator)
        if self.bias is not None:
            self.bias[e].uniform_(-bound, bound, generator=generator)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = members_input(
            "EnsembleLinear", x, self.ensemble, self.in_features, axis="in", dtype=self.weight.dtype
        )  # (E, B, in)
        y = (
            torch.baddbmm(self.bias.unsqueeze(1), x, self.weight.transpose(1, 2))
            if self.bias is not None
            else torch.bmm(x, self.weight.transpose(1, 2))
        )  # (E, B, out)
        return y
