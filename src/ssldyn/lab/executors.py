"""Executors: run a list of :class:`RunSpec` in-process or as Ray tasks.

Either way the driver alone writes the run store (atomically, via :func:`commit_run`); a run
that fails (after its retries, on Ray) is marked failed with its error and the sweep goes on.
Finished runs are returned from the store without recomputation unless ``force``. The tasks
of one run (``Context.map``) are run by :mod:`ssldyn.lab.tasks`.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal, get_args

from ssldyn.errors import UserError
from ssldyn.lab.runner import RunSpec, commit_run, compute_run, format_exception_line
from ssldyn.lab.store import RunStore, StoredRun, check_out_dir
from ssldyn.lab.tasks import check_count, check_workers

__all__ = ["EXECUTORS", "DEFAULT_MAX_RETRIES", "WORKER_DIED", "Executor", "SweepItem", "check_executor", "execute"]

#: where the runs of a sweep execute: this machine (``--jobs`` processes) or a Ray cluster
Executor = Literal["local", "ray"]
EXECUTORS: tuple[str, ...] = get_args(Executor)


@dataclass
class SweepItem:
    """The outcome of one spec: ``status`` is cached, done or failed."""

    spec: RunSpec
    status: str
    run: StoredRun | None = None
    error: str = ""
    seconds: float = 0.0
    note: str = ""


class _Bar:
    """A rich progress bar of runs done / running / failed (or nothing). Where the bar's console is not a
    terminal (output redirected to a file, CI logs), where rich shows no live bar, each finished or failed run
    prints one plain line on stderr instead, so a long run's log is not empty until the end."""

    def __init__(self, progress: Any, total: int, title: str) -> None:
        self.progress, self.task = progress, None
        self.done = self.failed = self.running = 0
        self.title, self.total = title, total
        console = getattr(progress, "console", None)
        self.plain = console is not None and not console.is_terminal
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
            if self.plain and done + failed:  # on stderr: stdout keeps the result tables only
                print(f"{self._desc()} ({self.done + self.failed}/{self.total})", file=sys.stderr, flush=True)


#: Ray's retries of a failed run (``--max-retries``)
DEFAULT_MAX_RETRIES = 2


def check_executor(
    executor: str, max_retries: int, address: str | None = None, *, workers: int | None = None, jobs: int | None = None
) -> None:
    """``--executor`` must be one of :data:`EXECUTORS` and ``--max-retries`` >= 0; the Ray options
    (``--ray-address``, a ``--max-retries`` other than the default) only with ``--executor ray``, and the local
    process options (``--workers``, a ``--jobs`` other than 1) only with ``--executor local``, where they apply
    (else one :class:`UserError`: an option that would be ignored silently is refused)."""
    if executor not in EXECUTORS:
        raise UserError(f"--executor {executor!r}: allowed values are {', '.join(EXECUTORS)}")
    if max_retries < 0:
        raise UserError(f"--max-retries {max_retries}: must be >= 0")
    if executor == "ray":
        if workers is not None:
            raise UserError(f"--workers {workers}: applies only with --executor local (under Ray, a run's tasks "
                            "are Ray tasks and Ray schedules them)")  # fmt: skip
        if jobs is not None and jobs != 1:
            raise UserError(f"--jobs {jobs}: applies only with --executor local (under Ray, the runs are Ray "
                            "tasks and Ray schedules them)")  # fmt: skip
    if executor != "ray":
        if address is not None:
            raise UserError(f"--ray-address {address!r}: applies only with --executor ray (not {executor})")
        if max_retries != DEFAULT_MAX_RETRIES:
            raise UserError(f"--max-retries {max_retries}: applies only with --executor ray (not {executor}); "
                            "a failed local run is not retried")  # fmt: skip


