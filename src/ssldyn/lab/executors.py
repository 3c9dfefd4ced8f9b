"""Executors: run a list of :class:`RunSpec` in-process or as Ray tasks, and the tasks of one run.

Runs (:func:`execute`): either way the driver alone writes the run store (atomically, via
:func:`commit_run`); a run that fails (after its retries, on Ray) is marked failed with its
error and the sweep goes on. Finished runs are returned from the store without recomputation
unless ``force``.

Tasks of one run (:func:`map_tasks`, behind ``Context.map``): an experiment hands the lab a
picklable top-level function and its inputs; the lab runs them in-process (``"inline"``), in
a local pool of worker processes (``"processes"``, ``workers`` of them) or as Ray tasks
(``"ray"``, when the run itself runs under ``--executor ray``). Every task runs on ONE torch
thread (parallelism comes from the workers; in-process tasks too, so every executor gives the
same numbers) and worker processes keep a malloc top pad (:func:`~ssldyn.lab.context.keep_heap_pad`).
On a CUDA device tasks run in-process, one after the other, on the device.
"""

from __future__ import annotations

import atexit
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from ssldyn.lab.errors import UserError
from ssldyn.lab.runner import RunSpec, commit_run, compute_run, format_exception_line
from ssldyn.lab.store import RunStore, StoredRun

EXECUTORS = ("local", "ray")
TASK_EXECUTORS = ("inline", "processes", "ray")

T = TypeVar("T")
R = TypeVar("R")


@dataclass
class SweepItem:
    """The outcome of one spec: ``status`` is cached, done or failed."""

    spec: RunSpec
    status: str
    run: StoredRun | None = None
    error: str = ""
    seconds: float = 0.0


class _Bar:
    """A rich progress bar of runs done / running / failed (or nothing)."""

    def __init__(self, progress: Any, total: int, title: str) -> None:
        self.progress, self.task = progress, None
        self.done = self.failed = self.running = 0
        self.title = title
        if progress is not None:
            self.task = progress.add_task(self._desc(), total=total)

    def _desc(self) -> str:
        return f"{self.title}: {self.done} done · {self.running} running · {self.failed} failed"

    def update(self, *, done: int = 0, failed: int = 0, running: int | None = None, label: str = "") -> None:
        self.done += done
        self.failed += failed
        if running is not None:
            self.running = running
        if self.progress is not None:
            desc = self._desc() + (f" · {label}" if label else "")
            self.progress.update(self.task, description=desc, advance=done + failed)


def execute(
    specs: list[RunSpec],
    out: str | Path,
    *,
    executor: str = "local",
    force: bool = False,
    address: str | None = None,
    max_retries: int = 2,
    progress: Any = None,
    title: str = "runs",
    workers: int | None = None,
) -> list[SweepItem]:
    """Run every spec (skipping finished ones unless ``force``) and return their outcomes in order.

    ``workers``: worker processes for the tasks of each local run (``Context.map``); default
    :func:`default_workers`. Under Ray, tasks are Ray tasks and Ray schedules them.
    """
    if executor not in EXECUTORS:
        raise UserError(f"--executor {executor!r}: allowed values are {', '.join(EXECUTORS)}")
    if max_retries < 0:
        raise UserError(f"--max-retries {max_retries}: must be >= 0")
    workers = check_workers(workers)
    check_out_dir(out)
    store = RunStore(out)
    items: list[SweepItem | None] = [None] * len(specs)
    todo = []
    for i, spec in enumerate(specs):
        existing = store.get(spec.experiment, spec.digest)
        if existing is not None and not force:
            items[i] = SweepItem(spec, "cached", existing)
        else:
            todo.append(i)
    bar = _Bar(progress, len(specs), title)
    bar.update(done=len(specs) - len(todo))
    if executor == "local":
        _run_local(specs, todo, items, store, bar, progress, workers)
    else:
        _run_ray(specs, todo, items, store, bar, address, max_retries)
    return [it for it in items if it is not None]


def check_out_dir(out: str | Path) -> None:
    """``--out`` must be a directory (or creatable as one) that we can write to."""
    p = Path(out)
    if p.exists() and not p.is_dir():
        raise UserError(f"--out {str(p)!r}: exists and is not a directory")
    probe = p
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir() or not os.access(probe, os.W_OK | os.X_OK):
        raise UserError(f"--out {str(p)!r}: not writable")


def _run_local(specs, todo, items, store, bar, progress, workers) -> None:  # noqa: ANN001
    for i in todo:
        spec = specs[i]
        bar.update(running=1, label=spec.experiment)
        t0 = time.perf_counter()
        try:
            computed = compute_run(
                spec,
                progress=progress if progress is not None else False,
                cache_dir=store.cache_dir,
                executor="processes",
                workers=workers,
            )
            run = commit_run(store, computed)
            items[i] = SweepItem(spec, "done", run, seconds=time.perf_counter() - t0)
            bar.update(done=1, running=0)
        except UserError:
            raise
        except Exception as exc:  # the sweep goes on; the run is marked failed with its error
            err = format_exception_line(exc)
            store.record_failure(spec.experiment, spec.digest, err, spec.config)
            items[i] = SweepItem(spec, "failed", error=err, seconds=time.perf_counter() - t0)
            bar.update(failed=1, running=0)


def _ray_compute(spec: RunSpec, cache_dir: str):  # noqa: ANN202 - executed on a Ray worker
    from ssldyn.lab.context import set_threads

    set_threads(int(os.environ.get("SSLDYN_THREADS", "1")))
    return compute_run(spec, cache_dir=cache_dir, executor="ray")


