"""Parts of grassmann.collapse (Lemma 1 in the NTK parametrisation), grassmann.prop3 and grassmann.fig6 (subspace
comparisons at the fixed rank z), checked on small hand-made inputs."""

import math

import pytest
import torch

from ssldyn.experiments.grassmann.collapse import correlated_columns, ntk_param_kernel, train_ntk_param
from ssldyn.experiments.grassmann.fig6 import gram_distance, row_space_angle
from ssldyn.experiments.grassmann.prop3 import rank_z_angle
from ssldyn.kernels.ntk import empirical_ntk
from ssldyn.models.two_layer import TwoLayerNet
from ssldyn.probes.collapse import dimension_coupling
from ssldyn.probes.subspace import principal_angles

D = torch.float64


def _plane(theta: float) -> torch.Tensor:
    """``(2, 4)``: orthonormal rows spanning span(e_1, cos θ e_2 + sin θ e_3)."""
    return torch.tensor([[1.0, 0, 0, 0], [0, math.cos(theta), math.sin(theta), 0]], dtype=D)


def test_a_rank_one_map_does_not_extract_a_two_dimensional_subspace():
    """The numerical-rank comparison gave a rank-one map along v_1 angle 0 against span(v_1, v_2); at the fixed rank
    z = 2 it scores π/2 — also where the SVD's second right singular vector happens to be e_2 (M = e_1e_1ᵀ)."""
    V2 = torch.eye(4, dtype=D)[:, :2]
    for M in (
        torch.tensor([[1.0, 0, 0, 0], [0, 0, 0, 0]], dtype=D),
        torch.tensor([[2.0, 0, 0, 0], [1.0, 0, 0, 0]], dtype=D),
    ):
        assert float(principal_angles(M.T, V2).max()) == pytest.approx(0.0, abs=1e-12)  # the old reading: a pass
        assert rank_z_angle(M, V2) == pytest.approx(math.pi / 2)
    assert rank_z_angle(torch.tensor([[1.0, 0, 0, 0], [0, 1e-4, 0, 0]], dtype=D), V2) == pytest.approx(math.pi / 2)
    mix = torch.tensor([[2.0, 1.0], [-0.5, 3.0]], dtype=D)  # any full-rank map with the same row space
    for theta in (0.0, 0.3):
        assert rank_z_angle(mix @ _plane(theta), V2) == pytest.approx(theta, abs=1e-12)


def test_gram_distance_is_zero_up_to_rotation_and_sees_rank_and_singular_values():
    g = torch.Generator().manual_seed(0)
    B = _plane(0.0)
    Q, _ = torch.linalg.qr(torch.randn(2, 2, generator=g, dtype=D))
    assert gram_distance(Q @ B, B) < 1e-14 and row_space_angle(Q @ B, B) < 1e-7  # the same embedding, rotated
    for theta in (0.05, 0.4):  # orthonormal rows: sin of the largest principal angle
        assert gram_distance(_plane(theta), B) == pytest.approx(math.sin(theta), abs=1e-12)
        assert row_space_angle(_plane(theta), B) == pytest.approx(theta, abs=1e-12)
    collapsed = torch.tensor([[1.0, 0, 0, 0], [0, 0, 0, 0]], dtype=D)  # rank one, its row inside span(B)
    assert gram_distance(collapsed, B) == pytest.approx(1.0) and row_space_angle(collapsed, B) == pytest.approx(
        math.pi / 2
    )
    assert row_space_angle(B, collapsed) == pytest.approx(math.pi / 2)
    assert gram_distance(torch.diag(torch.tensor([1.0, 0.5], dtype=D)) @ B, B) == pytest.approx(0.75)  # σ_2 = 0.5


def test_ntk_parametrisation_kernel_is_the_kernel_of_the_rescaled_weights():
    """K_W1/d + (K − K_W1)/h is the tangent kernel of f = (1/√h)Ŵ2ᵀtanh(Ŵ1x/√d) w.r.t. Ŵ1 = √d W1, Ŵ2 = √h W2;
    its W2 block is diagonal with the same diagonal for every output."""
    d, h, z = 2, 50, 3
    net = TwoLayerNet(d, h, z, "tanh", "unconstrained", seeds=[4], init="normal", dtype=D)
    x = torch.randn(5, d, generator=torch.Generator().manual_seed(1), dtype=D)
    K, K1, Kn = ntk_param_kernel(net, x)

    def f(p, xx):
        return torch.tanh(xx @ p["V1"].mT / d**0.5) @ p["V2"] / h**0.5  # (m, z)

    params = {"V1": (net.W1[0] * d**0.5).detach(), "V2": (net.W2[0] * h**0.5).detach()}
    torch.testing.assert_close(Kn, empirical_ntk(f, params, x))
    K2 = K - K1  # the W2 block: δ_lj φ(W1x)ᵀφ(W1x')
    off = K2 * (1 - torch.eye(z, dtype=D))
    assert off.abs().max() < 1e-12 and dimension_coupling(K2)[1] < 1e-12


