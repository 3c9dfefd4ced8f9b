"""Pieces of the one dynamics contract shared by every trainer and flow (see :mod:`ssldyn.dynamics`).

* :func:`step_schedule` — the steps ``every`` selects: ``0, every, 2·every, …`` and the last.
* :func:`log_value` / :func:`per_member` — the one probe signature ``probe(observable) -> float | (E,)``.
* :func:`embed` — eval-mode embeddings of a model in batches (the one ``embed``); :func:`eval_mode`.
* :func:`minibatches` — seeded epochs of index batches (:class:`EpochBatches`, with a state to checkpoint).
* :func:`check_steps`, :func:`check_lr` — the argument checks every flow makes; :func:`check_schedule` — explicit
  logged steps within ``0..steps``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from ssldyn.checks import integer, positive
from ssldyn.dynamics.trajectory import Trajectory

__all__ = [
    "Probe",
    "Probes",
    "Track",
    "Augment",
    "step_schedule",
    "log_value",
    "check_probe_value",
    "member_checked_probes",
    "per_member",
    "drop_singleton_member",
    "module_device",
    "module_dtype",
    "to_module",
    "eval_mode",
    "embed",
    "EpochBatches",
    "minibatches",
    "check_steps",
    "check_schedule",
    "check_lr",
    "check_embedding_loss",
]

Probe = Callable[[Any], "float | Tensor"]
"""``probe(observable) -> float | (E,)``: a float (logged as member 0) or one value per member."""
Probes = Mapping[str, Probe]
Track = Callable[[Iterable[int]], Iterable[int]]
"""``track(steps) -> steps``: wraps the step iterator (e.g. a progress bar)."""
Augment = Callable[[Tensor, "torch.Generator | None"], Tensor]
"""``augment(x, generator) -> x_view``: one random view of a batch, drawn with ``generator``."""


def step_schedule(every: int | Iterable[int] | None, steps: int) -> set[int]:
    """The logged steps of a flow with ``steps`` steps.

    ``every`` an int ``k >= 1``: ``{0, k, 2k, …} ∪ {steps}``; an iterable: those steps (within
    ``[0, steps]``) and nothing else; ``None``: ``{0, steps}`` (first and last).
    """
    if every is None:
        return {0, int(steps)}
    if isinstance(every, (int, np.integer)) and not isinstance(every, bool):
        if every < 1:
            raise ValueError(f"every must be >= 1 (an interval of steps), got {every}")
        return set(range(0, steps + 1, int(every))) | {int(steps)}
    if isinstance(every, bool) or not isinstance(every, Iterable):
        raise ValueError(f"every: expected an int >= 1, an iterable of steps or None, got {every!r}")
    return {int(s) for s in every if 0 <= int(s) <= steps}


def check_schedule(
    every: int | Iterable[int] | None, steps: int, name: str = "every", *, who: str = ""
) -> int | list[int] | None:
    """``every`` for :func:`step_schedule`, with explicit steps checked: each one an integer in ``0..steps`` (both
    ends included: ``steps`` is the state after the last update). A step outside that range would never be
    logged, silently (:func:`step_schedule` keeps only the steps in range); here it is one ``ValueError`` naming
    ``who``, ``name`` and the steps. An int interval or None is returned as it is (checked by
    :func:`step_schedule`); an iterable as a list of its steps (a generator is read once, here)."""
    if every is None or isinstance(every, (bool, int, np.integer)) or not isinstance(every, Iterable):
        return every  # type: ignore[return-value]  # an interval, None, or an error of step_schedule
    items = list(every)
    bad = [s for s in items if isinstance(s, bool) or not _integral(s) or not 0 <= int(s) <= steps]
    if bad:
        shown = ", ".join(map(repr, bad[:5])) + (", …" if len(bad) > 5 else "")
        raise ValueError(f"{who + ': ' if who else ''}{name}: the steps {shown} are not integers in 0..steps={steps} "
                         f"(the record at t is the state after t updates, so a step beyond steps={steps} would never "
                         f"be logged); allowed: an int interval >= 1, explicit steps in 0..{steps}, or None")  # fmt: skip
    return [int(s) for s in items]


def _integral(s: Any) -> bool:
    try:
        return int(s) == s
    except (TypeError, ValueError, OverflowError):
        return False


def log_value(traj: Trajectory, step: int, name: str, value: Any) -> None:
    """Log a probe's value: a scalar as member 0, a vector ``(E,)`` as one value per member."""
    if isinstance(value, Mapping):
        raise ValueError(
            f"probe {name!r} returned a dict (keys {sorted(map(str, value))[:6]}); a probe returns a float or one "
            "value per member (E,): make one probe per key, e.g. "
            "{f'{name}_{k}': (lambda z, k=k: monitor(z)[k]) for k in keys} (a Monitor's .probes() does this)"
        )
    if isinstance(value, Tensor):
        value = value.detach()
        if value.numel() == 1:
            traj.log_members(step, name, value.reshape(1))  # member 0 (no keyword: any probe name works)
            return
        if value.dim() != 1:
            raise ValueError(f"probe {name!r}: expected a float or a per-member (E,) tensor, got {tuple(value.shape)}")
        traj.log_members(step, name, value)
        return
    arr = np.asarray(value, dtype=np.float64)
    if arr.size == 1:
        traj.log_members(step, name, arr.reshape(1))
    elif arr.ndim == 1:
        traj.log_members(step, name, arr)
    else:
        raise ValueError(f"probe {name!r}: expected a float or a per-member (E,) value, got shape {arr.shape}")


