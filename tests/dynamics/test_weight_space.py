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
    traj = train_weight_space(m, x, _loss, steps=1, lr=0.3, output="sphere")
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
    traj = train_weight_space(ens, x, _loss, steps=5, lr=0.5, momentum=0.9)
    for e, s in enumerate(singles):
        t = train_weight_space(s, x, _loss, steps=5, lr=0.5, momentum=0.9)
        assert torch.allclose(ens(x)[e], s(x)[0], atol=1e-6)
        assert abs(traj.last("loss", member=e) - t.last("loss")) < 1e-6


def test_views_are_passed_as_two_augmented_batches():
    seen = []

    def loss2(z1, z2):
        seen.append((z1.detach().clone(), z2.detach().clone()))
        return ((z1 - z2) ** 2).sum(-1).mean(-1)

    x = torch.randn(4, 2)
    m = MLP(2, 2, hidden=3, depth=2)
    g = torch.Generator().manual_seed(0)
    train_weight_space(
        m, x, loss2, steps=2, lr=0.1, views=lambda t: t + 0.1 * torch.randn(t.shape, generator=g), log_every=None
    )
    assert len(seen) == 2 and not torch.allclose(seen[0][0], seen[0][1])
