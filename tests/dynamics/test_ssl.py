"""train_ssl against hand-written references: one SGD step on each objective, an ensemble member
against a single run, DataLoader batches, and every error a user can hit."""

import copy

import numpy as np
import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from ssldyn.dynamics.guards import LossGuard, NonFiniteLossError
from ssldyn.dynamics.ssl import train_ssl
from ssldyn.models import MLP
from ssldyn.objectives import (
    BYOLLoss,
    GeneralizedContrastiveLoss,
    InfoNCE,
    NegativeCosine,
    QuadraticContrastiveLoss,
    SpectralContrastiveLoss,
    VICRegLoss,
    info_nce,
)
from ssldyn.probes.rank import rankme

DT = torch.float64


def jitter(x, g):
    """A seeded augmentation: additive noise drawn from the (CPU) generator, moved to the data's device."""
    return x + 0.1 * torch.randn(x.shape, generator=g, dtype=x.dtype).to(x.device)


def data(n=16, D=6, seed=0):
    return torch.randn(n, D, generator=torch.Generator().manual_seed(seed), dtype=DT)


def plain_net(D=6, d=16, seed=1):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(D, 12), nn.Tanh(), nn.Linear(12, d)).to(DT)


def hand_step(net, x, B, seed, loss_of, lr, head=None, predictor=None):
    """The first step written out: the epoch permutation, view 1, view 2, one forward on [v1; v2], SGD."""
    g = torch.Generator().manual_seed(seed)
    xb = x[torch.randperm(x.shape[0], generator=g)[:B]]
    v = torch.cat([jitter(xb, g), jitter(xb, g)])
    mods = [m for m in (net, head, predictor) if m is not None]
    z = net(v)
    z = head(z) if head is not None else z
    loss = loss_of(z, predictor(z) if predictor is not None else None)
    params = [p for m in mods for p in m.parameters()]
    grads = torch.autograd.grad(loss, params)
    with torch.no_grad():
        new = [p - lr * gr for p, gr in zip(params, grads)]
    return float(loss.detach()), new


def sgd(lr):
    return lambda p: torch.optim.SGD(p, lr=lr)


def test_first_step_is_a_hand_written_sgd_step_for_a_plain_module_with_d_equal_2B():
    # issue 18: train_simclr sliced z[:, :B]; a plain (2B, d) output with d = 2B trained on nonsense
    x, B = data(), 8
    net = plain_net(d=2 * B)
    ref = copy.deepcopy(net)
    want_loss, want = hand_step(ref, x, B, 5, lambda z, _: info_nce(z[:B], z[B:], 0.5), 0.1)
    res = train_ssl(
        net,
        x,
        objective=InfoNCE(0.5),
        augment=jitter,
        steps=1,
        batch_size=B,
        optimizer=sgd(0.1),
        every=1,
        generator=torch.Generator().manual_seed(5),
    )
    assert res.state is net
    for p, w in zip(net.parameters(), want):
        torch.testing.assert_close(p.detach(), w, rtol=0, atol=1e-12)
    assert res.trajectory.series("loss")[1][0] == pytest.approx(want_loss, abs=1e-12)


@pytest.mark.parametrize(
    "objective",
    [
        InfoNCE(0.2),
        VICRegLoss(),
        SpectralContrastiveLoss(),
        QuadraticContrastiveLoss(0.5),
        GeneralizedContrastiveLoss(),
    ],
    ids=lambda o: type(o).__name__,
)
def test_every_two_view_objective_gives_the_hand_written_step(objective):
    x, B = data(), 8
    net = plain_net(d=5)
    _, want = hand_step(copy.deepcopy(net), x, B, 2, lambda z, _: objective(z[:B], z[B:]), 0.05)
    train_ssl(
        net,
        x,
        objective=objective,
        augment=jitter,
        steps=1,
        batch_size=B,
        optimizer=sgd(0.05),
        generator=torch.Generator().manual_seed(2),
    )
    for p, w in zip(net.parameters(), want):
        torch.testing.assert_close(p.detach(), w, rtol=0, atol=1e-12)


