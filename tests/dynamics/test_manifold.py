import numpy as np
import pytest
import scipy.linalg
import torch

from ssldyn.dynamics.manifold import (ManifoldGD, grassmann_tangent, orthogonality_error, polar_retract, qr_retract,
                                      random_stiefel, retract, stiefel_tangent)
from ssldyn.objectives import trace_loss

D = torch.float64


def test_polar_is_scipy_polar_and_qr_has_positive_diagonal():
    X = torch.randn(9, 4, dtype=D)
    U, _ = scipy.linalg.polar(X.numpy())
    np.testing.assert_allclose(polar_retract(X).numpy(), U, atol=1e-12)
    Q = qr_retract(X)
    R = Q.T @ X  # X = Q R with R upper triangular, positive diagonal
    assert np.allclose(np.tril(R.numpy(), -1), 0, atol=1e-12) and (np.diag(R.numpy()) > 0).all()
    # wide matrices: orthonormal rows
    Xw = torch.randn(3, 7, dtype=D)
    np.testing.assert_allclose(polar_retract(Xw).numpy(), scipy.linalg.polar(Xw.numpy())[0], atol=1e-12)


def test_retractions_are_identity_on_the_manifold():
    W = random_stiefel(10, 3, 2, dtype=D)
    for m in ("polar", "qr"):
        np.testing.assert_allclose(retract(W, m).numpy(), W.numpy(), atol=1e-12)


@pytest.mark.parametrize("mode,retr", [("projected", "polar"), ("projected", "qr"), ("riemannian", "qr"),
                                       ("riemannian", "polar")])
def test_stiefel_steps_keep_constraint_float32(mode, retr):
    g = torch.Generator().manual_seed(0)
    C = torch.randn(5, 5, generator=g)
    C = C + C.T
    W1 = random_stiefel(40, 5, 3, generator=g).requires_grad_()
    W2 = random_stiefel(40, 2, 3, generator=g).requires_grad_()
    opt = ManifoldGD([W1, W2], lr=0.05, mode=mode, retraction=retr)
    for _ in range(100):
        opt.zero_grad()
        trace_loss(W1, W2, C).sum().backward()
        opt.step()
    assert orthogonality_error(W1).max() < 1e-6 and orthogonality_error(W2).max() < 1e-6


@pytest.mark.parametrize("tangent", ["stiefel", "grassmann"])
def test_riemannian_gradient_against_finite_differences(tangent):
    g = torch.Generator().manual_seed(1)
    C = torch.randn(4, 4, generator=g, dtype=D)
    C = C + C.T
    W1 = random_stiefel(12, 4, generator=g, dtype=D)
    W2 = random_stiefel(12, 2, generator=g, dtype=D)
    f = lambda A: float(trace_loss(A, W2, C))  # noqa: E731
    G = 2 * W2 @ W2.T @ W1 @ C  # Euclidean gradient of Tr(W2ᵀW1CW1ᵀW2) in W1, written out
    grad = stiefel_tangent(W1, G)
    # it is tangent: W1ᵀ grad is skew
    A = W1.T @ grad
    np.testing.assert_allclose((A + A.T).numpy(), 0, atol=1e-12)
    for _ in range(3):
        xi = stiefel_tangent(W1, torch.randn(12, 4, generator=g, dtype=D)) if tangent == "stiefel" else \
            grassmann_tangent(W1, torch.randn(12, 4, generator=g, dtype=D))
        t = 1e-5
        fd = (f(retract(W1 + t * xi, "qr")) - f(retract(W1 - t * xi, "qr"))) / (2 * t)
        assert abs(fd - float((grad * xi).sum())) < 1e-7 * max(1.0, abs(fd))
    # Grassmann projection agrees with the Riemannian gradient on horizontal directions
    xi = grassmann_tangent(W1, torch.randn(12, 4, generator=g, dtype=D))
    assert abs(float((grassmann_tangent(W1, G) * xi).sum()) - float((grad * xi).sum())) < 1e-10


def test_projected_gd_is_first_order_riemannian():
    # polar(W − ηG) = W − η(G − W sym(WᵀG)) + O(η²)
    W = random_stiefel(15, 4, dtype=D)
    G = torch.randn(15, 4, dtype=D)
    errs = []
    for eta in (1e-2, 5e-3):
        errs.append(float((polar_retract(W - eta * G) - (W - eta * stiefel_tangent(W, G))).abs().max()))
    assert errs[1] < errs[0] / 3.5  # second order: ratio ~4


def test_random_stiefel_is_haar_monte_carlo():
    # E[W Wᵀ] = (p/n) I for Haar-uniform W ∈ St(n, p)
    W = random_stiefel(6, 2, 4000, dtype=D)
    M = (W @ W.mT).mean(0).numpy()
    np.testing.assert_allclose(M, (2 / 6) * np.eye(6), atol=0.02)
