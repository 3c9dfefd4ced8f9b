import torch

from ssldyn.dynamics.function_space import (NetworkKernel, function_space_flow, pointwise_gradient, project_sphere,
                                            vanilla_gradient_descent)
from ssldyn.dynamics.weight_space import train_weight_space
from ssldyn.kernels.ntk import empirical_ntk
from ssldyn.models.mlp import MLP


def _loss(z):  # a mean over samples of a contrastive-type term, written out here (not from the library)
    u = z / z.norm(dim=-1, keepdim=True)
    s = torch.exp(u @ u.mT / 0.5)  # (..., n, n)
    return torch.log(s.sum(-1) - s.diagonal(dim1=-2, dim2=-1)).mean(-1)


def _fd_grad(f, z, h=1e-6):
    g = torch.zeros_like(z)
    for idx in range(z.numel()):
        e = torch.zeros_like(z).view(-1)
        e[idx] = h
        e = e.view_as(z)
        g.view(-1)[idx] = (f(z + e) - f(z - e)) / (2 * h)
    return g


def test_prop41_one_weight_step_equals_kernel_step_up_to_eta_squared():
    torch.manual_seed(0)
    x = torch.randn(6, 3, dtype=torch.float64)
    model = MLP(3, 2, hidden=8, depth=2, activation="tanh", dtype=torch.float64)
    z0 = model(x)[0].detach()
    g = _fd_grad(_loss, z0)  # ∂𝓛/∂z by finite differences
    K = empirical_ntk(model, None, x)
    errs = []
    for eta in (1e-2, 5e-3, 2.5e-3):
        m = MLP(3, 2, hidden=8, depth=2, activation="tanh", dtype=torch.float64)
        m.load_state_dict(model.state_dict())
        train_weight_space(m, x, _loss, steps=1, lr=eta, output="raw", log_every=None)
        dz = m(x)[0].detach() - z0
        pred = -eta * torch.einsum("ijab,jb->ia", K, g)
        errs.append(((dz - pred).norm() / pred.norm()).item())
    # relative error O(η): halves when η halves
    assert 1.7 < errs[0] / errs[1] < 2.3 and 1.7 < errs[1] / errs[2] < 2.3
    assert errs[-1] < 0.05


def test_vanilla_gd_is_eq14_projected():
    z0 = project_sphere(torch.randn(5, 2, dtype=torch.float64))
    _, z1 = vanilla_gradient_descent(z0, _loss, steps=1, lr=0.1)
    grad_L = 5 * _fd_grad(_loss, z0)  # ∇L(z_i) = n ∂𝓛/∂z_i
    expected = z0 - 0.1 * grad_L
    expected = expected / expected.norm(dim=1, keepdim=True)
    assert torch.allclose(z1, expected, atol=1e-7)


def test_fixed_kernel_flow_step_and_snapshots():
    z0 = torch.randn(4, 2, dtype=torch.float64)
    A = torch.randn(8, 8, dtype=torch.float64)
    K = (A @ A.T).view(4, 2, 4, 2).permute(0, 2, 1, 3)  # (n, n, d, d) PSD kernel
    traj, z1 = function_space_flow(z0, _loss, K, steps=1, lr=0.05, snapshot_every=1)
    g = _fd_grad(_loss, z0)
    expected = z0 - 0.05 * torch.einsum("ijab,jb->ia", K, g)
    assert torch.allclose(z1, expected, atol=1e-8)
    assert torch.allclose(torch.as_tensor(traj.snapshots("neg_grad")[0]), -4 * g, atol=1e-6)
    assert traj.series("loss")[0].tolist() == [0, 1]


def test_network_kernel_flow_tracks_the_trained_network():
    torch.manual_seed(1)
    x = torch.randn(6, 3, dtype=torch.float64)
    net = MLP(3, 2, hidden=16, depth=2, activation="tanh", dtype=torch.float64)
    ref = MLP(3, 2, hidden=16, depth=2, activation="tanh", dtype=torch.float64)
    ref.load_state_dict(net.state_dict())
    z0 = net(x)[0].detach()
    nk = NetworkKernel(net, x, refresh_every=1)
    _, z_flow = function_space_flow(z0, _loss, nk, steps=20, lr=1e-3)
    train_weight_space(ref, x, _loss, steps=20, lr=1e-3, output="raw", log_every=None)
    z_net = ref(x)[0].detach()
    moved = (z_net - z0).norm()
    assert (z_flow - z_net).norm() / moved < 0.02  # same flow up to O(η) per step
    assert nk.evaluations == 20


def test_pointwise_gradient_off_sample_by_finite_differences():
    z = torch.randn(5, 2, dtype=torch.float64)
    assert torch.allclose(pointwise_gradient(_loss, z, z), 5 * _fd_grad(_loss, z), atol=1e-6)
    q = torch.randn(5, 2, dtype=torch.float64)
    pg = pointwise_gradient(_loss, z, q)
    for i in (0, 3):
        def f(u, i=i):
            zz = z.clone()
            zz[i] = u
            return _loss(zz)
        assert torch.allclose(pg[i], 5 * _fd_grad(f, q[i]), atol=1e-6)