@pytest.mark.parametrize("objective", [NegativeCosine(), BYOLLoss()], ids=lambda o: type(o).__name__)
def test_predictor_objectives_are_symmetrised_with_stop_gradient(objective):
    # SimSiam (Chen & He eq. 3): L = ½ D(p1, sg z2) + ½ D(p2, sg z1); head and predictor train too
    x, B = data(), 8
    net, head = plain_net(d=7), nn.Linear(7, 4).to(DT)
    pred = nn.Sequential(nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 4)).to(DT)
    refs = [copy.deepcopy(m) for m in (net, head, pred)]

    def loss_of(z, p):
        return 0.5 * (objective(p[:B], z[B:]) + objective(p[B:], z[:B]))

    _, want = hand_step(refs[0], x, B, 3, loss_of, 0.1, head=refs[1], predictor=refs[2])
    train_ssl(
        net,
        x,
        objective=objective,
        augment=jitter,
        steps=1,
        batch_size=B,
        head=head,
        predictor=pred,
        optimizer=sgd(0.1),
        generator=torch.Generator().manual_seed(3),
    )
    got = [p for m in (net, head, pred) for p in m.parameters()]
    for p, w in zip(got, want):
        torch.testing.assert_close(p.detach(), w, rtol=0, atol=1e-12)


def _byol_step1(net0, pred0, x, B, m):
    """BYOL with EMA momentum m from (net0, pred0), SGD 0.5, every=1: the loss logged at step 1, the online network
    and predictor after step 0, the target ξ₁ = m θ₀ + (1 − m) θ₁ written out (Grill et al. Sec. 3.1) and the two
    views [v1; v2] of step 1's minibatch (the draws replayed from the seeded generator)."""

    def run(steps):
        net, pred = copy.deepcopy(net0), copy.deepcopy(pred0)
        kw = dict(objective=BYOLLoss(), augment=jitter, steps=steps, batch_size=B, predictor=pred, every=1)
        res = train_ssl(net, x, target_momentum=m, optimizer=sgd(0.5), generator=torch.Generator().manual_seed(4), **kw)
        return res, net, pred

    res, _, _ = run(2)
    _, net1, pred1 = run(1)  # the online network after step 0
    target = copy.deepcopy(net0)
    with torch.no_grad():
        for t, p in zip(target.parameters(), net1.parameters()):
            t.mul_(m).add_((1 - m) * p)
    g = torch.Generator().manual_seed(4)
    perm = torch.randperm(x.shape[0], generator=g)
    jitter(x[perm[:B]], g), jitter(x[perm[:B]], g)  # the draws of step 0
    xb = x[perm[B : 2 * B]]  # the second minibatch of the epoch
    v = torch.cat([jitter(xb, g), jitter(xb, g)])
    return res.trajectory.series("loss")[1][1], net1, pred1, target, v


def _byol_loss(p, tz, B):
    """The symmetrised BYOL loss of predictions p and targets tz, both (2B, d) = [view 1; view 2]."""
    return 0.5 * (BYOLLoss()(p[:B], tz[B:]) + BYOLLoss()(p[B:], tz[:B]))


def test_byol_target_network_is_the_ema_of_the_online_network():
    # with every=1 the loss logged at step 1 uses the target ξ₁ = m θ₀ + (1 − m) θ₁ (Grill et al. Sec. 3.1)
    x, B, m = data(), 8, 0.9
    logged, net1, pred1, target, v = _byol_step1(plain_net(d=4), nn.Linear(4, 4).to(DT), x, B, m)
    with torch.no_grad():
        p = pred1(net1(v))
        want, without_ema = _byol_loss(p, target(v), B), _byol_loss(p, net1(v), B)
    assert logged == pytest.approx(float(want), abs=1e-12)
    assert abs(float(want) - float(without_ema)) > 1e-6  # the target really is not the online network


