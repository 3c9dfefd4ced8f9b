import math

import numpy as np
import pytest
import torch

from ssldyn.lab.claims import Claim, check


def test_relations():
    assert check("a", "s", "l", 0.5, gt=0.0).passed
    assert not check("a", "s", "l", 0.0, gt=0.0).passed
    assert check("a", "s", "l", 0.0, ge=0.0).passed
    assert check("a", "s", "l", -1, lt=0).passed and not check("a", "s", "l", 1, le=0).passed
    assert check("a", "s", "l", 0.5, between=(0, 1)).passed and not check("a", "s", "l", 2, between=(0, 1)).passed
    assert check("a", "s", "l", 3, equals=3).passed and not check("a", "s", "l", 3, equals=4).passed
    c = check("a", "s", "l", np.float32(0.25), le=1.0)
    assert isinstance(c.measured, float) and c.expected == "<= 1"
    assert check("a", "s", "l", torch.tensor(2.0), gt=1).measured == 2.0


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_never_passes(bad):
    assert not check("a", "s", "l", bad, lt=1e9).passed
    assert not check("a", "s", "l", bad, gt=-1e9).passed
    assert not check("a", "s", "l", bad, between=(-1e9, 1e9)).passed


def test_holds_needs_description_and_one_relation():
    with pytest.raises(ValueError):
        check("a", "s", "l", 1.0, holds=True)
    with pytest.raises(ValueError):
        check("a", "s", "l", 1.0, gt=0, lt=2)
    c = check("a", "s", "l", "text", holds=False, expected="all converge")
    assert not c.passed and Claim.from_dict(c.to_dict()) == c
    assert check("a", "s", "l", math.nan, holds=True, expected="x").to_dict()["measured"] == "nan"
