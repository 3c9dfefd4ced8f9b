import numpy as np
import pytest
import scipy.linalg
import torch

from ssldyn.probes.collapse import dimension_coupling, effective_rank, embedding_singular_values, singular_value_ratio
from ssldyn.probes.subspace import (
    distance_up_to_sign,
    linear_svm_accuracy,
    output_gap,
    pca_components,
    principal_angles,
    projection_norms,
)

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


def test_projection_norms_batched_with_zero_columns_against_least_squares():
    """A batch of Q (..., n, r) with zero (padding) columns and a broadcast standard basis: every member equals
    the least-squares projection onto its nonzero columns."""
    rng = np.random.default_rng(4)
    Q = rng.normal(size=(3, 2, 6, 2))  # (T, B, n, r)
    Q[1, 0, :, 1] = 0.0  # a member of rank 1
    padded = np.concatenate([Q, np.zeros((3, 2, 6, 2))], axis=-1)  # two zero columns more
    got = projection_norms(torch.eye(6, dtype=D), torch.tensor(padded))  # (T, B, 6)
    assert got.shape == (3, 2, 6)
    for t in range(3):
        for b in range(2):
            coef, *_ = np.linalg.lstsq(Q[t, b], np.eye(6), rcond=None)
            np.testing.assert_allclose(got[t, b].numpy(), np.linalg.norm(Q[t, b] @ coef, axis=0), atol=1e-10)
    np.testing.assert_allclose(got[1, 0].pow(2).sum().item(), 1.0, atol=1e-10)  # Σ_i ‖P e_i‖² = rank
    assert projection_norms(torch.eye(6, dtype=D), torch.zeros(6, 2, dtype=D)).abs().max() == 0  # no span


def test_distance_up_to_sign_closed_form():
    """``min(‖a − b‖, ‖a + b‖) = √(‖a‖² + 1 − 2|⟨a, b⟩|)`` for a unit b; invariant to the sign of a and of b."""
    rng = np.random.default_rng(5)
    a = rng.normal(size=(7, 4))
    b = rng.normal(size=4)
    b /= np.linalg.norm(b)
    ref = np.sqrt((a**2).sum(-1) + 1 - 2 * np.abs(a @ b))
    got = distance_up_to_sign(torch.tensor(a), torch.tensor(b))
    np.testing.assert_allclose(got.numpy(), ref, atol=1e-12)
    np.testing.assert_allclose(distance_up_to_sign(torch.tensor(-a), torch.tensor(b)).numpy(), ref, atol=1e-12)
    assert float(distance_up_to_sign(torch.tensor(-b), torch.tensor(b))) == 0.0
    with pytest.raises(ValueError, match=r"distance_up_to_sign: a and b must be vectors .* got \(7, 4\) and \(5,\)"):
        distance_up_to_sign(torch.tensor(a), torch.ones(5, dtype=torch.float64))  # was a broadcasting RuntimeError


def test_pca_components_match_scikit_learn_with_its_sign_convention():
    """``PCA(k).components_`` of scikit-learn (full SVD, ``svd_flip`` on the components: the entry of largest
    magnitude is positive); the sign of the data and of the SVD factors does not matter."""
    from sklearn.decomposition import PCA

    g = torch.Generator().manual_seed(3)
    X = torch.randn(40, 9, generator=g, dtype=D) * torch.arange(1, 10, dtype=D)
    X = X - X.mean(0)
    comps = pca_components(X, 6)  # (6, 9)
    ref = PCA(6, svd_solver="full").fit(X.numpy()).components_
    np.testing.assert_allclose(comps.numpy(), ref, atol=1e-10)
    # numpy's eigh of XᵀX: the same directions with arbitrary signs, fixed by the convention
    _, v = np.linalg.eigh(X.numpy().T @ X.numpy())
    ev = v[:, ::-1][:, :6].T  # (6, 9), descending variance
    ev = ev * np.sign(ev[np.arange(6), np.abs(ev).argmax(1)])[:, None]
    np.testing.assert_allclose(comps.numpy(), ev, atol=1e-10)
    np.testing.assert_allclose(pca_components(-X, 6).numpy(), comps.numpy(), atol=1e-10)
    with pytest.raises(ValueError, match="pca_components"):
        pca_components(X, 10)


def test_output_gap_is_mean_euclidean_distance():
    g = torch.Generator().manual_seed(8)
    a, b = torch.randn(2, 5, 3, generator=g, dtype=D), torch.randn(2, 5, 3, generator=g, dtype=D)
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


def test_dimension_coupling_is_the_documented_ratios_written_out():
    """cross = max_{l≠j} |K_lj| / max_l |K_ll|, spread = max_{l,j} |K_ll − K_jj| / max_l |K_ll| (loops over entries)."""
    rng = np.random.default_rng(6)
    n, z = 4, 3
    K = rng.normal(size=(n, n, z, z))
    K[..., 1, 1] *= 3.0  # the largest diagonal entry sits in dimension 1
    diag_max = max(abs(K[a, b, l, l]) for a in range(n) for b in range(n) for l in range(z))
    cross = max(abs(K[a, b, l, j]) for a in range(n) for b in range(n) for l in range(z) for j in range(z) if l != j)
    spread = max(
        abs(K[a, b, l, l] - K[a, b, j, j]) for a in range(n) for b in range(n) for l in range(z) for j in range(z)
    )
    got = dimension_coupling(torch.tensor(K))
    assert got == pytest.approx((cross / diag_max, spread / diag_max), rel=1e-12)
    # a kernel δ_lj k(x, x') with one k for every dimension (Lemma 1 + Prop. 1): both vanish exactly
    k = rng.normal(size=(n, n))
    assert dimension_coupling(torch.tensor(k[..., None, None] * np.eye(z))) == (0.0, 0.0)


def test_linear_svm_accuracy_separable_and_random():
    rng = np.random.default_rng(3)
    X = np.concatenate([rng.normal(-3, 1, size=(50, 2)), rng.normal(3, 1, size=(50, 2))])
    y = np.repeat([0, 1], 50)
    assert linear_svm_accuracy(X, y) == pytest.approx(1.0)
    acc = linear_svm_accuracy(rng.normal(size=(100, 2)), y)
    assert 0.25 < acc < 0.75


def test_linear_svm_accuracy_counts_mislabelled_points_exactly():
    """Two tight, far-apart clusters and two points carrying the other cluster's label: every 20-point test fold
    of the 5-fold split misclassifies exactly its mislabelled points, so the mean fold accuracy is 1 − 2/100."""
    rng = np.random.default_rng(7)
    X = np.concatenate([rng.normal(-4, 0.3, size=(50, 2)), rng.normal(4, 0.3, size=(50, 2))])
    y = np.repeat([0, 1], 50)
    y[[3, 71]] = 1 - y[[3, 71]]  # one point of each cluster mislabelled (classes stay 50 / 50)
    for standardize in (True, False):
        assert linear_svm_accuracy(X, y, standardize=standardize) == pytest.approx(0.98, abs=1e-12)
    assert linear_svm_accuracy(X, y, folds=4, seed=3) == pytest.approx(0.98, abs=1e-12)  # 25-point folds


def test_collapse_probes_name_non_finite_embeddings():
    u = torch.randn(6, 3)
    u[2, 1] = float("nan")
    for probe in (effective_rank, singular_value_ratio, embedding_singular_values):
        with pytest.raises(ValueError, match=r"^embeddings contain NaN or inf \(shape \(6, 3\)\)"):
            probe(u)
