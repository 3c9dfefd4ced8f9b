import pytest

from ssldyn.lab import registry


@pytest.fixture
def toy():
    """Register the toy experiment for one test."""
    from tests.lab.toy import CALLS, Toy

    registry.load_all()
    registry.register(Toy)
    CALLS["run"] = 0
    yield Toy
    registry._REGISTRY.pop(Toy.name, None)


@pytest.fixture
def toy_sweep():
    """Register the toy sweep experiment (a knob ``lr``, declared claims) for one test."""
    from tests.lab.toy import ToySweep

    registry.load_all()
    registry.register(ToySweep)
    yield ToySweep
    registry._REGISTRY.pop(ToySweep.name, None)


@pytest.fixture
def toy_map():
    """Register the toy experiment with a control and a robustness map for one test."""
    from tests.lab.toy import ToyMap

    registry.load_all()
    registry.register(ToyMap)
    yield ToyMap
    registry._REGISTRY.pop(ToyMap.name, None)
