"""SimCLR trainer: batches, the logged loss equals NT-Xent written out, ensemble = separate runs, learning."""

import copy
import math

import pytest
import torch

from ssldyn.data.augment import SimCLRAugment
from ssldyn.dynamics import embed, minibatches, train_simclr
from ssldyn.models.encoders import build_simclr_net

KW = dict(hidden=(32,), feature_dim=16, proj_hidden=16, proj_dim=8)


def test_minibatches_are_epochs_of_permutations():
    g = torch.Generator().manual_seed(0)
    batches = list(minibatches(10, 3, 7, generator=g))
    assert len(batches) == 7 and all(len(b) == 3 for b in batches)
    for e in range(2):  # each epoch: 3 disjoint batches of one permutation
        ep = torch.cat(batches[3 * e : 3 * e + 3])
        assert len(set(ep.tolist())) == 9


def _nt_xent_loop(z1, z2, tau):
    z = torch.cat([z1, z2]).detach().double()
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
    ).trajectory
    g = torch.Generator().manual_seed(4)
    idx = next(minibatches(12, 6, 1, generator=g))
    v = torch.cat([aug(x[idx], g), aug(x[idx], g)])
    z = ref(v)[0]
    steps, loss = traj.series("loss")
    assert steps.tolist() == [0, 1]  # the loss optimised by the update, and the final state's
    assert abs(loss[0] - _nt_xent_loop(z[:6], z[6:], 0.3)) < 1e-4


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
        every=29,
    ).trajectory
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
        every=29,
    ).trajectory
    assert abs(tr.last("loss", member=1) - tl.last("loss")) < 1e-3
    torch.testing.assert_close(embed(ens, ds.images)[1], embed(lone, ds.images)[0], atol=2e-3, rtol=2e-3)
    for m in range(2):  # NT-Xent decreased from its initial value
        s, v = tr.series("loss", member=m)
        assert v[-1] < v[0] - 0.1


class _Plain(torch.nn.Module):
    """A user's plain model: ``(B, 1, 8, 8) -> (B, out)`` with no ensemble axis."""

    def __init__(self, out: int):
        super().__init__()
        self.lin = torch.nn.Linear(64, out)

    def forward(self, x):
        return self.lin(x.flatten(1))


def test_plain_module_whose_width_equals_two_batches_trains_on_the_views():
    # the old slicing z[:, :B] cut the *feature* axis of a plain (2B, d) output when d == 2B: a nonsense
    # objective that trained silently. The loss must be NT-Xent of the two views' embeddings.
    torch.manual_seed(0)
    x = torch.rand(12, 1, 8, 8)
    B = 6
    net = _Plain(2 * B)
    ref = _Plain(2 * B)
    ref.load_state_dict(net.state_dict())
    aug = SimCLRAugment(rotation=5.0)
    res = train_simclr(net, x, aug, steps=1, batch_size=B, temperature=0.3, generator=torch.Generator().manual_seed(4))
    g = torch.Generator().manual_seed(4)
    idx = next(minibatches(12, B, 1, generator=g))
    v = torch.cat([aug(x[idx], g), aug(x[idx], g)])
    z = ref(v)  # (2B, 2B): rows are the views
    assert abs(res.trajectory.series("loss")[1][0] - _nt_xent_loop(z[:B], z[B:], 0.3)) < 1e-4


def test_wrong_output_shape_is_a_clear_error():
    x = torch.rand(12, 1, 8, 8)

    class Flat(torch.nn.Module):  # returns one vector per batch: no per-view embeddings
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(64, 5)

        def forward(self, v):
            return self.lin(v.flatten(1)).mean(0)

    with pytest.raises(
        ValueError, match=r"output has shape \(5,\) for the 2B = 12 inputs.*allowed: \(12, d\) .* or \(E, 12, d\)"
    ):
        train_simclr(Flat(), x, SimCLRAugment(), steps=1, batch_size=6)
    ens = build_simclr_net("mlp", (1, 8, 8), ensemble=2, seeds=[0, 1], **KW)
    with pytest.raises(ValueError, match="batch_size=1"):
        train_simclr(ens, x, SimCLRAugment(), steps=1, batch_size=1)


