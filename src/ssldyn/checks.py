"""Scalar argument checks, for every layer: one rule and one message for "a finite number > 0",
"a number in [0, 1]" and "an integer >= k".

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

import numpy as np
import torch

__all__ = ["real", "positive", "nonnegative", "unit_interval", "integer"]


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


def integer(value: object, name: str, *, where: str = "", minimum: int = 1) -> int:
    """An integer ``>= minimum`` (any integral type: ``int``, a NumPy integer; not a bool, not ``2.0``), as an int."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or int(value) < minimum:
        raise ValueError(f"{_prefix(where)}{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)
