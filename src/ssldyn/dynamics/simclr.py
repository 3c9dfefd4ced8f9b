"""SimCLR training of image encoders (``variational`` eq. (1), Fig. 1; Chen et al. 2020).

Each step draws a minibatch of ``B`` images (a fresh seeded permutation per epoch), makes
two augmented views, embeds both with the projection ``z = g(f(x))`` of every ensemble
member, and takes an optimizer step on the NT-Xent loss
``L = info_nce(z1, z2, τ)`` (:func:`ssldyn.objectives.info_nce`, ``negatives="both"``: the
2B embeddings are all anchors, ``variational`` eq. (1)–(2) with cosine similarity).
Members share the data and the views and differ only in their initialisation; their losses
are summed, so Adam/SGD train them as independent runs.

The one dynamics contract (:mod:`ssldyn.dynamics`): returns ``FlowResult(state=model,
trajectory)``. At the logged steps ``k = 0..steps`` (the state after ``k`` updates) the
trajectory holds the NT-Xent ``loss`` per member on the batch of update ``k + 1`` (at
``k = steps`` one more batch is drawn and evaluated, without an update and without changing the
model's BatchNorm statistics) and the probes of the eval-mode
backbone features of ``probe_images`` (:func:`ssldyn.dynamics.embed`; ``(n, d_h)``, or
``(E, n, d_h)`` with ``E > 1`` members).

The model may be a library ensemble (:class:`~ssldyn.models.SimCLRNet`: ``(2B, ...) ->
(E, 2B, d)``) or any plain ``nn.Module`` returning ``(2B, d)``; any other output shape is a
``ValueError`` naming the expected shapes.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import Tensor, nn

from ssldyn.dynamics.common import (
    Augment,
    Probes,
    Track,
    check_lr,
    check_steps,
    drop_singleton_member,
    embed,
    iterate,
    log_probes,
    log_value,
    minibatches,
    preserved_buffers,
    step_schedule,
)
from ssldyn.dynamics.guards import LossGuard, check_finite, resolve_guard
from ssldyn.dynamics.trajectory import FlowResult, Trajectory
from ssldyn.objectives import info_nce

__all__ = ["minibatches", "train_simclr", "embed", "split_views"]


def split_views(z: Tensor, batch_size: int, ensemble: int | None = None) -> tuple[Tensor, Tensor]:
    """The two views' embeddings ``(E, B, d)`` each from the model output of the stacked views.

    ``z`` is ``(2B, d)`` (a plain model: one member) or ``(E, 2B, d)`` (an ensemble of
    ``ensemble`` members when known); view 1 is the first ``B`` rows, view 2 the last ``B``.
    """
    two_b = 2 * batch_size
    if z.dim() == 2 and z.shape[0] == two_b:
        z = z.unsqueeze(0)  # (1, 2B, d)
    if z.dim() != 3 or z.shape[1] != two_b or (ensemble is not None and z.shape[0] != ensemble):
        e = "E" if ensemble is None else str(ensemble)
        raise ValueError(
            f"train_simclr: the model must map the {two_b} stacked views (2 × batch {batch_size}) to "
            f"({two_b}, d) or ({e}, {two_b}, d) embeddings, got shape {tuple(z.shape)}"
        )
    return z[:, :batch_size], z[:, batch_size:]  # (E, B, d) each


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
    optimizer: str = "adam",
    generator: torch.Generator | None = None,
    probes: Probes | None = None,
    probe_images: Tensor | None = None,
    every: int | Iterable[int] | None = 10,
    track: Track | None = None,
    guard: LossGuard | bool | None = None,
) -> FlowResult[nn.Module]:
    """Train ``model`` in place with NT-Xent on two augmented views.

    Args:
        model: a :class:`~ssldyn.models.SimCLRNet` (E members) or a plain module ``(2B, ...) -> (2B, d)``,
            on the images' device.
        images: ``(N, C, H, W)`` in [0, 1].
        augment: ``augment(x, generator) -> view`` (e.g. :class:`ssldyn.data.augment.SimCLRAugment`).
        steps, batch_size, temperature, lr, weight_decay: the optimisation (``optimizer`` Adam,
            or SGD with momentum 0.9).
        generator: CPU generator seeding batches and augmentations (None: seed 0).
        probes: ``name -> probe(h)`` on the eval-mode features ``h`` of ``probe_images`` (default:
            the first 512 images); a float or ``(E,)``.
        every: logged steps (int interval, explicit steps, None: first and last).
        track: progress wrapper of the step iterator; guard: the loss guard (None: default; False: none).
    Returns:
        ``FlowResult(state=model, trajectory)`` with ``loss`` per member and the probes.
    Raises:
        ValueError: bad arguments, NaN/inf in the images, or a model output of the wrong shape.
        NonFiniteLossError: the loss of a member became NaN/inf.
    """
    steps, lr = check_steps(steps), check_lr(lr)
    if not isinstance(images, Tensor) or images.dim() != 4:
        raise ValueError(f"images must be (N, C, H, W), got {tuple(getattr(images, 'shape', ()))}")
    if not 2 <= batch_size <= images.shape[0]:
        raise ValueError(f"batch_size={batch_size}: must be in [2, N={images.shape[0]}] (the number of images)")
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    check_finite("images", images)
    guard = resolve_guard(guard)
    g = generator if generator is not None else torch.Generator().manual_seed(0)
    if optimizer == "adam":
        opt = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    elif optimizer == "sgd":
        opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, weight_decay=weight_decay)
    else:
        raise ValueError(f"optimizer {optimizer!r}: allowed values are adam, sgd")
    if probes and probe_images is None:
        probe_images = images[:512]
    ensemble = getattr(model, "ensemble", None)
    traj = Trajectory(meta={"temperature": temperature, "batch_size": batch_size, "lr": lr})
    logs = step_schedule(every, steps)
    batches = minibatches(images.shape[0], batch_size, steps + 1, g)
    model.train()
    for t in iterate(steps, track):
        x = images[next(batches).to(images.device)]  # (B, C, H, W)
        v = torch.cat([augment(x, g), augment(x, g)])  # (2B, C, H, W): view 1 then view 2
        if t < steps:
            z1, z2 = split_views(model(v), batch_size, ensemble)  # (E, B, d) each
            losses = info_nce(z1, z2, temperature)  # (E,)
        else:  # the final state: evaluated, not trained on (BatchNorm statistics left as they are)
            with torch.no_grad(), preserved_buffers(model):
                losses = info_nce(*split_views(model(v), batch_size, ensemble), temperature)
        guard.update(t, losses)  # non-finite: the run fails, naming step, member and last value
        if t in logs:
            guard.check()
            log_value(traj, t, "loss", losses.detach())
            if probes:
                log_probes(traj, t, probes, drop_singleton_member(embed(model, probe_images)))
        if t == steps:
            break
        opt.zero_grad(set_to_none=True)
        losses.sum().backward()
        opt.step()
    guard.check()
    return FlowResult(model, traj)
