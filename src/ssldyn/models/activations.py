"""Activations h with their derivatives h' (`nonlinearity` Sec. 2–3, App. B.1).

An activation is *homogeneous* when h(x) = h'(x)·x (up to a constant factor): linear, ReLU,
LeakyReLU and monomials x^p (h(x) = x^p = (1/p)·h'(x)·x). Sigmoid and tanh are the
non-homogeneous controls. ReLU uses h'(0) = 0 (App. B.1).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, get_args

import torch

from ssldyn.checks import choice, integer

__all__ = ["Activation", "ActivationName", "ACTIVATION_NAMES", "monomial", "get_activation"]

Fn = Callable[[torch.Tensor], torch.Tensor]
#: the names :func:`get_activation` knows (the keys of ``ACTIVATIONS``)
ActivationName = Literal["linear", "relu", "leaky_relu", "quadratic", "sigmoid", "tanh"]
ACTIVATION_NAMES: tuple[str, ...] = get_args(ActivationName)


@dataclass(frozen=True)
class Activation:
    """``fn`` = h, ``deriv`` = h', ``homogeneous``: h(x) = c·h'(x)·x for the constant ``c``."""

    name: str
    fn: Fn
    deriv: Fn
    homogeneous: bool
    c: float | None = None

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return self.fn(x)


def _leaky(slope: float) -> Activation:
    return Activation(
        "leaky_relu",
        lambda x: torch.where(x > 0, x, slope * x),
        lambda x: torch.where(x > 0, torch.ones_like(x), torch.full_like(x, slope)),
        True,
        1.0,
    )


def monomial(p: int) -> Activation:
    """h(x) = x^p, h'(x) = p x^{p-1}; homogeneous with c = 1/p."""
    p = integer(p, "power p", where="monomial")
    return Activation(f"monomial{p}", lambda x: x**p, lambda x: p * x ** (p - 1), True, 1.0 / p)


ACTIVATIONS: dict[str, Activation] = {
    "linear": Activation("linear", lambda x: x, torch.ones_like, True, 1.0),
    "relu": Activation("relu", torch.relu, lambda x: (x > 0).to(x.dtype), True, 1.0),
    "leaky_relu": _leaky(0.05),
    "quadratic": Activation("quadratic", lambda x: x * x, lambda x: 2 * x, True, 0.5),
    "sigmoid": Activation("sigmoid", torch.sigmoid, lambda x: torch.sigmoid(x) * (1 - torch.sigmoid(x)), False),
    "tanh": Activation("tanh", torch.tanh, lambda x: 1 - torch.tanh(x) ** 2, False),
}


def get_activation(name: str | Activation) -> Activation:
    """Look up by name (:data:`ActivationName`: linear, relu, leaky_relu (slope 0.05), quadratic, sigmoid, tanh).

    Any other string is one ``ValueError`` naming the allowed ones (names read from configs and files arrive as
    ``str``, so the lookup takes any string and checks it)."""
    if isinstance(name, Activation):
        return name
    choice(name, "activation", ACTIVATIONS)
    return ACTIVATIONS[name]
