"""``function_space``: a NetworkKernel moves its network's weights along the weight
flow (``advance``), and ``project="sphere"`` projects the starting embeddings too."""

import torch

from ssldyn.dynamics.function_space import NetworkKernel, function_space_flow, vanilla_gradient_descent
from ssldyn.models.mlp import MLP

D = torch.float64


def _loss(z):  # a mean over pairs, not invariant to the scale of z (written out here)
    return ((z.unsqueeze(-2) - z.unsqueeze(-3)) ** 2).sum(-1).neg().exp().mean((-1, -2))


def _fd_grad(f, z, h=1e-6):
    g = torch.zeros_like(z)
    for idx in range(z.numel()):
        e = torch.zeros_like(z).view(-1)
        e[idx] = h
        g.view(-1)[idx] = (f(z + e.view_as(z)) - f(z - e.view_as(z))) / (2 * h)
    return g


def test_network_kernel_moves_the_weights_by_a_gradient_step_of_the_loss(sgd_step_by_hand):
    # at step 0 the flow's z is the network's output, so advance(g, lr) = −lr Σ_i J_iᵀ g_i is exactly one GD step
    # of 𝓛(model(x)) on the weights (reference: the hand-written SGD step)
    torch.manual_seed(2)
    x = torch.randn(6, 3, dtype=D)
    net = MLP(3, 2, hidden=8, depth=2, activation="tanh", dtype=D)
    ref = MLP(3, 2, hidden=8, depth=2, activation="tanh", dtype=D)
    ref.load_state_dict(net.state_dict())
    w0 = [p.detach().clone() for p in net.parameters()]
    z0 = net(x)[0].detach()
    function_space_flow(z0, _loss, NetworkKernel(net, x, refresh_every=1), steps=1, lr=0.05)
    sgd_step_by_hand(ref, _loss(ref(x)[0]), 0.05)
    assert max(float((q.detach() - p0).abs().max()) for q, p0 in zip(ref.parameters(), w0)) > 1e-4  # a real step
    for p, q in zip(net.parameters(), ref.parameters()):
        torch.testing.assert_close(p.detach(), q.detach(), rtol=1e-10, atol=1e-12)


def test_network_kernel_flow_and_its_network_stay_together_over_many_steps(sgd_step_by_hand):
    torch.manual_seed(1)
    x = torch.randn(6, 3, dtype=D)
    net = MLP(3, 2, hidden=16, depth=2, activation="tanh", dtype=D)
    ref = MLP(3, 2, hidden=16, depth=2, activation="tanh", dtype=D)
    ref.load_state_dict(net.state_dict())
    w0 = [p.detach().clone() for p in net.parameters()]
    z0 = net(x)[0].detach()
    z_flow = function_space_flow(z0, _loss, NetworkKernel(net, x, refresh_every=1), steps=20, lr=0.05).state
    for _ in range(20):
        sgd_step_by_hand(ref, _loss(ref(x)[0]), 0.05)
    dw_ref = torch.cat([(q.detach() - p0).reshape(-1) for q, p0 in zip(ref.parameters(), w0)])
    dw_net = torch.cat([(p.detach() - p0).reshape(-1) for p, p0 in zip(net.parameters(), w0)])
    assert float((dw_net - dw_ref).norm()) < 0.05 * float(dw_ref.norm())  # the weights followed GD
    z_net = net(x)[0].detach()
    assert float((z_flow - z_net).norm()) < 0.05 * float((z_net - z0).norm())  # and the kernel followed the weights


def test_sphere_projection_applies_to_the_starting_embeddings():
    # z0 off the sphere: eq. (14) starts from P_C(z0), so step 1 is P(P(z0) − σ n ∂𝓛/∂z |_{P(z0)}) and the loss
    # logged at step 0 is 𝓛(P(z0))
    g = torch.Generator().manual_seed(5)
    z0 = 3.0 * torch.randn(5, 2, generator=g, dtype=D)
    u0 = z0 / z0.norm(dim=1, keepdim=True)
    res = vanilla_gradient_descent(z0, _loss, steps=1, lr=0.1)
    want = u0 - 0.1 * 5 * _fd_grad(_loss, u0)
    want = want / want.norm(dim=1, keepdim=True)
    torch.testing.assert_close(res.state, want, rtol=0, atol=1e-7)
    assert abs(res.trajectory.series("loss")[1][0] - float(_loss(u0))) < 1e-12
    # with steps = 0 the state is the projected start
    torch.testing.assert_close(function_space_flow(z0, _loss, torch.eye(5, dtype=D), steps=0, lr=0.1,
                                                   project="sphere").state, u0, rtol=0, atol=1e-15)  # fmt: skip
