"""Tasks of one run (:func:`map_tasks`, behind ``Context.map``).

An experiment hands the lab a picklable top-level function and its inputs; the lab runs them
in-process (``"inline"``), in a local pool of worker processes (``"processes"``, ``workers`` of
them) or as Ray tasks (``"ray"``, when the run itself runs under ``--executor ray``). Every task
runs on ONE torch thread (parallelism comes from the workers; in-process tasks too, so every
executor gives the same numbers); worker processes are the lab's one kind
(:mod:`ssldyn.lab.workers`: a malloc top pad, and they die with their driver). On a CUDA device tasks run in-process, one after
the other, on the device.
"""

from __future__ import annotations

import atexit
import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from typing import Any, Literal, TypeVar, get_args

from ssldyn.checks import choice
from ssldyn.contract.context import inline_tasks
from ssldyn.errors import UserError

__all__ = [
    "TASK_EXECUTORS", "TaskExecutor", "default_workers", "check_count", "check_workers", "shutdown_pools", "map_tasks",
    "Tasks",
]  # fmt: skip

#: where the tasks of one run execute: in this process, a process pool, or Ray tasks
TaskExecutor = Literal["inline", "processes", "ray"]
TASK_EXECUTORS: tuple[str, ...] = get_args(TaskExecutor)

T = TypeVar("T")
R = TypeVar("R")


# ---------------------------------------------------------------------- tasks of one run
def default_workers() -> int:
    """Worker processes for a run's tasks: the CPU cores this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def check_count(option: str, value: Any) -> int:
    """``value`` of a count option (``--workers``, ``--jobs``) when it is an integer >= 1, else one
    :class:`UserError` naming the option."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UserError(f"{option} {value!r}: must be an integer >= 1")
    return value


def check_workers(workers: int | None) -> int:
    """``--workers``: None -> :func:`default_workers`; otherwise an integer >= 1."""
    if workers is None:
        return default_workers()
    return check_count("--workers", workers)


_POOLS: dict[int, ProcessPoolExecutor] = {}
_POOL_THREAD: dict[int, int] = {}  # workers -> the thread that made (and submits to) the pool


def _pool(workers: int) -> ProcessPoolExecutor:
    """A pool of ``workers`` lab workers (:func:`ssldyn.lab.workers.new_pool`: single-thread, dying
    with this process), kept for later runs of this process. Used from the thread that made it only
    (workers start from the submitting thread, whose end the kernel's parent-death signal watches):
    another thread gets a new pool."""
    import threading

    from ssldyn.lab.workers import new_pool, stop_pool

    pool = _POOLS.get(workers)
    if pool is not None and not getattr(pool, "_broken", False) and _POOL_THREAD.get(workers) == threading.get_ident():
        return pool
    if pool is not None:
        stop_pool(pool)
    pool = new_pool(workers)
    _POOLS[workers], _POOL_THREAD[workers] = pool, threading.get_ident()
    return pool


@atexit.register
def shutdown_pools() -> None:
    """Stop the kept worker processes (at exit; also safe to call at any time)."""
    from ssldyn.lab.workers import stop_pool

    while _POOLS:
        _, pool = _POOLS.popitem()
        stop_pool(pool)


def _check_executor(executor: str) -> None:
    choice(executor, "executor", TASK_EXECUTORS, where="map_tasks")


def map_tasks(
    fn: Callable[[T], R],
    items: Sequence[T],
    *,
    executor: TaskExecutor = "inline",
    workers: int = 1,
    device: Any = None,
) -> Iterator[tuple[int, R]]:
    """Run ``fn(item)`` for every item; yields ``(index, result)`` as tasks finish.

    ``fn`` must be a picklable top-level function (and items / results picklable) for
    ``"processes"`` and ``"ray"``. Tasks are submitted in order (put the largest first for load
    balance). A failing task raises its exception here; tasks not yet started are cancelled.
    One task, one worker, or a CUDA ``device``: in-process.
    """
    _check_executor(executor)
    items = list(items)
    cuda = device is not None and str(device).startswith("cuda")
    if executor == "inline" or cuda or len(items) <= 1 or (executor == "processes" and workers <= 1):
        yield from inline_tasks(fn, items, device=device)
        return
    if executor == "ray":
        yield from _ray_tasks(fn, items)
        return
    pool = _pool(workers)
    futures: dict[Future, int] = {pool.submit(fn, item): i for i, item in enumerate(items)}
    finished = False
    try:
        pending = set(futures)
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for f in sorted(done, key=futures.__getitem__):
                yield futures[f], f.result()
        finished = True
    finally:
        for f in futures:
            f.cancel()
        if not finished and any(f.running() for f in futures):  # an interrupt or an error: end running tasks now
            from ssldyn.lab.workers import stop_pool

            for key in [k for k, v in _POOLS.items() if v is pool]:
                _POOLS.pop(key)
            stop_pool(pool, now=True)


def _ray_task(fn: Callable[[T], R], item: T) -> R:  # executed on a Ray worker
    import torch

    from ssldyn.contract.threads import keep_heap_pad

    torch.set_num_threads(1)
    keep_heap_pad()
    return fn(item)


def _ray_tasks(fn: Callable[[T], R], items: list[T]) -> Iterator[tuple[int, R]]:
    try:
        import ray
    except ImportError:
        raise UserError("--executor ray needs Ray: pip install 'ssldyn[distributed]'") from None
    if not ray.is_initialized():
        raise ValueError("executor 'ray': Ray is not initialised in this process (runs under --executor ray are)")
    task = ray.remote(num_cpus=1)(_ray_task)
    refs = {task.remote(fn, item): i for i, item in enumerate(items)}
    pending = list(refs)
    try:
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            yield refs[ready[0]], ray.get(ready[0])
    finally:
        for ref in pending:
            ray.cancel(ref)


@dataclass(frozen=True)
class Tasks:
    """The lab's executor of a run's tasks, as a :class:`~ssldyn.contract.context.Context` takes it
    (``Context(tasks=Tasks("processes", workers=2))``): :func:`map_tasks` with these settings."""

    executor: TaskExecutor = "processes"
    workers: int = 1

    def __post_init__(self) -> None:
        _check_executor(self.executor)

    def __call__(self, fn: Callable[[T], R], items: Sequence[T], *, device: Any = None) -> Iterator[tuple[int, R]]:
        return map_tasks(fn, items, executor=self.executor, workers=self.workers, device=device)