def execute(
    specs: list[RunSpec],
    out: str | Path,
    *,
    executor: Executor = "local",
    force: bool = False,
    address: str | None = None,
    max_retries: int = DEFAULT_MAX_RETRIES,
    progress: Any = None,
    title: str = "runs",
    raise_errors: bool = False,
    workers: int | None = None,
    jobs: int = 1,
) -> list[SweepItem]:
    """Run every spec (skipping finished ones unless ``force``) and return their outcomes in order.

    ``progress`` is an open ``rich.progress.Progress`` (bars are added to it), ``True`` for the
    runs' own bars, or ``None``/``False``. A run that raises is marked failed and the sweep goes
    on; with ``raise_errors`` (the one-run library call) its error propagates instead. A
    :class:`UserError` raised inside ``run()`` (a config rule checked there) propagates when
    ``specs`` holds one run, like a mistake found while planning; in a longer list it fails its
    run only, whichever of the others are already in the store.
    ``workers``: worker processes for the tasks of each local run (``Context.map``); default
    :func:`default_workers`. Under Ray, tasks are Ray tasks and Ray schedules them.
    ``jobs``: local runs computed at the same time, each in its own single-thread worker process
    (longest first; the driver alone writes the store); a run's own tasks then run in its worker.
    """
    check_executor(executor, max_retries, address, workers=workers, jobs=jobs)
    workers = check_workers(workers)
    check_out_dir(out)
    store = RunStore(out)
    items: list[SweepItem | None] = [None] * len(specs)
    notes: dict[int, str] = {}
    todo = []
    for i, spec in enumerate(specs):
        reason = store.damage(spec.experiment, spec.digest)
        if reason is not None:  # damaged: keep the old copy aside and recompute
            path = store.run_dir(spec.experiment, spec.digest)
            try:
                aside = store.set_aside(spec.experiment, spec.digest)
            except OSError as e:
                raise UserError(f"damaged run {path} ({reason}) cannot be moved aside: {e}") from None
            if aside is not None:  # None: another process repaired it meanwhile (checked under the lock)
                notes[i] = f"damaged run {path} ({reason}); old copy kept at {aside.name}, recomputed"
        existing = store.get(spec.experiment, spec.digest)
        if existing is not None and not force:
            items[i] = SweepItem(spec, "cached", existing)
        else:
            todo.append(i)
    # a run asked for twice (e.g. a grid point two robustness maps share) is computed once: two workers
    # computing it would race for its directory, and its re-entrant lock would be released out of order
    first: dict[tuple[str, str], int] = {}
    repeats: dict[int, int] = {}  # index -> the index of the same run's first spec
    for i in todo:
        j = first.setdefault((specs[i].experiment, specs[i].digest), i)
        if j != i:
            repeats[i] = j
    todo = [i for i in todo if i not in repeats]
    bar = _Bar(None if isinstance(progress, bool) else progress, len(specs), title)
    bar.update(done=len(specs) - len(todo) - len(repeats))
    check_count("--jobs", jobs)
    alone = len(specs) == 1  # the request is one run: a UserError from run() is the user's, as when planning
    cuda = any(specs[i].device.startswith("cuda") for i in todo)
    todo = start_order([specs[i].experiment for i in todo], todo)  # sources of reused results first
    if executor == "local" and jobs > 1 and len(todo) > 1 and not cuda and not raise_errors:
        portable = [i for i in todo if _discoverable(specs[i].experiment)]
        _run_parallel(specs, portable, items, store, bar, force, jobs)
        shipped = set(portable)
        rest = [i for i in todo if i not in shipped]  # registered only in this process: computed here
        _run_local(specs, rest, items, store, bar, progress, raise_errors, force, workers, alone)
    elif executor == "local":
        _run_local(specs, todo, items, store, bar, progress, raise_errors, force, workers, alone)
    else:
        _run_ray(specs, todo, items, store, bar, address, max_retries, force)
    for i, j in repeats.items():
        done = items[j]
        if done is not None:
            items[i] = replace(done, spec=specs[i], status="cached" if done.status == "done" else done.status)
            failed = done.status == "failed"
            bar.update(done=int(not failed), failed=int(failed))
    for i, note in notes.items():
        if items[i] is not None:
            items[i].note = note  # type: ignore[union-attr]
    return [it for it in items if it is not None]


