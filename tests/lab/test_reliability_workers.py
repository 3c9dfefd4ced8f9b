"""Workers die with their driver, whatever signal it gets (issue 32, item 9; issue 29: one pool).

A real driver process starts the lab's pool (the pool of ``Context.map`` tasks, the pool of
``--jobs N`` runs: both are :func:`ssldyn.lab.workers.new_pool`), its workers start a long task,
and the driver is killed. Every process the driver had started (the workers and
multiprocessing's resource tracker) must be gone within seconds.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ssldyn.lab import tasks, workers

ROOT = Path(__file__).resolve().parents[2]

DRIVER = """
import os, sys, time
from ssldyn.lab import tasks
from ssldyn.lab.workers import new_pool

def task(path):
    with open(path, "w") as fh:
        fh.write(str(os.getpid()))
    time.sleep(300)

def main():
    kind, folder, n = sys.argv[1], sys.argv[2], 2
    pool = tasks._pool(n) if kind == "tasks" else new_pool(n)
    futures = [pool.submit(task, os.path.join(folder, f"w{i}")) for i in range(n)]
    print("started", flush=True)
    time.sleep(300)

if __name__ == "__main__":
    main()
"""


def _children(pid: int) -> set[int]:
    out = set()
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            if int(stat[stat.rindex(")") + 2 :].split()[1]) == pid:
                out.add(int(d.name))
    return out


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"  # a zombie has ended (it waits for PID 1 to reap it)


def _kill_and_expect_no_survivors(driver: subprocess.Popen, kids: set[int], sig: int) -> None:
    """Send ``sig`` to the driver; within 10 s (the watchdog polls every WATCHDOG_SECONDS) none of its
    children may be alive."""
    driver.send_signal(sig)
    driver.wait(10)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(_alive(p) for p in kids):
        time.sleep(0.1)
    assert not [p for p in kids if _alive(p)], "processes outlived their driver"


def _reap(driver: subprocess.Popen, kids: set[int]) -> None:
    """Leave nothing behind, whatever the test's outcome."""
    driver.kill()
    driver.wait(10)
    if driver.stdout is not None:
        driver.stdout.close()
    for p in kids:
        if _alive(p):
            os.kill(p, signal.SIGKILL)


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc to list the driver's processes")
@pytest.mark.parametrize("kind, sig", [("tasks", signal.SIGTERM), ("runs", signal.SIGKILL)])
def test_workers_and_resource_tracker_die_with_the_driver(tmp_path, kind, sig):
    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    driver = subprocess.Popen([sys.executable, str(script), kind, str(tmp_path)], env=env, stdout=subprocess.PIPE,
                              text=True)  # fmt: skip
    kids: set[int] = set()
    try:
        assert driver.stdout.readline().strip() == "started"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not all((tmp_path / f"w{i}").is_file() for i in range(2)):
            time.sleep(0.1)  # both workers have run their initialiser and are in their task
        busy = {int((tmp_path / f"w{i}").read_text()) for i in range(2)}
        kids = _children(driver.pid)
        assert busy <= kids and len(kids) >= 3, (busy, kids)  # the workers and the resource tracker
        _kill_and_expect_no_survivors(driver, kids, sig)
    finally:
        _reap(driver, kids)


def test_worker_ends_itself_when_reparented(monkeypatch):
    """The watchdog: a worker whose parent PID changed exits (the path a non-Linux system relies on)."""
    exits = []
    ppids = iter([100, 100, 1])
    monkeypatch.setattr(workers.os, "getppid", lambda: next(ppids))
    monkeypatch.setattr(workers.os, "_exit", lambda code: (exits.append(code), (_ for _ in ()).throw(SystemExit)))
    with pytest.raises(SystemExit):
        workers._watch_parent(100, 0.0)
    assert exits == [70]


def test_one_pool_kind_for_tasks_and_runs():
    """Issue 29: the tasks pool and the --jobs pool are both lab.workers pools (one initialiser)."""
    from ssldyn.lab import executors

    src = Path(executors.__file__).read_text() + Path(tasks.__file__).read_text()
    assert "ProcessPoolExecutor(" not in src and "_processes" not in src
    assert "def _worker_init" not in src and "def _run_worker_init" not in src
    pool = tasks._pool(2)
    try:
        assert pool._initializer is workers.worker_init and pool._initargs[0] == os.getpid()
        assert sorted(pool.map(abs, [-1, -2, -3])) == [1, 2, 3]
    finally:
        tasks.shutdown_pools()


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc to list the driver's processes")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_cli_jobs_2_workers_die_with_the_driver(tmp_path, sig):
    """The attack of the issue: `ssldyn run ... --jobs 2` killed while two runs compute in their workers."""
    env = {**os.environ, "SSLDYN_PLUGINS": "tests.lab.toy_plugin", "SSLDYN_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}  # fmt: skip
    cmd = [sys.executable, "-m", "ssldyn.lab.cli", "run", "variational.zz-slow", "--quick", "--seeds", "1",
           "--sweep", "sleep=60,61", "--jobs", "2", "--out", str(tmp_path / "out")]  # fmt: skip
    driver = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    kids: set[int] = set()
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:  # two run workers (and the resource tracker) are up
            kids = _children(driver.pid)
            if len(kids) >= 3:
                break
            time.sleep(0.2)
        assert len(kids) >= 3, kids
        time.sleep(1.5)  # the workers are computing their runs (sleeping 60 s)
        kids = _children(driver.pid)
        _kill_and_expect_no_survivors(driver, kids, sig)
    finally:
        _reap(driver, kids)


def test_stopping_a_pool_now_leaves_no_pool_thread_to_race_the_exit_hook(monkeypatch):
    # the pool's manager thread closes its wake-up pipe when it sees its workers end; the interpreter's exit
    # hook (concurrent.futures' _python_exit) writes to that pipe: if the thread is still closing it, the
    # write fails ("OSError: [Errno 9] Bad file descriptor", a traceback after `reproduce`'s interrupt message;
    # seen once in a full -n 2 run). A slow close makes the window certain: stop_pool must wait it out.
    import threading
    from concurrent.futures import process

    if sys.version_info >= (3, 14):
        pytest.skip("Python >= 3.14 ends the workers with terminate_workers()")
    closing = process._ExecutorManagerThread.join_executor_internals

    def slow_close(self):
        time.sleep(1.0)
        closing(self)

    monkeypatch.setattr(process._ExecutorManagerThread, "join_executor_internals", slow_close)
    pool = workers.new_pool(2)
    futures = [pool.submit(time.sleep, 30) for _ in range(3)]
    deadline = time.time() + 60
    while time.time() < deadline and not any(f.running() for f in futures):
        time.sleep(0.05)
    assert any(f.running() for f in futures), "the pool never started its workers"
    # this pool's manager thread (not any pool's: an earlier test in this worker process may still be
    # closing one of its own, which is not this stop's business)
    manager = pool._executor_manager_thread
    assert isinstance(manager, process._ExecutorManagerThread) and manager.is_alive()
    procs = list(pool._processes.values())
    workers.stop_pool(pool, now=True)
    # it did not wait for the running tasks (30 s sleeps): none returned, and their workers are gone
    assert all(f.done() for f in futures), futures
    assert all(f.cancelled() or f.exception() is not None for f in futures), futures  # never a finished sleep
    assert procs and not any(p.is_alive() for p in procs)
    assert not manager.is_alive(), f"the pool's manager thread still runs after stop_pool(now=True): {manager}"
    assert manager not in threading.enumerate()
