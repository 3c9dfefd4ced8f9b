"""Sweeps on a local Ray (2 CPUs): same results as in-process; a killed worker is retried."""

import numpy as np
import pytest

ray = pytest.importorskip("ray")

from ssldyn.lab.executors import execute  # noqa: E402
from ssldyn.lab.runner import plan_run  # noqa: E402
from tests.lab.conftest import init_local_ray, plugin_loaded  # noqa: E402


@pytest.fixture(scope="module")
def local_ray():
    with plugin_loaded():
        init_local_ray(SSLDYN_PLUGINS="tests.lab.toy_plugin", SSLDYN_THREADS="1")
        yield
        ray.shutdown()


def test_ray_sweep_equals_local(local_ray, tmp_path):
    specs = [plan_run("variational.zz-toy", sets={"optim": {"lr": lr}}, seed=s) for lr in (0.1, 0.3) for s in (0, 1)]
    local = execute(specs, tmp_path / "local", executor="local")
    remote = execute(specs, tmp_path / "ray", executor="ray")
    assert [it.status for it in remote] == ["done"] * 4
    for a, b in zip(local, remote):
        assert a.run.path.name == b.run.path.name  # same config hash
        np.testing.assert_array_equal(a.run.result().arrays["x"], b.run.result().arrays["x"])
        assert a.run.result().tables["metrics"].equals(b.run.result().tables["metrics"])
        assert [c.to_dict() for c in a.run.claims] == [c.to_dict() for c in b.run.claims]
    # the driver wrote the store: nothing partial is left behind
    assert not list((tmp_path / "ray").glob("*/.*"))


def test_killed_worker_is_retried_and_failures_do_not_stop_the_sweep(local_ray, tmp_path):
    marker = tmp_path / "killed-once"
    specs = [
        plan_run("variational.zz-kill-once", sets={"marker": str(marker), "value": 3}),
        plan_run("variational.zz-toy", sets={"fail": True}),
        plan_run("variational.zz-toy"),
    ]
    items = execute(specs, tmp_path / "out", executor="ray", max_retries=2)
    assert marker.exists()  # the first attempt really died
    assert items[0].status == "done" and items[0].run.claims[0].passed
    assert int(marker.read_text()) != items[0].run.summary["pid"]  # the retry ran in another process
    assert items[1].status == "failed" and "toy failure" in items[1].error
    assert items[2].status == "done"
    failed = list((tmp_path / "out").glob("*/*.failed.json"))
    assert len(failed) == 1 and not (tmp_path / "out" / specs[1].experiment / specs[1].digest).exists()