def _run_local(specs, todo, items, store, bar, progress, raise_errors=False, force=False, workers=None,
               alone=False) -> None:  # fmt: skip
    """Compute the runs ``todo`` (indices into ``specs``) here, one after the other. ``alone``: the request
    is this one run, so a :class:`UserError` from it propagates (as with ``raise_errors``)."""
    for i in todo:
        spec = specs[i]
        bar.update(running=1, label=spec.experiment)
        t0 = time.perf_counter()
        try:
            # hold the run's lock from the check to the commit: a second process asking for the same run
            # waits here and then reads the finished run instead of computing it again
            with store.lock(spec.experiment, spec.digest):
                existing = None if force else store.get(spec.experiment, spec.digest)
                if existing is not None:
                    items[i] = SweepItem(spec, "cached", existing)
                    bar.update(done=1, running=0)
                    continue
                computed = compute_run(spec, progress=progress if progress is not None else False,
                                       cache_dir=store.cache_dir, executor="processes", workers=workers)  # fmt: skip
                run = commit_run(store, computed, force=True)
            items[i] = SweepItem(spec, "done", run, seconds=time.perf_counter() - t0)
            bar.update(done=1, running=0)
        except UserError as exc:  # a config rule checked inside run(): this run fails, a sweep goes on
            if raise_errors or alone:
                raise
            items[i] = _failed(store, spec, f"error: {exc}", t0)
            bar.update(failed=1, running=0)
        except _WRITE_ERRORS as exc:
            raise _store_write_error(exc, store) from None
        except Exception as exc:  # the sweep goes on; the run is marked failed with its error
            if raise_errors:
                raise
            items[i] = _failed(store, spec, format_exception_line(exc), t0)
            bar.update(failed=1, running=0)


_WRITE_ERRORS = (PermissionError, NotADirectoryError, FileExistsError, IsADirectoryError)


def _store_write_error(exc: OSError, store: RunStore) -> Exception:
    """A file-system error writing inside the run store is the user's ``--out`` (one UserError naming it); any other
    path is re-raised as it is (it is not the store's)."""
    if not _inside(exc.filename, store.out):
        return exc
    return UserError(f"--out {str(store.out)!r}: cannot write there ({exc.strerror}: {exc.filename})")


def _failed(store: RunStore, spec: RunSpec, error: str, t0: float) -> SweepItem:
    """Mark the run of ``spec`` failed in the store (its error line and config; a later success removes the
    mark) and return its outcome, timed from ``t0``."""
    store.record_failure(spec.experiment, spec.digest, error, spec.config)
    return SweepItem(spec, "failed", error=error, seconds=time.perf_counter() - t0)


def _discoverable(name: str) -> bool:
    """Whether a fresh process finds the experiment through the registry (its module is in the package or a plugin)."""
    from ssldyn.lab.registry import get_experiment

    module = get_experiment(name).__module__
    plugins = {m.strip() for m in os.environ.get("SSLDYN_PLUGINS", "").split(",") if m.strip()}
    return module.startswith("ssldyn.experiments.") or module in plugins


def _compute_in_worker(spec: RunSpec, cache_dir: str, pid_file: str | None = None) -> Any:  # in a run worker
    if pid_file is not None:  # which worker computes this run: the driver names the run whose worker died
        Path(pid_file).write_text(str(os.getpid()))
    return compute_run(spec, cache_dir=cache_dir, executor="inline")


def next_run(queued: list[str], running: list[str], reuses: Callable[[str], tuple[str, ...]]) -> int | None:
    """Which queued run starts next (an index into ``queued``, the experiments in start order).

    The first run none of whose ``reuses`` experiments (:attr:`Experiment.reuses`) is queued or
    running, so that shared cached results are computed once; ``None`` when every queued run waits
    for a running one; ``0`` when nothing runs (a cycle of reuses must not stall the batch).
    """
    busy = set(queued) | set(running)
    for k, name in enumerate(queued):
        if not busy & set(reuses(name)):
            return k
    return None if running else (0 if queued else None)


def _reuses(name: str) -> tuple[str, ...]:
    from ssldyn.lab.registry import get_experiment

    return get_experiment(name).reuses


def critical_paths(names: list[str], est: list[float], reuses: Callable[[str], tuple[str, ...]]) -> list[float]:
    """Each run's critical path: its estimate plus the longest chain of runs in the batch that wait
    for it (they reuse its cached results, :attr:`Experiment.reuses`).

    ``--jobs N`` starts runs longest chain first. By estimate alone a source and its reuser are
    scheduled apart: with issue 21's run times nonlinearity Fig. 11 (1200 s) with Table 1 after it
    (770 s) was a 33-minute chain, but Fig. 4 (1470 s) alone would start first and Table 1 last.
    """
    needs = {name: set(reuses(name)) for name in set(names)}  # one registry look-up per experiment, not per pair
    waiting = [[j for j, other in enumerate(names) if j != i and name in needs[other]] for i, name in enumerate(names)]
    memo: dict[int, float] = {}

    def path(i: int, seen: frozenset[int]) -> float:
        if i not in memo:
            after = [path(j, seen | {i}) for j in waiting[i] if j not in seen]  # a cycle of reuses ends here
            memo[i] = est[i] + max(after, default=0.0)
        return memo[i]

    return [path(i, frozenset()) for i in range(len(names))]


