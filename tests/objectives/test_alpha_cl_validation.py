"""Validation-level gaps of contrastive_covariance (optional: the mutants raise or act on inputs the docstring excludes)."""

import numpy as np
import pytest
import torch

from ssldyn.objectives import alpha_cl_energy, contrastive_covariance


def _rand(*shape, seed=0, dtype=torch.float64):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def test_alpha_of_another_float_dtype_is_cast_to_the_features_dtype():
    a, a_pos = _rand(5, 3, seed=1), _rand(5, 3, seed=2)
    alpha32 = torch.rand(5, 5, generator=torch.Generator().manual_seed(3))  # e.g. α from a float32 network
    got = contrastive_covariance(a, a_pos, alpha=alpha32)
    assert got.dtype == torch.float64
    A, P, W = a.numpy(), a_pos.numpy(), alpha32.double().numpy()
    ref = sum(W[i, j] * (np.outer(A[i] - A[j], A[i] - A[j]) - np.outer(A[i] - P[i], A[i] - P[i]))
              for i in range(5) for j in range(5)) / (2 * 25)  # fmt: skip
    np.testing.assert_allclose(got.numpy(), ref, rtol=1e-12, atol=1e-14)
    assert alpha_cl_energy(a, a_pos, alpha32).item() == pytest.approx(0.5 * np.trace(ref), rel=1e-12)


def test_b_with_other_leading_axes_is_one_error():
    a, a_pos = _rand(5, 3, seed=4), _rand(5, 3, seed=5)
    b, b_pos = _rand(2, 5, 2, seed=6), _rand(2, 5, 2, seed=7)  # an ensemble axis a does not have
    with pytest.raises(ValueError, match=r"b must have the same leading shape \(\.\.\., N\) as a"):
        contrastive_covariance(a, a_pos, b, b_pos)


def test_energy_module_forwards_stop_gradient():
    """AlphaCLEnergy(stop_gradient=False): ∂E/∂α_ij = (‖f_i − f_j‖² − ‖f_i − f_i'‖²)/(4N²) (eq. 3, linear in α)."""
    from ssldyn.objectives import AlphaCLEnergy

    f, f_pos = _rand(4, 3, seed=8), _rand(4, 3, seed=9)
    alpha = torch.rand(4, 4, generator=torch.Generator().manual_seed(10), dtype=torch.float64).requires_grad_(True)
    (g,) = torch.autograd.grad(AlphaCLEnergy(stop_gradient=False)(f, f_pos, alpha), alpha)
    F, P = f.numpy(), f_pos.numpy()
    ref = [[(np.sum((F[i] - F[j]) ** 2) - np.sum((F[i] - P[i]) ** 2)) / (4 * 16) for j in range(4)] for i in range(4)]
    np.testing.assert_allclose(g.numpy(), ref, rtol=1e-12, atol=1e-15)
    assert not AlphaCLEnergy()(f, f_pos, alpha).requires_grad  # default: α detached
