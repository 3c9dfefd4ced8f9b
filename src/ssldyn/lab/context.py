"""The run context handed to ``Experiment.run``: seed, device, progress reporting, tasks, cache."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import torch

from ssldyn.errors import UserError
from ssldyn.lab.threads import keep_heap_pad, set_threads, threads_from_env, torch_threads  # noqa: F401 (re-exported)

__all__ = ["seed_everything", "resolve_device", "progress_display", "Context"]

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
        raise UserError(f"--device {str(device)[:40]!r}: allowed values are cpu, cuda") from None
    if dev.type not in {"cpu", "cuda"}:
        raise UserError(f"--device {str(device)[:40]!r}: allowed values are cpu, cuda")
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise UserError("--device cuda: CUDA is not available on this machine; use --device cpu")
    return dev


def progress_display(console: Any = None, *, indent: str = "  ") -> Any:
    """The lab's transient ``rich.progress.Progress``: description (after ``indent``), bar, done/total and
    elapsed time, on ``console`` (default: rich's). Bars of runs and tasks are added to it."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(TextColumn(indent + "{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=console, transient=True)  # fmt: skip


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
            figures), through :meth:`cached`; ``None`` outside the lab (then nothing is cached on disk).
        executor: how :meth:`map` runs tasks: ``"inline"`` (this process; the default outside
            the lab), ``"processes"`` (a local pool of ``workers`` single-thread processes; the
            lab's default) or ``"ray"`` (Ray tasks; runs under ``--executor ray``).
        workers: worker processes for ``"processes"`` (the lab's ``--workers``, default the cores).
    """

    seed: int = 0
    seeds: tuple[int, ...] = ()
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    progress: bool = False
    run_dir: Any = None
    cache_dir: Any = None
    executor: str = "inline"
    workers: int = 1
    _bar: Any = field(default=None, repr=False)
    _cache: Any = field(default=None, repr=False)

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

    # ------------------------------------------------------------------ tasks
    def as_completed(
        self, fn: Callable[[T], R], items: Iterable[T], *, description: str = ""
    ) -> Iterator[tuple[int, R]]:
        """Run ``fn(item)`` for every item with the lab's executor; yields ``(index, result)`` as
        tasks finish (with a progress bar). ``fn``: a picklable top-level function; tasks run on
        one torch thread each (see :func:`ssldyn.lab.tasks.map_tasks`)."""
        from ssldyn.lab.tasks import map_tasks

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
        """Open a rich progress display (:func:`progress_display`) for the duration of a run."""
        if not self.progress or self._bar is not None:
            yield self
            return
        with progress_display() as bar:
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
