import math

import pytest
import torch

from ssldyn.data.clustered import clustered_data
from ssldyn.kernels.closed_form import (
    averaging_net_kernel,
    block_structure,
    cluster_coefficients,
    predicted_cluster_flow,
    relu_infinite_width_kernel,
)
from ssldyn.kernels.ntk import empirical_ntk
from ssldyn.models.averaging import AveragingNet


@pytest.mark.parametrize("act,bias", [("relu", False), ("tanh", True), ("quadratic", False), ("sigmoid", True)])
def test_prop43_closed_form_equals_empirical_ntk(act, bias):
    g = torch.Generator().manual_seed(0)
    net = AveragingNet(4, 3, 6, act, bias=bias, ensemble=2, generator=g, dtype=torch.float64)
    x1, x2 = torch.randn(5, 4, generator=g, dtype=torch.float64), torch.randn(3, 4, generator=g, dtype=torch.float64)
    K = empirical_ntk(net, None, x1, x2)
    Kc = averaging_net_kernel(net.B, x1, x2, act, d=3, bias=net.c)
    assert Kc.shape == (2, 5, 3, 3, 3)
    assert (K - Kc).abs().max() < 1e-8
    blocks = averaging_net_kernel(net.B, x1, x2, act, d=3, bias=net.c, mode="blocks")
    assert torch.allclose(torch.diag_embed(blocks), Kc)


def test_prop44_infinite_width_kernel_matches_monte_carlo():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(6, 3, generator=g, dtype=torch.float64)
    M = 40000
    B = torch.randn(2 * M, 3, generator=g, dtype=torch.float64)  # Gaussian rows, d = 2
    KM = averaging_net_kernel(B, x, None, "relu", d=2)
    Kinf = relu_infinite_width_kernel(x, d=2)
    # explicit formula written out: (x_i·x_j)(1/2 − θ_ij/(2π)) I_d
    i, j = 1, 4
    th = math.acos(float(x[i] @ x[j] / (x[i].norm() * x[j].norm())))
    assert math.isclose(Kinf[i, j, 0, 0].item(), float(x[i] @ x[j]) * (0.5 - th / (2 * math.pi)), rel_tol=1e-12)
    assert Kinf[i, j, 0, 1] == 0
    scale = (x.norm(dim=1)[:, None] * x.norm(dim=1)[None, :])[..., None, None]
    assert ((KM - Kinf).abs() / scale).max() < 5 * 0.5 / math.sqrt(M)  # Monte Carlo error of a Bernoulli mean


def test_beta_and_predicted_cluster_flow():
    net = AveragingNet(6, 3, 50, "relu", dtype=torch.float64)
    centers = torch.eye(3, 6, dtype=torch.float64) * 1.5
    beta = cluster_coefficients(net.B[0], centers, "relu", d=3)
    B = net.B[0]
    manual = torch.stack(
        [torch.stack([((B[k * 50 : (k + 1) * 50] @ c) > 0).double().mean() for k in range(3)]) for c in centers]
    )  # σ'² = 1{b·ξ>0} for ReLU
    assert torch.allclose(beta, manual)
    # Thm 4.5: for small δ the actual velocity -Σ_j K_ij g_j equals the cluster prediction up to O(δ)
    errs = []
    for delta in (0.04, 0.02, 0.01):
        data = clustered_data(
            [6, 10, 4],
            d=3,
            D=6,
            delta=delta,
            center_norm=1.5,
            dtype=torch.float64,
            generator=torch.Generator().manual_seed(3),
        )
        K = averaging_net_kernel(B, data.x, None, "relu", d=3)
        grads = torch.randn(20, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(4))  # ∇L(z_j)
        actual = -torch.einsum("ijab,jb->ia", K, grads) / 20
        pred = predicted_cluster_flow(grads, data.labels, data.centers, beta)
        errs.append(((actual - pred).norm() / actual.norm()).item())
        assert block_structure(K, data.labels)["off_ratio"] < 3 * delta
    assert errs[-1] < 0.05 and errs[0] > errs[-1]


