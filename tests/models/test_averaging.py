import math

import torch

from ssldyn.models.averaging import AveragingNet
from ssldyn.models.mlp import MLP


def _eq19_A(M, d):
    A = torch.zeros(M * d, d, dtype=torch.float64)
    for k in range(d):
        A[k * M : (k + 1) * M, k] = 1.0 / math.sqrt(M)
    return A


def test_forward_is_eq18_with_the_eq19_averaging_matrix():
    net = AveragingNet(5, 3, 4, "tanh", dtype=torch.float64, bias=True)
    x = torch.randn(7, 5, dtype=torch.float64)
    B, c = net.B[0], net.c[0]
    expected = torch.tanh(x @ B.T + c) @ _eq19_A(4, 3)  # Aᵀσ(Bx+c), row form
    assert torch.allclose(net(x)[0], expected, atol=1e-12)


def test_invariant_init_depends_on_first_d_coordinates_only():
    g = torch.Generator().manual_seed(0)
    net = AveragingNet(6, 2, 8, "relu", invariant_init=True, seeds=[5], dtype=torch.float64)
    x = torch.randn(10, 6, generator=g, dtype=torch.float64)
    x2 = x.clone()
    x2[:, 2:] += torch.randn(10, 4, generator=g, dtype=torch.float64)  # a perturbation in M^⊥
    assert torch.equal(net(x), net(x2))
    # eq. (17): the same draw as the plain net, with the columns of B on the last D − d coordinates zeroed
    plain = AveragingNet(6, 2, 8, "relu", seeds=[5], dtype=torch.float64)
    B = plain.B[0].detach().clone()
    B[:, 2:] = 0.0
    assert torch.equal(net.B[0], B)
    torch.testing.assert_close(net(x)[0], torch.relu(x[:, :2] @ B[:, :2].T) @ _eq19_A(8, 2), rtol=1e-14, atol=1e-14)
    assert not torch.equal(plain(x), plain(x2))  # the same net without the zeroed columns sees M^⊥


def test_ensemble_members_are_independent_networks():
    net = AveragingNet(3, 2, 5, "relu", ensemble=3, dtype=torch.float64)
    x = torch.randn(4, 3, dtype=torch.float64)
    out = net(x)
    for e in range(3):
        single = torch.relu(x @ net.B[e].T) @ _eq19_A(5, 2)
        assert torch.allclose(out[e], single, atol=1e-12)


def test_mlp_matches_manual_layers():
    net = MLP(3, 2, hidden=6, depth=4, activation="tanh", ensemble=2, dtype=torch.float64)
    x = torch.randn(5, 3, dtype=torch.float64)
    out = net(x)
    for e in range(2):
        h = x
        for i, layer in enumerate(net.layers):
            h = torch.nn.functional.linear(h, layer.weight[e], layer.bias[e])
            if i < 3:
                h = torch.tanh(h)
        assert torch.allclose(out[e], h, atol=1e-12)
    assert len(net.layers) == 4


def test_device_argument_moves_the_cpu_initialisation():
    # device=...: initialised on the CPU from the generator (the same weights as a CPU model), then moved; the meta
    # device stands in for CUDA (a CPU tensor mixed into a meta computation raises)
    g_cpu, g_meta = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    AveragingNet(4, 2, 5, bias=True, generator=g_cpu, dtype=torch.float64)
    net = AveragingNet(4, 2, 5, bias=True, generator=g_meta, dtype=torch.float64, device="meta")
    assert torch.equal(g_cpu.get_state(), g_meta.get_state())
    assert {t.device.type for t in (*net.parameters(), *net.buffers())} == {"meta"}
    assert net(torch.empty(3, 4, dtype=torch.float64, device="meta")).shape == (1, 3, 2)
    mlp = MLP(4, 2, hidden=6, depth=3, dtype=torch.float64, device="meta")
    assert {p.device.type for p in mlp.parameters()} == {"meta"}
    assert mlp(torch.empty(3, 4, dtype=torch.float64, device="meta")).device.type == "meta"
