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