def check_probe_value(value: Any, name: str, members: int, *, who: str) -> Any:
    """A probe's value for a run of ``members`` models (``E``; 1 for a plain model): a float (one number) when
    ``E = 1``, one value per member ``(E,)`` when ``E > 1``. Anything else — e.g. a vector ``(d,)`` from a single
    model, which :func:`log_value` would store as ``d`` members — is one ``ValueError`` naming ``who``, the probe,
    the shape it returned and what is allowed. A mapping is passed on (:func:`log_value` says what to do)."""
    if isinstance(value, Mapping):
        return value
    shape = tuple(value.shape) if isinstance(value, Tensor) else np.shape(value)
    n = int(np.prod(shape))
    if n != members or (members > 1 and len(shape) != 1):
        allowed = "a float (one model: E = 1)" if members == 1 else f"one value per member, shape ({members},)"
        run = "a single model" if members == 1 else f"an ensemble of {members} members"
        raise ValueError(f"{who}: probe {name!r} returned shape {shape} ({n} value(s)) for {run}; allowed: {allowed} "
                         "(a vector would be logged as ensemble members: make one probe per coordinate; wrap an "
                         "(n, d) probe in ssldyn.dynamics.per_member)")  # fmt: skip
    return value


def member_checked_probes(probes: Mapping[str, Probe] | None, who: str) -> dict[str, Probe]:
    """The probes of a flow whose observable is embeddings ``(n, d)`` (one model) or ``(E, n, d)`` (``E`` members),
    each value checked by :func:`check_probe_value` with ``E`` read from the observable."""

    def checked(name: str, fn: Probe) -> Probe:
        def probe(z: Any) -> Any:
            members = z.shape[0] if getattr(z, "ndim", 2) == 3 else 1
            return check_probe_value(fn(z), name, members, who=who)

        return probe

    return {name: checked(name, fn) if callable(fn) else fn for name, fn in (probes or {}).items()}


def per_member(fn: Callable[[Any], Any]) -> Callable[[Any], Tensor]:
    """A probe of one member ``(n, d) -> float`` made into an ensemble probe ``(E, n, d) -> (E,)``.

    A one-member ensemble's observable is that member's ``(n, d)`` (the flows drop the member axis,
    :func:`drop_singleton_member`): it gives ``(1,)``, member 0.

    Example: ``probes={"silhouette": per_member(lambda z: silhouette_cosine(z, labels))}``.
    """

    def probe(observable: Any) -> Tensor:
        if getattr(observable, "ndim", None) == 2:  # (n, d): one member, not n members of (d,)
            return torch.tensor([float(fn(observable))], dtype=torch.float64)  # (1,)
        return torch.tensor([float(fn(member)) for member in observable], dtype=torch.float64)  # (E,)

    probe.__name__ = getattr(fn, "__name__", "probe")
    return probe


def drop_singleton_member(z: Tensor) -> Tensor:
    """``(1, n, d) -> (n, d)``: the observable of a one-member ensemble is that member's."""
    return z[0] if z.dim() == 3 and z.shape[0] == 1 else z


def module_device(model: nn.Module) -> torch.device:
    """The device of the model's first parameter (the CPU for a model without parameters)."""
    for q in model.parameters():
        return q.device
    return torch.device("cpu")


def module_dtype(model: nn.Module) -> torch.dtype | None:
    """The dtype of the model's first floating parameter (None without one)."""
    for q in model.parameters():
        if q.is_floating_point():
            return q.dtype
    return None


def to_module(x: Tensor, device: torch.device, dtype: torch.dtype | None) -> Tensor:
    """Move inputs to the model's ``device``; floating inputs take its floating ``dtype`` (integer inputs stay)."""
    cast = dtype is not None and dtype.is_floating_point and x.is_floating_point()
    return x.to(device=device, dtype=dtype if cast else None, non_blocking=True)


@contextmanager
def eval_mode(*modules: nn.Module | None) -> Iterator[None]:
    """Put the modules (None entries skipped) in eval mode for the block; each one's train/eval mode is
    restored after it (``module.train(was)``), also when the block raises."""
    mods = [m for m in modules if m is not None]
    was = [m.training for m in mods]
    for m in mods:
        m.eval()
    try:
        yield
    finally:
        for m, w in zip(mods, was):
            m.train(w)


