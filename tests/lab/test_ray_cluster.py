"""Sweeps on a real two-node Ray cluster started on this machine (``ray.cluster_utils.Cluster``).

* A run that reuses a source's cached sub-result (``Experiment.reuses``) is submitted after the
  source's run has finished: the shared part is computed once, as with the local executors.
* One node is removed mid-sweep: every run still finishes exactly once (the runs that were on the
  lost node are retried on the other), with results identical to a local run and nothing
  half-written in the store.

Skipped only where Ray cannot start a cluster here; the reason is printed.
"""

from __future__ import annotations

import faulthandler
import os
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.slow  # starts a two-node cluster: ~1 min on the shared 2-core CPU

from ssldyn.contract import experiment as contract  # noqa: E402
from ssldyn.lab import registry  # noqa: E402
from ssldyn.lab.executors import execute  # noqa: E402
from ssldyn.lab.runner import plan_run  # noqa: E402

# the toys' names (their module registers them when the cluster fixture loads it as a plugin: importing it
# here would register them at collection, and every other test in the worker would list them)
SOURCE = "variational.zz-ray-source"
REUSER = "variational.zz-ray-reuser"

PLUGIN = "tests.lab.ray_toys"
BOUND_S = 420  # the whole module: a hung cluster ends the test process with a traceback, never the CI job


@pytest.fixture(scope="module")
def cluster():
    from ray.cluster_utils import Cluster

    old = os.environ.get("SSLDYN_PLUGINS")
    os.environ["SSLDYN_PLUGINS"] = ",".join(filter(None, [old, PLUGIN]))
    registry._LOADED = False
    registry.load_all()
    faulthandler.dump_traceback_later(BOUND_S, exit=True)
    if ray.is_initialized():
        ray.shutdown()
    try:
        c = Cluster(
            initialize_head=True,
            head_node_args={
                "num_cpus": 1,
                "include_dashboard": False,
                # a lost node is noticed within ~2 s instead of ~30 s
                "_system_config": {"health_check_period_ms": 500, "health_check_failure_threshold": 4},
            },
        )
        worker = c.add_node(num_cpus=1)
        c.wait_for_nodes()
    except Exception as e:  # any reason Ray cannot start here is a skip, printed
        reason = f"Ray cannot start a two-node cluster on this machine: {type(e).__name__}: {e}"
        print(reason, file=sys.stderr)
        faulthandler.cancel_dump_traceback_later()
        pytest.skip(reason)
    try:
        yield c, worker
    finally:
        if ray.is_initialized():
            ray.shutdown()
        c.shutdown()
        faulthandler.cancel_dump_traceback_later()
        if old is None:
            os.environ.pop("SSLDYN_PLUGINS", None)
        else:
            os.environ["SSLDYN_PLUGINS"] = old
        for name in (SOURCE, REUSER):  # the plugin's toys leave the registry with the cluster (other tests list it)
            contract._REGISTRY.pop(name, None)
        registry._LOADED = False


def _files(folder: Path, prefix: str) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(prefix))


def _same_results(a, b) -> None:
    assert a.run.path.name == b.run.path.name  # same config hash
    ra, rb = a.run.result(), b.run.result()
    assert ra.arrays.keys() == rb.arrays.keys()
    for k in ra.arrays:
        np.testing.assert_array_equal(ra.arrays[k], rb.arrays[k])
    assert ra.summary == rb.summary
    assert [c.to_dict() for c in a.run.claims] == [c.to_dict() for c in b.run.claims]


def _nothing_half_written(out: Path) -> None:
    """Only finished runs in the store: no partial/temporary/set-aside entries, no failure records,
    and every run folder complete (its DONE marker written last)."""
    for exp_dir in (p for p in out.iterdir() if p.is_dir() and not p.name.startswith(".")):
        hidden = [p.name for p in exp_dir.iterdir() if p.name.startswith(".")]
        assert hidden == [], f"left in {exp_dir}: {hidden}"
        assert not list(exp_dir.glob("*.failed.json"))
        for run in exp_dir.iterdir():
            assert (run / "DONE").exists(), f"{run} is not complete"


def test_a_reusing_run_waits_for_its_source_on_ray(cluster, tmp_path):
    c, _ = cluster
    log = tmp_path / "log"
    log.mkdir()
    # the reuser comes first in the list, and the source computes the shared part until the reuser has
    # started (at most 15 s): were both submitted at once, the reuser would miss the cache and compute it too
    specs = [
        plan_run(REUSER, sets={"key": 7, "sleep": 15.0, "log_dir": str(log)}, seeds=1),
        plan_run(SOURCE, sets={"key": 7, "sleep": 15.0, "log_dir": str(log), "wait_for": "attempt-reuser."}, seeds=1),
    ]
    items = execute(specs, tmp_path / "ray", executor="ray", address=c.address)
    assert [it.status for it in items] == ["done", "done"]
    assert len(_files(log, "shared.")) == 1, _files(log, "")  # the shared sub-result was computed once
    # ... by the source, and the reuser's attempt came after it
    (src_attempt,) = _files(log, "attempt-source.")
    (reuse_attempt,) = _files(log, "attempt-reuser.")
    assert (log / src_attempt).stat().st_mtime_ns <= (log / reuse_attempt).stat().st_mtime_ns
    np.testing.assert_array_equal(items[0].run.result().arrays["v"], items[1].run.result().arrays["v"])


def test_sweep_across_two_nodes_survives_losing_one(cluster, tmp_path):
    c, worker = cluster
    log = tmp_path / "log"
    log.mkdir()
    specs = [plan_run(SOURCE, sets={"key": k, "sleep": 2.0, "log_dir": str(log)}, seeds=1) for k in range(6)]
    specs += [plan_run(REUSER, sets={"key": k, "sleep": 2.0, "log_dir": str(log)}, seeds=1) for k in (0, 1)]
    local = execute(specs, tmp_path / "local", executor="local")
    assert [it.status for it in local] == ["done"] * len(specs)
    for p in log.iterdir():
        p.unlink()

    lost: dict[str, object] = {}

    def remove_worker_once_it_runs() -> None:  # mid-sweep: as soon as a run has started on the worker node
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            on_worker = [n for n in _files(log, "attempt-") if f".{worker.node_id}." in n]
            if on_worker:
                lost["runs"] = on_worker
                c.remove_node(worker, allow_graceful=False)
                lost["at"] = time.monotonic()
                return
            time.sleep(0.05)

    killer = threading.Thread(target=remove_worker_once_it_runs, daemon=True)
    killer.start()
    remote = execute(specs, tmp_path / "ray", executor="ray", address=c.address, max_retries=3)
    killer.join(timeout=5)
    assert "at" in lost, "no run was scheduled on the worker node: the sweep did not use both nodes"

    # every run finished exactly once: one committed run per spec, no failures, nothing half-written
    assert [it.status for it in remote] == ["done"] * len(specs), [it.error for it in remote]
    assert len({it.run.path for it in remote}) == len(specs)
    _nothing_half_written(tmp_path / "ray")
    # the runs caught on the lost node were started again (on the head node)
    attempts = _files(log, "attempt-")
    assert len(attempts) > len(specs), attempts
    # a run given one CPU computes with one BLAS thread, like torch (no spinning BLAS threads on shared cores)
    assert {(log / a).read_text() for a in attempts} == {"blas=1"}
    # results identical to the local run
    for a, b in zip(local, remote, strict=True):
        _same_results(a, b)
