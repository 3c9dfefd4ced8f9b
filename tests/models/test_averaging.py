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
    net = AveragingNet(6, 2, 8, "relu", invariant_init=True, dtype=torch.float64)
    x = torch.randn(10, 6, dtype=torch.float64)
    x2 = x.clone()
    x2[:, 2:] += torch.randn(10, 4, dtype=torch.float64)  # a perturbation in M^⊥
    assert torch.equal(net(x), net(x2))
    assert not torch.equal(
        AveragingNet(6, 2, 8, dtype=torch.float64)(x), AveragingNet(6, 2, 8, dtype=torch.float64)(x2)
    )


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
