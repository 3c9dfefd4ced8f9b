import torch

from ssldyn.contract.config import build_config
from ssldyn.experiments.variational.invariance import Invariance, eq36_violation, kernel_violation
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


def test_config_rule_fails_before_any_work():
    import pytest

    with pytest.raises(UserError, match="clusters <= d < D"):
        build_config(Invariance.Config, {"clusters": 4, "d": 3})


def test_quick_run_claims(tmp_path):
    out = run_experiment("variational.invariance", quick=True, seeds=1, out=tmp_path)
    claims = {c.id: c for c in out.claims}
    assert all(c.passed for c in claims.values()), {k: (c.measured, c.expected) for k, c in claims.items()}
    assert claims["vanilla-stays-invariant"].measured <= 1e-12 < claims["vanilla-stays-invariant"].control_value
    assert claims["network-starts-invariant"].kind == "sanity" and claims["network-gap-grows"].kind == "consequence"
    assert claims["network-loses-invariance"].measured > 1e-4
    # the erratum's demonstration: invariance kept (control) with eq. (36) violated by O(δ/‖x‖)
    assert claims["eq36-only-if"].kind == "erratum" and claims["eq36-only-if"].measured > 0.05
    assert claims["kernel-condition-kept"].measured <= 1e-12 < claims["kernel-condition-broken"].measured
    assert (out.run.path / "figures" / "invariance.png").exists()
