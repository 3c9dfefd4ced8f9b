import numpy as np
import pytest
import torch

from ssldyn.dynamics.weight_space import train_weight_space
from ssldyn.models.mlp import MLP


def _loss(z):  # (E, n, d) or (n, d) -> per-member mean of -log of squared norms spread, written out
    return ((z.unsqueeze(-2) - z.unsqueeze(-3)) ** 2).sum(-1).neg().exp().mean((-1, -2))


def test_sgd_step_on_sphere_outputs_matches_finite_difference_gradient():
    torch.manual_seed(0)
    x = torch.randn(5, 3, dtype=torch.float64)
    m = MLP(3, 2, hidden=4, depth=2, activation="tanh", dtype=torch.float64, bias=False)
    w0 = [p.detach().clone() for p in m.parameters()]

    def total(params):
        h = torch.tanh(x @ params[0][0].T) @ params[1][0].T
        return _loss(h / h.norm(dim=-1, keepdim=True))

    grads = []
    for p in w0:
        g = torch.zeros_like(p)
        for k in range(p.numel()):
            e = torch.zeros_like(p).view(-1)
            e[k] = 1e-6
            up = [q + e.view_as(q) if q is p else q for q in w0]
            dn = [q - e.view_as(q) if q is p else q for q in w0]
            g.view(-1)[k] = (total(up) - total(dn)) / 2e-6
        grads.append(g)
    traj = train_weight_space(m, x, _loss, steps=1, lr=0.3, output="sphere").trajectory
    for p, p0, g in zip(m.parameters(), w0, grads):
        assert torch.allclose(p.detach(), p0 - 0.3 * g, atol=1e-8)
    assert abs(traj.series("loss")[1][0] - total(w0).item()) < 1e-12


def test_ensemble_members_train_like_separate_runs():
    x = torch.randn(6, 2)
    ens = MLP(2, 2, hidden=5, depth=3, ensemble=3, generator=torch.Generator().manual_seed(0))
    singles = []
    for e in range(3):
        s = MLP(2, 2, hidden=5, depth=3)
        with torch.no_grad():
            for ls, le in zip(s.layers, ens.layers):
                ls.weight.copy_(le.weight[e : e + 1])
                ls.bias.copy_(le.bias[e : e + 1])
        singles.append(s)
    traj = train_weight_space(ens, x, _loss, steps=5, lr=0.5, momentum=0.9).trajectory
    for e, s in enumerate(singles):
        t = train_weight_space(s, x, _loss, steps=5, lr=0.5, momentum=0.9).trajectory
        assert torch.allclose(ens(x)[e], s(x)[0], atol=1e-6)
        assert abs(traj.last("loss", member=e) - t.last("loss")) < 1e-6


def test_augmented_views_are_passed_and_the_optimised_loss_is_logged():
    seen = []

    def loss2(z1, z2):
        seen.append((z1.detach().clone(), z2.detach().clone()))
        return ((z1 - z2) ** 2).sum(-1).mean(-1)

    def augment(t, generator):
        return t + 0.1 * torch.randn(t.shape, generator=generator)

    x = torch.randn(4, 2)
    m = MLP(2, 2, hidden=3, depth=2)
    traj = train_weight_space(
        m, x, loss2, steps=2, lr=0.1, augment=augment, generator=torch.Generator().manual_seed(0), every=1
    ).trajectory
    assert len(seen) == 3 and not torch.allclose(seen[0][0], seen[0][1])  # 2 updates + the final state
    # the logged loss is the one optimised on the two views (a clean-input loss would be exactly 0 here)
    for k, (z1, z2) in enumerate(seen):
        assert traj.series("loss")[1][k] == pytest.approx(float(((z1 - z2) ** 2).sum(-1).mean(-1)), rel=1e-6)
        assert traj.series("loss")[1][k] > 1e-4


