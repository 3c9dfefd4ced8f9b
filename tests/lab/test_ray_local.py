"""``--executor ray`` without ``--ray-address`` starts a new local Ray, as its help says.

Without ``address="local"``, ``ray.init()`` joins whatever cluster ``$RAY_ADDRESS`` or the last
``ray start`` (``/tmp/ray/ray_current_cluster``, also written by ``ray.cluster_utils.Cluster`` in
another test worker) names, and then refuses ``num_cpus``: a CI run failed that way.
"""

import pytest

ray = pytest.importorskip("ray")

from ssldyn.lab.executors import execute  # noqa: E402
from ssldyn.lab.runner import plan_run  # noqa: E402
from tests.lab.conftest import plugin_loaded  # noqa: E402


def test_no_address_starts_a_local_ray_whatever_ray_address_names(tmp_path, monkeypatch):
    monkeypatch.setenv("SSLDYN_RAY_CPUS", "1")
    # a cluster that does not exist: joining it would fail (ValueError on num_cpus, or no connection)
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:9")
    if ray.is_initialized():
        ray.shutdown()
    with plugin_loaded():
        spec = plan_run("variational.zz-toy", seed=0)
        (item,) = execute([spec], tmp_path / "ray", executor="ray")
        assert item.status == "done"
        assert not ray.is_initialized()  # the executor shut down the Ray it started
        local = execute([spec], tmp_path / "local", executor="local")[0]
        assert local.run.result().tables["metrics"].equals(item.run.result().tables["metrics"])
