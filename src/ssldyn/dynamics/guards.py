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
        super().__init__(
            f"{what} became {value} at step {step} (last finite value: {last}); "
            "lower the learning rate or check the data"
        )


def check_finite(name: str, x: Any) -> None:
    """Raise ``ValueError`` naming ``name`` when a tensor/array holds NaN or inf."""
    t = x if isinstance(x, torch.Tensor) else torch.as_tensor(x)
    if t.is_floating_point() or t.is_complex():
        bad = ~torch.isfinite(t)
        if bool(bad.any()):
            n = int(bad.sum())
            raise ValueError(
                f"{name}: {n} non-finite value(s) (NaN or inf) in the input data of shape "
                f"{tuple(t.shape)}; clean or drop them before training"
            )


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


class StepGuard:
    """A :class:`LossGuard` fed once per step, without a host sync per step where that matters.

    Eager (the default on the CPU): every loss is checked when given (exactly ``LossGuard``).
    Lazy (the default on an accelerator, or ``lazy=True``): the detached losses stay on their
    device and are checked in step order every ``every`` steps and at :meth:`flush` (one transfer
    per block), so the error names the same step and the same last finite value as a per-step
    check, at most ``every − 1`` steps later.

    Args:
        device: the device the losses live on (decides the default of ``lazy``).
        what: the name of the checked quantity in the error message.
        every: block length when lazy.
        lazy: force lazy/eager checking.
    """

    def __init__(
        self, device: torch.device | str | None = None, what: str = "loss", every: int = 64, lazy: bool | None = None
    ) -> None:
        self.guard = LossGuard(what)
        self.lazy = (device is not None and torch.device(device).type != "cpu") if lazy is None else bool(lazy)
        self.every = max(1, int(every))
        self._steps: list[int] = []
        self._vals: list[torch.Tensor] = []

    @property
    def last_finite(self) -> float | None:
        """Mean over members of the last finite loss checked so far."""
        return self.guard.last_finite

    def __call__(self, step: int, loss: Any, flush: bool = False) -> None:
        if not self.lazy:
            self.guard(step, loss)
            return
        t = loss.detach() if isinstance(loss, torch.Tensor) else torch.as_tensor(loss)
        self._steps.append(int(step))
        self._vals.append(t.reshape(-1))  # (E,) or (1,)
        if flush or len(self._steps) >= self.every:
            self.flush()

    push = __call__

    def flush(self) -> None:
        """Check the buffered losses now (raises :class:`NonFiniteLossError` at the first bad step)."""
        if not self._steps:
            return
        steps, vals = self._steps, torch.stack(self._vals).cpu()  # (B, E): one transfer
        self._steps, self._vals = [], []
        for k, v in zip(steps, vals):
            self.guard(k, v)


class EnsembleLossGuard:
    """Per-member loss guard for batched ensembles that does not synchronise every step.

    ``update(step, losses)`` (``losses`` ``(E,)``, on any device) keeps, per member, the last
    finite loss and the first step at which the loss was non-finite, with a few tiny tensor
    ops; ``check()`` (call it where the host reads results anyway, e.g. at logging steps)
    raises :class:`NonFiniteLossError` for the first member that went non-finite, naming the
    step, the last finite value and the member's label.
    """

    def __init__(self, labels: list[str] | None = None, what: str = "loss") -> None:
        self.labels, self.what = labels, what
        self.last: torch.Tensor | None = None  # (E,) last finite loss (NaN before any)
        self.first_bad: torch.Tensor | None = None  # (E,) first non-finite step, -1 if none
        self.bad_value: torch.Tensor | None = None  # (E,) the first non-finite value

    def update(self, step: int, losses: torch.Tensor) -> None:
        losses = losses.detach().reshape(-1)
        if self.last is None:
            self.last = torch.full_like(losses, math.nan)
            self.first_bad = torch.full(losses.shape, -1, dtype=torch.long, device=losses.device)
            self.bad_value = torch.zeros_like(losses)
        finite = torch.isfinite(losses)
        new_bad = (~finite) & (self.first_bad < 0)
        self.first_bad = torch.where(new_bad, torch.full_like(self.first_bad, step), self.first_bad)
        self.bad_value = torch.where(new_bad, losses, self.bad_value)
        self.last = torch.where(finite & (self.first_bad < 0), losses, self.last)

    def check(self) -> None:
        if self.first_bad is None:
            return
        fb = self.first_bad.cpu()
        bad = (fb >= 0).nonzero().flatten()
        if len(bad) == 0:
            return
        e = int(bad[fb[bad].argmin()])
        last = float(self.last[e].cpu())
        label = self.labels[e] if self.labels is not None else f"member {e}"
        err = NonFiniteLossError(
            int(fb[e]), None if math.isnan(last) else last, float(self.bad_value[e].cpu()), f"{self.what} of {label}"
        )
        raise err


__all__ = ["NonFiniteLossError", "check_finite", "LossGuard", "StepGuard", "EnsembleLossGuard", "math"]
