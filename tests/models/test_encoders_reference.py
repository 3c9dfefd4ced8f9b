"""Independent-reference checks beside tests/models/test_encoders.py (test audit, 2026-12-06).

``test_conv_forward_matches_functional_reference`` builds a one-block ConvEncoder, so the pooling between blocks
(``conv → BN → ReLU → maxpool2``) is never compared with a reference (average pooling passes every models test),
and no test pins the conv layers' initial distribution (``nn.Conv2d``'s U(±1/√(in·k²))): the ensemble-vs-lone
tests compare the code with itself. Both written out here."""

import math

import torch
import torch.nn.functional as F

from ssldyn.models.encoders import build_simclr_net


def test_two_block_conv_forward_is_conv_bn_relu_maxpool_then_global_average():
    net = build_simclr_net("conv", (2, 8, 8), ensemble=2, seeds=[0, 1], widths=(3, 5), proj_hidden=4, proj_dim=2)
    net.eval()
    with torch.no_grad():  # non-trivial running statistics, so the BN step is visible
        for bn in net.backbone.bns:
            bn.running_mean.uniform_(-0.2, 0.2)
            bn.running_var.uniform_(0.5, 2.0)
    x = torch.rand(4, 2, 8, 8, generator=torch.Generator().manual_seed(0))
    bb = net.backbone
    for e in range(2):
        h = x
        for i, c_out in enumerate((3, 5)):
            conv, bn = bb.convs[i], bb.bns[i]
            sl = slice(c_out * e, c_out * (e + 1))
            h = F.conv2d(h, conv.weight[e], conv.bias[e], padding=1)
            h = F.batch_norm(h, bn.running_mean[sl], bn.running_var[sl], bn.weight[sl], bn.bias[sl], False, 0.0, bn.eps)
            h = F.relu(h)
            if i == 0:
                h = F.max_pool2d(h, 2)  # (4, 3, 4, 4): between blocks
        ref = h.mean((2, 3))  # (4, 5): global average pool after the last block
        torch.testing.assert_close(net.features(x)[e], ref, atol=1e-6, rtol=1e-6)


def test_conv_layers_are_drawn_as_nn_conv2d_default_uniform_in_plus_minus_one_over_sqrt_fan_in():
    """Member e of ``seeds=[s]``: conv weight then bias ~ U(±1/√(in·k²)) drawn in float64 from Generator(s), block by
    block (the rule of the backbone, before the head); the bound is nn.Conv2d's own (kaiming-uniform, a = √5)."""
    net = build_simclr_net("conv", (2, 8, 8), ensemble=1, seeds=[7], widths=(3, 5), proj_hidden=4, proj_dim=2)
    g = torch.Generator().manual_seed(7)
    for conv, (c_in, c_out) in zip(net.backbone.convs, ((2, 3), (3, 5))):
        b = 1 / math.sqrt(c_in * 9)
        w = (torch.rand(c_out, c_in, 3, 3, generator=g, dtype=torch.float64) * 2 - 1) * b
        bias = (torch.rand(c_out, generator=g, dtype=torch.float64) * 2 - 1) * b
        torch.testing.assert_close(conv.weight[0].double(), w, rtol=0, atol=1e-7)
        torch.testing.assert_close(conv.bias[0].double(), bias, rtol=0, atol=1e-7)
    # nn.Conv2d's default bound, read off torch itself: max |w| over many weights reaches 1/√(in·k²) and no more
    ref = torch.nn.Conv2d(16, 64, 3)
    big = build_simclr_net("conv", (16, 8, 8), ensemble=1, seeds=[1], widths=(64,), proj_hidden=4, proj_dim=2)
    b = 1 / math.sqrt(16 * 9)
    for w in (ref.weight.detach(), big.backbone.convs[0].weight[0].detach()):
        assert float(w.abs().max()) <= b and float(w.abs().max()) > 0.99 * b
