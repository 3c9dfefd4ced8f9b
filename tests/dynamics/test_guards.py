import math

import pytest
import torch

from ssldyn.dynamics.guards import LossGuard, NonFiniteLossError, check_finite


def test_check_finite_names_input():
    check_finite("x", torch.ones(3))
    check_finite("labels", torch.tensor([1, 2]))
    with pytest.raises(ValueError, match=r"^data: 2 non-finite value\(s\).*shape \(2, 2\)"):
        check_finite("data", torch.tensor([[1.0, math.nan], [math.inf, 0.0]]))


def test_loss_guard_reports_step_and_last_finite_value():
    g = LossGuard()
    g(0, torch.tensor(2.0))
    g(1, torch.tensor([1.0, 3.0]))  # per-member losses: mean 2.0
    with pytest.raises(NonFiniteLossError, match=r"loss became nan at step 2 \(last finite value: 2\)") as e:
        g(2, torch.tensor([1.0, math.nan]))
    assert e.value.step == 2 and e.value.last_finite == 2.0
