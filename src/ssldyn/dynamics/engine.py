"""The one loop of every flow and trainer (``docs/architecture.md``, "The engine contract").

A flow is only its step function ``step(state, t) -> (state, loss)`` (optionally
``(state, loss, extras)``); :func:`run` owns everything around it:

* **the schedule** — ``t = 0 .. steps``; the record at ``t`` describes the state after ``t``
  updates (:func:`~ssldyn.dynamics.common.step_schedule` picks the logged steps from ``every``);
* **the update** — either the step returns the next state (a pure flow: embeddings, weights on
  the sphere, ``q`` of the q-ODE), or the engine is given an ``optimizer`` and applies the loss:
  ``zero_grad; guard.mask(loss).sum().backward(); optimizer.step(); after_update(); scheduler.step()``
  (``scaler`` for float16 mixed precision). No flow calls ``optimizer.step()`` itself;
* **the final evaluation** — ``final=True``: the state after the last update is evaluated once
  more at ``t = steps`` (its loss is logged) under ``torch.no_grad()`` with the buffers of
  ``modules`` (BatchNorm running statistics) preserved, and never trained on. ``final=False``:
  ``steps`` updates ``t = 0 .. steps − 1`` and, when ``steps`` is a logged step, a record of the
  final state with the last step's loss (with no update, ``steps = 0`` or ``start = steps``, no
  loss was measured: that record holds the probes only, no ``loss`` value is made up);
* **the guard** — every loss goes through a :class:`~ssldyn.dynamics.guards.LossGuard`
  (``update`` per step with no host sync on an accelerator, ``check`` at logged steps, at the
  end and every ``check_every`` updates); freezing single ensemble members instead of failing
  is the guard's policy (``LossGuard(policy="freeze")``: the engine masks frozen members out of
  the update, their slices of every parameter with a member-major leading axis ``E`` or ``E·F``;
  in a pure flow, without an ``optimizer``, a frozen member's rows of the state keep the value
  they had at the step of its first bad loss, which needs a tensor state with the leading axis
  ``E`` — any tensor when ``E = 1`` — and is a ``ValueError`` for any other state);
* **probe logging** — at a logged step: ``loss`` (one value per member), the step's
  ``extras`` (in their order), then every probe on ``observe(state)`` (the state before the
  step's update); a probe returns a float or one value per member ``(E,)``;
* **snapshots** — ``snapshots: name -> fn(state)`` at the ``snapshot_every`` steps, kept on
  their device until read;
* **the trajectory** — columnar: values stay on their device until the table is read
  (:class:`~ssldyn.dynamics.trajectory.Trajectory`);
* **callbacks** — the only extension point (as in minGPT's trainer): ``on_step(step, state,
  loss)`` after every update, ``on_log(step, state, row)`` at every logged step (``row``:
  ``name -> value`` of what was just logged), ``on_end(state, trajectory)``.

``stop(state, t) -> bool`` ends the loop early after the step ``t`` (that step is logged), e.g.
when a power iteration converged. ``start`` resumes at step ``start`` (a checkpointed run:
the trajectory passed in holds the rows before it).
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from typing import Any, Protocol, TypeVar, runtime_checkable

import numpy as np
import torch
from torch import Tensor, nn

from ssldyn.dynamics.common import check_schedule, check_steps, log_value, step_schedule
from ssldyn.dynamics.guards import LossGuard, resolve_guard
from ssldyn.dynamics.trajectory import FlowResult, Trajectory

__all__ = ["Callback", "run", "preserved_buffers", "resolve_device"]

S = TypeVar("S")
Step = Callable[[Any, int], "tuple[Any, Any] | tuple[Any, Any, Any]"]


@runtime_checkable
class Callback(Protocol):
    """What :func:`run` calls; every method is optional (a callback defines those it needs).

    * ``on_step(step, state, loss)`` — after the update of step ``step`` (the state after ``step + 1``
      updates); ``loss`` is that step's loss (detached, on its device).
    * ``on_log(step, state, row)`` — at every logged step, ``row`` maps each logged name (``loss``,
      the extras, the probes) to its value (a float or an ``(E,)`` tensor / array).
    * ``on_end(state, trajectory)`` — once, after the last step.
    """


@contextmanager
def preserved_buffers(model: nn.Module | Sequence[nn.Module]) -> Iterator[None]:
    """Run forwards without side effects on the modules' buffers (BatchNorm running statistics, …).

    The buffers are swapped for copies while the block runs and the originals are put back after
    it, untouched: values seen inside are the same, nothing outside changes, and tensors saved for
    a pending backward pass keep their version (an in-place restore would invalidate them).
    """
    mods = [model] if isinstance(model, nn.Module) else list(model)
    saved: list[tuple[nn.Module, str, Tensor]] = []
    for root in mods:
        for m in root.modules():
            for name, b in m._buffers.items():
                if b is not None:
                    saved.append((m, name, b))
                    m._buffers[name] = b.clone()
    try:
        yield
    finally:
        for m, name, b in saved:
            m._buffers[name] = b


def resolve_device(
    device: torch.device | str | None, default: torch.device | None = None, *, who: str = ""
) -> torch.device:
    """``device`` as a ``torch.device``; asking for CUDA (or MPS) where there is none is one clear error."""
    if device is None:
        return default if default is not None else torch.device("cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        raise ValueError(f"{who}device={device!r}: not a device; allowed: 'cpu', 'cuda', 'cuda:N', 'mps'") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(
            f"{who}device={device!r} but CUDA is not available in this PyTorch build or machine "
            f"(torch {torch.__version__}); use device='cpu' or install a CUDA build of PyTorch"
        )
    if dev.type == "cuda" and dev.index is not None and dev.index >= torch.cuda.device_count():
        raise ValueError(f"{who}device={device!r}: only {torch.cuda.device_count()} CUDA device(s) present")
    if dev.type == "mps" and not torch.backends.mps.is_available():
        raise ValueError(f"{who}device={device!r} but MPS is not available; use device='cpu'")
    return dev


def _call(callbacks: Sequence[Any], name: str, *args: Any) -> None:
    for cb in callbacks:
        fn = getattr(cb, name, None)
        if fn is not None:
            fn(*args)


def run(
    state: S,
    step: Step,
    *,
    steps: int,
    every: int | Iterable[int] | None = 1,
    probes: Mapping[str, Callable[[Any], Any]] | None = None,
    observe: Callable[[Any], Any] | None = None,
    snapshots: Mapping[str, Callable[[Any], Any]] | None = None,
    snapshot_every: int | Iterable[int] | None = (),
    track: Callable[[Iterable[int]], Iterable[int]] | None = None,
    guard: LossGuard | bool | None = None,
    guard_what: str = "loss",
    callbacks: Sequence[Any] = (),
    optimizer: Any = None,
    scheduler: Any = None,
    scaler: Any = None,
    after_update: Callable[[], Any] | None = None,
    modules: nn.Module | Sequence[nn.Module] = (),
    final: bool = True,
    stop: Callable[[Any, int], bool] | None = None,
    trajectory: Trajectory | None = None,
    loss_name: str | None = "loss",
    start: int = 0,
) -> FlowResult[S]:
    """Advance ``state`` by ``step`` for ``steps`` steps and record it (see the module docstring).

    Args:
        state: the flow's state (a module, embeddings, weights, parameters, ...); returned as
            ``FlowResult.state`` (the last state the step returned, or ``state`` itself when the
            engine applies an ``optimizer`` to it in place).
        step: ``step(state, t) -> (state, loss)`` or ``(state, loss, extras)``: the loss of the
            state at ``t`` (a scalar or ``(E,)``, with its graph when an ``optimizer`` is given) and
            the next state; ``extras`` (a mapping ``name -> value``, or a callable returning one, only
            called at logged steps) are logged after the loss.
        steps: number of updates (>= 0).
        every: the logged steps (an int interval, explicit steps in ``0..steps`` — another is a ``ValueError`` —, None:
            first and last).
        probes: ``name -> probe(observable)`` with ``observable = observe(state)`` (default the state).
        snapshots, snapshot_every: ``name -> fn(state)`` kept at the ``snapshot_every`` steps.
        track: wraps the step iterator (progress bars).
        guard: a :class:`LossGuard` (None/True: a default one naming ``guard_what``; False: none). With
            ``policy="freeze"`` and no ``optimizer`` the state must be a tensor ``(E, ...)`` (any tensor
            for ``E = 1``): the frozen members' rows are kept (see the module docstring).
        callbacks: objects with any of ``on_step``, ``on_log``, ``on_end`` (:class:`Callback`).
        optimizer, scheduler, scaler, after_update: the update the engine applies after each
            step's record (``scheduler.step()`` after every ``optimizer.step()``; ``after_update()``
            re-imposes a constraint). Without an ``optimizer`` the step itself advances the state.
        modules: evaluated at the final step with their buffers preserved.
        final: evaluate the final state at ``t = steps`` (True) or run ``steps`` updates only.
        stop: ``stop(state, t)`` after step ``t``; True ends the loop (step ``t`` is logged).
        trajectory: record into this trajectory (e.g. resumed rows); loss_name: the loss's name
            (None: not logged — the flow logs it among its extras).
        start: the first step (resume).
    Returns:
        ``FlowResult(state, trajectory)``.
    """
    steps = check_steps(steps)
    start = check_steps(start, "start")
    if start > steps:
        raise ValueError(f"start={start}: the first step must be in 0..steps={steps}")
    for kind, fns in (("probes", probes), ("snapshots", snapshots)):
        for name, fn in (fns or {}).items():
            if not callable(fn):
                raise ValueError(f"{kind}: {name!r} must be a callable (observable -> value), got {type(fn).__name__}")
    guard = resolve_guard(guard, guard_what)
    traj = trajectory if trajectory is not None else Trajectory()
    logs = step_schedule(check_schedule(every, steps, who="run"), steps)  # explicit steps in 0..steps, else an error
    snaps = step_schedule(check_schedule(snapshot_every, steps, "snapshot_every", who="run"), steps)
    probes = dict(probes or {})
    snapshots = dict(snapshots or {})
    observe = observe or (lambda s: s)
    callbacks = list(callbacks or ())
    mods = [modules] if isinstance(modules, nn.Module) else list(modules)
    last_t = steps if final else steps - 1
    it: Iterable[int] = range(start, last_t + 1)
    stopped = False
    loss: Any = None
    done = start  # updates applied so far
    for t in track(it) if track is not None else it:
        is_final = final and t == steps
        ctx = torch.no_grad() if is_final else nullcontext()
        with ctx, preserved_buffers(mods) if is_final and mods else nullcontext():
            out = step(state, t)
        if t == start:
            _check_step_output(out, t)
        new_state, loss = out[0], out[1]
        extras = out[2] if len(out) > 2 else None
        guard.update(t, loss)  # eager on the CPU; a few device ops (no host sync) on an accelerator
        if t == start and optimizer is None and guard.policy == "freeze":
            _check_freezable(state, guard)
        if stop is not None and not is_final:
            stopped = bool(stop(new_state, t))
        if t in logs or stopped:
            guard.check()  # a non-finite loss fails the run before it is recorded
            _record(traj, t, state, loss, extras, probes, observe, loss_name, callbacks)
        if t in snaps and snapshots:
            guard.check()
            _snapshot(traj, t, state, snapshots)
        if is_final:
            break
        if optimizer is not None:
            optimizer.zero_grad(set_to_none=True)
            total = guard.mask(loss).sum()
            if scaler is not None:
                scaler.scale(total).backward()
                with _frozen_kept(optimizer, guard):  # a frozen member's NaN gradient would skip every member's step
                    scaler.step(optimizer)
                scaler.update()
            else:
                total.backward()
                with _frozen_kept(optimizer, guard):
                    optimizer.step()
            if after_update is not None:
                after_update()
            if scheduler is not None:
                scheduler.step()
        elif guard.policy == "freeze":
            state = _keep_frozen(state, new_state, guard)
        else:
            state = new_state
        done = t + 1
        _call(callbacks, "on_step", t, state, loss.detach() if isinstance(loss, Tensor) else loss)
        if stopped:
            break
    if not final:  # the state after the last update: logged with the last step's loss
        if not stopped and steps in logs:
            guard.check()
            # loss None: no update ran (steps = 0 or start = steps), so no loss to log, only the probes
            _record(traj, steps, state, loss, None, probes, observe, loss_name, callbacks)
        if done in snaps and snapshots:
            _snapshot(traj, done, state, snapshots)
    guard.check()
    _call(callbacks, "on_end", state, traj)
    return FlowResult(state, traj)


def _optimizer_params(optimizer: Any) -> list[Tensor]:
    if hasattr(optimizer, "param_groups"):
        return [p for group in optimizer.param_groups for p in group["params"]]
    return list(getattr(optimizer, "params", []))


@contextmanager
def _frozen_kept(optimizer: Any, guard: LossGuard) -> Iterator[None]:
    """Policy "freeze": the frozen members' slices of every parameter stay as they are through the optimizer
    step — their gradients are zeroed (a NaN gradient cannot leak, nor make a ``GradScaler`` skip every member's
    step) and their values restored (momentum or Adam state cannot move them). No host sync.

    A parameter belongs to the members member-major along its leading axis: ``(E, ...)`` (one slice per member)
    or ``(E·F, ...)`` (``F`` rows per member, e.g. the flat BatchNorm affine vectors and grouped convolutions of
    the ensembles' encoders); its mask is ``alive`` repeated ``F = p.shape[0] / E`` times per member. A leading axis
    that is not a multiple of ``E`` (or no axis) is shared: it keeps training on the alive members' gradients, and
    while a member is frozen its non-finite entries are dropped — a frozen member with a non-finite loss puts NaN
    (0·inf) into every gradient its subgraph reaches, which would otherwise reach the shared parameter and freeze
    every member at the next step (entries the frozen member's NaN covers get no update while it stays frozen).
    With ``E = 1`` (a scalar loss) every parameter is the member's, so a frozen model keeps all of them.
    """
    alive = guard.alive if guard.policy == "freeze" else None
    if alive is None:
        yield
        return
    E = alive.shape[0]
    kept = []
    with torch.no_grad():
        for p in _optimizer_params(optimizer):
            if E == 1:
                mask = alive.reshape([1] * p.dim())  # one member: every parameter, a 0-d one included
            elif p.dim() >= 1 and p.shape[0] % E == 0:
                rows = alive.repeat_interleave(p.shape[0] // E)  # (E·F,) member-major
                mask = rows.view(-1, *([1] * (p.dim() - 1)))  # (E·F, 1, ...)
            else:  # shared by the members: a frozen member's non-finite gradient (0·inf in its backward) is dropped
                if p.grad is not None:  # no host sync; while every member is alive nothing is dropped
                    keep = torch.isfinite(p.grad) | alive.all()
                    p.grad.copy_(torch.where(keep, p.grad, torch.zeros_like(p.grad)))
                continue
            if p.grad is not None:
                p.grad.copy_(torch.where(mask, p.grad, torch.zeros_like(p.grad)))
            kept.append((p, mask, p.detach().clone()))
    yield
    with torch.no_grad():
        for p, mask, old in kept:
            p.copy_(torch.where(mask, p, old))


def _check_freezable(state: Any, guard: LossGuard) -> None:
    """Policy "freeze" in a pure flow (no optimizer): the engine keeps a frozen member's rows of the state, so the
    state must be a tensor with a leading ensemble axis ``E`` (the loss's length), or any tensor when ``E = 1``."""
    E = guard.alive.shape[0] if guard.alive is not None else 1
    if isinstance(state, Tensor) and (E == 1 or (state.dim() >= 1 and state.shape[0] == E)):
        return
    got = (
        f"a tensor of shape {tuple(state.shape)}"
        if isinstance(state, Tensor)
        else f"a state of type {type(state).__name__}"
    )
    raise ValueError(f"run: guard policy='freeze' needs an optimizer or an ensemble-first tensor state (E, ...) "
                     f"with E={E} members (the loss's length), got {got}; use policy='raise' here")  # fmt: skip


def _keep_frozen(state: Any, new_state: Any, guard: LossGuard) -> Any:
    """The next state of a pure flow under policy "freeze": the alive members' rows of ``new_state``, the frozen
    members' rows of ``state`` (the state of their first non-finite loss; no host sync)."""
    alive = guard.alive
    if alive is None:
        return new_state
    if not isinstance(new_state, Tensor) or new_state.shape != state.shape:
        got = tuple(new_state.shape) if isinstance(new_state, Tensor) else type(new_state).__name__
        raise ValueError(f"run: guard policy='freeze' keeps the frozen members' rows, so the step must return a "
                         f"state of the shape of its input {tuple(state.shape)}, got {got}")  # fmt: skip
    if alive.shape[0] == 1:
        mask = alive.reshape([1] * state.dim())  # one member: the whole state
    else:
        mask = alive.view(-1, *([1] * (state.dim() - 1)))  # (E, 1, ...)
    return torch.where(mask.to(state.device), new_state, state)  # (E, ...)


def _check_step_output(out: Any, t: int) -> None:
    """``step(state, t)`` returns ``(state, loss)`` or ``(state, loss, extras)``; the loss is a number, a scalar
    or one value per member ``(E,)`` (a per-sample loss ``(n, ...)`` would be optimised as its sum and logged as
    members, silently); ``extras`` a mapping ``name -> value`` or a callable returning one."""
    if not isinstance(out, tuple) or len(out) not in (2, 3):
        got = f"a {len(out)}-tuple" if isinstance(out, tuple) else type(out).__name__
        raise ValueError(f"step {t}: the step function must return (state, loss) or (state, loss, extras), got {got}")
    loss = out[1]
    if isinstance(loss, bool) or not isinstance(loss, (Tensor, np.ndarray, numbers.Real)):
        raise ValueError(f"step {t}: the loss must be a number or a tensor (a scalar or one value per ensemble "
                         f"member), got {type(loss).__name__}")  # fmt: skip
    if len(out) == 3 and out[2] is not None and not (isinstance(out[2], Mapping) or callable(out[2])):
        raise ValueError(f"step {t}: extras must be a mapping name -> value (or a callable returning one), got "
                         f"{type(out[2]).__name__}")  # fmt: skip
    shape = tuple(getattr(loss, "shape", ()))  # a tensor, an array or a Python number
    if len(shape) > 1:
        raise ValueError(f"step {t}: the loss must be a scalar or one value per ensemble member (E,), got shape "
                         f"{shape}: reduce it over the samples (e.g. .mean() or .sum())")  # fmt: skip


def _record(traj, t, state, loss, extras, probes, observe, loss_name, callbacks) -> None:
    row: dict[str, Any] = {}
    if loss_name is not None and loss is not None:  # None: logged among the extras / no step ran
        value = loss.detach() if isinstance(loss, Tensor) else loss
        if isinstance(value, Tensor):
            value = value.reshape(-1) if value.numel() > 1 else value.reshape(())
        log_value(traj, t, loss_name, value)
        row[loss_name] = value
    if extras is not None:
        items: Any = extras() if callable(extras) else extras  # name -> value
        for name, v in items.items():
            log_value(traj, t, name, v)
            row[name] = v
    if probes:
        with torch.no_grad():
            obs = observe(state)
            for name, fn in probes.items():
                v = fn(obs)
                log_value(traj, t, name, v)
                row[name] = v
    _call(callbacks, "on_log", t, state, row)


def _snapshot(traj: Trajectory, t: int, state: Any, snapshots: Mapping[str, Callable[[Any], Any]]) -> None:
    with torch.no_grad():
        for name, fn in snapshots.items():
            v = fn(state)
            if v is not None:
                traj.snapshot(t, name, v)
