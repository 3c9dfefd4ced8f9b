"""The size checks every model's constructor makes (private): one error naming the model and the size."""

from __future__ import annotations

import numbers
from collections.abc import Sequence

from ssldyn.checks import integer

__all__ = ["check_sizes", "check_widths"]


def _is_size(v: object) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool) and int(v) >= 1


def check_sizes(model: str, **sizes: int) -> None:
    """Every size an integer ``>= 1`` (:func:`ssldyn.checks.integer`).

    Raises:
        ValueError: ``"{model}: {name} must be an integer >= 1, got {value!r}"`` for the first bad one.
    """
    for name, v in sizes.items():
        integer(v, name, where=model)


def check_widths(model: str, name: str, widths: Sequence[int], *, allow_empty: bool = True) -> None:
    """Layer widths: a sequence of integers ``>= 1`` (at least one unless ``allow_empty``)."""
    ok = isinstance(widths, Sequence) and not isinstance(widths, (str, bytes)) and all(_is_size(w) for w in widths)
    if not ok or (not allow_empty and len(widths) == 0):
        what = "a list of integers >= 1" + ("" if allow_empty else " (at least one)")
        raise ValueError(f"{model}: {name} must be {what}, got {widths!r}")