def test_byol_target_with_batchnorm_normalises_by_the_batch_as_byol():
    """A BatchNorm target network runs in train mode (its BN normalises by the batch, as the online network's does,
    and as BYOL's reference code applies its target): the loss logged at step 1 is the one of the EMA target ξ₁ with
    batch statistics, written out here; the target with running statistics (eval mode) gives another number."""
    x, B, m = data(), 8, 0.9
    torch.manual_seed(2)
    net0 = nn.Sequential(nn.Linear(6, 10), nn.BatchNorm1d(10), nn.ReLU(), nn.Linear(10, 4)).to(DT)
    logged, net1, pred1, target, v = _byol_step1(net0, nn.Linear(4, 4).to(DT), x, B, m)
    net1.train(), target.train()
    with torch.no_grad():
        p = pred1(net1(v))  # (2B, 4): the online network in train mode, one forward on both views
        want = _byol_loss(p, target(v), B)
        target.eval()  # running statistics instead of the batch's
        with_running = _byol_loss(p, target(v), B)
    assert logged == pytest.approx(float(want), abs=1e-12)
    assert abs(float(want) - float(with_running)) > 1e-4


def test_an_ensemble_member_trains_exactly_like_a_single_run():
    # docs/architecture.md: member losses are summed, so SGD with momentum trains E independent runs
    x, B, E = data(24), 8, 3
    ens = MLP(6, 5, hidden=10, depth=2, ensemble=E, dtype=DT, generator=torch.Generator().manual_seed(0))
    singles = []
    for e in range(E):
        one = MLP(6, 5, hidden=10, depth=2, ensemble=1, dtype=DT)
        with torch.no_grad():
            for p, q in zip(one.parameters(), ens.parameters()):
                p.copy_(q[e : e + 1])
        singles.append(one)
    opt = lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9)  # noqa: E731
    kw = dict(objective=InfoNCE(0.5), augment=jitter, steps=6, batch_size=B, optimizer=opt, every=2)
    res = train_ssl(ens, x, generator=torch.Generator().manual_seed(7), **kw)
    for e, one in enumerate(singles):
        r1 = train_ssl(one, x, generator=torch.Generator().manual_seed(7), **kw)
        for p, q in zip(one.parameters(), ens.parameters()):
            torch.testing.assert_close(p[0], q[e], rtol=0, atol=1e-12)
        np.testing.assert_allclose(
            r1.trajectory.series("loss")[1], res.trajectory.series("loss", member=e)[1], atol=1e-12
        )


def test_dataloader_batches_are_used_in_order_and_cycled(sgd_step_by_hand):
    x, B = data(16), 8
    net = plain_net(d=5)
    loader = DataLoader(TensorDataset(x, torch.arange(16)), batch_size=B, shuffle=False)
    g = torch.Generator().manual_seed(9)
    v = torch.cat([jitter(x[:B], g), jitter(x[:B], g)])  # the loader's first batch, view 1 and view 2
    ref = copy.deepcopy(net)
    loss = info_nce(ref(v)[:B], ref(v)[B:], 0.5)
    grads = torch.autograd.grad(loss, list(ref.parameters()))
    train_ssl(
        net,
        loader,
        objective=InfoNCE(0.5),
        augment=jitter,
        steps=1,
        optimizer=sgd(0.1),
        generator=torch.Generator().manual_seed(9),
    )
    for p, p0, gr in zip(net.parameters(), ref.parameters(), grads):
        torch.testing.assert_close(p.detach(), p0.detach() - 0.1 * gr, rtol=0, atol=1e-12)
    # cycled: 2 batches per epoch, so steps 0..5 (the final evaluation included) see batches 0, 1, 0, 1, 0, 1;
    # reference: the SGD loop written out on those batches, views drawn in order from the same generator
    ref = copy.deepcopy(net)
    res = train_ssl(net, loader, objective=InfoNCE(0.5), augment=jitter, steps=5, every=1, optimizer=sgd(0.1),
                    generator=torch.Generator().manual_seed(4))  # fmt: skip
    assert list(res.trajectory.series("loss")[0]) == [0, 1, 2, 3, 4, 5]
    g = torch.Generator().manual_seed(4)
    want = []
    for k in range(6):
        xb = x[:B] if k % 2 == 0 else x[B:]
        v = torch.cat([jitter(xb, g), jitter(xb, g)])
        z = ref(v)
        loss = info_nce(z[:B], z[B:], 0.5)
        want.append(float(loss.detach()))
        if k < 5:
            sgd_step_by_hand(ref, loss, 0.1)
    np.testing.assert_allclose(res.trajectory.series("loss")[1], want, rtol=1e-12)
    for p, q in zip(net.parameters(), ref.parameters()):
        torch.testing.assert_close(p.detach(), q.detach(), rtol=0, atol=1e-12)


