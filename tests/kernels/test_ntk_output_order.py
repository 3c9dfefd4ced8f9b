"""ntk-vp in mode='full' keeps the output order K[i, j, k, l] = ∇f^k(x1_i)·∇f^l(x2_j).

The existing comparisons use two-layer nets (or a linear readout), whose blocks K_ij are symmetric in (k, l), so a
swap of the two output axes went unnoticed. With two hidden layers K_ij^{kl} ≠ K_ij^{lk}."""

import torch
from torch import nn

from ssldyn.kernels.ntk import empirical_ntk


def _jacobian(model, x):
    """Per-sample Jacobians (n, d, P) by plain autograd, one output coordinate at a time."""
    params = list(model.parameters())
    rows = []
    for i in range(len(x)):
        out = model(x[i : i + 1])[0]
        rows.append(torch.stack([torch.cat([g.reshape(-1) for g in torch.autograd.grad(out[k], params, retain_graph=True)])
                                 for k in range(out.shape[0])]))  # fmt: skip
    return torch.stack(rows)


def test_ntk_vp_full_kernel_has_the_output_axes_in_order():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 5), nn.Tanh(), nn.Linear(5, 4), nn.Tanh(), nn.Linear(4, 2)).double()
    x1, x2 = torch.randn(4, 3, dtype=torch.float64), torch.randn(3, 3, dtype=torch.float64)
    ref = torch.einsum("iaP,jbP->ijab", _jacobian(model, x1), _jacobian(model, x2))
    assert (ref - ref.transpose(-1, -2)).abs().max() > 1e-3  # the blocks are not symmetric in (k, l)
    for impl in ("jacobian", "ntk-vp"):
        torch.testing.assert_close(empirical_ntk(model, None, x1, x2, implementation=impl), ref, rtol=1e-10, atol=1e-12)
