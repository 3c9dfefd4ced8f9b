"""The lab's one kind of process pool: spawned single-thread workers that die with their driver.

Both the tasks of one run (:mod:`ssldyn.lab.tasks`) and the runs of ``--jobs N``
(:mod:`ssldyn.lab.executors`) use :func:`new_pool` and :func:`stop_pool`. A worker:

* runs torch on ONE thread (parallelism comes from the workers), and numpy/scipy's BLAS and
  OpenMP on one thread too (:data:`BLAS_THREAD_VARS`, unless the driver's environment sets
  them), and keeps a malloc top pad (:func:`~ssldyn.contract.threads.keep_heap_pad`);
* dies with its driver, whatever ends the driver (SIGTERM, SIGKILL, a crash): on Linux the
  kernel sends it SIGKILL when the driver exits (``prctl(PR_SET_PDEATHSIG)`` through ctypes,
  armed only when the worker was started by the driver's main thread, the thread whose exit
  the kernel watches), and everywhere a daemon thread polls the parent PID
  (:data:`WATCHDOG_SECONDS`) and ends the worker once it has been re-parented. With every
  worker gone, multiprocessing's resource tracker sees its pipe close and exits too.
"""

from __future__ import annotations

import os
import sys
import threading
from concurrent.futures import ProcessPoolExecutor
from typing import Any

__all__ = [
    "WATCHDOG_SECONDS",
    "BLAS_THREAD_VARS",
    "worker_init",
    "new_pool",
    "stop_pool",
    "worker_exit_codes",
    "one_blas_thread",
]

#: how often a worker checks that its driver is alive (seconds)
WATCHDOG_SECONDS = 0.5

_PR_SET_PDEATHSIG = 1

#: numpy/scipy's BLAS (OpenBLAS, MKL) and scikit-learn's OpenMP read these when they load
BLAS_THREAD_VARS = ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_NUM_THREADS")


def one_blas_thread(threads: int = 1) -> None:
    """numpy/scipy's BLAS and OpenMP on ``threads`` threads in this process, as torch is.

    A worker given one core must not run a BLAS that spins one thread per core: with the cores
    shared, OpenBLAS's busy-waiting threads made an SVD of 1000 × 400 10–30× slower and the
    k-means, PCA/t-SNE and linear probes of ``variational.fig1`` 1.3–8× slower, for the same
    results (benchmarks/README.md, issue 31). The variables are set (where the driver's
    environment does not set them) before numpy loads, which is when the libraries read them;
    if numpy is already loaded (a user's ``__main__`` imported it), ``threadpoolctl`` limits the
    loaded libraries instead.
    """
    for var in BLAS_THREAD_VARS:
        os.environ.setdefault(var, str(threads))
    if "numpy" in sys.modules:
        from threadpoolctl import threadpool_limits

        threadpool_limits(threads)  # kept for the process's life: not used as a context manager


def _parent_death_signal() -> bool:
    """Ask the kernel to SIGKILL this process when its parent thread ends (Linux only)."""
    try:
        import ctypes
        import signal

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) == 0
    except (OSError, AttributeError, TypeError):
        return False


def _watch_parent(parent: int, interval: float) -> None:
    import time

    while True:
        if os.getppid() != parent:  # re-parented: the driver has gone
            os._exit(70)
        time.sleep(interval)


def worker_init(parent: int, from_main_thread: bool = False) -> None:
    """Initializer of every lab worker: die with ``parent``, one torch and BLAS thread, a kept heap."""
    if os.getppid() != parent:  # the driver died before we started
        os._exit(70)
    if from_main_thread and _parent_death_signal() and os.getppid() != parent:
        os._exit(70)  # it died between the check and the prctl
    threading.Thread(target=_watch_parent, args=(parent, WATCHDOG_SECONDS), daemon=True,
                     name="ssldyn-parent-watchdog").start()  # fmt: skip
    one_blas_thread()  # before torch, which loads numpy
    import torch

    from ssldyn.contract.threads import keep_heap_pad

    torch.set_num_threads(1)
    keep_heap_pad()  # tasks free and re-allocate MB-sized tensors: keep the heap, no page faults


def new_pool(workers: int) -> ProcessPoolExecutor:
    """A pool of ``workers`` spawned processes initialised by :func:`worker_init`.

    The parent-death signal is armed only when the pool is made on the main thread: Python's
    pool starts workers from the thread that submits, and the kernel sends the signal when that
    thread ends, which must not be a helper thread that ends before the driver does (the
    watchdog still applies).
    """
    import multiprocessing as mp

    main = threading.current_thread() is threading.main_thread()
    return ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn"), initializer=worker_init,
                               initargs=(os.getpid(), main))  # fmt: skip


def worker_exit_codes(pool: Any, timeout: float = 10.0) -> dict[int, int | None]:
    """``{PID: exit code}`` of a broken pool's worker processes (``None``: still running after ``timeout`` s).

    A pool whose worker died terminates its other workers (SIGTERM): the exit codes tell the worker
    that died on its own (SIGKILL from the out-of-memory killer, a crash) from those. Empty where the
    pool does not expose its processes.

    The pool's manager thread reaps the workers of a broken pool itself (``waitpid``), after it has
    failed the futures: joined from this thread at the same time, a worker reaped by the other
    thread reads as ``ECHILD``, i.e. exit code ``None``, and the worker that died could not be
    named. So the manager thread is waited for first; the joins below then only read the codes.
    """
    import time

    deadline = time.monotonic() + timeout
    manager = getattr(pool, "_executor_manager_thread", None)  # (with stop_pool, the only readers of these fields)
    if manager is not None and manager.is_alive():
        manager.join(timeout=timeout)
    procs = dict(getattr(pool, "_processes", None) or {})
    for proc in procs.values():
        proc.join(timeout=max(0.0, deadline - time.monotonic()))
    return {int(pid): proc.exitcode for pid, proc in procs.items()}


def stop_pool(pool: Any, *, now: bool = False) -> None:
    """Shut a pool down. ``now``: cancel queued work and end running workers at once (an interrupt
    or an error; their partial outputs are never read), instead of waiting for them."""
    if not now:
        pool.shutdown(wait=True, cancel_futures=True)
        return
    terminate = getattr(pool, "terminate_workers", None)  # Python >= 3.14
    if terminate is not None:
        terminate()
        return
    procs = list((getattr(pool, "_processes", None) or {}).values())  # the only readers of these private fields
    manager = getattr(pool, "_executor_manager_thread", None)  # (Python < 3.14: no terminate_workers)
    pool.shutdown(wait=False, cancel_futures=True)
    for proc in procs:
        if proc.is_alive():
            proc.terminate()
    for proc in procs:
        proc.join(timeout=10)
    # let the pool's manager thread see its dead workers and close its wake-up pipe now: left running, it
    # races the interpreter's exit hook, which writes to that pipe while the thread closes it (CPython 3.11:
    # "OSError: [Errno 9] Bad file descriptor" and a traceback after the interrupt message)
    if manager is not None and manager.is_alive():
        manager.join(timeout=10)
