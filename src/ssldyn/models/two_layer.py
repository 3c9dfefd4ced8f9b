"""The SSL models of ``grassmann`` Sec. 3–4: ``u(x) = W2ᵀ φ(W1 x)`` and deep linear networks.

Shapes follow the paper: ``W1 ∈ R^{h×d}``, ``W2 ∈ R^{h×z}``, so ``u(x) ∈ R^z``. Four regimes:

- ``"unconstrained"``: plain weights (Sec. 2, Example 1 "without constraints");
- ``"frobenius"``: ``‖W1‖_F ≤ c1``, ``‖W2‖_F ≤ c2`` (Prop. 2), kept by projecting onto the balls;
- ``"orthogonal"``: ``W1ᵀW1 = I_d``, ``W2ᵀW2 = I_z`` (eq. 8, Stiefel, needs h ≥ d and h ≥ z);
- ``"scaled"``: no constraint on the weights, the loss is divided by ``‖W1‖₂²‖W2‖₂²``
  (Prop. 3(1), "L_orth" of Example 1); :meth:`loss_scale` returns that factor.

Ensembles (docs/architecture.md): parameters carry a leading axis ``E`` (``W1: (E, h, d)``); inputs
``(B, d)`` broadcast to every member. Members may differ in seed (``seeds=[...]``) and in
width (``widths=[...]``): all members are stored at the largest width ``H`` and the hidden
units ``h_e < j ≤ H`` of member ``e`` are masked out (their activations and weights are zero
and receive zero gradient), which is exact for every activation and every regime here.

Seeding (:mod:`ssldyn.models.seeding`): ``seeds=[...]`` (member ``e`` = the one-member net with
``seeds=[s_e]``) or ``generator=`` (members drawn one after another: ``W1`` then ``W2`` of member
0, then of member 1, …). Devices: the initial weights are drawn on the CPU (seeded CPU
generators, so every device starts from the same weights) and the module is then moved to
``device`` (default: CPU). Training loops for these models: :func:`ssldyn.dynamics.manifold.train_gd`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, get_args

import torch
from torch import nn

from ssldyn.checks import choice, positive
from ssldyn.models._sizes import check_sizes
from ssldyn.models.activations import Activation, ActivationName, get_activation
from ssldyn.models.ensemble import members_input
from ssldyn.models.seeding import member_generators
from ssldyn.models.stiefel import Retraction, frobenius_project, random_stiefel, retract

__all__ = ["REGIMES", "WEIGHT_INITS", "Regime", "WeightInit", "TwoLayerNet", "DeepLinearNet"]

Regime = Literal["unconstrained", "frobenius", "orthogonal", "scaled"]
REGIMES: tuple[str, ...] = get_args(Regime)
#: the initial draws of :class:`TwoLayerNet` / :class:`DeepLinearNet` (default from the regime)
WeightInit = Literal["orthogonal", "normal"]
WEIGHT_INITS: tuple[str, ...] = get_args(WeightInit)


def _init_matrix(
    rows: int, cols: int, init: WeightInit, gen: torch.Generator | None, dtype: torch.dtype, fan_in: int | None = None
) -> torch.Tensor:
    """``(rows, cols)``: Haar-random orthonormal columns (rows when wide), or N(0, 1/fan_in).

    ``fan_in`` is the number of summed terms the matrix multiplies: ``cols`` for a layer applied
    as ``W x`` (``W1``, the square middle layers), ``rows`` for one applied as ``Wᵀ φ``
    (``W2 ∈ R^{h×z}`` in ``u = W2ᵀφ``, whose fan-in is h). Default ``cols``.
    """
    if init == "orthogonal":
        if rows >= cols:
            return random_stiefel(rows, cols, generator=gen, dtype=dtype)
        return random_stiefel(cols, rows, generator=gen, dtype=dtype).T
    fan = cols if fan_in is None else fan_in  # "normal": N(0, 1/fan_in), unit-variance outputs for unit-variance inputs
    return torch.randn(rows, cols, generator=gen, dtype=torch.float64).div(fan**0.5).to(dtype)


class TwoLayerNet(nn.Module):
    """``u(x) = W2ᵀ φ(W1 x)`` with ``W1: (E, h, d)``, ``W2: (E, h, z)`` (``grassmann`` Sec. 3).

    Args:
        d, h, z: input, hidden and output sizes (``h`` is the largest width when ``widths`` is given).
        activation: name or :class:`Activation` (``linear`` gives ``u^I``).
        regime: one of ``unconstrained``, ``frobenius``, ``orthogonal``, ``scaled``.
        ensemble: number of members E.
        widths: optional per-member hidden widths (length E, each ≤ h).
        seeds: optional per-member init seeds (member e equals a single run with seeds[e]).
        init: ``"orthogonal"`` (Haar-random orthonormal columns; default for ``orthogonal``
            and ``scaled``) or ``"normal"`` (default otherwise): ``W1 ~ N(0, 1/d)``,
            ``W2 ~ N(0, 1/h_e)`` (the fan-in of ``u = W2ᵀφ`` is the member's width ``h_e``).
        frobenius: the bounds ``(c1, c2)`` of Prop. 2 (``frobenius`` regime).
        device: where the parameters live (initialised on the CPU, then moved).
    """

    mask: torch.Tensor  # (E, h) buffer: 1 for active hidden units

    def __init__(
        self,
        d: int,
        h: int,
        z: int,
        activation: ActivationName | Activation = "linear",
        regime: Regime = "unconstrained",
        *,
        ensemble: int = 1,
        widths: Sequence[int] | None = None,
        seeds: Sequence[int] | None = None,
        init: WeightInit | None = None,
        frobenius: tuple[float, float] = (1.0, 1.0),
        generator: torch.Generator | None = None,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__()
        choice(regime, "regime", REGIMES, where="TwoLayerNet")
        choice(init, "init", (None, *WEIGHT_INITS), where="TwoLayerNet")
        check_sizes("TwoLayerNet", d=d, h=h, z=z, ensemble=ensemble)
        widths = list(widths) if widths is not None else [h] * ensemble
        if len(widths) != ensemble or min(widths) < 1 or max(widths) > h:
            raise ValueError(f"widths: need {ensemble} widths in [1, h={h}], got {widths}")
        if regime == "orthogonal" and min(widths) < max(d, z):
            raise ValueError(
                f"regime 'orthogonal' needs every width >= max(d, z) = {max(d, z)} "
                f"(W1ᵀW1 = I_d, W2ᵀW2 = I_z), got widths {sorted(set(widths))}"
            )
        self.d, self.h, self.z, self.ensemble, self.regime = d, h, z, ensemble, regime
        self.act = get_activation(activation)
        if not (isinstance(frobenius, (tuple, list)) and len(frobenius) == 2):
            raise ValueError(
                f"TwoLayerNet: frobenius must be the bounds (c1, c2) of ‖W1‖_F, ‖W2‖_F (Prop. 2), got {frobenius!r}"
            )
        self.frobenius = (
            positive(frobenius[0], "frobenius c1", where="TwoLayerNet"),
            positive(frobenius[1], "frobenius c2", where="TwoLayerNet"),
        )
        init = init or ("orthogonal" if regime in ("orthogonal", "scaled") else "normal")
        gens = member_generators(ensemble, seeds=seeds, generator=generator)
        W1 = torch.zeros(ensemble, h, d, dtype=dtype)
        W2 = torch.zeros(ensemble, h, z, dtype=dtype)
        for e, (w, g) in enumerate(zip(widths, gens)):
            W1[e, :w] = _init_matrix(w, d, init, g, dtype)  # (w, d): fan-in d
            W2[e, :w] = _init_matrix(w, z, init, g, dtype, fan_in=w)  # (w, z): u = W2ᵀφ sums over w units
        self.W1 = nn.Parameter(W1)
        self.W2 = nn.Parameter(W2)
        mask = (torch.arange(h)[None, :] < torch.tensor(widths)[:, None]).to(dtype)  # (E, h)
        self.register_buffer("mask", mask)
        self.widths = widths
        self._masked = any(w < h for w in widths)
        if regime == "frobenius":
            self.project_()
        if device is not None:
            self.to(device)

    # --- forward -------------------------------------------------------------------------
    def _x(self, x: torch.Tensor) -> torch.Tensor:
        return members_input("TwoLayerNet", x, self.ensemble, self.d, dtype=self.W1.dtype)  # (E, B, d)

    def hidden(self, x: torch.Tensor) -> torch.Tensor:
        """``φ(W1 x)`` ``(E, B, h)`` (masked hidden units are 0)."""
        a = self.act(self._x(x) @ self.W1.mT)  # (E, B, h)
        return a * self.mask[:, None, :] if self._masked else a

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``u^φ(x) = W2ᵀφ(W1x)``: ``(B, d)`` or ``(E, B, d)`` -> ``(E, B, z)``.

        For the identity activation the product is taken in the cheaper order ``x (W2ᵀW1)ᵀ``
        (O(B·d·z) per member instead of O(B·h·(d + z)); masked units have zero weights, so the
        map is the same).
        """
        if self.act.name == "linear":
            return self.forward_linear(x)
        return self.hidden(x) @ self.W2  # (E, B, z)

    def forward_linear(self, x: torch.Tensor) -> torch.Tensor:
        """The linear counterpart ``u^I(x) = W2ᵀW1x`` with the same weights ``(E, B, z)``."""
        return self._x(x) @ self.end_to_end().mT

    def end_to_end(self) -> torch.Tensor:
        """``W2ᵀW1`` ``(E, z, d)`` (the linear map of ``u^I``)."""
        return self.W2.mT @ self.W1

    # --- constraints -----------------------------------------------------------------------
    def weights(self) -> list[nn.Parameter]:
        return [self.W1, self.W2]

    def loss_scale(self) -> torch.Tensor:
        """``‖W1‖₂²‖W2‖₂²`` per member ``(E,)`` for ``scaled`` (Prop. 3(1)); ones otherwise."""
        if self.regime != "scaled":
            return torch.ones(self.ensemble, dtype=self.W1.dtype, device=self.W1.device)
        s1 = torch.linalg.matrix_norm(self.W1, ord=2)
        s2 = torch.linalg.matrix_norm(self.W2, ord=2)
        return (s1 * s2) ** 2

    @torch.no_grad()
    def mask_grads_(self) -> None:
        """Zero the gradients of masked hidden units (exactly zero already for φ(0)=0 activations)."""
        if self._masked:
            for W in self.weights():
                if W.grad is not None:
                    W.grad.mul_(self.mask[..., None])

    @torch.no_grad()
    def project_(self, retraction: Retraction = "polar") -> None:
        """Re-impose the regime's constraint in place (after a Euclidean GD step)."""
        if self.regime == "orthogonal":
            for W in self.weights():
                W.copy_(retract(W, retraction))
        elif self.regime == "frobenius":
            self.W1.copy_(frobenius_project(self.W1, self.frobenius[0]))
            self.W2.copy_(frobenius_project(self.W2, self.frobenius[1]))
        if self._masked:
            for W in self.weights():
                W.mul_(self.mask[..., None])


class DeepLinearNet(nn.Module):
    """Deep linear network ``u(x) = W_outᵀ W_L ⋯ W_2 W_1 x`` (``grassmann`` Fig. 6).

    ``W_1 ∈ R^{h_1×d}``, ``W_k ∈ R^{h_k×h_{k-1}}``, ``W_out ∈ R^{h_L×z}``; ``hidden = [h]`` is the
    2-layer linear net of eq. (8) (``W_out = W2``). Regimes as :class:`TwoLayerNet`; with
    ``"orthogonal"`` every matrix has orthonormal columns (or rows when it is wide).
    Parameters carry the ensemble axis ``(E, rows, cols)``; initialised on the CPU, then moved to ``device``.
    """

    def __init__(
        self,
        d: int,
        hidden: Sequence[int],
        z: int,
        regime: Regime = "orthogonal",
        *,
        ensemble: int = 1,
        seeds: Sequence[int] | None = None,
        init: WeightInit | None = None,
        frobenius: float = 1.0,
        generator: torch.Generator | None = None,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__()
        choice(regime, "regime", REGIMES, where="DeepLinearNet")
        choice(init, "init", (None, *WEIGHT_INITS), where="DeepLinearNet")
        hidden = list(hidden)
        if not hidden or min(hidden) < 1:
            raise ValueError(f"DeepLinearNet: hidden must be a non-empty list of widths >= 1, got {hidden}")
        if regime == "orthogonal" and (hidden[0] < d or hidden[-1] < z):
            raise ValueError(f"regime 'orthogonal' needs h_1 >= d={d} and h_L >= z={z}, got hidden={hidden}")
        self.d, self.z, self.hidden_sizes, self.ensemble, self.regime = d, z, hidden, ensemble, regime
        self.frobenius = positive(frobenius, "frobenius", where="DeepLinearNet")
        init = init or ("orthogonal" if regime in ("orthogonal", "scaled") else "normal")
        gens = member_generators(ensemble, seeds=seeds, generator=generator)
        shapes = [(hidden[0], d)] + [(hidden[k], hidden[k - 1]) for k in range(1, len(hidden))] + [(hidden[-1], z)]
        fans = [d] + hidden[:-1] + [hidden[-1]]  # W_k x sums over its columns; W_outᵀ over its rows h_L
        members = [
            [_init_matrix(r, c, init, g, dtype, f) for (r, c), f in zip(shapes, fans)] for g in gens
        ]  # member by member
        mats = [torch.stack([m[k] for m in members]) for k in range(len(shapes))]
        self.layers = nn.ParameterList([nn.Parameter(m) for m in mats])
        if regime == "frobenius":
            self.project_()
        if device is not None:
            self.to(device)

    def end_to_end(self) -> torch.Tensor:
        """The product ``W_outᵀ W_L ⋯ W_1`` ``(E, z, d)``."""
        A = self.layers[0]  # (E, h1, d)
        for W in self.layers[1:-1]:
            A = W @ A
        return self.layers[-1].mT @ A

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``(B, d)`` or ``(E, B, d)`` -> ``(E, B, z)``."""
        x = members_input("DeepLinearNet", x, self.ensemble, self.d, dtype=self.layers[0].dtype)  # (E, B, d)
        return x @ self.end_to_end().mT  # (E, B, z)

    def weights(self) -> list[nn.Parameter]:
        return list(self.layers)

    def loss_scale(self) -> torch.Tensor:
        """Product of squared spectral norms of all layers for ``scaled``; ones otherwise ``(E,)``."""
        out = torch.ones(self.ensemble, dtype=self.layers[0].dtype, device=self.layers[0].device)
        if self.regime == "scaled":
            for W in self.layers:
                out = out * torch.linalg.matrix_norm(W, ord=2) ** 2
        return out

    @torch.no_grad()
    def project_(self, retraction: Retraction = "polar") -> None:
        for W in self.layers:
            if self.regime == "orthogonal":
                W.copy_(retract(W, retraction))
            elif self.regime == "frobenius":
                W.copy_(frobenius_project(W, self.frobenius))
