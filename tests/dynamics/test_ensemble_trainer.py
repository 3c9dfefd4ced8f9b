"""Ensemble trainer: element-wise SGD vs torch.optim.SGD, members vs lone runs, grouping."""

import numpy as np
import torch

from ssldyn.data.tokens import TokenSpec
from ssldyn.dynamics.ensemble_trainer import (MAX_ELEMS, EnsembleSGD, TokenRun, plan_ensembles,
                                              train_token_ensemble)


def test_ensemble_sgd_equals_torch_sgd_per_member():
    torch.manual_seed(0)
    p0 = torch.randn(3, 4, 5, dtype=torch.float64)
    lrs = [0.1, 0.02, 0.5]
    p = torch.nn.Parameter(p0.clone())
    opt = EnsembleSGD([p], torch.tensor(lrs, dtype=torch.float64), momentum=0.9, weight_decay=5e-3)
    refs = [torch.nn.Parameter(p0[e].clone()) for e in range(3)]
    ropts = [torch.optim.SGD([refs[e]], lr=lrs[e], momentum=0.9, weight_decay=5e-3) for e in range(3)]
    for t in range(5):
        g = torch.randn(3, 4, 5, dtype=torch.float64)
        p.grad = g.clone()
        opt.step()
        for e in range(3):
            refs[e].grad = g[e].clone()
            ropts[e].step()
    for e in range(3):
        torch.testing.assert_close(p.detach()[e], refs[e].detach(), rtol=1e-12, atol=1e-12)


def test_member_trajectory_equals_lone_run():
    """Tolerance: 1e-4 on χ̄± over 60 steps (float32; only the padded sums' round-off differs)."""
    small = dict(batch=32)
    runs = [TokenRun(spec=TokenSpec(P=3), beta=2, activation="relu", loss="infonce", bn="mean_only", seed=1, **small),
            TokenRun(spec=TokenSpec(P=1), beta=1, activation="linear", loss="quadratic", bn="off", seed=2, **small),
            TokenRun(spec=TokenSpec(P=5, zeta=5.0), beta=1, activation="quadratic", loss="infonce",
                     bn="standard", seed=3, lr=0.01, **small)]
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
    ref = torch.cat([info_nce(z[i:i + 1, 0], z[i:i + 1, 1], 0.1, negatives="view1") if kinds[i] else
                     quadratic_contrastive_loss(z[i:i + 1, 0], z[i:i + 1, 1], 0.1) for i in range(6)])
    (g,) = torch.autograd.grad(ref.sum(), z)
    torch.testing.assert_close(losses, ref.detach(), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(dz, g, rtol=1e-10, atol=1e-12)
    # the fused path trains like autograd through the objectives
    run = TokenRun(spec=TokenSpec(P=3), beta=2, batch=32, seed=4)
    a = train_token_ensemble([run], steps=30, log_every=10, fused_loss=True)[0]
    b = train_token_ensemble([run], steps=30, log_every=10, fused_loss=False)[0]
    np.testing.assert_allclose(a.chi_plus, b.chi_plus, atol=1e-4)
