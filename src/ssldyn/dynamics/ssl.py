"""Self-supervised training of any backbone on two augmented views, with online probes.

:func:`train_ssl` is the SSL trainer of the dynamics contract (DESIGN.md, "Dynamics"): each step
draws a minibatch ``x`` of ``B`` inputs, makes two views ``v1 = augment(x, g)``,
``v2 = augment(x, g)`` (one documented augmentation signature, ``augment(x, generator) -> view``),
embeds both in one forward pass ``z = head(model([v1; v2]))``, and takes an optimizer step on

    L = objective(z1, z2),       z1 = z[..., :B, :],  z2 = z[..., B:, :]

(or, with a ``predictor`` — SimSiam/BYOL — ``L = ½[objective(p1, t2) + objective(p2, t1)]``,
``p = predictor(z)``, the targets ``t`` from the online network or an EMA target network).
Any objective of :mod:`ssldyn.objectives` that takes two views works: ``InfoNCE`` / ``info_nce``
(SimCLR NT-Xent, ``variational`` eq. 1), ``VICRegLoss``, ``SpectralContrastiveLoss``,
``QuadraticContrastiveLoss`` (α-CL with constant α, ``nonlinearity`` Sec. 2),
``GeneralizedContrastiveLoss`` (``variational`` eq. 4), ``NegativeCosine`` / ``BYOLLoss`` with a
predictor, or any callable ``(z1, z2) -> loss``.

Shapes. A plain ``nn.Module`` maps ``(2B, ...) -> (2B, d)``; an ensemble of the library (or any
module with a leading member axis) maps it to ``(E, 2B, d)``. The output is checked at every
step: any other shape is one ``ValueError`` naming it and what is allowed, so a model whose
output merely *looks* right is never sliced along the wrong axis. Ensemble losses must come
back per member ``(E,)``; they are summed for the update, so element-wise optimizers train E
independent runs.

Probes. At steps ``0, every, 2·every, …, steps`` (the state after that many updates) the
trajectory records ``loss`` — the objective of that state on that step's minibatch, the quantity
being optimised — and every probe of ``probes`` on the observable: the embeddings
``z = model(probe_data)`` of a fixed probe set in eval mode (``(n, d)``, or ``(E, n, d)`` for an
ensemble; backbone features, the head discarded, ``variational`` Remark 4.3). A probe returns a
float, or one value per member ``(E,)`` for an ensemble (:func:`ssldyn.dynamics.per_member`
lifts an ``(n, d)`` probe). Monitors of the theory that need the model itself (its NTK, the
contrast matrix, the α-CL covariance) are in :mod:`ssldyn.dynamics.monitors`.

Randomness. One CPU ``generator`` drives everything: for tensor data, each epoch draws a
permutation (``torch.randperm``), then every step draws view 1 and view 2 from it; a DataLoader
shuffles with its own generator.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import nullcontext
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from ssldyn.dynamics.common import (
    check_steps,
    drop_singleton_member,
    embed,
    iterate,
    log_value,
    minibatches,
    preserved_buffers,
    step_schedule,
)
from ssldyn.dynamics.guards import LossGuard, check_finite, resolve_guard
from ssldyn.dynamics.trajectory import FlowResult, Trajectory

__all__ = ["train_ssl"]

Augment = Callable[[Tensor, torch.Generator], Tensor]
Probe = Callable[[Tensor], Any]


def train_ssl(
    model: nn.Module,
    data: Tensor | np.ndarray | Iterable,
    *,
    objective: Callable[[Tensor, Tensor], Tensor],
    augment: Augment | None,
    steps: int,
    optimizer: torch.optim.Optimizer | Callable[[list[nn.Parameter]], torch.optim.Optimizer] | None = None,
    batch_size: int | None = None,
    head: nn.Module | None = None,
    predictor: nn.Module | None = None,
    target_momentum: float | None = None,
    probes: Mapping[str, Probe] | None = None,
    probe_data: Tensor | np.ndarray | None = None,
    every: int | Iterable[int] | None = 10,
    track: Callable[[Iterable[int]], Iterable[int]] | None = None,
    guard: LossGuard | bool | None = None,
    generator: torch.Generator | None = None,
    device: torch.device | str | None = None,
    dtype: torch.dtype | None = None,
    amp: bool | torch.dtype = False,
) -> FlowResult[nn.Module]:
    """Train ``model`` (and ``head``, ``predictor``) in place on ``objective`` of two augmented views.

    Args:
        model: any ``nn.Module`` (the backbone): ``(2B, ...) -> (2B, d)``, or an ensemble
            ``(2B, ...) -> (E, 2B, d)``.
        data: inputs ``(N, ...)`` (tensor or array; minibatches of ``batch_size`` from seeded
            epoch permutations, the last partial batch dropped), or a ``torch.utils.data.DataLoader``
            / iterable of batches (a tensor, or a tuple/list whose first item is the inputs, e.g.
            ``(x, y)``), cycled for as many epochs as needed.
        objective: ``objective(z1, z2) -> loss``: a scalar, or ``(E,)`` per member for an ensemble
            (every two-view objective of :mod:`ssldyn.objectives`).
        augment: ``augment(x, generator) -> view`` (e.g. :class:`ssldyn.data.augment.SimCLRAugment`),
            called twice per step on the same minibatch; None = identity views.
        steps: optimizer updates.
        optimizer: a ``torch.optim.Optimizer`` over the parameters (it must hold every trainable
            parameter of ``model``, ``head`` and ``predictor``), or a factory
            ``params -> Optimizer`` (e.g. ``lambda p: torch.optim.SGD(p, lr=0.1)``);
            default Adam with lr 1e-3 (SimCLR on MNIST in ``variational`` Fig. 1).
        batch_size: B for tensor data (required there; a DataLoader sets its own).
        head: optional projection head on the backbone output: the loss sees ``head(model(x))``,
            probes see ``model(x)`` (``variational`` Remark 4.3).
        predictor: optional predictor for SimSiam/BYOL-style objectives (see the module docstring).
        target_momentum: with a predictor, an EMA target network ``ξ ← m ξ + (1 − m) θ`` after
            every step (BYOL, Grill et al. 2020, ``m = 0.996``); None = the online network is the target.
        probes: ``name -> probe(z)`` on the probe-set embeddings (float, or ``(E,)`` per member).
        probe_data: the fixed probe set ``(n, ...)``; default the training tensor (required with
            probes when ``data`` is a DataLoader).
        every: the logged steps: an int ``k`` gives ``0, k, 2k, …`` and ``steps``; an iterable gives
            those steps; None the first and the last (:func:`~ssldyn.dynamics.common.step_schedule`).
        track: wraps the step iterator (e.g. a progress bar).
        guard: the :class:`~ssldyn.dynamics.guards.LossGuard` (None: a default one, checked every
            step on the CPU and at the logged steps without a host sync per step on an accelerator;
            False: none).
        generator: CPU generator of batches and views (default seed 0).
        device: where to train (model, head and predictor are moved there; batches are moved per
            step); default the model's device.
        dtype: cast the modules and inputs to this floating dtype; default the model's dtype
            (inputs are cast to it).
        amp: mixed precision: the forward passes under ``torch.autocast``, the objective in float32,
            the weights and the optimizer in the model's dtype. ``True`` = bfloat16 (CPU and CUDA;
            no gradient scaling, no host sync per step); ``torch.float16`` = float16 with a gradient
            scaler on CUDA (older GPUs; the scaler's inf check reads one value per step).

    Returns:
        ``FlowResult(state=model, trajectory)``; the trajectory has ``loss`` and every probe per
        member at the logged steps.

    Raises:
        ValueError: a bad argument, NaN/inf in tensor data, an output or loss of the wrong shape,
            an optimizer that misses trainable parameters.
        NonFiniteLossError: the loss became NaN/inf (names the step and the last finite value).

    Example:
        >>> import torch
        >>> from torch import nn
        >>> from ssldyn.objectives import InfoNCE
        >>> x = torch.randn(64, 10, generator=torch.Generator().manual_seed(0))
        >>> net = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 8))
        >>> jitter = lambda x, g: x + 0.1 * torch.randn(x.shape, generator=g)
        >>> res = train_ssl(net, x, objective=InfoNCE(0.5), augment=jitter, steps=20, batch_size=32, every=10)
        >>> sorted(res.trajectory.to_frame().step.unique().tolist())
        [0, 10, 20]
    """
    _check_settings(steps, batch_size, data, target_momentum, predictor)
    if not callable(objective):
        raise ValueError(f"train_ssl: objective must be a callable (z1, z2) -> loss, got {type(objective).__name__}")
    if augment is not None and not callable(augment):
        raise ValueError(
            f"train_ssl: augment must be a callable augment(x, generator) -> view or None, got {augment!r}"
        )
    modules = [m for m in (model, head, predictor) if m is not None]
    dev = torch.device(device) if device is not None else _module_device(model)
    for m in modules:
        m.to(device=dev, dtype=dtype)
    dt = dtype if dtype is not None else _module_dtype(model)
    g = generator if generator is not None else torch.Generator().manual_seed(0)
    batches = _batches(data, batch_size, steps + 1, g)
    if probes and probe_data is None:
        if not isinstance(data, (Tensor, np.ndarray)):
            raise ValueError("train_ssl: probes need probe_data (a fixed tensor of inputs) when data is a DataLoader")
        probe_data = data
    probe_x = None if probe_data is None else _as_tensor("probe_data", probe_data)

    params = _trainable(modules)
    opt = _optimizer(optimizer, modules, params)
    all_modules = nn.ModuleList(modules)
    online = nn.Sequential(model, head) if head is not None else nn.Sequential(model)
    target = _target_network(online) if target_momentum is not None else None
    guard = resolve_guard(guard)
    amp_dtype = _amp_dtype(amp)
    scaler = torch.amp.GradScaler("cuda") if amp_dtype == torch.float16 and dev.type == "cuda" else None
    autocast = (lambda: torch.autocast(dev.type, dtype=amp_dtype)) if amp_dtype is not None else nullcontext
    logged = step_schedule(every, steps)
    traj = Trajectory(meta={"steps": steps, "logged": sorted(logged), "amp": str(amp_dtype) if amp_dtype else None})
    members: int | None = None
    for m in modules:
        m.train()
    for t in iterate(steps, track):
        x = _to(next(batches), dev, dt)  # (B, ...)
        B = x.shape[0]
        v = torch.cat([_view(augment, x, g), _view(augment, x, g)])  # (2B, ...): view 1 then view 2
        last = t == steps
        # the final state is evaluated, not trained on: no graph, BatchNorm statistics left as trained
        with torch.no_grad() if last else nullcontext(), preserved_buffers(all_modules) if last else nullcontext():
            with autocast():
                z = _forward(model, head, v, B)  # (E, 2B, d) or (2B, d)
                p = predictor(z) if predictor is not None else None
                tz = _targets(target, v, B) if target is not None else None
            losses = _loss(objective, z, p, tz, B)  # (E,) or ()
        members = _check_loss(losses, z, members)
        guard.update(t, losses)  # eager on the CPU; a few device ops (no host sync) on an accelerator
        if t in logged:
            guard.check()  # a non-finite loss fails the run with its step, member and last finite value
            _log(traj, t, losses, probes, model, probe_x, dt, members)
        if last:
            break
        opt.zero_grad(set_to_none=True)
        total = losses.sum()
        if scaler is not None:
            scaler.scale(total).backward()
            scaler.step(opt)
            scaler.update()
        else:
            total.backward()
            opt.step()
        if target is not None and target_momentum is not None:
            _ema_update(target, online, float(target_momentum))
    guard.check()
    return FlowResult(model, traj)


def _features(model: nn.Module, x: Tensor, *, head: nn.Module | None = None, dtype=None) -> Tensor:
    """:func:`~ssldyn.dynamics.common.embed` of ``head ∘ model`` (``model`` alone without a head) on inputs
    moved to the model's device and cast to ``dtype`` (default the model's floating dtype)."""
    dev, dt = _module_device(model), dtype if dtype is not None else _module_dtype(model)
    net = nn.Sequential(model, head) if head is not None else model
    return embed(net, _to(x, dev, dt))


# --------------------------------------------------------------------------- steps
def _view(augment: Augment | None, x: Tensor, g: torch.Generator) -> Tensor:
    if augment is None:
        return x
    v = augment(x, g)
    if not isinstance(v, Tensor) or v.shape[0] != x.shape[0]:
        shape = tuple(v.shape) if isinstance(v, Tensor) else type(v).__name__
        raise ValueError(
            f"train_ssl: augment(x, generator) must return a tensor with one view per input "
            f"({x.shape[0]}, ...), got {shape}"
        )
    return v


def _forward(model: nn.Module, head: nn.Module | None, v: Tensor, B: int) -> Tensor:
    h = model(v)
    _check_output("model", h, B, _declared_members(model))
    if head is None:
        return h
    z = head(h)
    _check_output("head", z, B)
    return z


def _check_output(what: str, z: Any, B: int, members: int | None = None) -> None:
    """``(2B, d)`` (plain) or ``(E, 2B, d)`` (ensemble); anything else is an error.

    ``(2B, 2B, d)`` is ambiguous (E = 2B members, or a plain model with an extra axis) and only
    accepted from a model that declares ``ensemble = 2B`` members.
    """
    ok = isinstance(z, Tensor) and (
        (z.dim() == 2 and z.shape[0] == 2 * B)
        or (z.dim() == 3 and z.shape[1] == 2 * B and (z.shape[0] != 2 * B or members == 2 * B))
    )
    if not ok:
        shape = tuple(z.shape) if isinstance(z, Tensor) else type(z).__name__
        raise ValueError(
            f"train_ssl: the {what} output has shape {shape} for the 2B = {2 * B} inputs of one step (two views "
            f"of B = {B}); allowed: ({2 * B}, d) for a plain model or (E, {2 * B}, d) for an ensemble of E members "
            "(one embedding row per input: flatten or pool spatial outputs)"
        )


def _declared_members(model: nn.Module) -> int | None:
    """The ensemble size a library model declares (``ensemble`` or ``E``), if any."""
    for name in ("ensemble", "E"):
        value = getattr(model, name, None)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def _loss(objective, z: Tensor, p: Tensor | None, tz: Tensor | None, B: int) -> Tensor:
    z = z.float() if z.dtype in (torch.float16, torch.bfloat16) else z
    z1, z2 = z[..., :B, :], z[..., B:, :]  # (E, B, d) or (B, d) each
    if p is None:
        return objective(z1, z2)
    p = p.float() if p.dtype in (torch.float16, torch.bfloat16) else p
    _check_output("predictor", p, B)
    t = z if tz is None else (tz.float() if tz.dtype in (torch.float16, torch.bfloat16) else tz)
    p1, p2 = p[..., :B, :], p[..., B:, :]
    t1, t2 = t[..., :B, :], t[..., B:, :]
    return 0.5 * (objective(p1, t2) + objective(p2, t1))  # SimSiam eq. 3 / symmetrised BYOL


def _check_loss(losses: Any, z: Tensor, members: int | None) -> int:
    E = z.shape[0] if z.dim() == 3 else 1
    want = (E,) if z.dim() == 3 else ()
    if not isinstance(losses, Tensor) or tuple(losses.shape) != want:
        got = tuple(losses.shape) if isinstance(losses, Tensor) else type(losses).__name__
        raise ValueError(
            f"train_ssl: the objective returned shape {got} for embeddings {tuple(z.shape)}; it must return "
            + (f"one loss per member, shape ({E},)" if z.dim() == 3 else "a scalar")
            + " (reduce over samples, never over members)"
        )
    if members is not None and members != E:
        raise ValueError(f"train_ssl: the number of members changed from {members} to {E} between steps")
    return E


def _targets(target: nn.Module, v: Tensor, B: int) -> Tensor:
    with torch.no_grad():
        tz = target(v)
    _check_output("target network", tz, B)
    return tz


def _target_network(online: nn.Module) -> nn.Module:
    net = copy.deepcopy(online).train()
    for q in net.parameters():
        q.requires_grad_(False)
    return net


@torch.no_grad()
def _ema_update(target: nn.Module, online: nn.Module, m: float) -> None:
    for tp, op in zip(target.parameters(), online.parameters()):
        tp.lerp_(op.detach(), 1.0 - m)  # ξ ← m ξ + (1 − m) θ
    for tb, ob in zip(target.buffers(), online.buffers()):
        tb.copy_(ob)


# --------------------------------------------------------------------------- logging
def _log(traj: Trajectory, t: int, losses: Tensor, probes, model, probe_x, dt, members: int) -> None:
    if members > 1:
        traj.log_members(t, "loss", losses.detach())
    else:
        traj.log(t, loss=losses.detach())
    if not probes:
        return
    obs = _features(model, probe_x, dtype=dt)  # (n, d) or (E, n, d)
    obs = drop_singleton_member(obs)  # an ensemble of one: probes see (n, d)
    for name, fn in probes.items():
        _log_probe(traj, t, name, fn(obs), members)


def _log_probe(traj: Trajectory, t: int, name: str, value: Any, members: int) -> None:
    if members > 1:
        n = value.numel() if isinstance(value, Tensor) else np.asarray(value).size
        if n != members:
            raise ValueError(
                f"train_ssl: probe {name!r} returned {n} value(s) for an ensemble of {members} members; "
                f"return one value per member, shape ({members},) (wrap an (n, d) probe in "
                "ssldyn.dynamics.per_member)"
            )
    log_value(traj, t, name, value)


# --------------------------------------------------------------------------- setup
def _check_settings(steps, batch_size, data, target_momentum, predictor) -> None:
    check_steps(steps)
    tensor_data = isinstance(data, (Tensor, np.ndarray))
    if tensor_data and (batch_size is None or isinstance(batch_size, bool) or int(batch_size) < 2):
        raise ValueError(f"train_ssl: batch_size must be an int >= 2 for tensor data, got {batch_size!r}")
    if not tensor_data and batch_size is not None:
        raise ValueError("train_ssl: batch_size is set by the DataLoader; leave batch_size=None")
    if target_momentum is not None:
        if predictor is None:
            raise ValueError("train_ssl: target_momentum (an EMA target network, BYOL) needs a predictor")
        if not 0.0 <= float(target_momentum) < 1.0:
            raise ValueError(f"train_ssl: target_momentum must be in [0, 1), got {target_momentum!r}")


def _as_tensor(name: str, x: Any) -> Tensor:
    t = x if isinstance(x, Tensor) else torch.as_tensor(np.asarray(x))
    if t.dim() < 2:
        raise ValueError(f"train_ssl: {name} must have shape (N, ...) with one input per row, got {tuple(t.shape)}")
    check_finite(name, t)
    return t


def _batches(data: Any, batch_size: int | None, n_steps: int, g: torch.Generator) -> Iterator[Tensor]:
    if isinstance(data, (Tensor, np.ndarray)):
        x = _as_tensor("data", data)
        B = int(batch_size) if batch_size is not None else 0  # checked >= 2 by _check_settings
        if B > x.shape[0]:
            raise ValueError(f"train_ssl: batch_size={batch_size} exceeds the number of inputs N={x.shape[0]}")
        return (x[idx.to(x.device)] for idx in minibatches(x.shape[0], B, n_steps, g))
    if not isinstance(data, Iterable):
        raise ValueError(
            f"train_ssl: data must be a tensor/array (N, ...) or a DataLoader/iterable of batches, got {type(data).__name__}"
        )
    return _cycle(data)


def _cycle(loader: Iterable) -> Iterator[Tensor]:
    while True:
        empty = True
        for b in loader:
            empty = False
            x = b[0] if isinstance(b, (list, tuple)) else b
            if not isinstance(x, Tensor) or x.dim() < 2 or x.shape[0] < 2:
                shape = tuple(x.shape) if isinstance(x, Tensor) else type(x).__name__
                raise ValueError(
                    f"train_ssl: each DataLoader batch must hold inputs (B, ...) with B >= 2 (first item of a "
                    f"tuple), got {shape}; use drop_last=True to drop a last batch of one"
                )
            yield x
        if empty:
            raise ValueError("train_ssl: the DataLoader yielded no batch")


def _trainable(modules: list[nn.Module]) -> list[nn.Parameter]:
    seen: set[int] = set()
    out = []
    for m in modules:
        for q in m.parameters():
            if q.requires_grad and id(q) not in seen:
                seen.add(id(q))
                out.append(q)
    if not out:
        raise ValueError("train_ssl: the model (and head, predictor) has no trainable parameters")
    return out


def _optimizer(optimizer: Any, modules: list[nn.Module], params: list[nn.Parameter]) -> torch.optim.Optimizer:
    if optimizer is None:
        return torch.optim.Adam(params, lr=1e-3)
    if isinstance(optimizer, torch.optim.Optimizer):
        held = {id(q) for group in optimizer.param_groups for q in group["params"]}
        names = {id(q): f"{type(m).__name__}.{n}" for m in modules for n, q in m.named_parameters()}
        missing = [names.get(id(q), "?") for q in params if id(q) not in held]
        if missing:
            raise ValueError(
                f"train_ssl: the optimizer does not hold {len(missing)} trainable parameter(s) of the model/head/"
                f"predictor ({', '.join(missing[:5])}{', …' if len(missing) > 5 else ''}); build it over all of them, "
                "or pass a factory such as lambda params: torch.optim.SGD(params, lr=0.1)"
            )
        return optimizer
    if callable(optimizer):
        opt = optimizer(params)
        if not isinstance(opt, torch.optim.Optimizer):
            raise ValueError(f"train_ssl: the optimizer factory returned {type(opt).__name__}, not a torch optimizer")
        return opt
    raise ValueError(
        f"train_ssl: optimizer must be a torch.optim.Optimizer, a factory params -> Optimizer, or None; got {optimizer!r}"
    )


def _amp_dtype(amp: Any) -> torch.dtype | None:
    if amp is False or amp is None:
        return None
    if amp is True:
        return torch.bfloat16
    if amp in (torch.bfloat16, torch.float16):
        return amp
    raise ValueError(f"train_ssl: amp must be False, True (bfloat16), torch.bfloat16 or torch.float16, got {amp!r}")


def _module_device(model: nn.Module) -> torch.device:
    for q in model.parameters():
        return q.device
    return torch.device("cpu")


def _module_dtype(model: nn.Module) -> torch.dtype | None:
    for q in model.parameters():
        if q.is_floating_point():
            return q.dtype
    return None


def _to(x: Tensor, dev: torch.device, dt: torch.dtype | None) -> Tensor:
    """Move a batch to the device; floating inputs take the model's floating dtype (integer inputs stay)."""
    cast = dt is not None and dt.is_floating_point and x.is_floating_point()
    return x.to(device=dev, dtype=dt if cast else None, non_blocking=True)