@torch.no_grad()
def embed(model: nn.Module, x: Tensor, *, batch_size: int = 1024, projection: bool = False) -> Tensor:
    """Eval-mode embeddings of ``x (N, ...)``, computed in batches of ``batch_size``.

    For a model with a ``features`` method (e.g. :class:`ssldyn.models.SimCLRNet`) the backbone
    features (the projection head discarded, ``variational`` Remark 4.3) unless ``projection=True``;
    for any other module ``model(x)``. Returns what the model returns, concatenated over the
    batches along the sample axis: ``(N, d)``, or ``(E, N, d)`` for an ensemble; any other output
    (a feature map ``(b, C, H, W)``, a sequence ``(b, T, d)``, one number per sample ``(b,)``) is a
    ``ValueError``. The model's train/eval mode is restored.
    """
    batch_size = integer(batch_size, "batch_size", where="embed")
    if x.shape[0] == 0:
        raise ValueError("embed: x is empty (0 samples)")
    fn: Callable[[Tensor], Tensor] = model
    if not projection and callable(getattr(model, "features", None)):
        fn = model.features  # type: ignore[assignment]
    outs = []
    with eval_mode(model):
        for i in range(0, x.shape[0], batch_size):
            xb = x[i : i + batch_size]  # (b, ...)
            out = fn(xb)  # (b, d) or (E, b, d)
            if out.dim() not in (2, 3) or out.shape[-2] != xb.shape[0]:
                raise ValueError(f"embed: the model's output must be (b, d) or (E, b, d) for a batch of b="
                                 f"{xb.shape[0]} samples, got {tuple(out.shape)}")  # fmt: skip
            outs.append(out)
    return torch.cat(outs, dim=-2)  # (N, d) or (E, N, d)


class EpochBatches:
    """Index batches of size ``B`` from ``n`` samples: epochs of seeded permutations, the last partial batch
    of each epoch dropped. A permutation ``torch.randperm(n, generator=generator)`` is drawn when an epoch
    starts (at the first batch asked for), so the draws from ``generator`` interleave with any other use
    of it in call order. ``state_dict()`` / ``load_state_dict()``: the current permutation and position
    (a checkpoint resumes the same batches)."""

    def __init__(self, n: int, B: int, *, generator: torch.Generator | None = None) -> None:
        self.n, self.B, self.generator = n, B, generator
        self.perm: Tensor | None = None  # (n,) permutation of the current epoch
        self.pos = 0  # batches of the current epoch already drawn

    def __iter__(self) -> Iterator[Tensor]:
        return self

    def __next__(self) -> Tensor:
        if self.perm is None or self.pos >= self.n // self.B:
            self.perm, self.pos = torch.randperm(self.n, generator=self.generator), 0
        idx = self.perm[self.pos * self.B : (self.pos + 1) * self.B]  # (B,)
        self.pos += 1
        return idx

    def state_dict(self) -> dict:
        return {"perm": self.perm, "pos": self.pos}

    def load_state_dict(self, state: Mapping) -> None:
        self.perm, self.pos = state["perm"], int(state["pos"])


def minibatches(n: int, batch_size: int, steps: int, *, generator: torch.Generator | None = None) -> Iterator[Tensor]:
    """``steps`` index batches of size ``batch_size``: epochs of seeded permutations, last partial batch dropped
    (:class:`EpochBatches`)."""
    batch_size = integer(batch_size, "batch_size", where="minibatches")
    if batch_size > n:
        raise ValueError(f"minibatches: batch_size={batch_size}: must be in [1, n={n}] (the number of samples)")
    batches = EpochBatches(n, batch_size, generator=generator)
    for _ in range(steps):
        yield next(batches)


def check_steps(steps: Any, name: str = "steps") -> int:
    """``steps`` must be an int >= 0."""
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 0:
        raise ValueError(f"{name} must be an int >= 0, got {steps!r}")
    return int(steps)


def check_lr(lr: Any, name: str = "lr") -> float:
    """``lr`` must be a finite number > 0 (:func:`ssldyn.checks.positive`)."""
    return positive(lr, name)


def check_embedding_loss(loss: Tensor, z: Tensor) -> None:
    """``loss_fn(z)`` of embeddings ``(..., n, d)``: a scalar, or one value per member ``(...)``. A per-sample loss
    ``(n,)`` would be differentiated as its sum and logged as ``n`` members, silently."""
    members = tuple(z.shape[:-2])
    if not isinstance(loss, Tensor) or tuple(loss.shape) not in {(), members}:
        got = tuple(loss.shape) if isinstance(loss, Tensor) else type(loss).__name__
        want = "a scalar tensor" + (f" or one value per member {members}" if members else "")
        raise ValueError(f"loss_fn: expected {want} for embeddings {tuple(z.shape)}, got {got}: reduce a "
                         "per-sample loss over the samples (the objectives of ssldyn.objectives do)")  # fmt: skip
