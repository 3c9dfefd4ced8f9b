import numpy as np
import torch

from ssldyn.contract.config import build_config
from ssldyn.experiments.variational.invariance import (
    Invariance,
    Projected,
    eq36_violation,
    kernel_violation,
    project_onto_M,
)
from ssldyn.kernels.ntk import empirical_ntk
from ssldyn.lab import UserError, run_experiment
from ssldyn.models.averaging import AveragingNet

DT = torch.float64


def _net_and_inputs(seed=0):
    g = torch.Generator().manual_seed(seed)
    net = AveragingNet(6, 2, 16, "relu", dtype=DT, generator=g)
    x = torch.randn(5, 6, generator=g, dtype=DT)
    xT = x.clone()
    xT[:, 2:] += 0.3 * torch.randn(5, 4, generator=g, dtype=DT)  # a perturbation in M^⊥
    return net, x, xT


def test_eq36_violation_matches_autograd_jacobians():
    net, x, xT = _net_and_inputs()

    def jac(u):  # (d, Md, D) Jacobian of f(u) w.r.t. B by autograd
        rows = []
        for k in range(2):
            (gk,) = torch.autograd.grad(net(u[None])[0, 0, k], net.hidden.weight)
            rows.append(gk[0])
        return torch.stack(rows)

    ref = torch.stack([(jac(xT[i]) - jac(x[i])).norm() / jac(x[i]).norm() for i in range(5)]).mean()
    torch.testing.assert_close(torch.tensor(eq36_violation(net.B[0].detach(), x, xT, 2), dtype=DT), ref)


def test_kernel_violation_matches_the_empirical_ntk():
    net, x, xT = _net_and_inputs(1)
    x_train = torch.randn(4, 6, generator=torch.Generator().manual_seed(2), dtype=DT)
    K = empirical_ntk(net, None, x, x_train)  # (n, m, d, d), block-diagonal in k, l
    KT = empirical_ntk(net, None, xT, x_train)
    diag = lambda k: k.diagonal(dim1=-2, dim2=-1)  # noqa: E731
    ref = (diag(KT) - diag(K)).abs().max() / diag(K).abs().max()
    torch.testing.assert_close(torch.tensor(kernel_violation(net.B[0].detach(), x, xT, x_train, 2), dtype=DT), ref)
    # training inputs in M (zero M^⊥ part): the kernel condition holds exactly although eq. (36) does not
    x_clean = x_train.clone()
    x_clean[:, 2:] = 0.0
    B = net.B[0].detach().clone()
    B[:, 2:] = 0.0  # the eq.-(17) invariant weights
    assert kernel_violation(B, x, xT, x_clean, 2) < 1e-15
    assert eq36_violation(B, x, xT, 2) > 0.05


def test_project_onto_M_is_the_orthogonal_projection_on_the_first_d_coordinates():
    """``P = diag(1_d, 0_{D−d})`` written out, applied along the last axis of a ``(2, 3, D)`` batch (a wrong axis or
    keeping the last d coordinates fails); P is idempotent and v − Pv ⟂ Pv; a perturbation in M^⊥ is removed."""
    D, d = 6, 2
    v = torch.randn(2, 3, D, generator=torch.Generator().manual_seed(5), dtype=DT)
    P = np.diag([1.0] * d + [0.0] * (D - d))
    got = project_onto_M(v, d)
    np.testing.assert_allclose(got.numpy(), v.numpy() @ P.T, rtol=0, atol=0)
    torch.testing.assert_close(project_onto_M(got, d), got, rtol=0, atol=0)
    assert float(((v - got) * got).sum(-1).abs().max()) == 0.0
    eps = torch.zeros(D, dtype=DT)
    eps[d:] = torch.tensor([0.3, -0.1, 0.2, 0.5], dtype=DT)  # ε' ∈ M^⊥
    torch.testing.assert_close(project_onto_M(v + eps, d), got, rtol=0, atol=0)
    # hand-worked
    one = torch.tensor([1.0, -2.0, 3.0, 4.0], dtype=DT)
    assert project_onto_M(one, 3).tolist() == [1.0, -2.0, 3.0, 0.0]
    # the Projected network is the net at P x: invariant to M^⊥ perturbations by construction
    net, x, xT = _net_and_inputs(3)
    f = Projected(net, 2)
    torch.testing.assert_close(f(xT), f(x), rtol=0, atol=0)
    torch.testing.assert_close(f(x), net(project_onto_M(x, 2)), rtol=0, atol=0)


def test_config_rule_fails_before_any_work():
    import pytest

    with pytest.raises(UserError, match="clusters <= d < D"):
        build_config(Invariance.Config, {"clusters": 4, "d": 3})


def test_quick_run_claims(tmp_path):
    out = run_experiment("variational.invariance", quick=True, seeds=1, out=tmp_path)
    claims = {c.id: c for c in out.claims}
    assert all(c.passed for c in claims.values()), {k: (c.measured, c.expected) for k, c in claims.items()}
    assert claims["vanilla-stays-invariant"].measured <= 1e-12 < claims["vanilla-stays-invariant"].control_value
    # it holds by construction (the same deterministic map on identical embeddings): a sanity check, not scored
    assert claims["vanilla-stays-invariant"].kind == "sanity"
    assert claims["network-starts-invariant"].kind == "sanity" and claims["network-gap-grows"].kind == "consequence"
    assert claims["network-loses-invariance"].measured > 1e-4
    # the erratum's demonstration: invariance kept (control) with eq. (36) violated by O(δ/‖x‖)
    assert claims["eq36-only-if"].kind == "erratum" and claims["eq36-only-if"].measured > 0.05
    assert claims["kernel-condition-kept"].measured <= 1e-12 < claims["kernel-condition-broken"].measured
    assert (out.run.path / "figures" / "invariance.png").exists()