def _run_ray(specs, todo, items, store, bar, address, max_retries) -> None:  # noqa: ANN001
    try:
        import ray
    except ImportError:
        raise UserError("--executor ray needs Ray: pip install 'ssldyn[distributed]'") from None
    if not todo:
        return
    env = {
        "SSLDYN_PLUGINS": os.environ.get("SSLDYN_PLUGINS", ""),
        "PYTHONPATH": os.pathsep.join(p for p in sys.path if p and os.path.isdir(p)),
        "SSLDYN_THREADS": os.environ.get("SSLDYN_THREADS", "1"),
    }
    started_here = False
    if not ray.is_initialized():
        kw: dict[str, Any] = {
            "runtime_env": {"env_vars": env},
            "include_dashboard": False,
            "log_to_driver": False,
            "configure_logging": False,
        }
        if address:
            kw["address"] = address
        else:
            kw["num_cpus"] = int(os.environ.get("SSLDYN_RAY_CPUS", os.cpu_count() or 1))
        try:
            ray.init(**kw)
        except (ConnectionError, RuntimeError, ValueError) as e:
            raise UserError(f"--address {address!r}: cannot connect to a Ray cluster ({e})") from None
        started_here = True
    try:
        task = ray.remote(_ray_compute)
        pending = {}
        for i in todo:
            spec = specs[i]
            opts: dict[str, Any] = {"max_retries": max_retries, "retry_exceptions": True, "num_cpus": 1}
            if spec.device.startswith("cuda"):
                opts["num_gpus"] = 1
            pending[task.options(**opts).remote(spec, str(store.cache_dir.resolve()))] = (i, time.perf_counter())
        bar.update(running=len(pending))
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            ref = ready[0]
            i, t0 = pending.pop(ref)
            spec = specs[i]
            try:
                computed = ray.get(ref)
                run = commit_run(store, computed)
                items[i] = SweepItem(spec, "done", run, seconds=time.perf_counter() - t0)
                bar.update(done=1, running=len(pending), label=spec.experiment)
            except Exception as exc:  # retries exhausted (task error or worker death)
                err = _ray_error_line(exc)
                store.record_failure(spec.experiment, spec.digest, err, spec.config)
                items[i] = SweepItem(spec, "failed", error=err, seconds=time.perf_counter() - t0)
                bar.update(failed=1, running=len(pending), label=spec.experiment)
    finally:
        if started_here:
            ray.shutdown()


def _ray_error_line(exc: Exception) -> str:
    cause = getattr(exc, "cause", None)
    if isinstance(cause, BaseException):
        return format_exception_line(cause)
    first = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {first[0] if first else ''}"


# ---------------------------------------------------------------------- tasks of one run
def default_workers() -> int:
    """Worker processes for a run's tasks: the CPU cores this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def check_workers(workers: int | None) -> int:
    """``--workers``: None -> :func:`default_workers`; otherwise an integer >= 1."""
    if workers is None:
        return default_workers()
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise UserError(f"--workers {workers!r}: must be an integer >= 1")
    return workers


def _worker_init() -> None:
    """Initializer of pool workers: one torch thread, a kept heap."""
    import torch

    from ssldyn.lab.context import keep_heap_pad

    torch.set_num_threads(1)
    keep_heap_pad()  # tasks free and re-allocate MB-sized tensors: keep the heap, no page faults


_POOLS: dict[int, ProcessPoolExecutor] = {}


def _pool(workers: int) -> ProcessPoolExecutor:
    """A spawned pool of ``workers`` single-thread processes, kept for later runs of this process."""
    pool = _POOLS.get(workers)
    if pool is not None and not getattr(pool, "_broken", False):
        return pool
    import multiprocessing as mp

    pool = ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn"), initializer=_worker_init)
    _POOLS[workers] = pool
    return pool


@atexit.register
def shutdown_pools() -> None:
    """Stop the kept worker processes (at exit; also safe to call at any time)."""
    while _POOLS:
        _, pool = _POOLS.popitem()
        pool.shutdown(wait=True, cancel_futures=True)


def _run_one_thread(fn: Callable[[T], R], item: T, device: Any) -> R:
    from ssldyn.lab.context import torch_threads

    with torch_threads(1, device):
        return fn(item)


def map_tasks(
    fn: Callable[[T], R],
    items: Sequence[T],
    *,
    executor: str = "inline",
    workers: int = 1,
    device: Any = None,
) -> Iterator[tuple[int, R]]:
    """Run ``fn(item)`` for every item; yields ``(index, result)`` as tasks finish.

    ``fn`` must be a picklable top-level function (and items / results picklable) for
    ``"processes"`` and ``"ray"``. Tasks are submitted in order (put the largest first for load
    balance). A failing task raises its exception here; tasks not yet started are cancelled.
    One task, one worker, or a CUDA ``device``: in-process.
    """
    if executor not in TASK_EXECUTORS:
        raise ValueError(f"executor {executor!r}: allowed values are {', '.join(TASK_EXECUTORS)}")
    items = list(items)
    cuda = device is not None and str(device).startswith("cuda")
    if executor == "inline" or cuda or len(items) <= 1 or (executor == "processes" and workers <= 1):
        if not cuda:
            from ssldyn.lab.context import keep_heap_pad

            keep_heap_pad()
        for i, item in enumerate(items):
            yield i, _run_one_thread(fn, item, device)
        return
    if executor == "ray":
        yield from _ray_tasks(fn, items)
        return
    pool = _pool(workers)
    futures: dict[Future, int] = {pool.submit(fn, item): i for i, item in enumerate(items)}
    try:
        pending = set(futures)
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for f in sorted(done, key=futures.__getitem__):
                yield futures[f], f.result()
    finally:
        for f in futures:
            f.cancel()


def _ray_task(fn: Callable[[T], R], item: T) -> R:  # executed on a Ray worker
    import torch

    from ssldyn.lab.context import keep_heap_pad

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