def test_minibatches_update_on_each_batch_like_a_hand_written_loop(sgd_step_by_hand):
    # reference: plain SGD written out on the batches of the same seeded permutations
    x = torch.randn(10, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    m = MLP(3, 2, hidden=4, depth=2, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    ref = MLP(3, 2, hidden=4, depth=2, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    res = train_weight_space(
        m, x, _loss, steps=5, lr=0.2, batch_size=4, generator=torch.Generator().manual_seed(3), output="raw"
    )
    g = torch.Generator().manual_seed(3)
    losses = []
    perm = None
    for k in range(6):  # epochs of 10 // 4 = 2 batches; one permutation per epoch
        if k % 2 == 0:
            perm = torch.randperm(10, generator=g)
        xb = x[perm[(k % 2) * 4 : (k % 2) * 4 + 4]]
        loss = _loss(ref(xb))[0]
        losses.append(float(loss.detach()))
        if k == 5:
            break
        sgd_step_by_hand(ref, loss, 0.2)
    np.testing.assert_allclose(res.trajectory.series("loss")[1], losses, rtol=1e-12)
    for p, q in zip(m.parameters(), ref.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-12, atol=1e-14)
    with pytest.raises(ValueError, match="batch_size=11"):
        train_weight_space(m, x, _loss, steps=1, lr=0.1, batch_size=11)


def test_final_evaluation_leaves_batchnorm_statistics_alone(sgd_step_by_hand):
    # the loss of the final state is evaluated (not trained on): BatchNorm buffers must stay as the last update left them
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin, self.bn = torch.nn.Linear(3, 2), torch.nn.BatchNorm1d(2)

        def forward(self, x):
            return self.bn(self.lin(x))

    torch.manual_seed(0)
    x = torch.randn(8, 3, dtype=torch.float64)
    net = Net().double()
    ref = Net().double()
    ref.load_state_dict(net.state_dict())
    res = train_weight_space(net, x, _loss, steps=2, lr=0.1, output="raw", every=None)
    assert int(net.bn.num_batches_tracked) == 2  # two updates, two train-mode forwards counted
    # reference: two hand-written SGD steps in train mode, then the final loss (its forward moves the buffers)
    losses = []
    for k in range(3):
        loss = _loss(ref(x))
        losses.append(float(loss.detach()))
        if k == 2:
            break
        sgd_step_by_hand(ref, loss, 0.1)
        if k == 1:
            mean, var = ref.bn.running_mean.clone(), ref.bn.running_var.clone()
    torch.testing.assert_close(net.bn.running_mean, mean, rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(net.bn.running_var, var, rtol=1e-12, atol=1e-14)
    for p, q in zip(net.parameters(), ref.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(res.trajectory.series("loss")[1], [losses[0], losses[2]], rtol=1e-12)
    assert not torch.equal(ref.bn.running_mean, mean)  # the final forward would have moved them


@pytest.mark.parametrize(
    "kw, message",
    [
        (dict(momentum=float("nan")), r"momentum must be in \[0, 1\), got nan"),
        (dict(momentum=1.0), r"momentum must be in \[0, 1\), got 1.0"),
        (dict(weight_decay=float("inf")), r"weight_decay must be a finite number >= 0, got inf"),
    ],
)
def test_optimizer_settings_torch_lets_through_are_one_error(kw, message):
    """torch.optim.SGD refuses negative values only: NaN momentum or an infinite weight decay trained to NaN."""
    from ssldyn.dynamics.weight_space import make_optimizer

    p = [torch.nn.Parameter(torch.zeros(2))]
    with pytest.raises(ValueError, match=rf"^make_optimizer: {message}"):
        make_optimizer(p, "sgd", 0.1, **kw)
    opt = make_optimizer(p, "sgd", 0.1, momentum=0.9, weight_decay=0.0)
    assert opt.param_groups[0]["momentum"] == 0.9 and opt.param_groups[0]["lr"] == 0.1


@pytest.mark.parametrize("batch_size", [2.5, 2.0, True, "4"])
def test_a_batch_size_that_is_not_an_integer_is_one_value_error(batch_size):
    """batch_size=2.5 passed the range check and failed inside the slicing of the first batch (a TypeError)."""
    m = MLP(3, 2, hidden=4, depth=1, dtype=torch.float64)
    with pytest.raises(ValueError, match=r"^train_weight_space: batch_size must be an integer >= 1, got "):
        train_weight_space(m, torch.randn(10, 3, dtype=torch.float64), _loss, steps=2, lr=0.1, batch_size=batch_size)
