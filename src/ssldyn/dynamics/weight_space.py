"""Weight-space gradient descent of any network on any loss of its embeddings (``variational`` eq. 9).

``w ← w − σ ∇_w 𝓛(f(w, x_1..x_n))``, with the outputs mapped to the sphere (the constraint set
``C = {f : R^D → S^{d-1}}`` of Sec. 2) by normalising inside the loss (``output="sphere"``,
the default) or used as they are (``output="raw"``). With ``views`` the loss receives two
augmented views ``loss_fn(f(T x), f(T' x))`` (SimCLR); without, ``loss_fn(f(x))`` (an
invariant map, Prop. 2.1). Reports into a :class:`~ssldyn.dynamics.Trajectory` with the same
probes and snapshots (``z``, ``neg_grad`` = ``−∇L(z_i) = −n ∂𝓛/∂z_i``) as the function-space
flows, so the two can be compared side by side.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import torch
from torch import Tensor, nn

from ssldyn.dynamics.function_space import project_sphere, step_schedule
from ssldyn.dynamics.guards import StepGuard, check_finite
from ssldyn.dynamics.trajectory import Trajectory

__all__ = ["train_weight_space", "embed"]


def embed(model: nn.Module, x: Tensor, output: str = "sphere") -> Tensor:
    """``model(x)`` (``(E, n, d)``, or ``(n, d)`` for a plain model), normalised when ``output="sphere"``."""
    z = model(x)
    return project_sphere(z) if output == "sphere" else z


def make_optimizer(params, optimizer: str, lr: float, momentum: float, weight_decay: float) -> torch.optim.Optimizer:
    if optimizer == "sgd":
        return torch.optim.SGD(params, lr=lr, momentum=momentum, weight_decay=weight_decay)
    if optimizer == "adam":
        return torch.optim.Adam(params, lr=lr, weight_decay=weight_decay)
    raise ValueError(f"optimizer {optimizer!r}: allowed values are 'sgd', 'adam'")


def train_weight_space(
    model: nn.Module,
    x: Tensor,
    loss_fn: Callable[..., Tensor],
    *,
    steps: int,
    lr: float,
    optimizer: str = "sgd",
    momentum: float = 0.0,
    weight_decay: float = 0.0,
    output: str = "sphere",
    views: Callable[[Tensor], Tensor] | None = None,
    probes: Mapping[str, Callable[[Tensor], Any]] | None = None,
    log_every: int | Iterable[int] | None = 1,
    snapshot_every: int | Iterable[int] | None = None,
    trajectory: Trajectory | None = None,
    track: Callable[[Iterable[int]], Iterable[int]] | None = None,
) -> Trajectory:
    """Train ``model`` in place by gradient descent on ``loss_fn`` of its embeddings.

    Args:
        model: any ``nn.Module``; ``(n, ...) -> (n, d)`` or an ensemble ``(E, n, d)``.
        x: ``(n, ...)`` training inputs (full batch).
        loss_fn: ``loss_fn(z)`` (no views) or ``loss_fn(z1, z2)`` (views); a scalar, or ``(E,)``
            one value per member (summed for the update: members train independently).
        steps, lr: iterations and step size; ``optimizer`` ``"sgd"`` (with ``momentum``,
            ``weight_decay``) or ``"adam"``.
        output: ``"sphere"`` (normalise the outputs; the sphere constraint of Sec. 2) or ``"raw"``.
        views: ``views(x) -> T(x)``, a random augmentation drawn anew at each call.
        probes: ``name -> fn(z)`` evaluated on the embeddings of the clean ``x`` (per member).
        log_every, snapshot_every: int interval or explicit steps (``z`` and ``neg_grad`` of the
            clean embeddings are snapshotted).
        track: optional progress wrapper of the step iterator (e.g. ``ctx.track``).
    Returns:
        The trajectory (``loss`` and probes per member; snapshots of member 0 or all members).
    Raises:
        ValueError: NaN/inf in ``x`` (before training).
        NonFiniteLossError: the loss became NaN/inf (names the step and the last finite value).
    """
    if output not in ("sphere", "raw"):
        raise ValueError(f"output {output!r}: allowed values are 'sphere', 'raw'")
    check_finite("x", x)
    guard = StepGuard(x.device)  # per step on CPU; in blocks on a GPU (no sync per step)
    traj = trajectory if trajectory is not None else Trajectory()
    logs, snaps = step_schedule(log_every, steps), step_schedule(snapshot_every, steps)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = make_optimizer(params, optimizer, lr, momentum, weight_decay)
    it = range(steps + 1)
    for step in track(it) if track else it:
        record = step in logs or step in snaps
        if views is None or record:
            z = embed(model, x, output)  # (E, n, d) or (n, d)
            loss_clean = loss_fn(z) if views is None else loss_fn(z, z)  # invariant-map loss on clean x
        if record:
            (g,) = torch.autograd.grad(loss_clean.sum(), z, retain_graph=views is None)
            _log(traj, step, z.detach(), loss_clean.detach(), g, probes, step in logs, step in snaps)
        if step == steps:
            break
        opt.zero_grad(set_to_none=True)
        if views is None:
            loss = loss_clean
        else:
            loss = loss_fn(embed(model, views(x), output), embed(model, views(x), output))
        guard(step, loss, flush=record)  # a non-finite loss fails the run with its step and last finite value
        loss.sum().backward()
        opt.step()
    guard.flush()
    return traj


def _log(traj: Trajectory, step: int, z: Tensor, loss: Tensor, g: Tensor, probes, log: bool, snap: bool) -> None:
    n = z.shape[-2]
    squeeze = z.dim() == 3 and z.shape[0] == 1
    if squeeze:
        z, g = z[0], g[0]
        loss = loss.reshape(-1)[0]
    if log:
        if z.dim() == 2:
            traj.log(step, loss=loss.reshape(()))
            for name, fn in (probes or {}).items():
                traj.log(step, **{name: fn(z)})
        else:
            traj.log_members(step, "loss", loss.reshape(-1))
            for name, fn in (probes or {}).items():
                traj.log_members(step, name, [fn(zm) for zm in z])
    if snap:
        traj.snapshot(step, "z", z)
        traj.snapshot(step, "neg_grad", -n * g)
