"""SimCLR training of image encoders (``variational`` eq. (1), Fig. 1; Chen et al. 2020).

Each step draws a minibatch of ``B`` images (a fresh seeded permutation per epoch), makes
two augmented views, embeds both with the projection ``z = g(f(x))`` of every ensemble
member, and takes an optimizer step on the NT-Xent loss
``L = info_nce(z1, z2, τ)`` (:func:`ssldyn.objectives.info_nce`, ``negatives="both"``: the
2B embeddings are all anchors, ``variational`` eq. (1)–(2) with cosine similarity).
Members share the data and the views and differ only in their initialisation; their losses
are summed, so Adam/SGD train them as independent runs.

The trajectory records the loss per member every ``log_every`` steps (and whatever the
optional ``probe(step, model)`` callback logs).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

import torch

from ssldyn.dynamics.guards import StepGuard, check_finite
from ssldyn.dynamics.trajectory import Trajectory
from ssldyn.models.encoders import SimCLRNet
from ssldyn.objectives import info_nce

__all__ = ["minibatches", "train_simclr", "embed"]


def minibatches(n: int, batch_size: int, steps: int, generator: torch.Generator) -> Iterator[torch.Tensor]:
    """``steps`` index batches of size ``batch_size``: epochs of seeded permutations, last partial batch dropped."""
    if batch_size > n:
        raise ValueError(f"batch_size={batch_size} exceeds the number of images n={n}")
    done = 0
    while done < steps:
        perm = torch.randperm(n, generator=generator)
        for i in range(n // batch_size):
            if done >= steps:
                return
            yield perm[i * batch_size : (i + 1) * batch_size]
            done += 1


def train_simclr(
    model: SimCLRNet,
    images: torch.Tensor,
    augment: Callable,
    steps: int,
    batch_size: int = 256,
    temperature: float = 0.5,
    lr: float = 1e-3,
    weight_decay: float = 1e-6,
    optimizer: str = "adam",
    generator: torch.Generator | None = None,
    log_every: int = 10,
    probe: Callable[[int, SimCLRNet, Trajectory], None] | None = None,
    track: Callable[[Iterable, int, str], Iterable] | None = None,
) -> Trajectory:
    """Train ``model`` in place with NT-Xent on two augmented views; returns the :class:`Trajectory`.

    Args:
        model: a :class:`SimCLRNet` (E members), on the images' device.
        images: ``(N, C, H, W)`` in [0, 1].
        augment: ``augment(x, generator) -> views`` (e.g. :class:`ssldyn.data.augment.SimCLRAugment`).
        steps, batch_size, temperature, lr, weight_decay: the optimisation (Adam or SGD with momentum 0.9).
        generator: CPU generator seeding batches and augmentations.
        probe: optional ``probe(step, model, traj)`` called at step 0, every ``log_every`` steps and at the end.
        track: optional progress wrapper ``track(iterable, total, description)``.
    """
    if images.dim() != 4:
        raise ValueError(f"images must be (N, C, H, W), got {tuple(images.shape)}")
    if steps < 1 or batch_size < 2:
        raise ValueError(f"steps={steps} must be >= 1 and batch_size={batch_size} >= 2")
    check_finite("images", images)
    guard = StepGuard(images.device)  # per step on CPU; in blocks on a GPU (no sync per step)
    g = generator if generator is not None else torch.Generator().manual_seed(0)
    if optimizer == "adam":
        opt = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    elif optimizer == "sgd":
        opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, weight_decay=weight_decay)
    else:
        raise ValueError(f"optimizer {optimizer!r}: allowed values are adam, sgd")
    traj = Trajectory(meta={"temperature": temperature, "batch_size": batch_size, "lr": lr})
    it: Iterable = enumerate(minibatches(images.shape[0], batch_size, steps, g))
    if track is not None:
        it = track(it, steps, "SimCLR")
    model.train()
    for t, idx in it:
        x = images[idx.to(images.device)]  # (B, C, H, W)
        v = torch.cat([augment(x, g), augment(x, g)])  # (2B, C, H, W): view 1 then view 2
        z = model(v)  # (E, 2B, d)
        z1, z2 = z[:, :batch_size], z[:, batch_size:]  # (E, B, d) each
        losses = info_nce(z1, z2, temperature)  # (E,)
        guard(t, losses, flush=t % log_every == 0 or t == steps - 1)  # non-finite: run fails, step + last value
        opt.zero_grad(set_to_none=True)
        losses.sum().backward()
        opt.step()
        if t % log_every == 0 or t == steps - 1:
            traj.log_members(t, "loss", losses.detach())
            if probe is not None:
                probe(t, model, traj)
                model.train()
    guard.flush()
    return traj


@torch.no_grad()
def embed(model: SimCLRNet, images: torch.Tensor, batch_size: int = 1024, projection: bool = False) -> torch.Tensor:
    """Eval-mode embeddings of ``(N, C, H, W)`` images: backbone features ``(E, N, d_h)`` (head discarded,
    ``variational`` Remark 4.3), or the projections ``(E, N, d_z)`` with ``projection=True``."""
    was = model.training
    model.eval()
    fn = model if projection else model.features
    out = torch.cat([fn(images[i : i + batch_size]) for i in range(0, images.shape[0], batch_size)], dim=1)
    model.train(was)
    return out