def start_order(names: list[str], todo: list[int]) -> list[int]:
    """``todo`` (runs of the experiments ``names``) reordered so that a run comes after the runs whose
    cached results it reuses (:attr:`Experiment.reuses`), otherwise in the given order: sequential
    and parallel execution then see the same cache, hence give the same results."""
    queued, rest, out = list(names), list(todo), []
    while rest:
        k = next_run(queued, [], _reuses)
        assert k is not None
        queued.pop(k)
        out.append(rest.pop(k))
    return out


#: the message of a run whose worker process died (SIGKILL, the out-of-memory killer, a crash)
WORKER_DIED = "worker process died (signal or out of memory)"


def _death_text(code: int | None) -> str:
    """What ended a run's worker: ``worker process died (signal or out of memory): killed by SIGKILL``."""
    import signal

    if code is None:
        return WORKER_DIED
    if code < 0:
        try:
            return f"{WORKER_DIED}: killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"{WORKER_DIED}: killed by signal {-code}"
    return f"{WORKER_DIED}: exit code {code}"


def _read_pid(pid_file: str) -> int | None:
    try:
        return int(Path(pid_file).read_text().strip())
    except (OSError, ValueError):
        return None


def _dead_runs(broken: list[int], pid_files: dict[int, str], codes: dict[int, int | None]) -> dict[int, int | None]:
    """Of the runs whose futures broke with the pool, those whose own worker died: ``{run: exit code}``.

    A broken pool terminates its other workers with SIGTERM (the runs that only broke because of
    it); a worker that died on its own has another exit code (SIGKILL from the out-of-memory killer,
    a crash). A run whose worker had not started it yet has no PID file.
    """
    import signal

    dead = {}
    for i in broken:
        pid = _read_pid(pid_files[i])
        code = codes.get(pid) if pid is not None else None
        if code is not None and code != -signal.SIGTERM:
            dead[i] = code
    return dead


#: how long the futures of a broken pool may take to end (the pool fails them all at once)
BROKEN_POOL_WAIT_SECONDS = 60.0

#: pool breaks a run may be part of, when the dead worker cannot be named, before it counts as the cause
MAX_UNEXPLAINED_BREAKS = 2


