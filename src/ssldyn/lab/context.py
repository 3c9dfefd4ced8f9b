"""The run context handed to ``Experiment.run``: seed, device, progress reporting, tasks, cache."""

from __future__ import annotations

import os
import random
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import torch

from ssldyn.lab.errors import UserError

T = TypeVar("T")
R = TypeVar("R")


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
        raise UserError(f"--device {str(device)!r}: allowed values are cpu, cuda") from None
    if dev.type not in {"cpu", "cuda"}:
        raise UserError(f"--device {str(device)!r}: allowed values are cpu, cuda")
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise UserError("--device cuda: CUDA is not available on this machine; use --device cpu")
    return dev


def set_threads(n: int | None = None) -> int:
    """Set torch intra-op threads deliberately (env ``SSLDYN_THREADS`` or the core count)."""
    n = n or int(os.environ.get("SSLDYN_THREADS", "0")) or (os.cpu_count() or 1)
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


def single_thread() -> Any:
    """``torch_threads(1)``."""
    return torch_threads(1)


@dataclass
class Context:
    """What an experiment may use besides its config.

    Attributes:
        seed: the one seed of this run (already applied to python/numpy/torch by the runner).
        device: torch device to compute on.
        progress: show rich progress bars (the CLI turns them on; library use keeps quiet).
        run_dir: a scratch directory for this run (removed afterwards).
        cache_dir: a directory inside the run store (``<out>/.cache``) where experiments may
            keep computations shared between runs (e.g. one training grid behind several
            figures), through :meth:`cached`; ``None`` outside the lab (then nothing is cached on disk).
        executor: how :meth:`map` runs tasks: ``"inline"`` (this process; the default outside
            the lab), ``"processes"`` (a local pool of ``workers`` single-thread processes; the
            lab's default) or ``"ray"`` (Ray tasks; runs under ``--executor ray``).
        workers: worker processes for ``"processes"`` (the lab's ``--workers``, default the cores).
    """

    seed: int = 0
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    progress: bool = False
    run_dir: Any = None
    cache_dir: Any = None
    executor: str = "inline"
    workers: int = 1
    _bar: Any = field(default=None, repr=False)
    _cache: Any = field(default=None, repr=False)

    def generator(self, offset: int = 0) -> torch.Generator:
        """A CPU ``torch.Generator`` seeded with ``seed + offset`` (independent streams)."""
        g = torch.Generator()
        g.manual_seed(self.seed + offset)
        return g

    def rng(self, offset: int = 0) -> np.random.Generator:
        return np.random.default_rng(self.seed + offset)

    # ------------------------------------------------------------------ tasks
    def as_completed(
        self, fn: Callable[[T], R], items: Iterable[T], *, description: str = ""
    ) -> Iterator[tuple[int, R]]:
        """Run ``fn(item)`` for every item with the lab's executor; yields ``(index, result)`` as
        tasks finish (with a progress bar). ``fn``: a picklable top-level function; tasks run on
        one torch thread each (see :func:`ssldyn.lab.executors.map_tasks`)."""
        from ssldyn.lab.executors import map_tasks

        items = list(items)
        done = map_tasks(fn, items, executor=self.executor, workers=self.workers, device=self.device)
        yield from self.track(done, total=len(items), description=description or "tasks")

    def map(self, fn: Callable[[T], R], items: Iterable[T], *, description: str = "") -> list[R]:
        """``[fn(item) for item in items]``, run by the lab's executor (:meth:`as_completed`), in order."""
        items = list(items)
        out: list[Any] = [None] * len(items)
        for i, result in self.as_completed(fn, items, description=description):
            out[i] = result
        return out

    # ------------------------------------------------------------------ shared sub-results
    @property
    def cache(self) -> Any:
        """The run store's cache (:class:`~ssldyn.lab.cache.RunCache` on ``cache_dir``; keeps
        nothing when ``cache_dir`` is None)."""
        if self._cache is None or self._cache.root != (None if self.cache_dir is None else Path(self.cache_dir)):
            from ssldyn.lab.cache import RunCache

            self._cache = RunCache(self.cache_dir)
        return self._cache

    def cache_key(self, key: Any) -> dict[str, Any]:
        """The full key of a shared sub-result: ``key`` (its settings, JSON data) and the device type
        (the code version is added by the cache)."""
        return {"key": key, "device": self.device.type}

    def cache_lookup(self, key: Any, *, namespace: str = "shared") -> dict[str, np.ndarray] | None:
        """The stored arrays of ``key`` (see :meth:`cached`), or None: missing, damaged (a
        :class:`~ssldyn.lab.cache.CacheWarning`) or outside the lab. For results computed in batches."""
        return self.cache.get(namespace, self.cache_key(key))

    def cache_store(self, key: Any, arrays: Mapping[str, Any], *, namespace: str = "shared") -> None:
        """Store the arrays of ``key`` (see :meth:`cached`; nothing outside the lab)."""
        self.cache.put(namespace, self.cache_key(key), arrays)

    def cached(
        self, key: Any, compute: Callable[[], Mapping[str, Any]], *, namespace: str = "shared"
    ) -> dict[str, np.ndarray]:
        """Arrays ``compute()`` returns (name -> array), shared through the run store: read back when
        ``<out>/.cache/<namespace>/`` holds a sound entry for ``key`` (JSON data: the settings that
        determine the value) on this device type and code version, else computed and stored
        (atomically, checksummed). A damaged entry is recomputed with a
        :class:`~ssldyn.lab.cache.CacheWarning` naming it. Outside the lab (``cache_dir`` None):
        ``compute()``."""
        return self.cache.cached(namespace, self.cache_key(key), compute)

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
