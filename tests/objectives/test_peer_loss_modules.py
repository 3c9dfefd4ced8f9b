"""The module forms of the peer losses forward *every* setting (VICRegLoss dropped eps silently under mutation)."""

import numpy as np
import pytest
import torch

from ssldyn.objectives import BYOLLoss, NegativeCosine, VICRegLoss


def _ref_vicreg(z1, z2, inv, var, cov, gamma, eps):
    """Bardes et al. main_vicreg.py scaling, float64 loops over dimensions."""
    z1, z2 = np.asarray(z1, np.float64), np.asarray(z2, np.float64)
    n, d = z1.shape
    s = np.mean((z1 - z2) ** 2)

    def v(z):
        return np.mean([max(0.0, gamma - np.sqrt(np.var(z[:, k], ddof=1) + eps)) for k in range(d)])

    def c(z):
        C = np.cov(z.T, ddof=1)
        return sum(C[k, l] ** 2 for k in range(d) for l in range(d) if k != l) / d

    return inv * s + var * 0.5 * (v(z1) + v(z2)) + cov * (c(z1) + c(z2))


def test_vicreg_module_forwards_gamma_and_eps():
    g = torch.Generator().manual_seed(5)
    z1, z2 = (
        0.4 * torch.randn(7, 3, generator=g, dtype=torch.float64),
        0.4 * torch.randn(7, 3, generator=g, dtype=torch.float64),
    )
    kw = dict(inv=1.5, var=2.0, cov=0.5, gamma=1.3, eps=0.2)  # eps large enough to move the hinge visibly
    want = _ref_vicreg(z1.numpy(), z2.numpy(), **kw)
    assert VICRegLoss(**kw)(z1, z2).item() == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("module", [BYOLLoss, NegativeCosine])
def test_predictor_modules_forward_stop_gradient(module):
    p = torch.randn(4, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(6)).requires_grad_(True)
    z = torch.randn(4, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(7)).requires_grad_(True)
    (gz,) = torch.autograd.grad(module(stop_gradient=False)(p, z), z)
    # d/dz of -mean cos(p, z) (BYOL: 2 - 2cos, twice that), written out: -(p̂ - (p̂·ẑ)ẑ)/(N‖z‖)
    pn, zn = p.detach() / p.detach().norm(dim=1, keepdim=True), z.detach() / z.detach().norm(dim=1, keepdim=True)
    ref = -(pn - (pn * zn).sum(1, keepdim=True) * zn) / (4 * z.detach().norm(dim=1, keepdim=True))
    torch.testing.assert_close(gz, (2.0 if module is BYOLLoss else 1.0) * ref, rtol=1e-12, atol=1e-14)
    out = module()(p, z)  # default: the target is detached
    assert torch.autograd.grad(out, (p, z), allow_unused=True)[1] is None
