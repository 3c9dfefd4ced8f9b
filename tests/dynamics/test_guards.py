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
    g.update(0, torch.tensor(2.0))
    g.update(1, torch.tensor(3.0))
    with pytest.raises(NonFiniteLossError, match=r"^loss became nan at step 2 \(last finite value: 3\)") as e:
        g.update(2, torch.tensor(math.nan))
    assert e.value.step == 2 and e.value.last_finite == 3.0 and e.value.member is None


@pytest.mark.parametrize("lazy", [False, True])
def test_loss_guard_names_the_member_and_its_last_finite_value(lazy):
    g = LossGuard("energy", labels=["a", "b", "c"], lazy=lazy, check_every=None)
    g.update(0, torch.tensor([1.0, 2.0, 3.0]))
    g.update(1, torch.tensor([1.5, 2.5, 3.5]))
    with pytest.raises(NonFiniteLossError, match=r"^energy of c became inf at step 2 \(last finite value: 3.5\)") as e:
        g.update(2, torch.tensor([1.0, 2.0, math.inf]))
        g.check()
    assert (e.value.step, e.value.member, e.value.last_finite) == (2, 2, 3.5)


def test_loss_guard_without_a_finite_value_and_shape_changes():
    g = LossGuard()
    with pytest.raises(NonFiniteLossError, match=r"last finite value: none"):
        g.update(0, torch.tensor([math.nan, 1.0]))
    g = LossGuard()
    g.update(0, torch.ones(3))
    with pytest.raises(ValueError, match="changed shape"):
        g.update(1, torch.ones(2))
    with pytest.raises(ValueError, match="check_every"):
        LossGuard(check_every=0)


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
        train_weight_space(model, x, loss_fn, steps=10, lr=0.01, augment=lambda v, g: v + 0.01, every=None)
    # the two views are equal (v + 0.01) and the outputs are on the sphere (output="sphere"), so the loss of every
    # finite step is Σ_i ‖z_i‖² = n = 8 by hand; the last finite value is the loss of step 3
    assert e.value.step == 4 and e.value.last_finite == pytest.approx(8.0, rel=1e-6)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_diverged_at_is_the_exact_step_for_a_half_precision_loss(dtype):
    """diverged_at was kept in the loss's dtype: step 2049 of a float16 / bfloat16 loss was stored as 2048 (and steps
    above 65504 as inf in float16)."""
    for first_bad in (2049, 70001):
        guard = LossGuard(policy="freeze")
        for step in (0, first_bad - 1, first_bad, first_bad + 1):
            bad = step >= first_bad
            guard.update(step, torch.tensor([1.0, math.inf if bad else 1.0], dtype=dtype))
        assert guard.diverged_at is not None and guard.alive is not None
        assert guard.diverged_at[0].isnan() and float(guard.diverged_at[1]) == first_bad
        assert guard.alive.tolist() == [True, False]


def test_a_limit_is_only_taken_with_the_freeze_policy():
    """LossGuard(limit=...) under the default policy "raise" was accepted and never checked (losses of 1e9 logged with
    no error); now it is one error at construction. With "freeze" a member whose |loss| reaches the limit is frozen."""
    with pytest.raises(ValueError, match=r"LossGuard: limit=100.0 is only for policy='freeze'"):
        LossGuard(limit=100.0)
    guard = LossGuard(policy="freeze", limit=100.0)
    guard.update(0, torch.tensor([1.0, 50.0]))
    guard.update(1, torch.tensor([1.0, 100.0]))
    assert guard.alive is not None and guard.diverged_at is not None
    assert guard.alive.tolist() == [True, False] and float(guard.diverged_at[1]) == 1.0
    LossGuard(limit=math.inf)  # the default: accepted with either policy


# ---------------------------------------------------------------------------- from the mutation audit of the engine
@pytest.mark.parametrize("limit", [0.0, -1.0, math.nan])
def test_a_limit_must_be_positive(limit):
    with pytest.raises(ValueError, match=r"^LossGuard: limit must be > 0, got"):
        LossGuard(policy="freeze", limit=limit)


def test_a_frozen_member_stays_frozen_when_its_loss_is_finite_again():
    """Freezing is from the first bad step on: a later finite loss does not bring the member back."""
    guard = LossGuard(policy="freeze")
    guard.update(0, torch.tensor([1.0, 1.0]))
    guard.update(1, torch.tensor([1.0, math.nan]))
    guard.update(2, torch.tensor([1.0, 1.0]))
    assert guard.alive is not None and guard.diverged_at is not None
    assert guard.alive.tolist() == [True, False] and float(guard.diverged_at[1]) == 1.0
    assert torch.equal(guard.mask(torch.tensor([2.0, 3.0])), torch.tensor([2.0, 0.0]))  # its loss stays masked


def test_a_deferred_guard_checks_every_check_every_updates_counted_from_the_last_check():
    """check_every=3: a non-finite loss at step 0 is reported at the third update (step 2), not earlier, not later;
    a check resets the count, so after a clean check at step 2 a NaN at step 3 is reported at step 5."""
    g = LossGuard(lazy=True, check_every=3)
    g.update(0, torch.tensor(math.nan))
    g.update(1, torch.tensor(1.0))
    with pytest.raises(NonFiniteLossError, match=r"at step 0 \(last finite value: none\)"):
        g.update(2, torch.tensor(1.0))
    g = LossGuard(lazy=True, check_every=3)
    for step in range(3):
        g.update(step, torch.tensor(float(step + 1)))  # the third update checks: all finite
    g.update(3, torch.tensor(math.nan))
    g.update(4, torch.tensor(1.0))
    with pytest.raises(NonFiniteLossError, match=r"at step 3 \(last finite value: 3\)"):
        g.update(5, torch.tensor(1.0))


def test_a_deferred_guard_reports_the_earliest_bad_step_and_the_last_finite_value_before_it():
    """Member 1 is bad first (step 1), member 0 later (step 2): the report names member 1 at step 1. A member whose
    loss is finite again after its bad step keeps the last finite value from before it."""
    g = LossGuard(lazy=True, check_every=None)
    g.update(0, torch.tensor([1.0, 2.0]))
    g.update(1, torch.tensor([1.5, math.nan]))
    g.update(2, torch.tensor([math.inf, 7.0]))
    with pytest.raises(NonFiniteLossError) as e:
        g.check()
    assert (e.value.step, e.value.member, e.value.last_finite) == (1, 1, 2.0)
