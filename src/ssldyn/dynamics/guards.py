"""Guards against non-finite data and diverging losses (docs/architecture.md, "Dynamics": one guard class).

* :func:`check_finite` — NaN/inf in input data is one clear ``ValueError`` *before* training.
* :class:`LossGuard` — the one loss guard of every trainer and flow. ``update(step, loss)``
  once per step (``loss`` a scalar or one value per member ``(E,)``), ``check()`` where the
  host reads results anyway (logging steps, the end). A non-finite loss raises
  :class:`NonFiniteLossError` naming the step, the member (its label) and that member's last
  finite value, so the runner marks the run failed (with that message) and a sweep goes on.

Policies. ``policy="raise"`` (the default) fails the run; ``policy="freeze"`` freezes a member
whose loss became non-finite (or reaches ``limit`` in magnitude) and lets the others go on: the
engine trains only the members in ``guard.alive`` (``guard.mask(loss)`` zeroes the frozen members'
losses before the backward pass), ``guard.diverged_at`` holds each member's first bad step (NaN
for members that never diverged). Both without a host sync per step.

Eager or deferred. On the CPU (the default for CPU losses) every ``update`` checks at once. On
an accelerator (the default for losses on any other device) ``update`` only runs a few tiny
tensor ops on the device — per member, the last finite loss, the first non-finite step and its
value — with no host synchronisation; the check happens at ``check()`` (one transfer) or every
``check_every`` updates. Both modes raise the same error (the same step, member and last finite
value), the deferred one at most ``check_every − 1`` steps later.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal

import torch

from ssldyn.checks import choice, integer

__all__ = ["NonFiniteLossError", "check_finite", "LossGuard", "NoGuard", "resolve_guard"]


class NonFiniteLossError(FloatingPointError):
    """The loss became NaN/inf during training.

    Attributes:
        step: the first step with a non-finite loss.
        last_finite: the member's last finite value (None if it never had one).
        value: the non-finite value.
        member: the member index (None for a scalar loss).
    """

    def __init__(
        self, step: int, last_finite: float | None, value: float, what: str = "loss", *, member: int | None = None
    ) -> None:
        self.step, self.last_finite, self.value, self.member = step, last_finite, value, member
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
    """``update(step, loss)`` every step, ``check()`` at logging points; ``loss`` scalar or ``(E,)``.

    Args:
        what: the name of the checked quantity in the error ("loss", "energy", ...).
        labels: optional names of the members (default ``member e``), used in the error.
        lazy: ``True`` defers the checks (no host sync per step), ``False`` checks at every
            ``update``; ``None`` (default) decides from the device of the first loss: eager on
            the CPU, deferred elsewhere.
        check_every: when deferred, also check every this many updates (None: only at
            ``check()``).
        policy: ``"raise"`` (default): a non-finite loss raises :class:`NonFiniteLossError`;
            ``"freeze"``: a member whose loss is non-finite or ``|loss| >= limit`` is frozen from that
            step on (``alive``, ``diverged_at``; the engine masks it out of the update), the others train.
        limit: the magnitude at which ``policy="freeze"`` freezes a member (> 0; default ``inf``: only
            a non-finite loss). Only for ``policy="freeze"``: with ``"raise"`` a finite ``limit`` is a
            ``ValueError`` (it would not be checked).

    Example::

        guard = LossGuard()
        for step in range(steps):
            loss = loss_fn(model)          # () or (E,)
            guard.update(step, loss)       # eager on CPU; a few device ops on a GPU
            ...
            if step % every == 0:
                guard.check()              # raises NonFiniteLossError (step, member, last finite)
        guard.check()
    """

    def __init__(
        self,
        what: str = "loss",
        *,
        labels: Sequence[str] | None = None,
        lazy: bool | None = None,
        check_every: int | None = 64,
        policy: Literal["raise", "freeze"] = "raise",
        limit: float = math.inf,
    ) -> None:
        if check_every is not None:
            check_every = integer(check_every, "check_every", where="LossGuard")
        choice(policy, "policy", ("raise", "freeze"), where="LossGuard")
        if not limit > 0:
            raise ValueError(f"LossGuard: limit must be > 0, got {limit!r}")
        if policy == "raise" and limit != math.inf:
            raise ValueError(f"LossGuard: limit={limit!r} is only for policy='freeze' (a member whose |loss| reaches "
                             "it is frozen); policy='raise' fails on a non-finite loss only")  # fmt: skip
        self.what, self.labels, self.lazy, self.check_every = what, labels, lazy, check_every
        self.policy, self.limit = policy, float(limit)
        self.alive: torch.Tensor | None = None  # (E,) members still trained (policy "freeze")
        self.diverged_at: torch.Tensor | None = None  # (E,) first bad step, NaN if none (policy "freeze")
        self._scalar: bool | None = None  # a scalar loss (no member in the message)
        self._n = 0  # updates since the last check
        # eager state: the previous (all finite) losses
        self._prev: torch.Tensor | None = None
        # deferred state, on the loss's device
        self._last: torch.Tensor | None = None  # (E,) last finite loss (NaN before any)
        self._first_bad: torch.Tensor | None = None  # (E,) first non-finite step, -1 if none
        self._bad_value: torch.Tensor | None = None  # (E,) the first non-finite value

    # --- recording ---------------------------------------------------------------------
    def update(self, step: int, loss: Any) -> None:
        """Record the loss of ``step``: a scalar or ``(E,)`` (tensor, array or float)."""
        t = loss.detach() if isinstance(loss, torch.Tensor) else torch.as_tensor(loss, dtype=torch.float64)
        if self._scalar is None:
            self._scalar = t.dim() == 0
            if self.lazy is None:
                self.lazy = t.device.type != "cpu"
        t = t.reshape(-1)  # (E,)
        if self.policy == "freeze":
            self._freeze(int(step), loss if isinstance(loss, torch.Tensor) else t)
            return
        ref = self._prev if self._prev is not None else self._last
        if ref is not None and ref.shape != t.shape:
            raise ValueError(f"LossGuard: the loss changed shape from {tuple(ref.shape)} to {tuple(t.shape)}")
        if not self.lazy:
            finite = torch.isfinite(t)
            if not bool(finite.all()):
                e = int((~finite).nonzero()[0, 0])
                last = None if self._prev is None else float(self._prev[e])
                self._raise(int(step), e, last, float(t[e]))
            self._prev = t
            return
        if self._last is None or self._first_bad is None or self._bad_value is None:
            self._last = torch.full_like(t, math.nan)
            self._first_bad = torch.full(t.shape, -1, dtype=torch.long, device=t.device)
            self._bad_value = torch.zeros_like(t)
        last, first_bad, bad_value = self._last, self._first_bad, self._bad_value
        finite = torch.isfinite(t)
        new_bad = (~finite) & (first_bad < 0)
        first_bad = torch.where(new_bad, torch.full_like(first_bad, int(step)), first_bad)
        self._first_bad, self._bad_value = first_bad, torch.where(new_bad, t, bad_value)
        self._last = torch.where(finite & (first_bad < 0), t, last)
        self._n += 1
        if self.check_every is not None and self._n >= self.check_every:
            self.check()

    def _freeze(self, step: int, loss: torch.Tensor) -> None:
        loss = loss.detach().reshape(-1)
        if self.alive is None or self.diverged_at is None:
            self.alive = torch.ones(loss.shape, dtype=torch.bool, device=loss.device)
            # float64 whatever the loss's dtype: a float16 / bfloat16 step number rounds (2049 -> 2048)
            self.diverged_at = torch.full(loss.shape, math.nan, dtype=torch.float64, device=loss.device)  # (E,)
        ok = torch.isfinite(loss) & (loss.abs() < self.limit)
        self.diverged_at = torch.where(
            self.alive & ~ok, torch.full_like(self.diverged_at, float(step)), self.diverged_at
        )
        self.alive = self.alive & ok

    def mask(self, loss: Any) -> Any:
        """The loss the engine backpropagates: frozen members' losses replaced by 0 (policy "freeze")."""
        if self.policy != "freeze" or self.alive is None or not isinstance(loss, torch.Tensor):
            return loss
        return torch.where(self.alive.reshape(loss.shape), loss, torch.zeros_like(loss))

    def check(self) -> None:
        """Raise :class:`NonFiniteLossError` for the earliest non-finite loss recorded so far (one transfer)."""
        self._n = 0
        if not self.lazy or self._first_bad is None or self._last is None or self._bad_value is None:
            return
        fb = self._first_bad.cpu()
        bad = (fb >= 0).nonzero().flatten()
        if len(bad) == 0:
            return
        e = int(bad[fb[bad].argmin()])
        last = float(self._last[e].cpu())
        self._raise(int(fb[e]), e, None if math.isnan(last) else last, float(self._bad_value[e].cpu()))

    @property
    def last_finite(self) -> float | None:
        """Mean over members of the last finite losses checked so far (None before any)."""
        t = self._prev if not self.lazy else self._last
        if t is None:
            return None
        v = float(t.double().mean().cpu())
        return None if math.isnan(v) else v

    def _raise(self, step: int, member: int, last: float | None, value: float) -> None:
        if self._scalar:
            raise NonFiniteLossError(step, last, value, self.what)
        label = self.labels[member] if self.labels is not None else f"member {member}"
        raise NonFiniteLossError(step, last, value, f"{self.what} of {label}", member=member)


class NoGuard(LossGuard):
    """A guard that checks nothing (``guard=False`` of a trainer: e.g. a run that diverges by design)."""

    def update(self, step: int, loss: Any) -> None:
        return None

    def mask(self, loss: Any) -> Any:
        return loss

    def check(self) -> None:
        return None


def resolve_guard(guard: LossGuard | bool | None, what: str = "loss") -> LossGuard:
    """A trainer's ``guard=`` argument: None/True -> a default :class:`LossGuard` (``what``), False -> :class:`NoGuard`."""
    if guard is None or guard is True:
        return LossGuard(what)
    if guard is False:
        return NoGuard(what)
    if not isinstance(guard, LossGuard):
        raise ValueError(f"guard: expected a LossGuard, True/None (default guard) or False (none), got {guard!r}")
    return guard