def test_dataloader_errors_are_named():
    x = data(9)
    net = plain_net(d=5)
    kw = dict(objective=InfoNCE(0.5), augment=jitter, steps=3)
    with pytest.raises(ValueError, match="batch_size is set by the DataLoader"):
        train_ssl(net, DataLoader(TensorDataset(x), batch_size=4), batch_size=4, **kw)
    with pytest.raises(ValueError, match="drop_last=True"):
        train_ssl(net, DataLoader(TensorDataset(x), batch_size=4), **kw)  # last batch of one
    with pytest.raises(ValueError, match="probe_data"):
        train_ssl(net, DataLoader(TensorDataset(x), batch_size=3), probes={"r": rankme}, **kw)


class _Out(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.lin = nn.Linear(6, 8).to(DT)
        self.fn = fn

    def forward(self, x):
        return self.fn(self.lin(x))


@pytest.mark.parametrize(
    "fn",
    [
        lambda h: h[: h.shape[0] // 2],  # (B, d): one row per pair, not per input
        lambda h: h.reshape(h.shape[0], 2, 4),  # (2B, 2, 4): an extra axis that is not a member axis
        lambda h: h.T,  # (d, 2B)
        lambda h: h.sum(),  # a scalar
    ],
    ids=["B_rows", "extra_axis", "transposed", "scalar"],
)
def test_wrong_output_shapes_are_one_clear_error(fn):
    with pytest.raises(ValueError, match=r"allowed: \(16, d\) for a plain model or \(E, 16, d\)"):
        train_ssl(_Out(fn), data(), objective=InfoNCE(0.5), augment=jitter, steps=1, batch_size=8)


def test_an_optimizer_that_misses_the_head_is_rejected():
    net, head = plain_net(d=5), nn.Linear(5, 3).to(DT)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    with pytest.raises(ValueError, match=r"does not hold 2 trainable parameter\(s\).*Linear.weight"):
        train_ssl(net, data(), objective=InfoNCE(0.5), augment=jitter, steps=1, batch_size=8, head=head, optimizer=opt)
    opt = torch.optim.SGD([*net.parameters(), *head.parameters()], lr=0.1)
    train_ssl(net, data(), objective=InfoNCE(0.5), augment=jitter, steps=1, batch_size=8, head=head, optimizer=opt)


def test_objectives_must_reduce_over_samples_not_members():
    ens = MLP(6, 5, hidden=10, depth=2, ensemble=2, dtype=DT)
    kw = dict(augment=jitter, steps=1, batch_size=8)
    with pytest.raises(ValueError, match=r"one loss per member, shape \(2,\)"):
        train_ssl(ens, data(), objective=lambda a, b: info_nce(a, b).mean(), **kw)
    with pytest.raises(ValueError, match="a scalar"):
        train_ssl(plain_net(d=5), data(), objective=lambda a, b: (a - b).pow(2).sum(-1), **kw)


def test_probes_see_the_eval_embeddings_of_the_probe_set_at_the_logged_steps():
    x, B = data(32), 8
    net = nn.Sequential(nn.Linear(6, 12), nn.BatchNorm1d(12), nn.ReLU(), nn.Linear(12, 5)).to(DT)
    seen = []
    res = train_ssl(
        net,
        x,
        objective=InfoNCE(0.5),
        augment=jitter,
        steps=7,
        batch_size=B,
        every=3,
        probes={"rankme": rankme, "n": lambda z: seen.append(z.clone()) or z.shape[0]},
        probe_data=x[:20],
    )
    assert list(res.trajectory.series("rankme")[0]) == [0, 3, 6, 7]
    assert net.training  # train mode restored after probing
    net.eval()
    with torch.no_grad():
        final = net(x[:20])  # eval mode: BatchNorm running statistics
    torch.testing.assert_close(seen[-1], final, rtol=0, atol=1e-12)
    assert res.trajectory.last("rankme") == pytest.approx(float(rankme(final)), abs=1e-12)
    assert res.trajectory.last("n") == 20


def test_ensemble_probes_must_return_one_value_per_member():
    ens = MLP(6, 5, hidden=10, depth=2, ensemble=2, dtype=DT)
    kw = dict(objective=InfoNCE(0.5), augment=jitter, steps=1, batch_size=8)
    res = train_ssl(ens, data(), probes={"rankme": rankme}, **kw)  # rankme gives (E,) for (E, n, d)
    assert res.trajectory.to_frame().query("probe == 'rankme'").member.tolist() == [0, 1, 0, 1]
    with pytest.raises(ValueError, match="per_member"):
        train_ssl(ens, data(), probes={"mean": lambda z: float(z.mean())}, **kw)


def test_a_non_finite_loss_names_the_step():
    calls = []

    def objective(z1, z2):
        calls.append(1)
        loss = info_nce(z1, z2, 0.5)
        return loss * float("nan") if len(calls) == 3 else loss

    with pytest.raises(NonFiniteLossError, match="at step 2"):
        train_ssl(plain_net(d=5), data(), objective=objective, augment=jitter, steps=5, batch_size=8)


def test_nan_data_and_bad_settings_are_rejected_before_training():
    x = data()
    x[3, 2] = float("nan")
    kw = dict(objective=InfoNCE(0.5), augment=jitter, steps=1, batch_size=8)
    with pytest.raises(ValueError, match="data: 1 non-finite"):
        train_ssl(plain_net(d=5), x, **kw)
    with pytest.raises(ValueError, match=r"^train_ssl: tensor data needs batch_size \(an integer >= 2, at most N\)"):
        train_ssl(plain_net(d=5), data(), **{**kw, "batch_size": None})
    with pytest.raises(ValueError, match="batch_size must be an integer >= 2"):
        train_ssl(plain_net(d=5), data(), **{**kw, "batch_size": 1})
    with pytest.raises(ValueError, match="exceeds the number of inputs"):
        train_ssl(plain_net(d=5), data(), **{**kw, "batch_size": 64})
    with pytest.raises(ValueError, match="needs a predictor"):
        train_ssl(plain_net(d=5), data(), target_momentum=0.99, **kw)
    with pytest.raises(ValueError, match="augment"):
        train_ssl(plain_net(d=5), data(), **{**kw, "augment": lambda x, g: x[:2]})


def test_numpy_data_is_cast_to_the_model_dtype_and_dtype_casts_the_model():
    x = np.random.default_rng(0).normal(size=(16, 6))  # float64 array, float32 model
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(6, 5))
    net0 = copy.deepcopy(net)
    kw = dict(objective=InfoNCE(0.5), augment=jitter, batch_size=8, every=1, optimizer=sgd(0.1))
    res = train_ssl(net, x, steps=2, generator=torch.Generator().manual_seed(3), **kw)
    assert net[0].weight.dtype == torch.float32
    # reference: the same run on the array cast to float32 by hand (the views then drawn in float32 too)
    ref_net = copy.deepcopy(net0)
    ref = train_ssl(ref_net, torch.from_numpy(x).float(), steps=2, generator=torch.Generator().manual_seed(3), **kw)
    np.testing.assert_array_equal(res.trajectory.series("loss")[1], ref.trajectory.series("loss")[1])
    for p, q in zip(net.parameters(), ref_net.parameters()):
        assert torch.equal(p, q)
    # and the first logged loss is info_nce of the float32 model on the hand-drawn float32 views
    want, _ = hand_step(net0, torch.from_numpy(x).float(), 8, 3, lambda z, _: info_nce(z[:8], z[8:], 0.5), 0.1)
    assert res.trajectory.series("loss")[1][0] == pytest.approx(want, rel=1e-6)
    # dtype=float64 casts the model and the data: the same as a float64 copy of the model on the float64 array
    net64 = copy.deepcopy(net0)
    res64 = train_ssl(net64, x, steps=1, generator=torch.Generator().manual_seed(3), dtype=torch.float64, **kw)
    assert net64[0].weight.dtype == torch.float64
    want64, new64 = hand_step(copy.deepcopy(net0).double(), torch.from_numpy(x), 8, 3,
                              lambda z, _: info_nce(z[:8], z[8:], 0.5), 0.1)  # fmt: skip
    assert res64.trajectory.series("loss")[1][0] == pytest.approx(want64, abs=1e-12)
    for p, w in zip(net64.parameters(), new64):
        torch.testing.assert_close(p.detach(), w, rtol=0, atol=1e-12)


def test_amp_on_the_cpu_uses_bfloat16_forward_and_a_float32_loss():
    x = data().float()
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(6, 32), nn.ReLU(), nn.Linear(32, 8))
    kw = dict(objective=InfoNCE(0.5), augment=jitter, steps=3, batch_size=8, every=1, optimizer=sgd(0.1))
    full = train_ssl(copy.deepcopy(net), x, generator=torch.Generator().manual_seed(0), **kw)
    mixed_net = copy.deepcopy(net)
    mixed = train_ssl(mixed_net, x, generator=torch.Generator().manual_seed(0), amp=True, **kw)
    l_full, l_mixed = full.trajectory.series("loss")[1], mixed.trajectory.series("loss")[1]
    np.testing.assert_allclose(l_mixed, l_full, rtol=2e-2)  # bfloat16 has 8 bits of mantissa
    assert not np.allclose(l_mixed, l_full, rtol=1e-6, atol=0)  # ... and it was really used
    assert mixed_net[0].weight.dtype == torch.float32  # master weights stay float32