def _run_parallel(specs, todo, items, store, bar, force, jobs) -> None:
    """``jobs`` runs at a time in spawned single-thread processes; lock, commit and failures in the driver.

    A worker that dies (SIGKILL, out of memory) breaks the whole process pool: its run is marked failed
    (:data:`WORKER_DIED`), the pool is rebuilt and the runs that broke only because of the pool are
    submitted again (they keep their locks); the other runs go on."""
    import shutil
    import tempfile
    from concurrent.futures import FIRST_COMPLETED, wait
    from concurrent.futures.process import BrokenProcessPool
    from contextlib import ExitStack

    from ssldyn.lab.registry import get_experiment
    from ssldyn.lab.workers import new_pool, stop_pool, worker_exit_codes

    est = [float(get_experiment(specs[i].experiment).est_seconds[0 if specs[i].preset == "quick" else 1])
           for i in todo]  # fmt: skip
    path = critical_paths([specs[i].experiment for i in todo], est, _reuses)
    order = [todo[k] for k in sorted(range(len(todo)), key=lambda k: -path[k])]  # longest chain first
    held: dict[int, ExitStack] = {}
    later: list[int] = []
    for i in order:  # claim every run this process will compute; runs another process holds are done at the end
        stack = ExitStack()
        if stack.enter_context(store.lock(specs[i].experiment, specs[i].digest, blocking=False)):
            existing = None if force else store.get(specs[i].experiment, specs[i].digest)
            if existing is not None:
                items[i] = SweepItem(specs[i], "cached", existing)
                bar.update(done=1)
                stack.close()
                continue
            held[i] = stack
        else:
            stack.close()
            later.append(i)
    t0s: dict[int, float] = {}
    pid_dir = tempfile.mkdtemp(prefix="ssldyn-runs-")  # the PID of the worker that computes each run
    pid_files = {i: os.path.join(pid_dir, f"{i}.pid") for i in held}
    strikes: dict[int, int] = {}  # unexplained pool breaks each run was part of
    n_workers = min(jobs, max(1, len(held)))
    pool = new_pool(n_workers)  # the lab's workers: one thread, die with the driver
    try:
        futures: dict[Any, int] = {}
        queue = [i for i in order if i in held]
        pending: set[Any] = set()
        cache_dir = str(store.cache_dir.resolve())

        def submit_ready() -> bool:  # up to `jobs` runs at a time, in `order`, reusers after their sources
            while queue and len(pending) < jobs:
                k = next_run([specs[j].experiment for j in queue], [specs[futures[f]].experiment for f in pending],
                             _reuses)  # fmt: skip
                if k is None:
                    break  # the rest waits for a running run whose results it reuses
                i = queue[k]
                with contextlib.suppress(FileNotFoundError):
                    os.remove(pid_files[i])
                try:
                    f = pool.submit(_compute_in_worker, specs[i], cache_dir, pid_files[i])
                except BrokenProcessPool:
                    return False  # a worker died: the caller rebuilds the pool
                queue.pop(k)
                futures[f], t0s[i] = i, time.perf_counter()
                pending.add(f)
            return True

        def collect(f: Any, broken: list[int]) -> None:
            """Commit (or mark failed) the run of a finished future; a future the broken pool failed goes to ``broken``."""
            i = futures.pop(f)
            spec = specs[i]
            try:
                run = commit_run(store, f.result(), force=True)
                items[i] = SweepItem(spec, "done", run, seconds=time.perf_counter() - t0s[i])
                bar.update(done=1, running=min(jobs, len(pending)), label=spec.experiment)
            except BrokenProcessPool:
                broken.append(i)  # its lock stays held: it is submitted again or marked failed below
                return
            except _WRITE_ERRORS as exc:
                raise _store_write_error(exc, store) from None
            except Exception as exc:  # the sweep goes on; the run is marked failed with its error
                err = f"error: {exc}" if isinstance(exc, UserError) else format_exception_line(exc)
                items[i] = _failed(store, spec, err, t0s[i])
                bar.update(failed=1, running=min(jobs, len(pending)), label=spec.experiment)
            held.pop(i).close()

        usable = submit_ready()
        bar.update(running=len(pending))
        rebuilds = 0
        while pending or queue:  # (runs queued, none pending: the pool broke before taking any)
            broken: list[int] = []
            if pending:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                usable = submit_ready()
                for f in done:
                    collect(f, broken)
            if not broken and usable:
                continue
            # a worker died and took the pool with it: every other future ends now (failed with the pool, or
            # finished just before it broke)
            ended, stuck = wait(pending, timeout=BROKEN_POOL_WAIT_SECONDS)
            pending = set()
            for f in ended:
                collect(f, broken)
            broken += [futures.pop(f) for f in stuck]  # submitted as the pool broke: never started
            dead = _dead_runs(broken, pid_files, worker_exit_codes(pool))
            rebuilds += 1
            hopeless = rebuilds > 2 * len(pid_files) + 2  # pools that break before computing anything
            resubmit = []
            for i in broken + (queue if hopeless else []):
                started = _read_pid(pid_files[i]) is not None
                if not dead and started:  # the dead worker cannot be named: each run it may be gets a strike
                    strikes[i] = strikes.get(i, 0) + 1
                if i in dead or strikes.get(i, 0) >= MAX_UNEXPLAINED_BREAKS or hopeless:
                    items[i] = _failed(store, specs[i], _death_text(dead.get(i)), t0s.get(i, time.perf_counter()))
                    bar.update(failed=1, running=0, label=specs[i].experiment)
                    held.pop(i).close()
                else:
                    resubmit.append(i)
            if hopeless:
                queue.clear()
            stop_pool(pool, now=True)
            queue[:0] = [i for i in order if i in resubmit]  # first again, in their order
            if queue:
                pool = new_pool(n_workers)
                usable = submit_ready()
                bar.update(running=len(pending))
    except BaseException:  # an interrupt or an error: end the running workers at once (the command resumes)
        stop_pool(pool, now=True)
        raise
    else:
        stop_pool(pool)
    finally:
        for stack in held.values():
            stack.close()
        shutil.rmtree(pid_dir, ignore_errors=True)
    if later:  # held by another process while we started: wait for it, then read or compute
        _run_local(specs, later, items, store, bar, False, False, force, None)