def test_correlated_columns_share_the_first_output_weights():
    W2 = torch.randn(1, 2000, 3, generator=torch.Generator().manual_seed(2), dtype=D) / 2000**0.5
    Wc = correlated_columns(W2, 0.5)
    torch.testing.assert_close(Wc[..., 0], W2[..., 0])
    for j in (1, 2):  # column j ≥ 1: ρ·w₀ + √(1 − ρ²)·w_j, written out
        torch.testing.assert_close(Wc[..., j], 0.5 * W2[..., 0] + math.sqrt(0.75) * W2[..., j], rtol=1e-14, atol=0)
    torch.testing.assert_close(correlated_columns(W2, 0.0), W2)  # ρ = 0: independent columns, unchanged
    torch.testing.assert_close(correlated_columns(W2, 1.0), W2[..., :1].expand_as(W2))  # ρ = 1: one shared column
    corr = torch.corrcoef(Wc[0].T)
    assert corr[0, 1] == pytest.approx(0.5, abs=0.05) and corr[1, 2] == pytest.approx(0.25, abs=0.05)
    assert (Wc.std(dim=-2) / W2.std(dim=-2) - 1).abs().max() < 0.1  # every column keeps its N(0, 1/h) scale


def test_ntk_parametrisation_training_is_gd_on_the_rescaled_weights():
    """train_ntk_param is plain GD Ŵ ← Ŵ − η∇_Ŵ L on f = (1/√h)Ŵ2ᵀtanh(Ŵ1x/√d) (written out here with autograd on
    Ŵ), member by member: an ensemble's member r trains as the one-member net of its seed."""
    d, h, z, eta, steps = 2, 30, 2, 0.3, 4
    x = torch.randn(6, d, generator=torch.Generator().manual_seed(3), dtype=D)
    t = torch.randn(6, z, generator=torch.Generator().manual_seed(4), dtype=D)
    ens = TwoLayerNet(d, h, z, "tanh", "unconstrained", ensemble=2, seeds=[5, 6], init="normal", dtype=D)
    V1 = (ens.W1[1] * d**0.5).detach().clone().requires_grad_(True)  # member 1 in the NTK parametrisation
    V2 = (ens.W2[1] * h**0.5).detach().clone().requires_grad_(True)
    for _ in range(steps):
        loss = ((torch.tanh(x @ V1.T / d**0.5) @ V2 / h**0.5 - t) ** 2).sum()
        g1, g2 = torch.autograd.grad(loss, (V1, V2))
        with torch.no_grad():
            V1 -= eta * g1
            V2 -= eta * g2
    one = TwoLayerNet(d, h, z, "tanh", "unconstrained", seeds=[6], init="normal", dtype=D)
    torch.testing.assert_close(one.W1[0], ens.W1[1].detach(), rtol=0, atol=0)  # the same start (seeding rule)
    train_ntk_param(ens, lambda: ((ens(x) - t) ** 2).sum((-2, -1)), eta, steps)
    train_ntk_param(one, lambda: ((one(x) - t) ** 2).sum((-2, -1)), eta, steps)
    torch.testing.assert_close(ens.W1[1].detach(), V1.detach() / d**0.5, rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(ens.W2[1].detach(), V2.detach() / h**0.5, rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(one.W1[0].detach(), ens.W1[1].detach(), rtol=1e-13, atol=1e-15)
    # the standard parametrisation's GD (one rate for both layers) is another trajectory
    std = TwoLayerNet(d, h, z, "tanh", "unconstrained", seeds=[6], init="normal", dtype=D)
    for _ in range(steps):
        loss = ((std(x) - t) ** 2).sum()
        g1, g2 = torch.autograd.grad(loss, (std.W1, std.W2))
        with torch.no_grad():
            std.W1 -= eta * g1
            std.W2 -= eta * g2
    assert (std.W2 - one.W2).abs().max() > 1e-3
