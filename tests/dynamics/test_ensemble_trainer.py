"""Ensemble trainer: element-wise SGD vs torch.optim.SGD, members vs lone runs, grouping."""

import numpy as np
import pytest
import torch

from ssldyn.data.tokens import TokenSpec
from ssldyn.dynamics.ensemble_trainer import MAX_ELEMS, EnsembleSGD, TokenRun, plan_ensembles, train_token_ensemble


def test_ensemble_sgd_equals_torch_sgd_per_member():
    torch.manual_seed(0)
    p0 = torch.randn(3, 4, 5, dtype=torch.float64)
    lrs = [0.1, 0.02, 0.5]
    p = torch.nn.Parameter(p0.clone())
    opt = EnsembleSGD([p], torch.tensor(lrs, dtype=torch.float64), momentum=0.9, weight_decay=5e-3)
    refs = [torch.nn.Parameter(p0[e].clone()) for e in range(3)]
    ropts = [torch.optim.SGD([refs[e]], lr=lrs[e], momentum=0.9, weight_decay=5e-3) for e in range(3)]
    for _ in range(5):
        g = torch.randn(3, 4, 5, dtype=torch.float64)
        p.grad = g.clone()
        opt.step()
        for e in range(3):
            refs[e].grad = g[e].clone()
            ropts[e].step()
    for e in range(3):
        torch.testing.assert_close(p.detach()[e], refs[e].detach(), rtol=1e-12, atol=1e-12)


def test_uniform_lr_fused_step_equals_torch_sgd():
    torch.manual_seed(1)
    p0 = torch.randn(3, 4, 5, dtype=torch.float64)
    p = torch.nn.Parameter(p0.clone())
    opt = EnsembleSGD([p], torch.full((3,), 0.05, dtype=torch.float64), momentum=0.9, weight_decay=5e-3)
    assert opt._fused
    ref = torch.nn.Parameter(p0.clone())
    ropt = torch.optim.SGD([ref], lr=0.05, momentum=0.9, weight_decay=5e-3)
    for _ in range(6):
        g = torch.randn(3, 4, 5, dtype=torch.float64)
        p.grad, ref.grad = g.clone(), g.clone()
        opt.step()
        ropt.step()
    torch.testing.assert_close(p.detach(), ref.detach(), rtol=1e-12, atol=1e-12)
    assert not torch.equal(p.detach(), p0)


def test_member_trajectory_equals_lone_run():
    """Tolerance: 1e-4 on χ̄± over 60 steps (float32; only the padded sums' round-off differs)."""
    small = dict(batch=32)
    runs = [
        TokenRun(spec=TokenSpec(P=3), beta=2, activation="relu", loss="infonce", bn="mean_only", seed=1, **small),
        TokenRun(spec=TokenSpec(P=1), beta=1, activation="linear", loss="quadratic", bn="off", seed=2, **small),
        TokenRun(
            spec=TokenSpec(P=5, zeta=5.0),
            beta=1,
            activation="quadratic",
            loss="infonce",
            bn="standard",
            seed=3,
            lr=0.01,
            **small,
        ),
    ]
    ens = train_token_ensemble(runs, steps=60, log_every=20)
    for r, tr in zip(runs, ens):
        lone = train_token_ensemble([r], steps=60, log_every=20)[0]
        np.testing.assert_array_equal(tr.steps, [0, 20, 40, 60])
        np.testing.assert_allclose(tr.chi_plus, lone.chi_plus, atol=1e-4)
        np.testing.assert_allclose(tr.chi_minus, lone.chi_minus, atol=1e-4)
        np.testing.assert_allclose(tr.loss, lone.loss, rtol=1e-4, atol=1e-4)
    # training moves χ̄₊ of the ReLU run
    assert abs(ens[0].chi_plus[-1] - ens[0].chi_plus[0]) > 1e-3


