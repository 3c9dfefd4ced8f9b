"""``relu_infinite_width_kernel`` (Prop. 4.4): values equal the arccos form, gradients finite and correct.

The arccos form had NaN gradients on the diagonal of K(x, x) (arccos' = −∞ at cos θ = 1); the angle is now
2·atan2(‖û − v̂‖, ‖û + v̂‖). Gradients are checked against central finite differences in float64.
"""

import math

import pytest
import torch

from ssldyn.kernels.closed_form import relu_infinite_width_kernel


def _arccos_form(x1, x2):
    gram = x1 @ x2.T
    cos = (gram / (x1.norm(dim=1)[:, None] * x2.norm(dim=1)[None, :])).clamp(-1, 1)
    return gram * (0.5 - torch.arccos(cos) / (2 * math.pi))


def test_values_equal_the_printed_arccos_form():
    g = torch.Generator().manual_seed(0)
    x1, x2 = torch.randn(6, 4, generator=g, dtype=torch.float64), torch.randn(5, 4, generator=g, dtype=torch.float64)
    torch.testing.assert_close(relu_infinite_width_kernel(x1, x2), _arccos_form(x1, x2), rtol=1e-12, atol=1e-12)
    k11, ref = relu_infinite_width_kernel(x1), _arccos_form(x1, x1)
    off = ~torch.eye(6, dtype=torch.bool)
    torch.testing.assert_close(k11[off], ref[off], rtol=1e-12, atol=1e-12)
    # the diagonal is exactly ‖x‖²/2 (θ = 0); arccos(1 − ε) ≈ √(2ε) loses it to ~1e-8
    torch.testing.assert_close(k11.diagonal(), 0.5 * (x1**2).sum(1), rtol=1e-15, atol=0.0)
    # parallel and opposite vectors: θ = 0 and π exactly
    x = torch.tensor([[1.0, 2.0], [2.0, 4.0], [-1.0, -2.0]], dtype=torch.float64)
    k = relu_infinite_width_kernel(x)
    assert k[0, 1] == pytest.approx(10.0 * 0.5) and k[0, 2] == pytest.approx(0.0, abs=1e-15)


@pytest.mark.parametrize("symmetric", [True, False])
def test_gradient_is_finite_and_matches_finite_differences(symmetric):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(5, 3, generator=g, dtype=torch.float64)
    y = torch.randn(4, 3, generator=g, dtype=torch.float64)
    w = torch.randn(5, 5 if symmetric else 4, generator=g, dtype=torch.float64)

    def f(xx):
        return (w * (relu_infinite_width_kernel(xx) if symmetric else relu_infinite_width_kernel(xx, y))).sum()

    xr = x.clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(f(xr), xr)
    assert torch.isfinite(grad).all()
    h = 1e-6
    fd = torch.zeros_like(x)
    for i in range(x.shape[0]):
        for j in range(x.shape[1]):
            e = torch.zeros_like(x)
            e[i, j] = h
            fd[i, j] = (f(x + e) - f(x - e)) / (2 * h)
    torch.testing.assert_close(grad, fd, rtol=1e-6, atol=1e-7)


def test_old_arccos_form_had_nan_gradients_on_the_diagonal():
    # the regression this fixes: the same check fails for the arccos form
    x = torch.randn(4, 3, generator=torch.Generator().manual_seed(2), dtype=torch.float64, requires_grad=True)
    (_arccos_form(x, x)).sum().backward()
    assert not torch.isfinite(x.grad).all()
    # ... while the library's diagonal has the closed-form gradient: ∇_{x_i} Σ_i K(x_i, x_i) = ∇ Σ_i ‖x_i‖²/2 = x_i
    xr = x.detach().clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(relu_infinite_width_kernel(xr).diagonal().sum(), xr)
    torch.testing.assert_close(grad, x.detach(), rtol=1e-12, atol=1e-14)
