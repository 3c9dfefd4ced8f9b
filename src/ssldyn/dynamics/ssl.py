"""Self-supervised training of any backbone on two augmented views, with online probes.

:func:`train_ssl` is the SSL trainer of the dynamics contract (docs/architecture.md, "Dynamics"): each step
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

Views. ``augment`` is ``augment(x, generator)``, a one-argument (torchvision-style) transform
applied per sample, or a list of those — one view each (multi-crop, SwAV / DINO); with ``V > 2``
views the objective is the mean over the pairs ``i < j`` (:mod:`ssldyn.dynamics.views`). Views of
the same shape share one forward pass.

Hooks (:mod:`ssldyn.dynamics.engine`): ``callbacks`` (``on_step``, ``on_log``, ``on_end``; e.g.
:class:`~ssldyn.dynamics.callbacks.TensorBoardLogger` for live TensorBoard scalars), a
``scheduler`` (any ``torch.optim.lr_scheduler``, stepped after every update), and checkpoints
(``checkpoint=path, checkpoint_every=k``; ``resume=path`` continues a run exactly: same batches,
views, dropout masks and losses as without the interruption, for tensor data or a seeded
DataLoader).

:func:`train_simclr` is ``train_ssl`` with the NT-Xent objective (``variational`` Fig. 1).
"""

from __future__ import annotations

import copy
import io
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import nullcontext
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
from torch import Tensor, nn

from ssldyn.checks import choice, integer, nonnegative, positive
from ssldyn.dynamics.common import (
    EpochBatches,
    check_lr,
    check_schedule,
    check_steps,
    drop_singleton_member,
    embed,
    member_checked_probes,
    module_device,
    module_dtype,
    step_schedule,
    to_module,
)
from ssldyn.dynamics.engine import resolve_device, run
from ssldyn.dynamics.guards import LossGuard, check_finite
from ssldyn.dynamics.trajectory import FlowResult, Trajectory
from ssldyn.dynamics.views import as_augment, draw_views, pairwise_mean
from ssldyn.dynamics.weight_space import make_optimizer
from ssldyn.files import atomic_write_bytes

__all__ = ["train_ssl", "train_simclr"]

Augment = Callable[..., Tensor]
Probe = Callable[[Tensor], Any]