def test_probes_see_eval_mode_features_and_log_per_member():
    x = torch.rand(20, 1, 8, 8)
    ens = build_simclr_net("mlp", (1, 8, 8), ensemble=2, seeds=[0, 1], **KW)
    seen = []

    def norm_probe(h):
        seen.append(h.shape)
        return h.norm(dim=-1).mean(-1)  # (E,)

    res = train_simclr(
        ens, x, SimCLRAugment(), steps=4, batch_size=5, every=2, probes={"norm": norm_probe}, probe_images=x[:7]
    )
    assert seen == [torch.Size([2, 7, 16])] * 3  # steps 0, 2, 4: backbone features (E, n, d_h = feature_dim)
    assert ens.training  # train mode restored
    with torch.no_grad():
        ens.eval()
        h = ens.features(x[:7])  # eval mode (running statistics): what the last probe must have seen
        ens.train()
        h_train = copy.deepcopy(ens).features(x[:7])  # train mode: BatchNorm statistics of these 7 images
    want = h.norm(dim=-1).mean(-1)  # (E,)
    assert res.trajectory.last("norm", member=0) == pytest.approx(float(want[0]), rel=1e-6)
    assert res.trajectory.last("norm", member=1) == pytest.approx(float(want[1]), rel=1e-6)
    assert abs(float(h_train[1].norm(dim=-1).mean()) - float(want[1])) > 1e-3 * float(want[1])  # the mode matters


def _nt_xent_torch(z1, z2, tau):
    """NT-Xent (SimCLR eq. 1, cosine similarity, the 2B embeddings all anchors) written out, differentiable."""
    z = torch.cat([z1, z2])
    z = z / z.norm(dim=1, keepdim=True)
    n2 = z.shape[0]
    s = z @ z.T / tau  # (2B, 2B)
    pos = s[torch.arange(n2), (torch.arange(n2) + n2 // 2) % n2]  # (2B,): the other view of the same input
    off = s.masked_fill(torch.eye(n2, dtype=torch.bool), float("-inf"))
    return (torch.logsumexp(off, dim=1) - pos).mean()


def test_a_head_is_trained_with_the_model_on_vector_data(sgd_step_by_hand):
    """train_simclr built its optimizer over model.parameters() only, so head=... failed (the optimizer did not hold
    the head's parameters) and (N, d) data was refused. Reference: the first SGD step (momentum 0.9, no weight decay:
    the first step is plain SGD) of NT-Xent written out on head(model(views)), batch and views drawn as the trainer."""
    x = torch.randn(16, 5, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    torch.manual_seed(0)
    net, head = torch.nn.Linear(5, 6).double(), torch.nn.Linear(6, 3).double()
    ref = copy.deepcopy(torch.nn.ModuleList([net, head]))
    head0 = head.weight.detach().clone()
    aug = lambda v, g: v + 0.1 * torch.randn(v.shape, generator=g, dtype=v.dtype)  # noqa: E731
    res = train_simclr(net, x, aug, head=head, steps=1, batch_size=8, temperature=0.5, lr=0.1, optimizer="sgd",
                       weight_decay=0.0, generator=torch.Generator().manual_seed(4))  # fmt: skip
    g = torch.Generator().manual_seed(4)
    idx = next(minibatches(16, 8, 1, generator=g))
    v1, v2 = aug(x[idx], g), aug(x[idx], g)
    loss = _nt_xent_torch(ref[1](ref[0](v1)), ref[1](ref[0](v2)), 0.5)
    assert abs(res.trajectory.series("loss")[1][0] - float(loss.detach())) < 1e-12
    sgd_step_by_hand(ref, loss, 0.1)
    for p, q in zip([*net.parameters(), *head.parameters()], ref.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-12, atol=1e-14)
    assert (head.weight - head0).abs().max() > 1e-4  # the head did move
    with pytest.raises(ValueError, match=r"^train_simclr: images must be a tensor \(N, \.\.\.\) .* got \(16,\)"):
        train_simclr(net, x[:, 0], aug, steps=1, batch_size=8)
