"""Receptive-field network: hand-derived backward vs autograd, BN variants vs formulas, init."""

import math

import pytest
import torch

from ssldyn.data.tokens import TokenGenerator, TokenSpec
from ssldyn.models.rf_net import EnsembleRFNet
from ssldyn.objectives import info_nce, quadratic_contrastive_loss

D = torch.float64


def _loss(z):
    return info_nce(z[:, 0], z[:, 1], 0.1, negatives="view1")


@pytest.mark.parametrize("token_mode", ["table", "samples"])
def test_fast_path_matches_autograd_for_mixed_members(token_mode):
    spec = TokenSpec(K=4, n_tokens=6, P=2, G=5, L=2, zeta=3.0)
    gen = TokenGenerator(spec, 1)
    tok = gen.sample(1, 16)[0]  # (2, N, K)
    acts = ["relu", "relu", "linear", "quadratic", "leaky_relu", "sigmoid", "linear", "relu"]
    bns = ["off", "standard", "mean_only", "var_only", "none", "standard", "mean_only", "var_only"]
    E = len(acts)
    net = EnsembleRFNet(
        4, 6, [3, 2, 3, 1, 3, 2, 3, 3], out_dim=5, ensemble=E, activation=acts, bn=bns, seeds=range(E), dtype=D
    )
    net.token_mode = token_mode
    U = gen.embedding.to(D).expand(E, -1, -1)
    loss_tok = net.loss_and_grad(_loss, tokens=tok.expand(E, -1, -1, -1), embedding=U)
    gW, gV = net.W.grad.clone(), net.VT.grad.clone()
    x = gen.embed(tok).to(D)  # (2, N, K, d)
    net.loss_and_grad(_loss, x=x.unsqueeze(0))  # dense path
    torch.testing.assert_close(net.W.grad, gW, rtol=1e-10, atol=1e-10)
    net.W.grad = net.VT.grad = None
    z = torch.stack([net(x[0]), net(x[1])], 1)  # autograd, one view at a time
    ref = _loss(z)
    ref.sum().backward()
    torch.testing.assert_close(loss_tok, ref.detach(), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(gW, net.W.grad, rtol=1e-9, atol=1e-10)
    torch.testing.assert_close(gV, net.VT.grad, rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize(
    "mode,a,b", [("off", None, None), ("standard", 1, 1), ("mean_only", 1, 0), ("var_only", 0, 1), ("none", 0, 0)]
)
def test_bn_variant_gradients_match_hand_derivation(mode, a, b):
    # K = M = out = d_in = 1, linear activation: h_n = w x_n, z_n = v g_n, loss = Σ c_n z_n.
    torch.manual_seed(1)
    N, eps = 12, 1e-5
    x = torch.randn(N, dtype=D) + 0.5
    c = torch.randn(N, dtype=D)
    net = EnsembleRFNet(1, 1, 1, out_dim=1, ensemble=1, activation="linear", bn=mode, seeds=3, bn_eps=eps, dtype=D)
    w, v = net.W.detach().item(), net.V.detach().item()
    z = net(x.view(N, 1, 1))[0, :, 0]  # (N,)
    (c * z).sum().backward()
    h = w * x
    dg = c * v
    if mode == "off":
        dh = dg
    else:
        mu, var = h.mean(), h.var(unbiased=False)
        s = 1 / math.sqrt(var + eps)
        g = (h - mu) * s
        # written out: d/dh_n of Σ_j dg_j (h_j − μ)s with μ, σ² (not) differentiated
        dh = s * (dg - a * dg.mean() - b * g * (dg * g).mean())
    torch.testing.assert_close(net.W.grad.view(()), (dh * x).sum(), rtol=1e-10, atol=1e-12)
    # the fast path (both views; second view = same batch) gives twice the per-view gradient
    net.W.grad = None

    def lin(zz):
        return (c * zz[:, 0, :, 0]).sum(-1) + (c * zz[:, 1, :, 0]).sum(-1)

    net.loss_and_grad(lin, x=torch.stack([x, x]).view(1, 2, N, 1, 1))
    torch.testing.assert_close(net.W.grad.view(()), 2 * (dh * x).sum(), rtol=1e-10, atol=1e-12)


def test_members_equal_lone_networks_and_padding_is_inert():
    acts, Ms, seeds = ["relu", "linear", "quadratic"], [2, 5, 3], [11, 12, 13]
    ens = EnsembleRFNet(3, 4, Ms, out_dim=6, ensemble=3, activation=acts, bn="mean_only", seeds=seeds, dtype=D)
    x = torch.randn(9, 3, 4, dtype=D)
    z = ens(x)
    for e in range(3):
        lone = EnsembleRFNet(
            3, 4, Ms[e], out_dim=6, ensemble=1, activation=acts[e], bn="mean_only", seeds=seeds[e], dtype=D
        )
        torch.testing.assert_close(ens.W.detach()[e, :, : Ms[e]], lone.W.detach()[0])
        assert torch.all(ens.W.detach()[e, :, Ms[e] :] == 0)
        torch.testing.assert_close(z[e], lone(x)[0], rtol=1e-12, atol=1e-12)
    # init follows nn.Linear's bounds: |w| <= 1/sqrt(d_in), |v| <= 1/sqrt(K M)
    assert ens.W.abs().max() <= 1 / math.sqrt(4)
    assert ens.V.detach()[1].abs().max() <= 1 / math.sqrt(3 * 5)


@pytest.mark.parametrize("token_mode", ["table", "samples"])
def test_quadratic_loss_gradients_through_fast_path(token_mode):
    gen = TokenGenerator(TokenSpec(K=3, n_tokens=5, P=2, G=4, L=2), 0)
    tok = gen.sample(1, 10)[0]
    net = EnsembleRFNet(
        3, 5, 4, out_dim=3, ensemble=2, activation=["relu", "leaky_relu"], bn="standard", seeds=[0, 1], dtype=D
    )
    net.token_mode = token_mode

    def q(z):
        return quadratic_contrastive_loss(z[:, 0], z[:, 1], 0.1)

    net.loss_and_grad(q, tokens=tok.expand(2, -1, -1, -1), embedding=gen.embedding.to(D).expand(2, -1, -1))
    gW = net.W.grad.clone()
    net.W.grad = None
    x = gen.embed(tok).to(D)
    q(torch.stack([net(x[0]), net(x[1])], 1)).sum().backward()
    torch.testing.assert_close(gW, net.W.grad, rtol=1e-9, atol=1e-11)


def test_bad_inputs():
    with pytest.raises(ValueError, match="bn"):
        EnsembleRFNet(2, 3, 2, bn="weird")
    with pytest.raises(ValueError, match="activation"):
        EnsembleRFNet(2, 3, 2, activation="swish")
    net = EnsembleRFNet(2, 3, 2)
    with pytest.raises(ValueError, match="x must be"):
        net(torch.randn(4, 3, 3))
