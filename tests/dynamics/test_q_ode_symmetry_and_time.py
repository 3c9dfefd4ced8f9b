"""``q_ode``: the symmetrisation of ``eigh_ascending`` and solving backwards in time."""

import numpy as np
import torch

from ssldyn.dynamics.q_ode import eigh_ascending, solve_adaptive, solve_reference

D = torch.float64


def test_eigh_ascending_uses_the_symmetric_part_of_a_slightly_asymmetric_C():
    # an empirical covariance is symmetric only up to round-off / a user passes C + skew: the documented contract is
    # "C symmetrised first", i.e. the spectrum of (C + Cᵀ)/2 (torch.linalg.eigh alone reads the lower triangle only)
    g = torch.Generator().manual_seed(0)
    B = torch.randn(5, 5, generator=g, dtype=D)
    S = (B + B.T) / 2
    K = torch.randn(5, 5, generator=g, dtype=D)
    C = S + 0.3 * (K - K.T)  # symmetric part S
    lam, V = eigh_ascending(C)
    lam_ref, V_ref = np.linalg.eigh(S.numpy())
    np.testing.assert_allclose(lam.numpy(), lam_ref, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(np.abs(V.numpy().T @ V_ref), np.eye(5), atol=1e-10)  # same eigenvectors up to sign
    torch.testing.assert_close(V @ torch.diag(lam) @ V.T, S, rtol=1e-12, atol=1e-12)


def test_solvers_integrate_backwards_in_time_against_the_closed_form():
    # d = z = 1: u = q² solves u̇ = 8λu(u − 1), so (u − 1)/u = (1 − 1/u₀) e^{8λt} (see test_q_ode). Times may be
    # strictly decreasing (documented): integrate from t = 0.3 back to 0 and compare with the closed form.
    lam = np.array([-1.0])
    u0 = 0.25  # q(0.3) = 0.5
    t = np.array([0.3, 0.2, 0.0])
    c = (1 - 1 / u0) * np.exp(-8.0 * (t - t[0]))  # relative to t0 = 0.3
    want = np.sqrt(1 / (1 - c))
    ref = solve_reference(np.array([[0.5]]), lam, t=t).trajectory.stack("q", tensors=True)[1][:, 0, 0].numpy()
    np.testing.assert_allclose(ref, want, rtol=1e-9)
    ada = solve_adaptive(torch.tensor([[0.5]], dtype=D), torch.tensor(lam), t=torch.tensor(t), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(ada.trajectory.stack("q", tensors=True)[1][:, 0, 0].numpy(), want, rtol=1e-7)