def train_ssl(
    model: nn.Module,
    data: Tensor | np.ndarray | Iterable,
    *,
    objective: Callable[[Tensor, Tensor], Tensor],
    augment: Augment | Sequence[Augment | None] | None,
    steps: int,
    optimizer: torch.optim.Optimizer | Callable[[list[nn.Parameter]], torch.optim.Optimizer] | None = None,
    scheduler: Any = None,
    batch_size: int | None = None,
    views: int = 2,
    head: nn.Module | None = None,
    predictor: nn.Module | None = None,
    target_momentum: float | None = None,
    probes: Mapping[str, Probe] | None = None,
    probe_data: Tensor | np.ndarray | None = None,
    every: int | Iterable[int] | None = 10,
    track: Callable[[Iterable[int]], Iterable[int]] | None = None,
    guard: LossGuard | bool | None = None,
    callbacks: Sequence[Any] = (),
    checkpoint: str | os.PathLike | None = None,
    checkpoint_every: int | None = None,
    resume: str | os.PathLike | None = None,
    generator: torch.Generator | None = None,
    device: torch.device | str | None = None,
    dtype: torch.dtype | None = None,
    amp: bool | torch.dtype = False,
    meta: Mapping[str, Any] | None = None,
) -> FlowResult[nn.Module]:
    """Train ``model`` (and ``head``, ``predictor``) in place on ``objective`` of augmented views.

    Args:
        model: any ``nn.Module`` (the backbone): ``(V·B, ...) -> (V·B, d)``, or an ensemble
            ``(V·B, ...) -> (E, V·B, d)``.
        data: inputs ``(N, ...)`` (tensor or array; minibatches of ``batch_size`` from seeded
            epoch permutations, the last partial batch dropped), or a ``torch.utils.data.DataLoader``
            / iterable of batches (a tensor, or a tuple/list whose first item is the inputs, e.g.
            ``(x, y)``), cycled for as many epochs as needed.
        objective: ``objective(z1, z2) -> loss``: a scalar, or ``(E,)`` per member for an ensemble
            (every two-view objective of :mod:`ssldyn.objectives`).
        augment: ``augment(x, generator) -> view`` (e.g. :class:`ssldyn.data.augment.SimCLRAugment`),
            a one-argument transform ``augment(x) -> view`` (torchvision style, applied per sample;
            :func:`ssldyn.dynamics.views.per_batch` applies it to the batch), or a list of those, one
            per view (multi-crop); None = identity views.
        steps: optimizer updates.
        optimizer: a ``torch.optim.Optimizer`` over the parameters (it must hold every trainable
            parameter of ``model``, ``head`` and ``predictor``), or a factory
            ``params -> Optimizer`` (e.g. ``lambda p: torch.optim.SGD(p, lr=0.1)``);
            default Adam with lr 1e-3 (SimCLR on MNIST in ``variational`` Fig. 1).
        scheduler: a ``torch.optim.lr_scheduler`` of that optimizer, or a factory ``optimizer ->
            scheduler``; stepped after every update (``ReduceLROnPlateau`` with the mean loss).
        batch_size: B for tensor data (required there; a DataLoader sets its own).
        views: the number of views when ``augment`` is one augmentation (>= 2).
        head: optional projection head on the backbone output: the loss sees ``head(model(x))``,
            probes see ``model(x)`` (``variational`` Remark 4.3).
        predictor: optional predictor for SimSiam/BYOL-style objectives (see the module docstring).
        target_momentum: with a predictor, an EMA target network ``ξ ← m ξ + (1 − m) θ`` after
            every step (BYOL, Grill et al. 2020, ``m = 0.996``); None = the online network is the target. The
            target runs in train mode (a BatchNorm in it normalises by the batch) and takes the online network's
            buffers after each step.
        probes: ``name -> probe(z)`` on the probe-set embeddings: a float for a plain model, ``(E,)`` for an
            ensemble (anything else, e.g. a vector ``(d,)`` of one model, is a ``ValueError``).
        probe_data: the fixed probe set ``(n, ...)`` with the training inputs' shape; default the training tensor
            (required with probes when ``data`` is a DataLoader).
        every: the logged steps: an int ``k`` gives ``0, k, 2k, …`` and ``steps``; an iterable gives
            those steps (integers in ``0..steps``); None the first and the last (:func:`~ssldyn.dynamics.common.step_schedule`).
        track: wraps the step iterator (e.g. a progress bar).
        guard: the :class:`~ssldyn.dynamics.guards.LossGuard` (None: a default one, checked every
            step on the CPU; on an accelerator deferred: checked at the logged steps and every
            ``check_every = 64`` updates, one host sync each, none at the other steps; False: none).
        callbacks: objects with ``on_step(step, model, loss)``, ``on_log(step, model, row)``,
            ``on_end(model, trajectory)`` (any subset; :mod:`ssldyn.dynamics.engine`).
        checkpoint, checkpoint_every: write a checkpoint to this file after every
            ``checkpoint_every`` updates (atomically; the last one wins).
        resume: a checkpoint file to continue from (same arguments otherwise): the run goes on at
            the step after the checkpoint with the same batches, views and random state.
        generator: CPU generator of batches and views (default seed 0).
        device: where to train (model, head and predictor are moved there; batches are moved per
            step); default the model's device. CUDA without CUDA is a ``ValueError``.
        dtype: cast the modules and inputs to this floating dtype; default the model's dtype
            (inputs are cast to it).
        amp: mixed precision: the forward passes under ``torch.autocast``, the objective in float32,
            the weights and the optimizer in the model's dtype. ``True`` = bfloat16 (CPU and CUDA;
            no gradient scaling, no host sync per step); ``torch.float16`` = float16 with a gradient
            scaler on CUDA (older GPUs; the scaler's inf check reads one value per step).
        meta: stored in ``trajectory.meta`` (with ``steps``, ``logged``, ``amp``, ``views``).

    Returns:
        ``FlowResult(state=model, trajectory)``; the trajectory has ``loss`` and every probe per
        member at the logged steps.

    Raises:
        ValueError: a bad argument (an explicit logged step outside ``0..steps`` included), NaN/inf in tensor
            data, probe_data of another input shape than the data, a view, output or loss of the wrong shape (an
            augmentation that changes the input shape for a model that fails on it), a probe value that is neither
            a float nor ``(E,)``, an optimizer that misses trainable parameters, CUDA asked for but absent.
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
    every = check_schedule(every, steps, who="train_ssl")
    if not callable(objective):
        raise ValueError(f"train_ssl: objective must be a callable (z1, z2) -> loss, got {type(objective).__name__}")
    augments = _augments(augment, views)
    if checkpoint_every is not None:
        checkpoint_every = integer(checkpoint_every, "checkpoint_every", where="train_ssl")
    if (checkpoint is None) != (checkpoint_every is None):
        raise ValueError("train_ssl: give checkpoint (a file) and checkpoint_every (updates) together")
    modules = [m for m in (model, head, predictor) if m is not None]
    dev = resolve_device(device, module_device(model), who="train_ssl: ")
    for m in modules:
        m.to(device=dev, dtype=dtype)
    dt = dtype if dtype is not None else module_dtype(model)
    g = generator if generator is not None else torch.Generator().manual_seed(0)
    batches = _batches(data, batch_size, steps + 1, g)
    if probes and probe_data is None:
        if not isinstance(data, (Tensor, np.ndarray)):
            raise ValueError("train_ssl: probes need probe_data (a fixed tensor of inputs) when data is a DataLoader")
        probe_data = data
    probe_x = None if probe_data is None else _as_tensor("probe_data", probe_data)
    if probe_x is not None and isinstance(batches, _Sampler):
        _check_probe_shape(probe_x, batches.x)  # tensor data: before any work (a DataLoader's at its first batch)

    params = _trainable(modules)
    opt = _optimizer(optimizer, modules, params)
    sched = _scheduler(scheduler, opt)
    all_modules = nn.ModuleList(modules)
    online = nn.Sequential(model, head) if head is not None else nn.Sequential(model)
    target = _target_network(online) if target_momentum is not None else None
    amp_dtype = _amp_dtype(amp)
    scaler = torch.amp.GradScaler("cuda") if amp_dtype == torch.float16 and dev.type == "cuda" else None
    autocast = (lambda: torch.autocast(dev.type, dtype=amp_dtype)) if amp_dtype is not None else nullcontext
    logged = step_schedule(every, steps)
    info = {"steps": steps, "logged": sorted(logged), "amp": str(amp_dtype) if amp_dtype else None}
    traj = Trajectory(meta={**info, **({"views": len(augments)} if len(augments) != 2 else {}), **(meta or {})})
    members: list[int | None] = [None]
    last_loss: list[Tensor] = []

    def step(model: nn.Module, t: int) -> tuple[nn.Module, Tensor]:
        x = to_module(next(batches), dev, dt)  # (B, ...)
        B = x.shape[0]
        if t == start and probe_x is not None and not isinstance(batches, _Sampler):
            _check_probe_shape(probe_x, x)  # a DataLoader's first batch
        vs = draw_views(augments, x, generator=g)  # V views (B, ...) each, drawn in order from g
        with autocast():
            z, p = _forward_views(model, head, vs, B, predictor, x.shape)  # per view (E, B, d) or (B, d)
            tz = _target_views(target, vs, B) if target is not None else None
        losses = _loss(objective, z, p, tz)  # (E,) or ()
        members[0] = _check_loss(losses, z[0], members[0])
        last_loss[:] = [losses]
        return model, losses

    def observe(model: nn.Module) -> Tensor:
        assert probe_x is not None  # probes without probe_data were rejected above
        return drop_singleton_member(_features(model, probe_x, dtype=dt))  # (n, d) or (E, n, d)

    checked = member_checked_probes(probes, "train_ssl")
    for m in modules:
        m.train()
    start = 0
    state = _CheckpointState(model, head, predictor, target, opt, sched, scaler, g, batches, traj)
    if resume is not None:
        start = state.load(resume)
    hooks = list(callbacks or ())
    if checkpoint is not None and checkpoint_every is not None:
        hooks.insert(0, _Checkpointer(state, Path(checkpoint), int(checkpoint_every)))
    plateau = isinstance(sched, torch.optim.lr_scheduler.ReduceLROnPlateau)
    momentum = float(target_momentum) if target_momentum is not None else 0.0
    return run(
        model,
        step,
        steps=steps,
        every=every,
        probes=checked,
        observe=observe,
        track=track,
        guard=guard,
        callbacks=hooks,
        optimizer=opt,
        scheduler=_PlateauStep(sched, last_loss) if plateau else sched,
        scaler=scaler,
        after_update=(lambda: _ema_update(target, online, momentum)) if target is not None else None,
        modules=all_modules,
        trajectory=traj,
        start=start,
    )


def train_simclr(
    model: nn.Module,
    images: Tensor,
    augment: Augment,
    *,
    steps: int,
    batch_size: int = 256,
    temperature: float = 0.5,
    lr: float = 1e-3,
    weight_decay: float = 1e-6,
    optimizer: Literal["adam", "sgd"] = "adam",
    generator: torch.Generator | None = None,
    probes: Mapping[str, Probe] | None = None,
    probe_images: Tensor | None = None,
    every: int | Iterable[int] | None = 10,
    track: Callable[[Iterable[int]], Iterable[int]] | None = None,
    guard: LossGuard | bool | None = None,
    **hooks: Any,
) -> FlowResult[nn.Module]:
    """SimCLR (``variational`` eq. 1, Fig. 1; Chen et al. 2020): :func:`train_ssl` with the NT-Xent objective.

    ``train_ssl(model, images, objective=InfoNCE(temperature), augment=augment, ...)`` with Adam
    (``lr``, ``weight_decay``) or SGD with momentum 0.9 over every trainable parameter of ``model`` and of a
    ``head`` / ``predictor`` passed on, probes on the eval-mode backbone features of
    ``probe_images`` (default the first 512 images). Further keywords of :func:`train_ssl`
    (``head``, ``callbacks``, ``scheduler``, ``checkpoint``, ...) are passed on.

    Args:
        model: a :class:`~ssldyn.models.SimCLRNet` (E members) or a plain module ``(2B, ...) -> (2B, d)``.
        images: ``(N, C, H, W)`` in [0, 1], or any inputs ``(N, ...)`` the model and ``augment`` take (e.g.
            vectors ``(N, d)``, as :func:`train_ssl`).
        augment: ``augment(x, generator) -> view`` (e.g. :class:`ssldyn.data.augment.SimCLRAugment`).
    Returns:
        ``FlowResult(state=model, trajectory)`` with ``loss`` per member and the probes;
        ``trajectory.meta`` has ``temperature``, ``batch_size``, ``lr``.
    """
    from ssldyn.objectives import InfoNCE

    lr = check_lr(lr)
    if not isinstance(images, Tensor) or images.dim() < 2:
        got = tuple(images.shape) if isinstance(images, Tensor) else type(images).__name__
        raise ValueError(f"train_simclr: images must be a tensor (N, ...) with one input per row, e.g. (N, C, H, W) "
                         f"or (N, d), got {got}")  # fmt: skip
    if not 2 <= batch_size <= images.shape[0]:
        raise ValueError(f"batch_size={batch_size}: must be in [2, N={images.shape[0]}] (the number of images)")
    temperature = positive(temperature, "temperature")
    choice(optimizer, "optimizer", ("adam", "sgd"))
    weight_decay = nonnegative(weight_decay, "weight_decay", where="train_simclr")

    def opt(params: list[nn.Parameter]) -> torch.optim.Optimizer:  # over the model's, head's and predictor's
        # SGD with momentum 0.9; Adam has no momentum argument
        return make_optimizer(params, optimizer, lr, momentum=0.9, weight_decay=weight_decay)

    return train_ssl(
        model,
        images,
        objective=InfoNCE(temperature),
        augment=augment,
        steps=steps,
        optimizer=opt,
        batch_size=batch_size,
        probes=probes,
        probe_data=images[:512] if probe_images is None else probe_images,
        every=every,
        track=track,
        guard=guard,
        generator=generator,
        meta={"temperature": temperature, "batch_size": batch_size, "lr": lr},
        **hooks,
    )


def _features(model: nn.Module, x: Tensor, *, head: nn.Module | None = None, dtype=None) -> Tensor:
    """:func:`~ssldyn.dynamics.common.embed` of ``head ∘ model`` (``model`` alone without a head) on inputs
    moved to the model's device and cast to ``dtype`` (default the model's floating dtype)."""
    dev, dt = module_device(model), dtype if dtype is not None else module_dtype(model)
    net = nn.Sequential(model, head) if head is not None else model
    return embed(net, to_module(x, dev, dt))


# --------------------------------------------------------------------------- steps
def _augments(augment: Any, views: int) -> list:
    """One augmentation per view (library convention ``augment(x, generator)``)."""
    if isinstance(augment, (list, tuple)):
        if len(augment) < 2:
            raise ValueError(f"train_ssl: a list of augmentations needs one per view, at least 2; got {len(augment)}")
        return [as_augment(a) for a in augment]
    views = integer(views, "views", where="train_ssl", minimum=2)
    aug = as_augment(augment)
    return [aug] * views


def _forward_views(
    model: nn.Module,
    head: nn.Module | None,
    vs: list[Tensor],
    B: int,
    predictor: nn.Module | None,
    x_shape: tuple[int, ...] | torch.Size | None = None,
) -> tuple[list[Tensor], list[Tensor] | None]:
    """Embeddings (and predictions) per view, ``(E, B, d)`` or ``(B, d)``: consecutive views of one
    shape share a forward pass (``(k·B, ...)`` stacked, view ``i`` = rows ``i·B .. (i+1)·B``).

    A model that fails (``RuntimeError``) on views whose shape differs from the batch's ``x_shape`` (or from each
    other) is one ``ValueError`` naming the augmentations and the shapes; on views of the batch's own shape its
    error is raised as it is (the model does not take the data)."""
    out: list[Tensor] = []
    preds: list[Tensor] = []
    for group in _shape_groups(vs):
        v = group[0] if len(group) == 1 else torch.cat(group)  # (k·B, ...)
        try:
            h = model(v)
        except RuntimeError as e:
            same = all(gv.shape == vs[0].shape for gv in vs) and len(vs) == len(group)
            changed = [i for i, gv in enumerate(vs) if x_shape is not None and gv.shape != x_shape]
            if (same and not changed) or isinstance(e, torch.OutOfMemoryError):
                raise
            shapes = sorted({tuple(gv.shape) for gv in vs})
            by = (f"augment {', '.join(map(str, changed))} changed the batch's shape {tuple(x_shape or ())} to "
                  f"{', '.join(str(tuple(vs[i].shape)) for i in changed)}; " if changed else "")  # fmt: skip
            raise ValueError(
                f"train_ssl: the model failed on views of shape {tuple(group[0].shape)} (the views have shapes "
                f"{shapes}); {by}an augmentation that changes the input shape needs a model that accepts it "
                f"(e.g. global pooling for multi-crop) — the model said: {e}"
            ) from e
        _check_output("model", h, B, _declared_members(model), k=len(group))
        z = h
        if head is not None:
            z = head(h)
            _check_output("head", z, B, k=len(group))
        out.extend(z.split(B, dim=-2))
        if predictor is not None:
            pz = predictor(z)
            _check_output("predictor", pz, B, k=len(group))
            preds.extend(pz.split(B, dim=-2))
    return out, (preds if predictor is not None else None)


def _shape_groups(vs: list[Tensor]) -> list[list[Tensor]]:
    groups: list[list[Tensor]] = []
    for v in vs:
        if groups and groups[-1][0].shape == v.shape:
            groups[-1].append(v)
        else:
            groups.append([v])
    return groups


def _check_output(what: str, z: Any, B: int, members: int | None = None, k: int = 2) -> None:
    """``(k·B, d)`` (plain) or ``(E, k·B, d)`` (ensemble); anything else is an error.

    ``(kB, kB, d)`` is ambiguous (E = kB members, or a plain model with an extra axis) and only
    accepted from a model that declares ``ensemble = kB`` members.
    """
    n = k * B
    ok = isinstance(z, Tensor) and (
        (z.dim() == 2 and z.shape[0] == n) or (z.dim() == 3 and z.shape[1] == n and (z.shape[0] != n or members == n))
    )
    if not ok:
        shape = tuple(z.shape) if isinstance(z, Tensor) else type(z).__name__
        raise ValueError(
            f"train_ssl: the {what} output has shape {shape} for the {k}B = {n} inputs of one step ({k} views "
            f"of B = {B}); allowed: ({n}, d) for a plain model or (E, {n}, d) for an ensemble of E members "
            "(one embedding row per input: flatten or pool spatial outputs)"
        )


def _declared_members(model: nn.Module) -> int | None:
    """The ensemble size a library model declares (``ensemble`` or ``E``), if any."""
    for name in ("ensemble", "E"):
        value = getattr(model, name, None)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def _f32(t: Tensor) -> Tensor:
    return t.float() if t.dtype in (torch.float16, torch.bfloat16) else t


def _loss(objective, z: list[Tensor], p: list[Tensor] | None, tz: list[Tensor] | None) -> Tensor:
    """``objective(z_i, z_j)`` averaged over the view pairs; with a predictor the symmetrised
    ``½[objective(p_i, t_j) + objective(p_j, t_i)]`` (SimSiam eq. 3 / BYOL)."""
    z = [_f32(v) for v in z]  # (E, B, d) or (B, d) each
    if p is None:
        return pairwise_mean(lambda i, j: objective(z[i], z[j]), len(z))
    p = [_f32(v) for v in p]
    t = z if tz is None else [_f32(v) for v in tz]
    return pairwise_mean(lambda i, j: 0.5 * (objective(p[i], t[j]) + objective(p[j], t[i])), len(z))


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


def _target_views(target: nn.Module, vs: list[Tensor], B: int) -> list[Tensor]:
    out: list[Tensor] = []
    with torch.no_grad():
        for group in _shape_groups(vs):
            tz = target(group[0] if len(group) == 1 else torch.cat(group))
            _check_output("target network", tz, B, k=len(group))
            out.extend(tz.split(B, dim=-2))
    return out


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


# --------------------------------------------------------------------------- scheduler
class _PlateauStep:
    """``ReduceLROnPlateau.step(metric)`` with the mean loss of the last step (one host read per step)."""

    def __init__(self, sched: Any, last: list[Tensor]) -> None:
        self.sched, self.last = sched, last

    def step(self) -> None:
        self.sched.step(float(self.last[0].detach().float().mean()))


# --------------------------------------------------------------------------- checkpoints
class _CheckpointState:
    """Everything a run needs to continue exactly: modules, optimizer, scheduler, scaler, random
    state (the trainer's generator, torch's global generators: dropout), the batch sampler and the
    trajectory so far."""

    def __init__(self, model, head, predictor, target, opt, sched, scaler, g, batches, traj) -> None:
        self.mods = {"model": model, "head": head, "predictor": predictor, "target": target}
        self.opt, self.sched, self.scaler, self.g, self.batches, self.traj = opt, sched, scaler, g, batches, traj

    def save(self, path: Path, next_step: int) -> None:
        state = {
            "step": next_step,
            "modules": {k: m.state_dict() for k, m in self.mods.items() if m is not None},
            "optimizer": self.opt.state_dict(),
            "scheduler": self.sched.state_dict() if self.sched is not None else None,
            "scaler": self.scaler.state_dict() if self.scaler is not None else None,
            "generator": self.g.get_state(),
            "torch_rng": torch.get_rng_state(),
            "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
            "batches": self.batches.state_dict(),
            "trajectory": self.traj.state_dict(),
        }
        path.parent.mkdir(parents=True, exist_ok=True)
        buf = io.BytesIO()
        torch.save(state, buf)
        atomic_write_bytes(path, buf.getvalue())  # a crash mid-write keeps the previous checkpoint

    def load(self, path: str | os.PathLike) -> int:
        p = Path(path)
        if not p.is_file():
            raise ValueError(f"train_ssl: resume={str(path)!r}: no such checkpoint file")
        state = torch.load(p, weights_only=False, map_location="cpu")
        for k, m in self.mods.items():
            if (m is None) != (k not in state["modules"]):
                raise ValueError(
                    f"train_ssl: the checkpoint {'has' if m is None else 'lacks'} a {k}; resume with the same arguments"
                )
            if m is not None:
                m.load_state_dict(state["modules"][k])
        self.opt.load_state_dict(state["optimizer"])
        if (self.sched is None) != (state["scheduler"] is None):
            raise ValueError("train_ssl: the checkpoint was written with a different scheduler setting")
        if self.sched is not None:
            self.sched.load_state_dict(state["scheduler"])
        if self.scaler is not None and state["scaler"] is not None:
            self.scaler.load_state_dict(state["scaler"])
        self.g.set_state(state["generator"])
        torch.set_rng_state(state["torch_rng"])
        if state["cuda_rng"] is not None and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state["cuda_rng"])
        self.batches.load_state_dict(state["batches"])
        self.traj.load_state_dict(state["trajectory"])
        return int(state["step"])


class _Checkpointer:
    """Callback: a checkpoint after every ``every`` updates (``on_step``)."""

    def __init__(self, state: _CheckpointState, path: Path, every: int) -> None:
        self.state, self.path, self.every = state, path, every

    def on_step(self, step: int, model: nn.Module, loss: Tensor) -> None:
        if (step + 1) % self.every == 0:
            self.state.save(self.path, step + 1)


# --------------------------------------------------------------------------- setup
def _check_settings(steps, batch_size, data, target_momentum, predictor) -> None:
    check_steps(steps)
    tensor_data = isinstance(data, (Tensor, np.ndarray))
    if tensor_data:
        if batch_size is None:
            raise ValueError("train_ssl: tensor data needs batch_size (an integer >= 2, at most N); a DataLoader sets "
                             "its own")  # fmt: skip
        integer(batch_size, "batch_size", where="train_ssl", minimum=2)
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


def _check_probe_shape(probe_x: Tensor, x: Tensor) -> None:
    """The probes embed ``probe_data (n, ...)`` with the model: its inputs must have the training inputs' shape."""
    if probe_x.shape[1:] != x.shape[1:]:
        raise ValueError(
            f"train_ssl: probe_data has shape {tuple(probe_x.shape)}, inputs of shape {tuple(probe_x.shape[1:])}, "
            f"but the training inputs have shape {tuple(x.shape[1:])} (data {tuple(x.shape)}); the probes embed "
            f"probe_data with the model, so it must be (n, {', '.join(map(str, x.shape[1:]))})"
        )


