"""BatchNorm two-layer dynamics (nonlinearity App. D): Lemma 6 against autograd, Cor. 3 against Lemma 6."""

import pytest
import torch

from ssldyn.data.latent import TwoRFModel
from ssldyn.dynamics.alpha_cl import uniform_contrastive_covariance
from ssldyn.dynamics.two_layer_alpha_cl import two_layer_features, two_layer_gated_input
from ssldyn.dynamics.two_layer_bn import bn_statistics, bn_two_layer_energy, cor3_closed_form, lemma6_dynamics

D = torch.float64


def gen(s):
    return torch.Generator().manual_seed(s)


def rel(a, b):
    return float((a - b).norm() / b.norm())


def _batch(seed=0, N=48, K=3, M=2, d=4):
    g = gen(seed)
    x = torch.randn(N, K, d, generator=g, dtype=D)
    xp = x + 0.3 * torch.randn(N, K, d, generator=g, dtype=D)
    W = torch.randn(K, M, d, generator=g, dtype=D)
    V = torch.randn(5, K * M, generator=g, dtype=D)
    alpha = torch.rand(N, N, generator=g, dtype=D)
    return x, xp, W, V, alpha


def test_bn_statistics_over_both_views():
    f1 = torch.tensor([[1.0], [3.0]], dtype=D)
    f2 = torch.tensor([[5.0], [7.0]], dtype=D)
    mu, sigma = bn_statistics(f1, f2)
    assert float(mu) == pytest.approx(4.0) and float(sigma) == pytest.approx(5.0**0.5)  # eq. 164-165


@pytest.mark.parametrize("activation", ["relu", "linear", "leaky_relu"])
def test_lemma6_equals_autograd_with_mean_backprop_bn(activation):
    x, xp, W, V, alpha = _batch(1)
    Wr, Vr = W.clone().requires_grad_(True), V.clone().requires_grad_(True)
    E = bn_two_layer_energy(Wr, Vr, x, xp, alpha=alpha, activation=activation, bn="mean_only")
    gW, gV = torch.autograd.grad(E, (Wr, Vr))
    V_dot, W_dot = lemma6_dynamics(W, V, x, xp, alpha=alpha, activation=activation)
    assert rel(W_dot, gW) < 1e-10 and rel(V_dot, gV) < 1e-10


def test_lemma6_is_not_vanilla_bn():
    x, xp, W, V, alpha = _batch(2)
    Wr = W.clone().requires_grad_(True)
    (gW,) = torch.autograd.grad(bn_two_layer_energy(Wr, V, x, xp, alpha=alpha, bn="standard"), Wr)
    _, W_dot = lemma6_dynamics(W, V, x, xp, alpha=alpha)
    assert rel(W_dot, gW) > 1e-3  # backpropagating σ changes the gradient (Def. 5 matters)


def test_cor3_equals_lemma6_on_the_population():
    m = TwoRFModel.random(K=3, d=3, C=2, P=3, generator=gen(3))
    xs, zs, ps = m.support()
    W = torch.randn(8, 3, 3, generator=gen(4), dtype=D)
    alive = (torch.einsum("kad,ekd->eka", m.patterns, W).amax(-1) > 0).all(-1)  # some pattern activates each filter
    W = W[alive]
    assert W.shape[0] >= 2
    t = cor3_closed_form(W, xs, zs, weights=ps)
    for e in range(W.shape[0]):
        We = W[e][:, None, :]
        f1 = two_layer_features(xs, We)
        mu = ps @ f1
        sig = (((f1 - mu) ** 2) * ps[:, None]).sum(0).sqrt()
        torch.testing.assert_close(sig, t.sigma[e])
        xt = two_layer_gated_input(xs, We) * (1 / sig).repeat_interleave(3)
        C = uniform_contrastive_covariance(xt, None, ps)
        S = torch.outer(t.s[e], t.s[e])
        ref = ((torch.kron(S, torch.ones(3, 3, dtype=D)) * C) @ W[e].reshape(-1)).reshape(3, 3)
        assert rel(t.w_dot[e], ref) < 1e-10
        lam = torch.linalg.eigvalsh(uniform_contrastive_covariance((f1 - mu) / sig, None, ps))[-1]
        assert float(t.lam[e]) == pytest.approx(float(lam), abs=1e-12)
    assert bool((t.delta >= 0).all()) and bool((t.lam >= t.d.max(-1).values - 1e-12).all())  # Cor. 3 (1), eq. 179
    p = t.plain
    torch.testing.assert_close(t.d, 1 / (1 + p.p0 * p.p1 * (p.b / p.d.sqrt()) ** 2))  # App. D remark


def test_cor3_rejects_dead_filters():
    m = TwoRFModel.random(K=2, d=3, C=2, P=3, generator=gen(5))
    xs, zs, ps = m.support()
    W = torch.ones(2, 3, dtype=D)
    W[0] = -m.patterns[0].sum(0)  # orthonormal patterns: w·u_a = −1 for every pattern, f_0 ≡ 0 (a dead ReLU)
    assert float((xs[:, 0] @ W[0]).max()) < 0
    with pytest.raises(ValueError, match="dead"):
        cor3_closed_form(W, xs, zs, weights=ps)
