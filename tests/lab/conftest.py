import contextlib
import os
import sys

import pytest

from ssldyn.contract import experiment as contract
from ssldyn.lab import registry


@contextlib.contextmanager
def plugin_loaded(plugin: str = "tests.lab.toy_plugin"):
    """Load ``plugin``'s experiments (through ``SSLDYN_PLUGINS``, as users do) and afterwards restore the
    registry and the variable: the toys must not show up in other tests' ``ssldyn list``. The plugin module
    leaves ``sys.modules`` too, so that the next load imports (and registers) it again."""
    # the shipped experiments first: their modules stay imported, so a registry restored without them (the state
    # before the first load_all) would never register them again in this process
    registry.load_all()
    saved, loaded, env = dict(contract._REGISTRY), registry._LOADED, os.environ.get("SSLDYN_PLUGINS")
    os.environ["SSLDYN_PLUGINS"] = plugin
    sys.modules.pop(plugin, None)
    registry._LOADED = False
    registry.load_all()
    try:
        yield
    finally:
        sys.modules.pop(plugin, None)
        contract._REGISTRY.clear()
        contract._REGISTRY.update(saved)
        registry._LOADED = loaded
        if env is None:
            os.environ.pop("SSLDYN_PLUGINS", None)
        else:
            os.environ["SSLDYN_PLUGINS"] = env


def init_local_ray(**env_vars: str) -> None:
    """Start a new local Ray with 2 CPUs for a test; its workers import from this process's ``sys.path`` and get
    ``env_vars``. ``address="local"``: never the cluster another test (``ray.cluster_utils.Cluster`` on the other
    xdist worker) left in ``/tmp/ray/ray_current_cluster``."""
    import ray

    path = os.pathsep.join(p for p in sys.path if p)
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False,
             runtime_env={"env_vars": {"PYTHONPATH": path, **env_vars}})  # fmt: skip


@pytest.fixture
def toy():
    """Register the toy experiment for one test."""
    from tests.lab.toy import CALLS, Toy

    registry.load_all()
    contract.register(Toy)
    CALLS["run"] = 0
    yield Toy
    contract._REGISTRY.pop(Toy.name, None)


def _registered(cls):
    """Register ``cls`` (after the shipped experiments) for one test, and unregister it afterwards."""
    registry.load_all()
    contract.register(cls)
    yield cls
    contract._REGISTRY.pop(cls.name, None)


@pytest.fixture
def toy_sweep():
    """Register the toy sweep experiment (a knob ``lr``, declared claims) for one test."""
    from tests.lab.toy import ToySweep

    yield from _registered(ToySweep)


@pytest.fixture
def toy_map():
    """Register the toy experiment with a control and a robustness map for one test."""
    from tests.lab.toy import ToyMap

    yield from _registered(ToyMap)


@pytest.fixture
def toy_rule():
    """Register the toy whose run() refuses x = 2 (UserError) and crashes at x = 3 (its map's second point)."""
    from tests.lab.toy import ToyRule

    yield from _registered(ToyRule)
