import numpy as np
import pytest
import scipy.linalg
import torch

from ssldyn.probes.collapse import dimension_coupling, effective_rank, embedding_singular_values, singular_value_ratio
from ssldyn.probes.subspace import linear_svm_accuracy, output_gap, principal_angles, projection_norms

D = torch.float64


def _with_singular_values(s, n=20, seed=0):
    rng = np.random.default_rng(seed)
    U, _ = np.linalg.qr(rng.normal(size=(n, len(s))))
    U = U - U.mean(0)  # keep columns centered so centering does not change the spectrum
    U, _ = np.linalg.qr(U)
    V, _ = np.linalg.qr(rng.normal(size=(len(s), len(s))))
    return torch.tensor(U @ np.diag(s) @ V.T + 3.0)  # + constant offset, removed by centering


def test_singular_value_ratio_and_effective_rank_formula():
    s = np.array([3.0, 1.0, 0.5])
    u = _with_singular_values(s)
    np.testing.assert_allclose(embedding_singular_values(u).numpy(), s, atol=1e-10)
    assert float(singular_value_ratio(u)) == pytest.approx(0.5 / 3.0, rel=1e-8)
    p = s / s.sum()
    assert float(effective_rank(u)) == pytest.approx(np.exp(-(p * np.log(p)).sum()), rel=1e-8)
    line = _with_singular_values(np.array([2.0, 0.0]))
    assert float(singular_value_ratio(line)) < 1e-8 and float(effective_rank(line)) == pytest.approx(1.0, abs=1e-6)


def test_principal_angles_match_scipy():
    rng = np.random.default_rng(1)
    A, B = rng.normal(size=(8, 3)), rng.normal(size=(8, 2))
    ref = np.sort(scipy.linalg.subspace_angles(A, B))
    np.testing.assert_allclose(principal_angles(torch.tensor(A), torch.tensor(B)).numpy(), ref, atol=1e-8)
    # same span -> zero angles
    M = rng.normal(size=(3, 3))
    assert principal_angles(torch.tensor(A), torch.tensor(A @ M)).max() < 1e-6


def test_projection_norms_against_least_squares():
    rng = np.random.default_rng(2)
    Q, v = rng.normal(size=(6, 2)), rng.normal(size=(6, 3))
    coef, *_ = np.linalg.lstsq(Q, v, rcond=None)
    ref = np.linalg.norm(Q @ coef, axis=0) / np.linalg.norm(v, axis=0)
    np.testing.assert_allclose(projection_norms(torch.tensor(v), torch.tensor(Q)).numpy(), ref, atol=1e-10)


def test_output_gap_is_mean_euclidean_distance():
    a, b = torch.randn(2, 5, 3, dtype=D), torch.randn(2, 5, 3, dtype=D)
    ref = np.sqrt(((a - b).numpy() ** 2).sum(-1)).mean(-1)
    np.testing.assert_allclose(output_gap(a, b).numpy(), ref)


def test_dimension_coupling_on_linear_and_coupled_kernels():
    # linear model u = Θx: ⟨∇u_l(x), ∇u_j(x')⟩ = δ_lj xᵀx' (Lemma 1), computed by autograd
    x = torch.randn(5, 3, dtype=D)
    theta = torch.randn(2, 3, dtype=D)
    J = torch.autograd.functional.jacobian(lambda th: x @ th.T, theta)  # (n, z, z, d)
    K = torch.einsum("alpq,bjpq->ablj", J, J)
    cross, spread = dimension_coupling(K)
    assert cross < 1e-12 and spread < 1e-12
    Kc = K.clone()
    Kc[..., 0, 1] += 0.5
    assert dimension_coupling(Kc)[0] > 0.05


def test_linear_svm_accuracy_separable_and_random():
    rng = np.random.default_rng(3)
    X = np.concatenate([rng.normal(-3, 1, size=(50, 2)), rng.normal(3, 1, size=(50, 2))])
    y = np.repeat([0, 1], 50)
    assert linear_svm_accuracy(X, y) == pytest.approx(1.0)
    acc = linear_svm_accuracy(rng.normal(size=(100, 2)), y)
    assert 0.25 < acc < 0.75