class _Sampler:
    """Minibatches of a tensor: the index batches of :class:`~ssldyn.dynamics.common.EpochBatches` (the
    draws of :func:`~ssldyn.dynamics.common.minibatches`), with its state to checkpoint."""

    def __init__(self, x: Tensor, B: int, g: torch.Generator) -> None:
        self.x = x
        self.indices = EpochBatches(x.shape[0], B, generator=g)

    def __iter__(self) -> Iterator[Tensor]:
        return self

    def __next__(self) -> Tensor:
        idx = next(self.indices)  # (B,)
        return self.x[idx.to(self.x.device)]

    def state_dict(self) -> dict:
        return self.indices.state_dict()

    def load_state_dict(self, state: Mapping) -> None:
        self.indices.load_state_dict(state)


class _Cycle:
    """A DataLoader cycled for as many epochs as needed; its state is the number of batches drawn
    (a resumed run skips them: exact for a loader that replays its order, e.g. a seeded one)."""

    def __init__(self, loader: Iterable) -> None:
        self.loader, self.drawn, self._it = loader, 0, _cycle(loader)

    def __iter__(self) -> Iterator[Tensor]:
        return self

    def __next__(self) -> Tensor:
        self.drawn += 1
        return next(self._it)

    def state_dict(self) -> dict:
        return {"drawn": self.drawn}

    def load_state_dict(self, state: Mapping) -> None:
        self._it, self.drawn = _cycle(self.loader), 0
        for _ in range(int(state["drawn"])):
            next(self)


