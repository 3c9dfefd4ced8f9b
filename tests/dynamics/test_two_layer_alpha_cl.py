import pytest
import torch

from ssldyn.data.latent import TwoRFModel
from ssldyn.dynamics.two_layer_alpha_cl import (
    lemma4_dynamics,
    lemma4_filter_velocity,
    stationary_top_layer,
    thm4_linear_dynamics,
    thm5_closed_form,
    top_eigvec_S,
    two_layer_energy,
    two_layer_features,
    two_layer_features_and_gated_input,
    two_layer_gated_input,
)
from ssldyn.models.activations import get_activation

D = torch.float64


def gen(s=0):
    return torch.Generator().manual_seed(s)


def rel(a, b):
    return float((a - b).norm() / b.norm())


@pytest.mark.parametrize("act", ["linear", "relu", "leaky_relu"])
def test_lemma4_matches_autograd(act):
    N, K, M, d = 30, 3, 2, 4
    x = torch.randn(N, K, d, generator=gen(), dtype=D)
    xp = x + 0.3 * torch.randn(N, K, d, generator=gen(1), dtype=D)
    alpha = torch.rand(N, N, generator=gen(2), dtype=D)
    W = torch.randn(K, M, d, generator=gen(3), dtype=D)
    V = torch.randn(2, K * M, generator=gen(4), dtype=D)
    for a, xx in [(None, None), (alpha, xp), (None, xp)]:
        Wr, Vr = W.clone().requires_grad_(True), V.clone().requires_grad_(True)
        gW, gV = torch.autograd.grad(two_layer_energy(Wr, Vr, x, x_pos=xx, alpha=a, activation=act), (Wr, Vr))
        V_dot, W_dot = lemma4_dynamics(W, V, x, x_pos=xx, alpha=a, activation=act, project=False)
        assert rel(W_dot, gW) < 1e-6 and rel(V_dot, gV) < 1e-6
        _, W_proj = lemma4_dynamics(W, V, x, x_pos=xx, alpha=a, activation=act)
        wn = W / W.norm(dim=-1, keepdim=True)
        ref = gW - (gW * wn).sum(-1, keepdim=True) * wn
        assert rel(W_proj, ref) < 1e-6


def test_thm4_linear_colinear_and_equals_lemma4():
    N, K, M, d = 40, 3, 3, 4
    x = torch.randn(N, K, d, generator=gen(5), dtype=D)
    W = torch.randn(K, M, d, generator=gen(6), dtype=D)
    s, _ = top_eigvec_S(W, x, activation="linear")
    W_dot, b = thm4_linear_dynamics(W, x, s)
    _, ref = lemma4_dynamics(W, s[None], x, activation="linear", project=False)
    assert rel(W_dot, ref) < 1e-10
    cos = torch.nn.functional.cosine_similarity(W_dot[:, :, None], W_dot[:, None, :], dim=-1).abs()
    assert torch.allclose(cos, torch.ones_like(cos), atol=1e-12)


def test_thm5_closed_form_equals_lemma4_on_population():
    m = TwoRFModel.random(K=3, d=4, C=2, P=3, generator=gen(7))
    xs, zs, ps = m.support()
    W = torch.randn(3, 4, generator=gen(8), dtype=D)
    t = thm5_closed_form(W, xs, zs, weights=ps)
    s, lam = top_eigvec_S(W[:, None, :], xs, weights=ps)
    _, ref = lemma4_dynamics(W[:, None, :], s[None], xs, weights=ps)
    assert rel(t.w_dot, ref[:, 0]) < 1e-10
    assert float(t.lam) == pytest.approx(float(lam), rel=1e-12)
    assert abs(float(t.s @ s)) == pytest.approx(1.0, abs=1e-12)  # Bunch–Nielsen–Sorensen vs eigh
    assert bool((t.delta >= 0).all())
    # eq. 138: V[f1] = D + p0 p1 b bᵀ
    f1 = two_layer_features(xs, W[:, None, :])
    mean = ps @ f1
    Vf = (f1 * ps[:, None]).T @ f1 - torch.outer(mean, mean)
    torch.testing.assert_close(Vf, torch.diag(t.d) + t.p0 * t.p1 * torch.outer(t.b, t.b))
    # batched W
    tb = thm5_closed_form(torch.stack([W, W]), xs, zs, weights=ps)
    torch.testing.assert_close(tb.w_dot[1], t.w_dot)


