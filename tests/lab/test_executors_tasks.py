"""Tasks of one run (``Context.map`` / ``as_completed``): in-process, a local process pool, Ray."""

import os

import pytest
import torch

from ssldyn.contract.context import Context
from ssldyn.errors import UserError
from ssldyn.lab.tasks import Tasks, check_workers, default_workers, map_tasks
from tests.lab import tasks_toy


def test_inline_map_is_ordered_and_single_threaded():
    ctx = Context()
    assert ctx.tasks is None  # outside the lab: this process (inline_tasks)
    assert ctx.map(tasks_toy.square, range(6)) == [0, 1, 4, 9, 16, 25]
    torch.set_num_threads(2)
    try:
        pid, threads = ctx.map(tasks_toy.worker_info, [0])[0]
        assert pid == os.getpid() and threads == 1  # a task runs on one torch thread everywhere
        assert torch.get_num_threads() == 2  # restored
    finally:
        torch.set_num_threads(1)


def test_process_pool_gives_the_in_process_results_in_order():
    ctx = Context(tasks=Tasks("processes", workers=2))
    items = list(range(7))
    assert ctx.map(tasks_toy.square, items) == [x * x for x in items]
    assert ctx.map(tasks_toy.matmul_sum, items) == Context().map(tasks_toy.matmul_sum, items)  # bitwise
    info = ctx.map(tasks_toy.worker_info, range(8))
    pids = {pid for pid, _ in info}
    assert os.getpid() not in pids and 1 <= len(pids) <= 2
    assert {threads for _, threads in info} == {1}
    # as_completed yields every index once
    assert sorted(i for i, _ in ctx.as_completed(tasks_toy.square, items)) == items


def test_a_failing_task_raises_its_error():
    for ctx in (Context(), Context(tasks=Tasks("processes", workers=2))):
        with pytest.raises(ValueError, match="task 3 failed"):
            ctx.map(tasks_toy.fail_on_three, range(6))


def test_one_task_or_a_cuda_device_runs_in_process():
    # (no pool is needed for one task; on a GPU the tasks share the device in this process)
    assert list(map_tasks(tasks_toy.worker_info, [0], executor="processes", workers=2))[0][1][0] == os.getpid()
    out = list(map_tasks(tasks_toy.worker_info, [0, 1], executor="processes", workers=2, device="cuda"))
    assert {pid for _, (pid, _) in out} == {os.getpid()}


def test_worker_count_is_a_lab_setting(monkeypatch):
    if hasattr(os, "sched_getaffinity"):  # Linux
        assert default_workers() == len(os.sched_getaffinity(0))  # the cores this process may use
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 3, 5}, raising=False)
    assert default_workers() == 3  # the affinity mask, not the machine's core count
    assert check_workers(None) == default_workers() and check_workers(3) == 3
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(UserError, match="--workers"):
            check_workers(bad)
    with pytest.raises(ValueError, match="executor"):
        list(map_tasks(tasks_toy.square, [1, 2], executor="threads"))


def test_the_lab_runs_experiments_with_its_default_pool(tmp_path, monkeypatch):
    """``run_experiment`` hands the experiment a process pool of the default worker count and the store's cache."""
    from ssldyn.lab import runner

    seen = {}
    real = runner.Context

    def spy(*a, **k):
        ctx = real(*a, **k)
        seen.update(tasks=ctx.tasks, cache=type(ctx.cache).__name__)
        return ctx

    monkeypatch.setattr(runner, "Context", spy)
    from ssldyn.lab.api import run_experiment
    from tests.lab.conftest import plugin_loaded

    with plugin_loaded():
        run_experiment("variational.zz-toy", out=tmp_path)
    assert seen == {"tasks": Tasks("processes", workers=default_workers()), "cache": "RunCache"}


def test_ray_tasks_give_the_in_process_results():
    ray = pytest.importorskip("ray")
    from tests.lab.conftest import init_local_ray

    init_local_ray()
    try:
        ctx = Context(tasks=Tasks("ray"))
        items = list(range(5))
        assert ctx.map(tasks_toy.matmul_sum, items) == Context().map(tasks_toy.matmul_sum, items)
        assert {threads for _, threads in ctx.map(tasks_toy.worker_info, range(4))} == {1}
        with pytest.raises(Exception, match="task 3 failed"):
            ctx.map(tasks_toy.fail_on_three, range(5))
    finally:
        ray.shutdown()
    with pytest.raises(ValueError, match="Ray is not initialised"):
        Context(tasks=Tasks("ray")).map(tasks_toy.square, [1, 2])


def test_progress_bars_outside_the_lab_show_tracked_loops_and_close():
    """``Context(progress=True)`` used as a library: ``with ctx.progress_bars():`` opens one display for the
    run (``track`` adds a task to it and removes it when the loop ends) and closes it afterwards; without
    ``progress`` nothing is opened. ``track`` yields every item either way."""
    ctx = Context(progress=True)
    with ctx.progress_bars() as inner:
        assert inner is ctx and ctx._bar is not None
        seen = []
        for i in ctx.track(range(4), description="toy"):
            seen.append(i)
            assert [t.description for t in ctx._bar.tasks] == ["toy"]
        assert seen == [0, 1, 2, 3] and list(ctx._bar.tasks) == []
    assert ctx._bar is None
    quiet = Context()
    with quiet.progress_bars():
        assert quiet._bar is None and list(quiet.track([5, 6])) == [5, 6]
