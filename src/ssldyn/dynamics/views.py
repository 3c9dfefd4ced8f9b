"""Augmented views for the SSL trainer: the accepted augmentation conventions and multi-view losses.

Conventions (all seeded by the trainer's CPU ``generator``, so a run is reproducible and a resumed
run sees the same views):

* ``augment(x, generator) -> view`` — the library's convention (:mod:`ssldyn.data.augment`): one
  random view of the batch ``x (B, ...)``, random parameters drawn from ``generator``;
* a one-argument callable ``augment(x) -> view`` (the torchvision convention) — applied **per
  sample** by default (``view_i = augment(x_i)``, each sample with its own random parameters, as a
  torchvision transform inside a ``Dataset``); :func:`per_batch` applies it once to the whole batch.
  Its randomness comes from torch's global generator, which is seeded from ``generator`` for the
  call and restored afterwards (:func:`torch.random.fork_rng`).

Several views (multi-crop, as in SwAV / DINO): a list of augmentations gives one view each; the
two-view objective is averaged over the pairs ``i < j`` (:func:`pairwise_mean`), which is the
objective itself for two views.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor

from ssldyn.dynamics.common import Augment

__all__ = ["per_sample", "per_batch", "as_augment", "draw_views", "pairwise_mean"]


def _positional_capacity(fn: Callable) -> int:
    """How many positional arguments ``fn`` accepts (a large number for ``*args``)."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return 2  # builtins without a signature: assume the library convention
    n = 0
    for p in sig.parameters.values():
        if p.kind == p.VAR_POSITIONAL:
            return 99
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            n += 1
    return n


def _seeded(fn: Callable[[Tensor], Tensor], x: Tensor, generator: torch.Generator | None) -> Tensor:
    if generator is None:
        return fn(x)
    seed = int(torch.randint(0, 2**62, (1,), generator=generator))
    devices = [x.device.index or 0] if x.device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        return fn(x)


def per_sample(fn: Callable[[Tensor], Tensor]) -> Augment:
    """A one-argument transform applied to every sample ``x_i (...)`` of ``x (B, ...)`` (torchvision style)."""

    def augment(x: Tensor, generator: torch.Generator | None = None) -> Tensor:
        return _seeded(lambda xb: torch.stack([fn(xi) for xi in xb]), x, generator)

    augment.__name__ = f"per_sample({getattr(fn, '__name__', type(fn).__name__)})"
    return augment


def per_batch(fn: Callable[[Tensor], Tensor]) -> Augment:
    """A one-argument transform applied once to the whole batch ``x (B, ...)``."""

    def augment(x: Tensor, generator: torch.Generator | None = None) -> Tensor:
        return _seeded(fn, x, generator)

    augment.__name__ = f"per_batch({getattr(fn, '__name__', type(fn).__name__)})"
    return augment


def as_augment(augment: Any, *, who: str = "train_ssl") -> Augment | None:
    """``augment`` in the library convention: None stays None (identity views), a callable that takes
    two positional arguments is used as ``augment(x, generator)``, a one-argument callable is
    applied per sample (:func:`per_sample`). Anything else is a ``ValueError``."""
    if augment is None:
        return None
    if not callable(augment):
        raise ValueError(
            f"{who}: augment must be None, a callable augment(x, generator) -> view, a one-argument transform "
            f"augment(x) -> view (torchvision style, applied per sample), or a list of those; got {augment!r}"
        )
    fn: Any = augment
    if _positional_capacity(fn) >= 2:
        return fn
    return per_sample(fn)


def draw_views(
    augments: Sequence[Augment | None], x: Tensor, *, generator: torch.Generator, who: str = "train_ssl"
) -> list[Tensor]:
    """One view of ``x (B, ...)`` per augmentation, drawn in order; each checked to hold ``B`` inputs
    with the input's number of axes (a crop may change the spatial size)."""
    views = []
    for i, aug in enumerate(augments):
        v = x if aug is None else aug(x, generator)
        if not isinstance(v, Tensor) or v.dim() != x.dim() or v.shape[0] != x.shape[0]:
            shape = tuple(v.shape) if isinstance(v, Tensor) else type(v).__name__
            raise ValueError(
                f"{who}: augment {i} must return a tensor with one view per input and the input's axes, "
                f"shape ({x.shape[0]}, ...) with {x.dim()} axes like the batch {tuple(x.shape)}; got {shape}"
            )
        views.append(v)
    return views


def pairwise_mean(loss: Callable[[int, int], Tensor], n_views: int) -> Tensor:
    """``mean_{i<j} loss(i, j)`` over the pairs of ``n_views`` views (``loss(0, 1)`` for two views)."""
    if n_views == 2:
        return loss(0, 1)
    pairs = [(i, j) for i in range(n_views) for j in range(i + 1, n_views)]
    total = loss(*pairs[0])
    for i, j in pairs[1:]:
        total = total + loss(i, j)
    return total / len(pairs)
