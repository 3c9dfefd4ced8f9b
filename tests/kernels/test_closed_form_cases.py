"""Closed forms of variational Sec. 4.2.1 on the cases the existing tests skip: the "trace" mode, β for a smooth σ,
block_structure's O(δ) numbers (off / on) and its permutation z-score, each against an independent reference."""

import numpy as np
import pytest
import torch

from ssldyn.kernels.closed_form import averaging_net_kernel, block_structure, cluster_coefficients
from ssldyn.kernels.ntk import empirical_ntk
from ssldyn.models.averaging import AveragingNet


def test_trace_mode_is_the_trace_of_the_empirical_ntk():
    g = torch.Generator().manual_seed(0)
    net = AveragingNet(4, 3, 5, "tanh", bias=True, generator=g, dtype=torch.float64)
    x1, x2 = torch.randn(5, 4, generator=g, dtype=torch.float64), torch.randn(3, 4, generator=g, dtype=torch.float64)
    T = averaging_net_kernel(net.B, x1, x2, "tanh", d=3, bias=net.c, mode="trace")
    ref = empirical_ntk(net, None, x1, x2, mode="trace")  # autograd: Σ_k ∇f^k(x_i)·∇f^k(x_j)
    assert T.shape[-2:] == ref.shape[-2:] == (5, 3)
    torch.testing.assert_close(T.reshape(ref.shape), ref, rtol=1e-10, atol=1e-10)


def test_cluster_coefficients_for_tanh_are_the_block_means_of_the_squared_derivative():
    """eq. (37) for a smooth σ: β_q^k = (1/M) Σ_{p ∈ block k} σ'(b_p·ξ_q)², σ' = 1 − tanh² (not σ' itself)."""
    g = torch.Generator().manual_seed(1)
    d, M, D = 2, 7, 4
    B = torch.randn(d * M, D, generator=g, dtype=torch.float64)
    xi = torch.randn(3, D, generator=g, dtype=torch.float64)
    beta = cluster_coefficients(B, xi, "tanh", d=d)
    Bn, X = B.numpy(), xi.numpy()
    ref = [
        [np.mean([(1 - np.tanh(Bn[k * M + p] @ X[q]) ** 2) ** 2 for p in range(M)]) for k in range(d)] for q in range(3)
    ]
    np.testing.assert_allclose(beta.numpy(), ref, rtol=1e-12)


@pytest.mark.parametrize("matrix_valued", [True, False])
def test_block_structure_off_and_on_are_the_documented_max_and_mean(matrix_valued):
    """off = max |entry| over pairs of different classes; on = mean Frobenius norm of the same-class blocks K_ij."""
    rng = np.random.default_rng(3)
    n, d = 7, 2
    J = rng.normal(size=(n, d, 9))
    K = np.einsum("iaP,jbP->ijab", J, J)  # a PSD matrix-valued kernel with non-zero cross-output entries
    if not matrix_valued:
        K = np.einsum("ijaa->ij", K)
    y = np.array([0, 1, 0, 2, 1, 0, 2])
    out = block_structure(torch.tensor(K), torch.tensor(y))
    diff = [(i, j) for i in range(n) for j in range(n) if y[i] != y[j]]
    same = [(i, j) for i in range(n) for j in range(n) if y[i] == y[j]]
    off = max(np.abs(K[i, j]).max() for i, j in diff)
    on = np.mean([np.linalg.norm(K[i, j]) if matrix_valued else abs(K[i, j]) for i, j in same])
    assert out["off"] == pytest.approx(off, rel=1e-12)
    assert out["on"] == pytest.approx(on, rel=1e-12)
    assert out["off_ratio"] == pytest.approx(off / on, rel=1e-12)


def test_block_structure_z_is_the_permutation_z_score_of_the_gap():
    """z = (W − B − mean_π) / sd_π over the n_perm shuffles y[π] drawn by the generator (torch.randperm)."""
    rng = np.random.default_rng(4)
    a = rng.normal(size=(8, 11))
    K = a @ a.T + 0.1 * np.eye(8)
    y = np.array([0, 0, 0, 1, 1, 1, 2, 2])

    def gap(lab):
        kn = K / np.sqrt(np.outer(np.diag(K), np.diag(K)))
        w = [kn[i, j] for i in range(8) for j in range(8) if i != j and lab[i] == lab[j]]
        b = [kn[i, j] for i in range(8) for j in range(8) if lab[i] != lab[j]]
        return np.mean(w) - np.mean(b)

    out = block_structure(torch.tensor(K), torch.tensor(y), n_perm=12, generator=torch.Generator().manual_seed(7))
    g = torch.Generator().manual_seed(7)
    null = np.array([gap(y[torch.randperm(8, generator=g).numpy()]) for _ in range(12)])
    assert abs(null.mean()) > 1e-3  # a finite null sample has a non-zero mean: subtracting it matters here
    assert out["z"] == pytest.approx((gap(y) - null.mean()) / null.std(ddof=1), rel=1e-10)