def _inside(filename: object, root: Path) -> bool:
    try:
        Path(str(filename)).resolve().relative_to(root.resolve())
    except (ValueError, OSError):
        return False
    return filename is not None


def _ray_compute(spec: RunSpec, cache_dir: str):  # executed on a Ray worker
    from ssldyn.contract.context import set_threads

    set_threads(int(os.environ.get("SSLDYN_THREADS", "1")))
    return compute_run(spec, cache_dir=cache_dir, executor="ray")


def ray_worker_env() -> dict[str, str]:
    """Environment of the Ray workers: the driver's plugins, ``PYTHONPATH`` and ``SSLDYN_THREADS``, and
    numpy/scipy's BLAS and OpenMP on the same threads as torch (:data:`ssldyn.lab.workers.BLAS_THREAD_VARS`,
    unless the driver sets them itself), as in the local workers (:func:`ssldyn.lab.workers.one_blas_thread`).
    A Ray worker process loads numpy when it starts, so the variables go in its runtime environment.
    """
    from ssldyn.lab.workers import BLAS_THREAD_VARS

    threads = os.environ.get("SSLDYN_THREADS", "1")
    env = {
        "SSLDYN_PLUGINS": os.environ.get("SSLDYN_PLUGINS", ""),
        "PYTHONPATH": os.pathsep.join(p for p in sys.path if p and os.path.isdir(p)),
        "SSLDYN_THREADS": threads,
    }
    env.update({var: os.environ.get(var, threads) for var in BLAS_THREAD_VARS})
    return env


def _run_ray(specs, todo, items, store, bar, address, max_retries, force=False) -> None:
    try:
        import ray
    except ImportError:
        raise UserError("--executor ray needs Ray: pip install 'ssldyn[distributed]'") from None
    if not todo:
        return
    env = ray_worker_env()
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
            # "local": a new local Ray, as documented. Without it ray.init() joins the cluster named by
            # $RAY_ADDRESS or by the last `ray start`/test cluster's /tmp/ray/ray_current_cluster (stale or
            # another process's), which then refuses num_cpus; `--ray-address auto` is Ray's discovery.
            kw["address"] = "local"
            kw["num_cpus"] = int(os.environ.get("SSLDYN_RAY_CPUS", os.cpu_count() or 1))
        try:
            ray.init(**kw)
        except (ConnectionError, RuntimeError, ValueError) as e:
            raise UserError(f"--ray-address {address!r}: cannot connect to a Ray cluster ({e})") from None
        started_here = True
    try:
        task = ray.remote(_ray_compute)
        cache_dir = str(store.cache_dir.resolve())
        queue = list(todo)  # in start order: the sources of reused results first
        pending: dict[Any, tuple[int, float]] = {}

        def submit_ready() -> None:
            """Submit every queued run none of whose reused experiments is queued or running: a run
            that reads a source's cached sub-results (``Experiment.reuses``) is submitted after the
            source's run has finished, so the shared part is computed once (as with the local executors)."""
            while queue:
                k = next_run([specs[j].experiment for j in queue], [specs[j].experiment for j, _ in pending.values()],
                             _reuses)  # fmt: skip
                if k is None:
                    return  # the rest waits for a running source
                i = queue.pop(k)
                opts: dict[str, Any] = {"max_retries": max_retries, "retry_exceptions": True, "num_cpus": 1}
                if specs[i].device.startswith("cuda"):
                    opts["num_gpus"] = 1
                pending[task.options(**opts).remote(specs[i], cache_dir)] = (i, time.perf_counter())

        submit_ready()
        bar.update(running=len(pending))
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            ref = ready[0]
            i, t0 = pending.pop(ref)
            spec = specs[i]
            try:
                computed = ray.get(ref)
                run = commit_run(store, computed, force=force)
                items[i] = SweepItem(spec, "done", run, seconds=time.perf_counter() - t0)
                bar.update(done=1, running=len(pending), label=spec.experiment)
            except Exception as exc:  # retries exhausted (task error or worker death)
                items[i] = _failed(store, spec, _ray_error_line(exc), t0)
                bar.update(failed=1, running=len(pending), label=spec.experiment)
            submit_ready()  # after the commit: a reusing run starts once its source's run is in the store
    finally:
        if started_here:
            ray.shutdown()


def _ray_error_line(exc: Exception) -> str:
    cause = getattr(exc, "cause", None)
    if isinstance(cause, BaseException):
        return format_exception_line(cause)
    first = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {first[0] if first else ''}"
