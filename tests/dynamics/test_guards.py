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


def test_weight_space_training_stops_on_nan_input_and_non_finite_loss():
    from torch import nn

    from ssldyn.dynamics.weight_space import train_weight_space

    model = nn.Linear(3, 2)
    x = torch.randn(8, 3)
    bad = x.clone()
    bad[2, 1] = math.nan
    with pytest.raises(ValueError, match="^x: 1 non-finite"):
        train_weight_space(model, bad, lambda z: (z**2).sum(), steps=3, lr=0.1)
    calls = {"n": 0}

    def loss_fn(z1, z2):  # one call per step (no logging): finite for steps 0-3, NaN from step 4
        calls["n"] += 1
        return (z1 * z2).sum() * (math.nan if calls["n"] > 4 else 1.0)

    with pytest.raises(NonFiniteLossError, match=r"at step 4 \(last finite value: ") as e:
        train_weight_space(model, x, loss_fn, steps=10, lr=0.01, views=lambda v: v + 0.01, log_every=None)
    assert e.value.step == 4 and math.isfinite(e.value.last_finite)
