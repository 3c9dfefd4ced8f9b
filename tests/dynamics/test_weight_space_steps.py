"""``weight_space``: both augmented views carry gradient, the ``neg_grad`` snapshot is
``−n ∂𝓛/∂z``, and ``weight_decay`` reaches SGD and Adam (references written out by hand)."""

import pytest
import torch

from ssldyn.dynamics.weight_space import train_weight_space
from ssldyn.models.mlp import MLP

D = torch.float64


def _loss(z):  # (E, n, d) or (n, d) -> per member, written out
    return ((z.unsqueeze(-2) - z.unsqueeze(-3)) ** 2).sum(-1).neg().exp().mean((-1, -2))


def _net(seed):
    return MLP(3, 2, hidden=4, depth=2, activation="tanh", dtype=D, generator=torch.Generator().manual_seed(seed))


def test_the_gradient_flows_through_both_augmented_views(sgd_step_by_hand):
    def loss2(z1, z2):
        return ((z1 - z2) ** 2).sum(-1).mean(-1) + 0.1 * (z1 * z2).sum(-1).mean(-1)

    def augment(t, generator):
        return t + 0.3 * torch.randn(t.shape, generator=generator, dtype=t.dtype)

    x = torch.randn(6, 3, dtype=D, generator=torch.Generator().manual_seed(0))
    m, ref = _net(1), _net(1)
    train_weight_space(m, x, loss2, steps=1, lr=0.2, augment=augment, output="raw",
                       generator=torch.Generator().manual_seed(9))  # fmt: skip
    g = torch.Generator().manual_seed(9)
    v1, v2 = augment(x, g), augment(x, g)  # the two views of update 0, in draw order
    sgd_step_by_hand(ref, loss2(ref(v1), ref(v2))[0], 0.2)
    for p, q in zip(m.parameters(), ref.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-12, atol=1e-14)


def test_neg_grad_snapshot_is_minus_n_times_the_loss_gradient():
    x = torch.randn(5, 3, dtype=D, generator=torch.Generator().manual_seed(2))
    m = _net(3)
    z0 = m(x)[0].detach()
    res = train_weight_space(m, x, _loss, steps=1, lr=0.1, output="raw", snapshot_every=[0])
    h, fd = 1e-6, torch.zeros_like(z0)  # ∂𝓛/∂z by central differences
    for k in range(z0.numel()):
        e = torch.zeros_like(z0).view(-1)
        e[k] = h
        fd.view(-1)[k] = (_loss(z0 + e.view_as(z0)) - _loss(z0 - e.view_as(z0))) / (2 * h)
    torch.testing.assert_close(torch.as_tensor(res.trajectory.snapshots("neg_grad")[0]), -5 * fd, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_weight_decay_is_applied_by_the_named_optimizers(optimizer):
    # one step by hand, L2 decay added to the gradient: d = ∇ + λp. SGD: p − η d. Adam's first step (bias-corrected
    # moments m̂ = d, v̂ = d²): p − η d / (|d| + 1e-8).
    x = torch.randn(6, 3, dtype=D, generator=torch.Generator().manual_seed(4))
    m, ref = _net(5), _net(5)
    lr, wd = 0.05, 0.3
    train_weight_space(m, x, _loss, steps=1, lr=lr, optimizer=optimizer, weight_decay=wd, output="raw")
    params = list(ref.parameters())
    grads = torch.autograd.grad(_loss(ref(x))[0], params)
    for p, q, gq in zip(m.parameters(), params, grads):
        d = gq + wd * q.detach()
        want = q.detach() - lr * (d if optimizer == "sgd" else d / (d.abs() + 1e-8))
        torch.testing.assert_close(p.detach(), want, rtol=1e-10, atol=1e-12)
