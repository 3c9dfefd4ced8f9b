"""nonlinearity.colinearity's filter helpers against hand-worked examples and loops in numpy."""

import math

import numpy as np
import pytest
import torch
from tests.objectives.test_alpha_cl_objective import ref_covariance

from ssldyn.dynamics.two_layer_alpha_cl import lemma4_dynamics
from ssldyn.experiments.nonlinearity.colinearity import (
    _abs_cos_within_rf,
    _energy_grads,
    _swap_first_two,
    _v_dot_rel_err,
)


def test_abs_cos_within_rf_hand_worked():
    """One RF with filters e1, e1 + e2, −e2: pairs (0,1) cos 1/√2, (0,2) 0, (1,2) −1/√2 → |·|; a second RF with
    filters (1,0,0), (2,0,0) (co-linear, |cos| 1) and (−3,0,0) (anti-parallel, |cos| 1)."""
    G = torch.tensor(
        [[[1.0, 0.0, 0.0], [1.0, 1.0, 0.0], [0.0, -1.0, 0.0]], [[1.0, 0.0, 0.0], [2.0, 0.0, 0.0], [-3.0, 0.0, 0.0]]],
        dtype=torch.float64,
    )
    got = _abs_cos_within_rf(G).numpy()
    s = 1 / math.sqrt(2)
    np.testing.assert_allclose(got, [s, 0.0, s, 1.0, 1.0, 1.0], atol=1e-15)


def test_abs_cos_within_rf_is_every_distinct_pair_of_one_rf_in_order():
    rng = np.random.default_rng(2)
    K, M, d = 3, 5, 4
    G = rng.normal(size=(K, M, d))
    ref = [
        abs(G[k, i] @ G[k, j]) / (np.linalg.norm(G[k, i]) * np.linalg.norm(G[k, j]))
        for k in range(K)
        for i in range(M)
        for j in range(i + 1, M)
    ]
    got = _abs_cos_within_rf(torch.tensor(G)).numpy()
    assert got.shape == (K * M * (M - 1) // 2,)
    np.testing.assert_allclose(got, ref, rtol=1e-12)
    # no pair across RFs: making RF 1 co-linear with RF 0's first filter changes nothing of RF 0's pairs
    G2 = G.copy()
    G2[1] = G[0, 0]
    np.testing.assert_allclose(_abs_cos_within_rf(torch.tensor(G2)).numpy()[:10], ref[:10], rtol=1e-12)


def test_swap_first_two_swaps_filters_0_and_1_of_every_rf_only():
    W = torch.arange(2 * 4 * 3, dtype=torch.float64).reshape(2, 4, 3)
    before = W.clone()
    out = _swap_first_two(W)
    ref = W.numpy()[:, [1, 0, 2, 3]]
    np.testing.assert_array_equal(out.numpy(), ref)
    assert torch.equal(W, before)  # the input is not modified
    assert torch.equal(_swap_first_two(out), W)  # an involution
    # the top-down sum v_k = Σ_m s_km w_km changes by (s_k0 − s_k1)(w_k1 − w_k0) (the erratum's measured gap)
    s = torch.tensor([[0.5, -0.2, 0.1, 0.3], [1.0, 1.0, 0.0, 2.0]], dtype=torch.float64)
    dv = (s[..., None] * out).sum(1) - (s[..., None] * W).sum(1)
    np.testing.assert_allclose(dv.numpy(), ((s[:, 0] - s[:, 1])[:, None] * (W[:, 1] - W[:, 0])).numpy())
    assert float(dv[1].abs().max()) == pytest.approx(0.0)  # equal s_k0 = s_k1: v_k unchanged


@pytest.mark.parametrize("act", ["relu", "quadratic"])
def test_v_dot_and_the_v_gradient_against_eq3_written_out(act):
    """lemma4's V̇ half (eq. 12): V̇ = V C_α[f₁] with eq. 3 as a double loop in numpy (two views, a fixed α); the
    autograd V-gradient of ½ tr C_α[f₂] equals it for every h (x² too), so _v_dot_rel_err is round-off."""
    g = torch.Generator().manual_seed(7)
    N, K, M, d = 10, 2, 3, 3
    x = torch.randn(N, K, d, generator=g, dtype=torch.float64)
    xp = x + 0.3 * torch.randn(N, K, d, generator=g, dtype=torch.float64)
    W = torch.randn(K, M, d, generator=g, dtype=torch.float64)
    V = torch.randn(2, K * M, generator=g, dtype=torch.float64)
    alpha = torch.rand(N, N, generator=g, dtype=torch.float64)
    h = (lambda u: np.maximum(u, 0)) if act == "relu" else (lambda u: u * u)
    f = h(np.einsum("nkd,kmd->nkm", x.numpy(), W.numpy())).reshape(N, -1)
    fp = h(np.einsum("nkd,kmd->nkm", xp.numpy(), W.numpy())).reshape(N, -1)
    ref = V.numpy() @ ref_covariance(f, fp, f, fp, alpha.numpy())  # eq. 3 as a double loop
    kw = {"x_pos": xp, "alpha": alpha, "activation": act}
    _, gV = _energy_grads(W, V, x, **kw)
    V_dot, _ = lemma4_dynamics(W, V, x, project=False, **kw)
    np.testing.assert_allclose(gV.numpy(), ref, rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(V_dot.numpy(), ref, rtol=1e-10, atol=1e-14)
    assert float(_v_dot_rel_err(W, V, x, **kw)) < 1e-12