def test_amp_settings_are_checked():
    with pytest.raises(ValueError, match="amp must be"):
        train_ssl(plain_net(d=5), data(), objective=InfoNCE(0.5), augment=jitter, steps=1, batch_size=8, amp="yes")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_run_matches_the_cpu_run():
    x = data(64).float()
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(6, 32), nn.ReLU(), nn.Linear(32, 8))
    kw = dict(objective=InfoNCE(0.5), augment=jitter, steps=5, batch_size=16, every=1, optimizer=sgd(0.1))
    cpu = train_ssl(copy.deepcopy(net), x, generator=torch.Generator().manual_seed(0), **kw)
    gpu_net = copy.deepcopy(net)
    gpu = train_ssl(gpu_net, x, generator=torch.Generator().manual_seed(0), device="cuda", **kw)
    assert next(gpu_net.parameters()).is_cuda
    np.testing.assert_allclose(gpu.trajectory.series("loss")[1], cpu.trajectory.series("loss")[1], rtol=1e-4)
    train_ssl(gpu_net, x, generator=torch.Generator().manual_seed(0), device="cuda", amp=True, **kw)


def test_guard_options_follow_the_dynamics_contract():
    calls = []

    def objective(z1, z2):
        calls.append(1)
        loss = info_nce(z1, z2, 0.5)
        return loss * float("nan") if len(calls) == 3 else loss

    kw = dict(objective=objective, augment=jitter, steps=5, batch_size=8)
    lazy = LossGuard(lazy=True, check_every=None)  # deferred, as on an accelerator: checked at the logged steps
    with pytest.raises(NonFiniteLossError, match="at step 2") as err:
        train_ssl(plain_net(d=5), data(), guard=lazy, every=4, **kw)
    # the last finite value is the loss of step 1: the final loss of the same run stopped after one update
    one = train_ssl(plain_net(d=5), data(), objective=InfoNCE(0.5), augment=jitter, steps=1, batch_size=8, every=1)
    assert err.value.step == 2 and err.value.last_finite == pytest.approx(one.trajectory.last("loss"), rel=1e-12)
    calls.clear()
    res = train_ssl(plain_net(d=5), data(), guard=False, every=[0, 2, 5], **kw)  # no guard: the NaN is logged
    steps, losses = res.trajectory.series("loss")
    assert list(steps) == [0, 2, 5] and np.isnan(losses[1])