def _batches(data: Any, batch_size: int | None, n_steps: int, g: torch.Generator) -> _Sampler | _Cycle:
    if isinstance(data, (Tensor, np.ndarray)):
        x = _as_tensor("data", data)
        B = int(batch_size) if batch_size is not None else 0  # checked >= 2 by _check_settings
        if B > x.shape[0]:
            raise ValueError(f"train_ssl: batch_size={batch_size} exceeds the number of inputs N={x.shape[0]}")
        return _Sampler(x, B, g)
    if not isinstance(data, Iterable):
        raise ValueError(
            f"train_ssl: data must be a tensor/array (N, ...) or a DataLoader/iterable of batches, got {type(data).__name__}"
        )
    return _Cycle(data)


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


def _scheduler(scheduler: Any, opt: torch.optim.Optimizer) -> Any:
    if scheduler is None:
        return None
    sched = scheduler
    if not hasattr(scheduler, "step") and callable(scheduler):
        sched = scheduler(opt)
    if not hasattr(sched, "step") or not hasattr(sched, "state_dict"):
        raise ValueError(
            f"train_ssl: scheduler must be a torch.optim.lr_scheduler (or a factory optimizer -> scheduler), got {scheduler!r}"
        )
    if getattr(sched, "optimizer", opt) is not opt:
        raise ValueError(
            "train_ssl: the scheduler is bound to another optimizer; pass a factory, e.g. "
            "scheduler=lambda opt: torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=steps)"
        )
    return sched


def _amp_dtype(amp: Any) -> torch.dtype | None:
    if amp is False or amp is None:
        return None
    if amp is True:
        return torch.bfloat16
    if amp in (torch.bfloat16, torch.float16):
        return amp
    raise ValueError(f"train_ssl: amp must be False, True (bfloat16), torch.bfloat16 or torch.float16, got {amp!r}")
