import torch

from ssldyn.kernels.ntk import empirical_ntk
from ssldyn.models.mlp import MLP
from ssldyn.models.shifted import ShiftedModel


def test_shifted_model_starts_at_z0_with_the_same_kernel_and_moves_like_the_model():
    x = torch.randn(6, 3, dtype=torch.float64)
    z0 = torch.randn(6, 2, dtype=torch.float64)
    g = MLP(3, 2, hidden=5, depth=3, activation="tanh", dtype=torch.float64)
    g_out0 = g(x).detach()
    f = ShiftedModel(g, x, z0)
    assert torch.allclose(f(x)[0], z0, atol=1e-14)
    assert torch.allclose(empirical_ntk(f, None, x), empirical_ntk(g, None, x), atol=1e-12)
    with torch.no_grad():
        for p in g.parameters():
            p.add_(0.01)
    # f(w) = z0 + g(w) - g(w0), written out
    assert torch.allclose(f(x), z0 + g(x) - g_out0, atol=1e-12)
    # single training rows get their own offset; unseen inputs none
    assert torch.allclose(f(x[2:3])[0], (z0 + g(x) - g_out0)[0, 2:3], atol=1e-12)
    y = torch.randn(4, 3, dtype=torch.float64)
    assert torch.equal(f(y), g(y))


def test_shifted_model_notices_in_place_changes_of_the_training_tensor():
    # the training tensor is recognised by identity (no value comparison, no host sync on CUDA) only while unchanged
    x = torch.randn(5, 3, dtype=torch.float64)
    z0 = torch.randn(5, 2, dtype=torch.float64)
    g = MLP(3, 2, hidden=4, depth=2, activation="tanh", dtype=torch.float64)
    f = ShiftedModel(g, x, z0)
    assert torch.allclose(f(x)[0], z0, atol=1e-14)
    with torch.no_grad():
        x[1:] += 1.0  # rows 1..4 are no longer training inputs; row 0 still is
    expected = g(x).detach()
    expected[0, 0] += z0[0] - g(f.x_ref).detach()[0, 0]  # offset z0_0 − g(x_0) on row 0 only
    assert torch.allclose(f(x), expected, atol=1e-12)
