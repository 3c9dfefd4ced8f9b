"""The run context handed to ``Experiment.run``: seed, device, progress reporting."""

from __future__ import annotations

import os
import random
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np
import torch

from ssldyn.lab.errors import UserError

T = TypeVar("T")


def seed_everything(seed: int) -> None:
    """Seed python, numpy and torch (CPU and CUDA) from one integer."""
    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)


def resolve_device(device: str | torch.device | None) -> torch.device:
    """``"cpu"`` / ``"cuda"`` / ``"cuda:1"`` -> torch.device; CUDA requested but absent is a UserError."""
    if device is None:
        return torch.device("cpu")
    try:
        dev = torch.device(device) if not isinstance(device, torch.device) else device
    except (RuntimeError, TypeError):
        raise UserError(f"--device {str(device)[:40]!r}: allowed values are cpu, cuda") from None
    if dev.type not in {"cpu", "cuda"}:
        raise UserError(f"--device {str(device)[:40]!r}: allowed values are cpu, cuda")
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise UserError("--device cuda: CUDA is not available on this machine; use --device cpu")
    return dev


def threads_from_env(default: int = 0) -> int:
    """``SSLDYN_THREADS`` as a positive integer (``default`` when unset); anything else is a UserError."""
    raw = os.environ.get("SSLDYN_THREADS", "").strip()
    if not raw:
        return default
    if not raw.isdigit() or not 1 <= int(raw) <= 4096:
        raise UserError(f"SSLDYN_THREADS={raw[:40]!r}: must be an integer from 1 to 4096 (torch threads)")
    return int(raw)


def set_threads(n: int | None = None) -> int:
    """Set torch intra-op threads deliberately (env ``SSLDYN_THREADS`` or the core count)."""
    n = n or threads_from_env() or (os.cpu_count() or 1)
    torch.set_num_threads(max(1, n))
    return torch.get_num_threads()


@contextmanager
def torch_threads(n: int = 1, device: torch.device | str | None = None) -> Iterator[None]:
    """Run torch on ``n`` intra-op threads (only on CPU: a no-op for CUDA ``device``), then restore.

    Experiments made of many tiny tensor ops use ``torch_threads(1)``: on a 2-core machine
    extra threads only add contention (measured up to ~10x slower when the cores are busy).
    """
    old = torch.get_num_threads()
    if device is None or torch.device(device).type == "cpu":
        torch.set_num_threads(max(1, n))
    try:
        yield
    finally:
        torch.set_num_threads(old)


def keep_heap_pad(pad_bytes: int = 256 << 20) -> bool:
    """Ask glibc's malloc to keep ``pad_bytes`` of freed heap instead of returning it to the OS.

    A training step of the batched ensembles allocates and frees tensors of a few MB; without
    a pad, glibc trims the heap after each step and the next step page-faults the memory back
    (measured: the 384-run token grid's steps are ~20 % faster with a 256 MB pad). Returns
    whether it took effect (False off glibc). Process-wide: call it in worker processes.
    """
    try:
        import ctypes
        import ctypes.util

        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        M_TOP_PAD = -2
        return bool(libc.mallopt(M_TOP_PAD, int(pad_bytes)))
    except (OSError, AttributeError, TypeError):
        return False


@dataclass
class Context:
    """What an experiment may use besides its config.

    Attributes:
        seed: the seed being run (already applied to python/numpy/torch by the runner); for an
            experiment with ``batch_seeds`` the first of ``seeds``.
        seeds: every seed this call computes: ``(seed,)`` when the lab runs one seed at a time,
            all seeds of the run for an experiment with ``batch_seeds`` (member/run ``i`` of a
            batched computation must use ``seeds[i]`` exactly as a one-seed run would).
        device: torch device to compute on.
        progress: show rich progress bars (the CLI turns them on; library use keeps quiet).
        run_dir: a scratch directory for this run (removed afterwards).
        cache_dir: a directory inside the run store (``<out>/.cache``) where experiments may
            keep computations shared between runs (e.g. one training grid behind several
            figures); ``None`` outside the lab (then nothing is cached on disk).
    """

    seed: int = 0
    seeds: tuple[int, ...] = ()
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    progress: bool = False
    run_dir: Any = None
    cache_dir: Any = None
    _bar: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self.seeds = tuple(int(s) for s in self.seeds) or (int(self.seed),)

    def generator(self, offset: int = 0, seed: int | None = None) -> torch.Generator:
        """A CPU ``torch.Generator`` seeded with ``seed + offset`` (``seed`` defaults to ``ctx.seed``)."""
        g = torch.Generator()
        g.manual_seed((self.seed if seed is None else int(seed)) + offset)
        return g

    def generators(self, offset: int = 0) -> list[torch.Generator]:
        """One :meth:`generator` per seed of ``seeds`` (for seed-batched experiments)."""
        return [self.generator(offset, s) for s in self.seeds]

    def track(self, iterable: Iterable[T], total: int | None = None, description: str = "") -> Iterator[T]:
        """Iterate with a progress bar when ``progress`` is on."""
        if self._bar is None or not self.progress:
            yield from iterable
            return
        task = self._bar.add_task(description or "working", total=total if total is not None else _len(iterable))
        try:
            for item in iterable:
                yield item
                self._bar.advance(task)
        finally:
            self._bar.remove_task(task)

    @contextmanager
    def progress_bars(self) -> Iterator[Context]:
        """Open a rich progress display for the duration of a run (used by the runner)."""
        if not self.progress or self._bar is not None:
            yield self
            return
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        with Progress(
            TextColumn("  {task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), transient=True
        ) as bar:
            self._bar = bar
            try:
                yield self
            finally:
                self._bar = None


def _len(it: Any) -> int | None:
    try:
        return len(it)
    except TypeError:
        return None