def test_a_library_simclr_ensemble_trains_and_probes_see_its_backbone_features():
    from ssldyn.models import build_simclr_net

    x = torch.rand(32, 1, 8, 8, generator=torch.Generator().manual_seed(0))
    net = build_simclr_net("conv", (1, 8, 8), ensemble=2, seeds=[0, 1], widths=(4, 8), proj_hidden=8, proj_dim=4)
    net0 = copy.deepcopy(net)
    flip = lambda v, g: v.flip(-1) if bool(torch.rand(1, generator=g) < 0.5) else v  # noqa: E731
    seen = []
    res = train_ssl(
        net,
        x,
        objective=InfoNCE(0.5),
        augment=flip,
        steps=2,
        batch_size=8,
        probes={"mean": lambda z: seen.append(z.clone()) or z.mean((-1, -2))},
        generator=torch.Generator().manual_seed(6),
    )
    assert [tuple(z.shape) for z in seen] == [(2, 32, 8)] * 2  # backbone features (E, n, widths[-1]), no head
    assert res.trajectory.to_frame().query("probe == 'loss'").member.tolist() == [0, 1, 0, 1]
    # the probe saw the eval-mode backbone of the trained net (BatchNorm running statistics), not its projection
    net.eval()
    with torch.no_grad():
        feats = net.features(x)  # (E, 32, 8)
    net.train()
    torch.testing.assert_close(seen[-1], feats, rtol=0, atol=1e-6)
    # the loss of step 0, per member: info_nce of the projections of the hand-drawn views (train-mode forward)
    g = torch.Generator().manual_seed(6)
    xb = x[torch.randperm(32, generator=g)[:8]]
    v = torch.cat([flip(xb, g), flip(xb, g)])
    with torch.no_grad():
        z = net0(v)  # (E, 16, 4)
    want = info_nce(z[:, :8], z[:, 8:], 0.5)  # (E,)
    assert tuple(z.shape) == (2, 16, 4)
    np.testing.assert_allclose(res.trajectory.to_frame().query("probe == 'loss' and step == 0").value, want.numpy(),
                               rtol=1e-5)  # fmt: skip


