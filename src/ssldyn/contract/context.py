"""The run context handed to ``Experiment.run``: seed, device, progress reporting, tasks, cache."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import numpy as np
import torch

from ssldyn.contract.threads import keep_heap_pad, set_threads, threads_from_env, torch_threads  # noqa: F401 (re-exported)
from ssldyn.errors import UserError
from ssldyn.streams import stream

__all__ = [
    "seed_everything",
    "resolve_device",
    "synchronize",
    "progress_display",
    "TaskRunner",
    "SubResultCache",
    "inline_tasks",
    "Context",
]

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


def synchronize(device: torch.device) -> None:
    """Wait for the work queued on ``device`` (CUDA runs asynchronously), so that a wall-clock timing
    measures the computation; nothing on the CPU."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def progress_display(console: Any = None, *, indent: str = "  ") -> Any:
    """The lab's transient ``rich.progress.Progress``: description (after ``indent``), bar, done/total and
    elapsed time, on ``console`` (default: rich's). Bars of runs and tasks are added to it."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(TextColumn(indent + "{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=console, transient=True)  # fmt: skip


class TaskRunner(Protocol):
    """How :meth:`Context.map` runs tasks: ``(index, fn(items[index]))`` as they finish."""

    def __call__(
        self, fn: Callable[[Any], Any], items: Sequence[Any], *, device: Any = None
    ) -> Iterator[tuple[int, Any]]: ...


class SubResultCache(Protocol):
    """Where :meth:`Context.cached` keeps arrays by (namespace, JSON key): the lab's ``RunCache``."""

    def get(self, namespace: str, key: Any) -> dict[str, np.ndarray] | None: ...

    def put(self, namespace: str, key: Any, arrays: Mapping[str, Any]) -> Any: ...

    def cached(self, namespace: str, key: Any, compute: Callable[[], Mapping[str, Any]]) -> dict[str, np.ndarray]: ...


def inline_tasks(fn: Callable[[T], R], items: Sequence[T], *, device: Any = None) -> Iterator[tuple[int, R]]:
    """Every task in this process, in order, each on ONE torch thread (as a worker process runs
    it, so every executor gives the same numbers); on the CPU with the malloc top pad kept."""
    if device is None or not str(device).startswith("cuda"):
        keep_heap_pad()
    for i, item in enumerate(items):
        with torch_threads(1, device):
            yield i, fn(item)


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
        progress: show rich progress bars (the CLI turns them on; library use keeps quiet; outside the lab
            they show inside ``with ctx.progress_bars():``).
        run_dir: a scratch directory for this run (removed afterwards).
        tasks: how :meth:`map` runs tasks, ``tasks(fn, items, device=...) -> iterator of (index,
            result)``; the lab hands in its executor (a pool of single-thread processes, or Ray:
            :class:`ssldyn.lab.tasks.Tasks`). None (outside the lab): in this process, one after
            the other, each on one torch thread (:func:`inline_tasks`) — the same numbers.
        cache: where :meth:`cached` keeps sub-results shared between runs (e.g. one training
            grid behind several figures); the lab hands in its run store's cache
            (:class:`ssldyn.lab.cache.RunCache` on ``<out>/.cache``). None (outside the lab):
            nothing is kept, every call computes.
    """

    seed: int = 0
    seeds: tuple[int, ...] = ()
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    progress: bool = False
    run_dir: Any = None
    tasks: TaskRunner | None = None
    cache: SubResultCache | None = None
    _bar: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self.seeds = tuple(int(s) for s in self.seeds) or (int(self.seed),)

    def generator(self, offset: int = 0, seed: int | None = None) -> torch.Generator:
        """A CPU ``torch.Generator`` for stream ``offset`` of ``seed`` (default ``ctx.seed``):
        :func:`ssldyn.streams.stream(seed, offset) <ssldyn.streams.stream>`, seeded by NumPy's
        ``SeedSequence(seed, spawn_key=(offset,))``. Distinct ``(seed, offset)`` pairs give unrelated
        streams, so the seeds of a run are independent replicates (an additive ``seed + offset``, used
        before 2026-12-05, made seed ``s`` at offset ``k`` the stream of seed ``s + k`` at offset 0).
        ``offset``: an integer in ``[0, 2^32)`` naming the stream (one per random role of the run).
        """
        return stream(self.seed if seed is None else int(seed), offset)

    def generators(self, offset: int = 0) -> list[torch.Generator]:
        """One :meth:`generator` per seed of ``seeds`` (for seed-batched experiments)."""
        return [self.generator(offset, s) for s in self.seeds]

    # ------------------------------------------------------------------ tasks
    def as_completed(
        self, fn: Callable[[T], R], items: Iterable[T], *, description: str = ""
    ) -> Iterator[tuple[int, R]]:
        """Run ``fn(item)`` for every item with the lab's executor (:attr:`tasks`); yields ``(index,
        result)`` as tasks finish (with a progress bar). ``fn``: a picklable top-level function;
        every task runs on one torch thread, whichever executor."""
        items = list(items)
        done = (self.tasks or inline_tasks)(fn, items, device=self.device)
        yield from self.track(done, total=len(items), description=description or "tasks")

    def map(self, fn: Callable[[T], R], items: Iterable[T], *, description: str = "") -> list[R]:
        """``[fn(item) for item in items]``, run by the lab's executor (:meth:`as_completed`), in order."""
        items = list(items)
        out: list[Any] = [None] * len(items)
        for i, result in self.as_completed(fn, items, description=description):
            out[i] = result
        return out

    # ------------------------------------------------------------------ shared sub-results
    def cache_key(self, key: Any) -> dict[str, Any]:
        """The full key of a shared sub-result: ``key`` (its settings, JSON data) and the device type
        (the code version is added by the cache)."""
        return {"key": key, "device": self.device.type}

    def cache_lookup(self, key: Any, *, namespace: str = "shared") -> dict[str, np.ndarray] | None:
        """The stored arrays of ``key`` (see :meth:`cached`), or None: missing, damaged (a
        :class:`~ssldyn.lab.cache.CacheWarning`) or outside the lab. For results computed in batches."""
        return None if self.cache is None else self.cache.get(namespace, self.cache_key(key))

    def cache_store(self, key: Any, arrays: Mapping[str, Any], *, namespace: str = "shared") -> None:
        """Store the arrays of ``key`` (see :meth:`cached`; nothing outside the lab)."""
        if self.cache is not None:
            self.cache.put(namespace, self.cache_key(key), arrays)

    def cached(
        self, key: Any, compute: Callable[[], Mapping[str, Any]], *, namespace: str = "shared"
    ) -> dict[str, np.ndarray]:
        """Arrays ``compute()`` returns (name -> array), shared through the run store: read back when
        the lab's cache (``<out>/.cache/<namespace>/``) holds a sound entry for ``key`` (JSON data: the settings that
        determine the value) on this device type and code version, else computed and stored
        (atomically, checksummed). A damaged entry is recomputed with a
        :class:`~ssldyn.lab.cache.CacheWarning` naming it. Outside the lab (``cache`` None):
        ``compute()``."""
        if self.cache is None:
            return {k: np.asarray(v) for k, v in compute().items()}
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