def test_thm5_delta_formula_eq143_matches_eq141():
    m = TwoRFModel.random(K=4, d=3, C=2, P=3, generator=gen(9))
    xs, zs, ps = m.support()
    W = torch.randn(5, 4, 3, generator=gen(10), dtype=D)
    t = thm5_closed_form(W, xs, zs, weights=ps)
    sb = (t.s * t.b).sum(-1, keepdim=True)
    lhs = t.delta * t.b  # δ_k b_k  (eq. 142-143)
    rhs = t.p0 * t.p1 * t.s * (sb - t.s * t.b)  # p0 p1 s_k Σ_{k'≠k} s_k' b_k'  (eq. 141)
    torch.testing.assert_close(lhs, rhs)


def test_thm5_per_rf_conditional_support_equals_full_population():
    m = TwoRFModel.random(K=3, d=3, C=2, P=3, generator=gen(11))
    W = torch.randn(2, 3, 3, generator=gen(12), dtype=D)
    full = thm5_closed_form(W, *m.support()[:2], weights=m.support()[2])
    xs, zs, ws = m.conditional_support()
    red = thm5_closed_form(W, xs, zs, weights=ws)
    torch.testing.assert_close(red.w_dot, full.w_dot)
    torch.testing.assert_close(red.A, full.A)


@pytest.mark.parametrize("act", ["relu", "tanh"])
def test_features_and_gated_input_are_the_rf_formulas(act):
    N, K, M, d = 5, 3, 2, 4
    x = torch.randn(N, K, d, generator=gen(20), dtype=D)
    W = torch.randn(K, M, d, generator=gen(21), dtype=D)
    h = get_activation(act)
    f_ref = torch.zeros(N, K * M, dtype=D)
    xt_ref = torch.zeros(N, K * M * d, dtype=D)
    for n in range(N):
        for k in range(K):
            for m in range(M):
                pre = W[k, m] @ x[n, k]  # w_kmᵀ x_k
                f_ref[n, k * M + m] = h(pre)  # f1_km = h(w_kmᵀ x_k)
                xt_ref[n, (k * M + m) * d : (k * M + m + 1) * d] = x[n, k] * h.deriv(pre)  # x̃_km = x_k h'(w_kmᵀ x_k)
    f1, xt = two_layer_features_and_gated_input(x, W, act)
    torch.testing.assert_close(f1, f_ref, rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(xt, xt_ref, rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(two_layer_features(x, W, act), f_ref, rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(two_layer_gated_input(x, W, act), xt_ref, rtol=1e-12, atol=1e-14)


def test_lemma4_filter_velocity_is_the_block_sum_of_eq12():
    K, M, d, d_out = 2, 3, 4, 2
    W = torch.randn(K, M, d, generator=gen(22), dtype=D)
    V = torch.randn(d_out, K * M, generator=gen(23), dtype=D)
    C = torch.randn(K * M * d, K * M * d, generator=gen(24), dtype=D)
    S = V.T @ V
    ref = torch.zeros(K, M, d, dtype=D)
    for i in range(K * M):  # ẇ_i = Σ_j S_ij C_[ij] w_j, C_[ij] the (d, d) block of filters i, j
        for j in range(K * M):
            block = C[i * d : (i + 1) * d, j * d : (j + 1) * d]
            ref[i // M, i % M] += S[i, j] * block @ W[j // M, j % M]
    torch.testing.assert_close(lemma4_filter_velocity(V, C, W), ref, rtol=1e-12, atol=1e-13)


def test_stationary_top_layer_is_the_top_eigenvector_and_eq143():
    K, p0, p1 = 4, 0.3, 0.7
    dk = torch.rand(3, K, generator=gen(25), dtype=D)
    bk = torch.randn(3, K, generator=gen(26), dtype=D)
    Vf = torch.diag_embed(dk) + p0 * p1 * bk[..., :, None] * bk[..., None, :]  # eq. 138
    lam_all, vec = torch.linalg.eigh(Vf)
    lam = lam_all[..., -1]
    s, delta = stationary_top_layer(dk, bk, p0, p1, lam)
    torch.testing.assert_close(s.norm(dim=-1), torch.ones(3, dtype=D), rtol=1e-12, atol=0)
    torch.testing.assert_close((Vf @ s[..., None]).squeeze(-1), lam[..., None] * s, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close((s * vec[..., -1]).sum(-1).abs(), torch.ones(3, dtype=D), rtol=1e-10, atol=0)
    assert bool(((s * bk).sum(-1) > 0).all())  # the sign b_k / (λ − d_k): sᵀb = Z Σ b_k²/(λ − d_k) / Z² > 0
    for e in range(3):  # eq. 143 written out
        gap = [float(lam[e] - dk[e, k]) for k in range(K)]
        Z2 = sum(float(bk[e, k]) ** 2 / g**2 for k, g in enumerate(gap))
        for k in range(K):
            others = sum(float(bk[e, j]) ** 2 / gap[j] for j in range(K) if j != k)
            assert float(delta[e, k]) == pytest.approx(p0 * p1 / (Z2 * gap[k]) * others, rel=1e-10)