def test_an_output_with_2B_rows_on_two_axes_needs_a_declared_ensemble():
    class Seq(nn.Module):  # a plain model returning one vector per input *pair of positions*: (2B, 2B, d)
        def __init__(self, ensemble=None):
            super().__init__()
            self.lin = nn.Linear(6, 3).to(DT)
            if ensemble is not None:
                self.ensemble = ensemble

        def forward(self, x):
            return self.lin(x)[None].expand(x.shape[0], -1, -1) * 1.0

    kw = dict(objective=InfoNCE(0.5), augment=jitter, steps=1, batch_size=8)
    with pytest.raises(ValueError, match="allowed"):
        train_ssl(Seq(), data(), **kw)
    net = Seq(ensemble=16)  # declared: 16 members, each the same linear map of the 16 inputs
    ref = copy.deepcopy(net.lin)
    res = train_ssl(net, data(), generator=torch.Generator().manual_seed(8), every=1, **kw)
    frame = res.trajectory.to_frame().query("probe == 'loss' and step == 0")
    assert frame.member.tolist() == list(range(16))
    g = torch.Generator().manual_seed(8)
    xb = data()[torch.randperm(16, generator=g)[:8]]
    v1, v2 = jitter(xb, g), jitter(xb, g)
    with torch.no_grad():
        want = float(info_nce(ref(v1), ref(v2), 0.5))  # member e's rows are the 2B inputs: z[e] = lin([v1; v2])
    np.testing.assert_allclose(frame.value, np.full(16, want), rtol=1e-12)


def test_a_vector_probe_of_a_single_model_is_one_error_not_members():
    """probes={"mean_vec": lambda z: z.mean(0)} on a plain model was stored as members 0..d−1 and series() returned
    coordinate 0 only. Allowed: a float for one model (a (1,) per_member value too), (E,) for an ensemble."""
    x = data()
    with pytest.raises(ValueError, match=r"^train_ssl: probe 'mean_vec' returned shape \(16,\) \(16 value\(s\)\) for a "
                                         r"single model; allowed: a float \(one model: E = 1\)"):  # fmt: skip
        train_ssl(plain_net(), x, objective=InfoNCE(0.5), augment=jitter, steps=1, batch_size=8,
                  probes={"mean_vec": lambda z: z.mean(0)})  # fmt: skip
    seen = []

    def first(z):  # a float: one coordinate of the mean, written out below
        seen.append(z.detach().clone())
        return float(z[:, 0].mean())

    res = train_ssl(plain_net(), x, objective=InfoNCE(0.5), augment=jitter, steps=1, batch_size=8, every=None,
                    probes={"m0": first, "one": lambda z: torch.ones(1)})  # fmt: skip
    steps, vals = res.trajectory.series("m0")
    assert steps.tolist() == [0, 1] and vals.tolist() == [float(z[:, 0].mean()) for z in seen]
    assert res.trajectory.series("one")[1].tolist() == [1.0, 1.0]
    ens = MLP(6, 3, hidden=8, depth=2, ensemble=2, dtype=DT)
    with pytest.raises(ValueError, match=r"probe 'v' returned shape \(2, 3\) \(6 value\(s\)\) for an ensemble of 2 "
                                         r"members; allowed: one value per member, shape \(2,\)"):  # fmt: skip
        train_ssl(ens, x, objective=InfoNCE(0.5), augment=jitter, steps=1, batch_size=8,
                  probes={"v": lambda z: z.mean(1)})  # fmt: skip