def test_closed_forms_compute_on_the_device_of_their_inputs():
    # the meta device stands in for CUDA: any tensor created on the CPU inside these functions would raise
    meta = torch.device("meta")
    B = torch.empty(3 * 4, 5, dtype=torch.float64, device=meta)  # M = 4, d = 3
    x = torch.empty(6, 5, dtype=torch.float64, device=meta)
    for mode in ("full", "blocks", "trace"):
        assert averaging_net_kernel(B, x, None, "relu", d=3, mode=mode).device == meta
    assert (
        averaging_net_kernel(B, x, None, "tanh", d=3, bias=torch.empty(12, dtype=torch.float64, device=meta)).device
        == meta
    )
    assert relu_infinite_width_kernel(x, d=3).device == meta
    assert cluster_coefficients(B, x[:3], "relu", d=3).device == meta
    # labels / centers on the CPU are moved to the gradients' device
    data = clustered_data([2, 2, 2], d=3, D=5, delta=0.1, dtype=torch.float64)
    grads = torch.empty(6, 3, dtype=torch.float64, device=meta)
    assert predicted_cluster_flow(grads, data.labels, data.centers, 0.5).device == meta
    assert (
        predicted_cluster_flow(grads, data.labels, data.centers, torch.ones(3, 3, dtype=torch.float64)).device == meta
    )


def test_cluster_limit_kernel_written_out_and_gives_the_cluster_flow():
    import torch

    from ssldyn.dynamics.function_space import apply_kernel
    from ssldyn.kernels.closed_form import cluster_limit_kernel, predicted_cluster_flow

    g = torch.Generator().manual_seed(0)
    labels = torch.tensor([0, 0, 1, 2, 1, 2, 2])  # (n,) unordered, unequal sizes
    centers = torch.randn(3, 5, generator=g, dtype=torch.float64)  # (N, D)
    beta = torch.rand(3, 2, generator=g, dtype=torch.float64)  # (N, d)
    K = cluster_limit_kernel(labels, centers, beta)  # (n, n, d, d)
    ref = torch.zeros(7, 7, 2, 2, dtype=torch.float64)
    for i in range(7):
        for j in range(7):
            if labels[i] == labels[j]:
                ref[i, j] = float((centers[labels[i]] ** 2).sum()) * torch.diag(beta[labels[i]])
    torch.testing.assert_close(K, ref, rtol=1e-15, atol=0)
    # −Σ_j K_ij ∂𝓛/∂z_j with this kernel is Thm. 4.5's flow −(n_q/n)‖ξ_q‖²β_q ∇L(ξ_q), ∇L(z_j) = n ∂𝓛/∂z_j
    gz = torch.randn(7, 2, generator=g, dtype=torch.float64)
    torch.testing.assert_close(-apply_kernel(K, gz), predicted_cluster_flow(7 * gz, labels, centers, beta))


@pytest.mark.parametrize("E", [2, 3])
def test_averaging_net_kernel_with_per_member_inputs_is_each_members_kernel(E):
    """Per-member inputs (E, n, D), as AveragingNet takes them: the gram of each member's inputs multiplies its own
    blocks. Before, the gram's E axis met the block axis d: wrong where E = d (max error 10.4), a crash otherwise."""
    g = torch.Generator().manual_seed(0)
    net = AveragingNet(4, 2, 3, ensemble=E, generator=g, dtype=torch.float64)  # B (E, M·d, D), d = 2, M = 3
    B = net.B.detach()
    x = torch.randn(E, 5, 4, generator=g, dtype=torch.float64)  # (E, n, D)
    K = averaging_net_kernel(B, x, d=2)  # (E, n, n, d, d)
    ref = torch.stack([averaging_net_kernel(B[e], x[e], d=2) for e in range(E)])
    torch.testing.assert_close(K, ref, rtol=0, atol=1e-12)
    Ke = torch.stack([empirical_ntk(net, None, x[e])[e] for e in range(E)])  # autograd, member e on its inputs
    torch.testing.assert_close(K, Ke, rtol=1e-10, atol=1e-10)
    with pytest.raises(ValueError, match="per-member inputs"):
        averaging_net_kernel(B, x[:1].expand(E + 1, -1, -1), d=2)
