"""Argument checks, for every layer: one rule and one message for "a finite number > 0",
"a number in [0, 1]", "an integer >= k", "a probability vector" and "one of these options".

At the package root (like :mod:`ssldyn.files` and :mod:`ssldyn.memory`): it imports nothing of
the package, so the objectives (a temperature ``τ``), the probes (the uniformity's ``t``), the data
(a noise scale), the models and the dynamics (a learning rate ``η``, a step ``dt``) share it.

A value is accepted if it is a real number: a Python ``int`` / ``float``, a NumPy scalar or a
one-element tensor / array. ``bool`` is refused (``True`` is not a learning rate), so is a string.
The error is one ``ValueError`` line that names the argument (and, with ``where``, the function):
``"info_nce: temperature must be a finite number > 0, got nan"``.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable
from typing import TypeVar

import numpy as np
import torch

__all__ = ["real", "positive", "nonnegative", "unit_interval", "integer", "probabilities", "choice"]

_T = TypeVar("_T")


def _prefix(where: str) -> str:
    return f"{where}: " if where else ""


def real(value: object, name: str, *, where: str = "") -> float:
    """``value`` as a Python float; one ``ValueError`` if it is not a real number (NaN and inf pass)."""
    if isinstance(value, (torch.Tensor, np.ndarray)):
        if value.size == 1 if isinstance(value, np.ndarray) else value.numel() == 1:
            value = value.item()
        else:
            shape = tuple(value.shape)
            raise ValueError(f"{_prefix(where)}{name} must be a scalar, got a tensor of shape {shape}")
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{_prefix(where)}{name} must be a real number, got {value!r}")
    return float(value)


def positive(value: object, name: str, *, where: str = "") -> float:
    """A finite real number ``> 0`` (see :func:`real`), as a float."""
    v = real(value, name, where=where)
    if not (math.isfinite(v) and v > 0):
        raise ValueError(f"{_prefix(where)}{name} must be a finite number > 0, got {v!r}")
    return v


def nonnegative(value: object, name: str, *, where: str = "") -> float:
    """A finite real number ``>= 0`` (see :func:`real`), as a float."""
    v = real(value, name, where=where)
    if not (math.isfinite(v) and v >= 0):
        raise ValueError(f"{_prefix(where)}{name} must be a finite number >= 0, got {v!r}")
    return v


def unit_interval(value: object, name: str, *, where: str = "", include_one: bool = True) -> float:
    """A real number in ``[0, 1]`` (a probability, a ``|cos|``), or in ``[0, 1)`` with ``include_one=False``
    (an SGD momentum); NaN is refused."""
    v = real(value, name, where=where)
    if not (0 <= v <= 1 and (include_one or v < 1)):
        raise ValueError(f"{_prefix(where)}{name} must be in [0, 1{']' if include_one else ')'}, got {value!r}")
    return v


def integer(value: object, name: str, *, where: str = "", minimum: int = 1, maximum: int | None = None) -> int:
    """An integer ``>= minimum`` and, with ``maximum``, ``< maximum`` (any integral type: ``int``, a NumPy integer;
    not a bool, not ``2.0``), as an int."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        v = int(value)
        if v >= minimum and (maximum is None or v < maximum):
            return v
    allowed = f">= {minimum}" if maximum is None else f"in [{minimum}, {maximum})"
    raise ValueError(f"{_prefix(where)}{name} must be an integer {allowed}, got {value!r}")


def probabilities(p: torch.Tensor, name: str, *, where: str = "", atol: float = 1e-6) -> torch.Tensor:
    """Probability vectors along the last axis of ``p (..., m)``: finite, ``>= 0``, each summing to 1 within
    ``atol`` (round-off of a float32 sum; counts or a forgotten normalisation are far off). ``p`` is returned.

    A NaN entry is refused (``p < 0`` and ``|Σp − 1| > atol`` are both false for NaN, so a comparison alone
    lets it through).
    """
    if not isinstance(p, torch.Tensor) or p.dim() < 1 or p.shape[-1] < 1 or not p.is_floating_point():
        what = tuple(p.shape) if isinstance(p, torch.Tensor) else type(p).__name__
        raise ValueError(f"{_prefix(where)}{name} must be a floating tensor (..., m) of probabilities, got {what}")
    if not bool(torch.isfinite(p).all()) or bool((p < 0).any()):
        raise ValueError(f"{_prefix(where)}{name} must be finite and >= 0 (probabilities), got {_head(p)}")
    err = float((p.sum(-1, dtype=torch.float64) - 1).abs().max())
    if not err <= atol:
        raise ValueError(f"{_prefix(where)}{name} must sum to 1 along its last axis (off by {err:.3g}), got {_head(p)}")
    return p


def _head(p: torch.Tensor) -> str:
    v = p.detach().reshape(-1)[:6].tolist()
    return f"{v}{' …' if p.numel() > 6 else ''}"


def choice(
    value: _T, name: str, allowed: Iterable[object], *, where: str = "", error: type[ValueError] = ValueError
) -> _T:
    """``value`` if it is one of ``allowed`` (a ``Literal`` option keeps its type), else one ``error`` line:
    ``"{where}: {name} 'x': allowed values are 'a', 'b'"``. ``error`` may be a subclass of ``ValueError``
    (:class:`ssldyn.errors.UserError` for a data set name a user types)."""
    options = tuple(allowed)
    try:
        ok = value in options
    except (TypeError, ValueError, RuntimeError):  # an incomparable value (a tensor, an array) is not an option
        ok = False
    if not ok:
        raise error(f"{_prefix(where)}{name} {_short(value)}: allowed values are {', '.join(map(repr, options))}")
    return value


def _short(value: object) -> str:
    """``repr(value)`` for an option-like value; a tensor or array (a slipped positional argument) by its type and
    shape, never its numbers."""
    shape = getattr(value, "shape", None)
    if shape is not None and len(shape) > 0 and not isinstance(value, (str, bytes)):
        return f"(a {type(value).__name__} of shape {tuple(shape)})"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
