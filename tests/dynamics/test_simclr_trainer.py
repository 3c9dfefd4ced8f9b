"""SimCLR trainer: batches, the logged loss equals NT-Xent written out, ensemble = separate runs, learning."""

import math

import torch

from ssldyn.data.augment import SimCLRAugment
from ssldyn.dynamics.simclr import embed, minibatches, train_simclr
from ssldyn.models.encoders import build_simclr_net

KW = dict(hidden=(32,), feature_dim=16, proj_hidden=16, proj_dim=8)


def test_minibatches_are_epochs_of_permutations():
    g = torch.Generator().manual_seed(0)
    batches = list(minibatches(10, 3, 7, g))
    assert len(batches) == 7 and all(len(b) == 3 for b in batches)
    for e in range(2):  # each epoch: 3 disjoint batches of one permutation
        ep = torch.cat(batches[3 * e : 3 * e + 3])
        assert len(set(ep.tolist())) == 9


def _nt_xent_loop(z1, z2, tau):
    z = torch.cat([z1, z2]).double()
    z = z / z.norm(dim=1, keepdim=True)
    n = len(z1)
    tot = 0.0
    for k in range(2 * n):
        p = (k + n) % (2 * n)
        den = sum(math.exp(float(z[k] @ z[m]) / tau) for m in range(2 * n) if m != k)
        tot += -float(z[k] @ z[p]) / tau + math.log(den)
    return tot / (2 * n)


def test_logged_loss_is_nt_xent_of_the_views():
    torch.manual_seed(0)
    x = torch.rand(12, 1, 8, 8)
    net = build_simclr_net("mlp", (1, 8, 8), seeds=[1], **KW)
    ref = build_simclr_net("mlp", (1, 8, 8), seeds=[1], **KW)
    aug = SimCLRAugment(rotation=5.0)
    traj = train_simclr(
        net, x, aug, steps=1, batch_size=6, temperature=0.3, lr=1e-3, generator=torch.Generator().manual_seed(4)
    )
    g = torch.Generator().manual_seed(4)
    idx = next(minibatches(12, 6, 1, g))
    v = torch.cat([aug(x[idx], g), aug(x[idx], g)])
    z = ref(v)[0]
    assert abs(traj.last("loss") - _nt_xent_loop(z[:6], z[6:], 0.3)) < 1e-4


def test_ensemble_training_equals_separate_runs_and_learns():
    torch.manual_seed(0)
    from ssldyn.data.images import load_sklearn_digits

    ds = load_sklearn_digits().take(200, seed=0)
    aug = SimCLRAugment(rotation=5.0)
    ens = build_simclr_net("mlp", ds.shape, ensemble=2, seeds=[0, 9], **KW)
    tr = train_simclr(
        ens,
        ds.images,
        aug,
        steps=30,
        batch_size=32,
        temperature=0.5,
        lr=0.05,
        optimizer="sgd",
        generator=torch.Generator().manual_seed(2),
        log_every=29,
    )
    lone = build_simclr_net("mlp", ds.shape, ensemble=1, seeds=[9], **KW)
    tl = train_simclr(
        lone,
        ds.images,
        aug,
        steps=30,
        batch_size=32,
        temperature=0.5,
        lr=0.05,
        optimizer="sgd",
        generator=torch.Generator().manual_seed(2),
        log_every=29,
    )
    assert abs(tr.last("loss", member=1) - tl.last("loss")) < 1e-3
    torch.testing.assert_close(embed(ens, ds.images)[1], embed(lone, ds.images)[0], atol=2e-3, rtol=2e-3)
    for m in range(2):  # NT-Xent decreased from its initial value
        s, v = tr.series("loss", member=m)
        assert v[-1] < v[0] - 0.1
