"""Image encoders: ensemble members equal lone networks (init, forward, training), head discarded for features."""

import pytest
import torch
import torch.nn.functional as F

from ssldyn.models.encoders import build_simclr_net
from ssldyn.objectives import info_nce


@pytest.mark.parametrize("arch", ["conv", "mlp"])
def test_ensemble_members_equal_lone_networks(arch):
    torch.manual_seed(0)
    x = torch.rand(8, 1, 12, 12)
    kw = dict(widths=(4, 6), hidden=(16,), feature_dim=8, proj_hidden=8, proj_dim=5)
    ens = build_simclr_net(arch, (1, 12, 12), ensemble=2, seeds=[3, 7], **kw)
    lone = [build_simclr_net(arch, (1, 12, 12), ensemble=1, seeds=[s], **kw) for s in (3, 7)]
    opt_e = torch.optim.SGD(ens.parameters(), lr=0.1, momentum=0.9)  # Adam amplifies round-off
    opt_l = [torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9) for m in lone]
    for _ in range(3):
        v1, v2 = x + 0.05 * torch.randn_like(x), x + 0.05 * torch.randn_like(x)
        z = ens(torch.cat([v1, v2]))  # (2, 16, 5)
        le = info_nce(z[:, :8], z[:, 8:], 0.5)
        opt_e.zero_grad()
        le.sum().backward()
        opt_e.step()
        for e, (m, o) in enumerate(zip(lone, opt_l)):
            zl = m(torch.cat([v1, v2]))
            ll = info_nce(zl[:, :8], zl[:, 8:], 0.5)
            torch.testing.assert_close(ll, le[e : e + 1].detach(), atol=1e-5, rtol=1e-5)
            o.zero_grad()
            ll.sum().backward()
            o.step()
    ens.eval()
    for e, m in enumerate(lone):
        m.eval()
        torch.testing.assert_close(ens.features(x)[e], m.features(x)[0], atol=1e-4, rtol=1e-4)


def test_conv_forward_matches_functional_reference():
    net = build_simclr_net("conv", (3, 8, 8), ensemble=2, seeds=[0, 1], widths=(4,), proj_hidden=6, proj_dim=3)
    net.eval()
    x = torch.rand(5, 3, 8, 8)
    bb = net.backbone
    for e in range(2):
        bn = bb.bns[0]
        sl = slice(4 * e, 4 * e + 4)
        h = F.conv2d(x, bb.convs[0].weight[e], bb.convs[0].bias[e], padding=1)
        h = F.batch_norm(h, bn.running_mean[sl], bn.running_var[sl], bn.weight[sl], bn.bias[sl], False, 0.0, bn.eps)
        ref = F.relu(h).mean((2, 3))  # (5, 4): one block -> global average pool
        torch.testing.assert_close(net.features(x)[e], ref, atol=1e-6, rtol=1e-6)
        hd = net.head
        p = F.linear(ref, hd.l1.weight[e], hd.l1.bias[e])
        bn1 = hd.bn.bn
        s6 = slice(6 * e, 6 * e + 6)
        p = F.batch_norm(
            p, bn1.running_mean[s6], bn1.running_var[s6], bn1.weight[s6], bn1.bias[s6], False, 0.0, bn1.eps
        )
        p = F.linear(F.relu(p), hd.l2.weight[e], hd.l2.bias[e])
        torch.testing.assert_close(net(x)[e], p, atol=1e-6, rtol=1e-6)


def test_init_bounds_and_errors():
    net = build_simclr_net("mlp", (1, 4, 4), hidden=(32,), feature_dim=8)
    w = net.backbone.linears[0].weight
    assert w.abs().max() <= 1 / 4 and w.abs().max() > 0.2  # U(±1/√16)
    with pytest.raises(ValueError, match="allowed values"):
        build_simclr_net("resnet", (1, 4, 4))
    with pytest.raises(ValueError, match="input"):
        net(torch.rand(3, 2, 4, 4, 4, 1))


def test_simclr_net_rejects_parts_without_the_seeding_rule():
    from torch import nn

    from ssldyn.models.encoders import MLPEncoder, SimCLRNet

    with pytest.raises(ValueError, match="backbone Linear has no init_member"):
        SimCLRNet(nn.Linear(4, 4), None)
    with pytest.raises(ValueError, match="head Linear has no init_member"):
        SimCLRNet(MLPEncoder(16, hidden=(8,), out_dim=4, ensemble=2), nn.Linear(4, 4))
    lone = SimCLRNet(MLPEncoder(16, hidden=(8,), out_dim=4, ensemble=1), None, seeds=[3])
    pair = SimCLRNet(MLPEncoder(16, hidden=(8,), out_dim=4, ensemble=2), None, seeds=[5, 3])
    x = torch.rand(5, 16)
    torch.testing.assert_close(pair(x)[1], lone(x)[0])  # member 1 of the pair is the lone seed-3 network


def test_encoder_layers_are_ensemble_linear_drawn_in_float64():
    """The encoders' linear layers are EnsembleLinear(init="torch64"): U(±1/√in) drawn in float64 and rounded, so a
    float32 and a float64 layer from one seed hold the same weights up to float32 rounding; the draw is the
    formula written out (weight, then bias, from the member's generator)."""
    from ssldyn.models.ensemble import EnsembleLinear

    net = build_simclr_net("mlp", (1, 4, 4), hidden=(32,), feature_dim=8, seeds=[3])
    assert all(type(m) is EnsembleLinear for m in [*net.backbone.linears, net.head.l1, net.head.l2])
    lin32 = EnsembleLinear(16, 5, 1, bias=True, init="torch64", seeds=[7])
    lin64 = EnsembleLinear(16, 5, 1, bias=True, init="torch64", seeds=[7], dtype=torch.float64)
    torch.testing.assert_close(lin32.weight.double(), lin64.weight, rtol=0, atol=1e-7)
    g = torch.Generator().manual_seed(7)
    w = (torch.rand(5, 16, generator=g, dtype=torch.float64) * 2 - 1) / 4  # bound 1/√16
    b = (torch.rand(5, generator=g, dtype=torch.float64) * 2 - 1) / 4
    assert torch.equal(lin64.weight[0], w) and torch.equal(lin64.bias[0], b)
    with pytest.raises(ValueError, match=r"init 'uniform': allowed values are 'torch', 'torch64', 'normal'"):
        EnsembleLinear(4, 3, init="uniform")  # pyright: ignore[reportArgumentType]
