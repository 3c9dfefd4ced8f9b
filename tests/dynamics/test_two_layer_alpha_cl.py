import pytest
import torch

from ssldyn.data.latent import TwoRFModel
from ssldyn.dynamics.two_layer_alpha_cl import (
    lemma4_dynamics,
    thm4_linear_dynamics,
    thm5_closed_form,
    top_eigvec_S,
    two_layer_energy,
    two_layer_features,
)

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