def test_probe_data_and_view_shapes_are_one_error_naming_the_input():
    """probe_data of the wrong feature size and an augmentation that changes it failed inside the model's matmul
    ("mat1 and mat2 shapes cannot be multiplied"), although the docs promise the shapes are checked."""
    x = data()  # (16, 6)
    probe = {"m": lambda z: float(z.mean())}
    with pytest.raises(ValueError, match=r"^train_ssl: probe_data has shape \(10, 5\), inputs of shape \(5,\), but the "
                                         r"training inputs have shape \(6,\).* must be \(n, 6\)"):  # fmt: skip
        train_ssl(plain_net(), x, objective=InfoNCE(0.5), augment=jitter, steps=1, batch_size=8, probes=probe,
                  probe_data=torch.randn(10, 5, dtype=DT))  # fmt: skip
    loader = DataLoader(TensorDataset(x), batch_size=8, drop_last=True)  # a DataLoader: checked at its first batch
    with pytest.raises(ValueError, match=r"^train_ssl: probe_data has shape \(10, 5\)"):
        train_ssl(plain_net(), loader, objective=InfoNCE(0.5), augment=jitter, steps=1, probes=probe,
                  probe_data=torch.randn(10, 5, dtype=DT))  # fmt: skip
    widen = lambda v, g: torch.cat([v, v[:, :1]], 1)  # noqa: E731  (B, 6) -> (B, 7)
    with pytest.raises(ValueError, match=r"^train_ssl: the model failed on views of shape \(8, 7\).*augment 0, 1 "
                                         r"changed the batch's shape \(8, 6\) to \(8, 7\), \(8, 7\)"):  # fmt: skip
        train_ssl(plain_net(), x, objective=InfoNCE(0.5), augment=widen, steps=1, batch_size=8)
    with pytest.raises(ValueError, match=r"augment 1 changed the batch's shape \(8, 6\) to \(8, 7\)"):
        train_ssl(plain_net(), x, objective=InfoNCE(0.5), augment=[jitter, widen], steps=1, batch_size=8)
    with pytest.raises(RuntimeError, match="mat1 and mat2"):  # views of the data's shape: the model refuses the data
        train_ssl(plain_net(D=5), x, objective=InfoNCE(0.5), augment=jitter, steps=1, batch_size=8)


def test_every_beyond_steps_is_refused_and_both_ends_are_logged():
    x = data()
    with pytest.raises(ValueError, match=r"^train_ssl: every: the steps 5 are not integers in 0\.\.steps=2 .*allowed: "
                                         r"an int interval >= 1, explicit steps in 0\.\.2, or None$"):  # fmt: skip
        train_ssl(plain_net(), x, objective=InfoNCE(0.5), augment=jitter, steps=2, batch_size=8, every=[0, 1, 5])
    with pytest.raises(ValueError, match=r"every: the steps 1\.5 are not integers"):
        train_ssl(plain_net(), x, objective=InfoNCE(0.5), augment=jitter, steps=2, batch_size=8, every=[0, 1.5])
    res = train_ssl(plain_net(), x, objective=InfoNCE(0.5), augment=jitter, steps=2, batch_size=8, every=[0, 2])
    assert res.trajectory.series("loss")[0].tolist() == [0, 2]
