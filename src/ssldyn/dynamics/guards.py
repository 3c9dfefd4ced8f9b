"""Guards against non-finite data and diverging losses.

* :func:`check_finite` — NaN/inf in input data is one clear error *before* training.
* :class:`LossGuard` — tracks the last finite loss; a non-finite loss raises
  :class:`NonFiniteLossError` naming the step and the last finite value, so the runner marks
  the run failed (with that message) and a sweep goes on with the next run.
"""

from __future__ import annotations

import math
from typing import Any

import torch


class NonFiniteLossError(FloatingPointError):
    """The loss became NaN/inf during training."""

    def __init__(self, step: int, last_finite: float | None, value: float, what: str = "loss") -> None:
        self.step, self.last_finite, self.value = step, last_finite, value
        last = "none" if last_finite is None else f"{last_finite:.6g}"
        super().__init__(f"{what} became {value} at step {step} (last finite value: {last}); "
                         "lower the learning rate or check the data")


def check_finite(name: str, x: Any) -> None:
    """Raise ``ValueError`` naming ``name`` when a tensor/array holds NaN or inf."""
    t = x if isinstance(x, torch.Tensor) else torch.as_tensor(x)
    if t.is_floating_point() or t.is_complex():
        bad = ~torch.isfinite(t)
        if bool(bad.any()):
            n = int(bad.sum())
            raise ValueError(f"{name}: {n} non-finite value(s) (NaN or inf) in the input data of shape "
                             f"{tuple(t.shape)}; clean or drop them before training")


class LossGuard:
    """``guard(step, loss)`` after each step; ``loss`` may be a scalar or per-member ``(E,)``."""

    def __init__(self, what: str = "loss") -> None:
        self.what = what
        self.last_finite: float | None = None

    def __call__(self, step: int, loss: Any) -> None:
        t = loss.detach() if isinstance(loss, torch.Tensor) else torch.as_tensor(loss)
        finite = torch.isfinite(t)
        if not bool(finite.all()):
            bad = float(t.reshape(-1)[~finite.reshape(-1)][0])
            raise NonFiniteLossError(step, self.last_finite, bad, self.what)
        self.last_finite = float(t.mean()) if t.numel() else self.last_finite


__all__ = ["NonFiniteLossError", "check_finite", "LossGuard", "math"]