def test_plan_ensembles_partitions_and_bounds_padding():
    Ms = [b * p for b in (1, 2, 5, 10) for p in (1, 3, 5, 10) for _ in range(24)]
    for max_elems in (MAX_ELEMS, 10**9):
        groups = plan_ensembles(Ms, overhead=8, slack=0.25, max_elems=max_elems)
        flat = sorted(i for g in groups for i in g)
        assert flat == list(range(len(Ms)))
        for g in groups:
            pad = max(Ms[i] for i in g)
            assert (pad + 8) * len(g) <= 1.25 * sum(Ms[i] + 8 for i in g) + 1e-9
            assert len(g) * 256 * 10 * pad <= max_elems
    assert len(groups) < 16  # without the size cap: fewer ensembles than distinct (β, P) cells


def test_closed_form_loss_gradient_matches_objectives_autograd():
    from ssldyn.dynamics.ensemble_trainer import contrastive_loss_and_grad
    from ssldyn.objectives import info_nce, quadratic_contrastive_loss

    torch.manual_seed(3)
    z = torch.randn(6, 2, 16, 5, dtype=torch.float64, requires_grad=True)
    kinds = torch.tensor([True, False, True, True, False, False])
    losses, dz = contrastive_loss_and_grad(z.detach(), kinds, 0.1)
    ref = torch.cat(
        [
            info_nce(z[i : i + 1, 0], z[i : i + 1, 1], 0.1, negatives="view1")
            if kinds[i]
            else quadratic_contrastive_loss(z[i : i + 1, 0], z[i : i + 1, 1], 0.1)
            for i in range(6)
        ]
    )
    (g,) = torch.autograd.grad(ref.sum(), z)
    torch.testing.assert_close(losses, ref.detach(), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(dz, g, rtol=1e-10, atol=1e-12)
    # the fused path trains like autograd through the objectives
    run = TokenRun(spec=TokenSpec(P=3), beta=2, batch=32, seed=4)
    a = train_token_ensemble([run], steps=30, log_every=10, fused_loss=True)[0]
    b = train_token_ensemble([run], steps=30, log_every=10, fused_loss=False)[0]
    np.testing.assert_allclose(a.chi_plus, b.chi_plus, atol=1e-4)


def test_ensemble_loss_guard_reports_first_bad_member():
    from ssldyn.dynamics.guards import EnsembleLossGuard, NonFiniteLossError

    g = EnsembleLossGuard(["a", "b", "c"])
    g.update(0, torch.tensor([1.0, 2.0, 3.0]))
    g.update(1, torch.tensor([1.5, float("inf"), 2.5]))  # b goes bad at step 1 (last finite 2.0)
    g.update(2, torch.tensor([float("nan"), 7.0, 2.0]))  # a at step 2 (last finite 1.5); b stays failed
    with pytest.raises(NonFiniteLossError, match=r"loss of b became inf at step 1 \(last finite value: 2\)") as e:
        g.check()
    assert e.value.step == 1 and e.value.last_finite == 2.0
    ok = EnsembleLossGuard()
    ok.update(0, torch.tensor([1.0]))
    ok.check()


def test_diverging_member_stops_training_with_step_and_last_finite_loss():
    from ssldyn.dynamics.guards import NonFiniteLossError

    good = TokenRun(spec=TokenSpec(P=3), beta=1, bn="off", seed=1, batch=32)
    bad = TokenRun(spec=TokenSpec(P=3), beta=1, bn="off", seed=2, batch=32, lr=1e4)
    with pytest.raises(NonFiniteLossError, match=r"relu/infonce/bn=off/beta=1/P=3/zeta=1.0/seed=2") as e:
        train_token_ensemble([good, bad], steps=200, log_every=50)
    step = e.value.step
    assert 0 < step < 200
    # the same run alone for exactly `step` steps never sees the non-finite loss; its last loss
    # (step − 1, recorded by the final probe) is the guard's last finite value
    lone = train_token_ensemble([bad], steps=step, log_every=1)[0]
    assert np.isfinite(lone.loss).all()
    np.testing.assert_allclose(lone.loss[-1], e.value.last_finite, rtol=1e-3)
    # the healthy member alone trains through
    assert np.isfinite(train_token_ensemble([good], steps=step + 5, log_every=50)[0].loss).all()
