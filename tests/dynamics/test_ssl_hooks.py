"""train_ssl hooks: scheduler + callbacks + checkpoint/exact resume, live TensorBoard, several views,
one-argument (torchvision-style) augmentations, the view-shape check, and the clear errors of the trainer."""

import itertools

import numpy as np
import pytest
import torch
from torch import nn

from ssldyn.dynamics import train_ssl
from ssldyn.dynamics.callbacks import History, TensorBoardLogger
from ssldyn.dynamics.views import per_batch, per_sample
from ssldyn.objectives import InfoNCE, info_nce

DT = torch.float64


def jitter(x, g):
    return x + 0.1 * torch.randn(x.shape, generator=g, dtype=x.dtype)


def data(n=24, D=6, seed=0):
    return torch.randn(n, D, generator=torch.Generator().manual_seed(seed), dtype=DT)


def net_with_bn_and_dropout(seed=1):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(6, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Dropout(0.2), nn.Linear(16, 8)).to(DT)


class Interrupt(Exception):
    pass


class StopAt:
    def __init__(self, step):
        self.step = step

    def on_step(self, step, model, loss):
        if step == self.step:
            raise Interrupt


def _run(tmp_path, *, callbacks=(), resume=None, seed=1, steps=12):
    torch.manual_seed(123)  # dropout draws from torch's global generator
    net = net_with_bn_and_dropout(seed)
    res = train_ssl(
        net,
        data(),
        objective=InfoNCE(0.5),
        augment=jitter,
        steps=steps,
        batch_size=8,
        every=1,
        optimizer=lambda p: torch.optim.SGD(p, lr=0.2, momentum=0.9),
        scheduler=lambda opt: torch.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.5),
        checkpoint=tmp_path / "ckpt.pt",
        checkpoint_every=4,
        callbacks=callbacks,
        resume=resume,
        generator=torch.Generator().manual_seed(7),
    )
    return res


def test_interrupted_run_resumed_from_its_checkpoint_matches_the_uninterrupted_run(tmp_path):
    full = _run(tmp_path / "a")
    hist = History()
    with pytest.raises(Interrupt):
        _run(tmp_path / "b", callbacks=[hist, StopAt(6)])  # checkpoints after 4 updates (not 8)
    assert [s for s, _ in hist.steps] == list(range(7))
    # a fresh process would rebuild the model from another seed: the checkpoint must restore everything
    torch.manual_seed(999)
    resumed = _run(tmp_path / "b", resume=tmp_path / "b" / "ckpt.pt", seed=5)
    s_full, l_full = full.trajectory.series("loss")
    s_res, l_res = resumed.trajectory.series("loss")
    assert s_full.tolist() == s_res.tolist() == list(range(13))
    np.testing.assert_array_equal(l_res, l_full)  # exactly: batches, views, dropout masks, LR schedule, BN stats
    for a, b in zip(full.state.state_dict().values(), resumed.state.state_dict().values()):
        assert torch.equal(a, b)
    # the schedule was applied: after 12 updates StepLR(3, 0.5) has halved the LR 4 times
    ck = torch.load(tmp_path / "a" / "ckpt.pt", weights_only=False)
    assert ck["step"] == 12 and ck["scheduler"]["_last_lr"][0] == pytest.approx(0.2 * 0.5**4)


def test_a_crash_while_writing_a_checkpoint_keeps_the_previous_one_and_no_temp_file(tmp_path, monkeypatch):
    """Checkpoints go through the one atomic write (``ssldyn.files``): a failure at the rename of
    the second checkpoint leaves the first intact and loadable, and nothing else in the folder."""
    import os

    with pytest.raises(Interrupt):
        _run(tmp_path, callbacks=[StopAt(5)])  # one checkpoint, after 4 updates
    first = (tmp_path / "ckpt.pt").read_bytes()
    real_replace = os.replace

    def crash(src, dst):
        if str(dst).endswith("ckpt.pt"):
            raise OSError(28, "No space left on device")
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="No space"):
        _run(tmp_path)
    assert (tmp_path / "ckpt.pt").read_bytes() == first
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt.pt"]
    assert torch.load(tmp_path / "ckpt.pt", weights_only=False)["step"] == 4


def test_callbacks_see_every_update_every_logged_row_and_the_end():
    hist = History()
    res = train_ssl(
        net_with_bn_and_dropout(),
        data(),
        objective=InfoNCE(0.5),
        augment=jitter,
        steps=5,
        batch_size=8,
        every=2,
        probes={"norm": lambda z: z.norm()},
        callbacks=[hist],
    )
    assert [s for s, _ in hist.steps] == [0, 1, 2, 3, 4]  # one per update, none for the final evaluation
    assert [s for s, _ in hist.logs] == [0, 2, 4, 5] and hist.ended
    frame = res.trajectory.to_frame()
    for step, row in hist.logs:
        assert set(row) == {"loss", "norm"}
        assert float(row["loss"]) == frame[(frame.probe == "loss") & (frame.step == step)].value.item()


def test_live_tensorboard_scalars_during_training_and_hparams_at_the_end(tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    seen = []

    class ReadBack:  # reads the event files while the run is going on
        def on_log(self, step, model, row):
            acc = EventAccumulator(str(tmp_path))
            acc.Reload()
            seen.append([e.step for e in acc.Scalars("loss")])

    logger = TensorBoardLogger(tmp_path, hparams={"tau": 0.5, "batch": 8})
    res = train_ssl(
        net_with_bn_and_dropout(),
        data(),
        objective=InfoNCE(0.5),
        augment=jitter,
        steps=6,
        batch_size=8,
        every=2,
        callbacks=[logger, ReadBack()],
    )
    assert seen == [[0], [0, 2], [0, 2, 4], [0, 2, 4, 6]]  # each scalar is on disk when its step is logged
    acc = EventAccumulator(str(tmp_path))
    acc.Reload()
    _, losses = res.trajectory.series("loss")
    np.testing.assert_allclose([e.value for e in acc.Scalars("loss")], losses, rtol=1e-6)  # float32 events
    from tensorboard.plugins.hparams import plugin_data_pb2

    content = acc.PluginTagToContent("hparams")["_hparams_/session_start_info"]
    start = plugin_data_pb2.HParamsPluginData.FromString(content).session_start_info
    assert start.hparams["tau"].number_value == 0.5 and start.hparams["batch"].number_value == 8


def test_three_views_average_the_objective_over_the_pairs():
    x = data()
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(6, 12), nn.Tanh(), nn.Linear(12, 5)).to(DT)
    ref = nn.Sequential(nn.Linear(6, 12), nn.Tanh(), nn.Linear(12, 5)).to(DT)
    ref.load_state_dict(net.state_dict())
    scale = lambda x, g: 1.5 * x  # noqa: E731  (a deterministic third view)
    res = train_ssl(net, x, objective=InfoNCE(0.5), augment=[jitter, jitter, scale], steps=1, batch_size=8, every=1)
    g = torch.Generator().manual_seed(0)
    xb = x[torch.randperm(24, generator=g)[:8]]
    views = [jitter(xb, g), jitter(xb, g), 1.5 * xb]
    z = ref(torch.cat(views)).detach()  # one forward of the three same-shape views
    zs = [z[i * 8 : (i + 1) * 8] for i in range(3)]
    want = np.mean([float(info_nce(zs[i], zs[j], 0.5)) for i, j in itertools.combinations(range(3), 2)])
    assert res.trajectory.series("loss")[1][0] == pytest.approx(want, rel=1e-12)
    assert res.trajectory.meta["views"] == 3


def test_views_keyword_draws_that_many_views_from_one_augmentation():
    # views=4 with one augmentation: four draws of it in order, one forward of the (4B, 6) stack, and the loss
    # is the mean of info_nce over the 6 pairs i < j (written out as in the three-view test above)
    x = data()
    torch.manual_seed(0)
    net = nn.Linear(6, 4).to(DT)
    ref = nn.Linear(6, 4).to(DT)
    ref.load_state_dict(net.state_dict())
    res = train_ssl(net, x, objective=InfoNCE(0.5), augment=jitter, views=4, steps=1, batch_size=8, every=1,
                    generator=torch.Generator().manual_seed(2))  # fmt: skip
    g = torch.Generator().manual_seed(2)
    xb = x[torch.randperm(24, generator=g)[:8]]
    views = [jitter(xb, g) for _ in range(4)]
    with torch.no_grad():
        zs = [ref(v) for v in views]
    pairs = list(itertools.combinations(range(4), 2))
    want = np.mean([float(info_nce(zs[i], zs[j], 0.5)) for i, j in pairs])
    assert len(pairs) == 6 and res.trajectory.meta["views"] == 4
    assert res.trajectory.series("loss")[1][0] == pytest.approx(want, rel=1e-12)
    # two views would give another number: the four views were really used
    assert abs(want - float(info_nce(zs[0], zs[1], 0.5))) > 1e-6
    with pytest.raises(ValueError, match="views must be an integer >= 2"):
        train_ssl(
            nn.Linear(6, 4).to(DT), data(), objective=InfoNCE(0.5), augment=jitter, views=1, steps=1, batch_size=8
        )


def test_one_argument_transforms_are_applied_per_sample_seeded_by_the_generator():
    calls = []

    def noise(x):  # torchvision style: one sample, global RNG
        calls.append(tuple(x.shape))
        return x + torch.randn(x.shape, dtype=x.dtype)

    x = data(n=4)
    out = per_sample(noise)(x, torch.Generator().manual_seed(3))
    assert calls == [(6,)] * 4  # one call per sample
    g = torch.Generator().manual_seed(3)
    seed = int(torch.randint(0, 2**62, (1,), generator=g))
    torch.manual_seed(seed)
    want = torch.stack([xi + torch.randn(6, dtype=DT) for xi in x])
    torch.testing.assert_close(out, want, rtol=0, atol=0)
    state = torch.get_rng_state()
    per_batch(noise)(x, torch.Generator().manual_seed(3))
    assert torch.equal(state, torch.get_rng_state())  # torch's global generator is left as it was

    def run(aug):
        torch.manual_seed(0)
        net = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 4)).to(DT)
        return train_ssl(net, data(), objective=InfoNCE(0.5), augment=aug, steps=3, batch_size=8, every=1)

    auto, explicit = run(noise), run(per_sample(noise))
    np.testing.assert_array_equal(auto.trajectory.series("loss")[1], explicit.trajectory.series("loss")[1])
    again = run(noise)  # reproducible: the randomness comes from the trainer's generator
    np.testing.assert_array_equal(auto.trajectory.series("loss")[1], again.trajectory.series("loss")[1])
    batch = run(per_batch(noise))
    assert not np.array_equal(batch.trajectory.series("loss")[1], auto.trajectory.series("loss")[1])


def test_a_view_of_the_wrong_shape_is_one_clear_error():
    conv = nn.Sequential(nn.Conv2d(1, 4, 3), nn.Flatten(), nn.LazyLinear(5)).to(DT)
    imgs = torch.rand(16, 1, 8, 8, dtype=DT)
    with pytest.raises(ValueError, match=r"augment 0 must return .* 4 axes .* got \(8, 8, 8\)"):
        train_ssl(conv, imgs, objective=InfoNCE(0.5), augment=lambda x, g: x[:, 0], steps=1, batch_size=8)
    crop = lambda x, g: x[..., :6, :6]  # noqa: E731  a local crop: another spatial size
    with pytest.raises(ValueError, match=r"the model failed on views of shape \(8, 1, 6, 6\)"):
        train_ssl(conv, imgs, objective=InfoNCE(0.5), augment=[jitter, crop], steps=1, batch_size=8)
    with pytest.raises(ValueError, match="augment must be None, a callable"):
        train_ssl(conv, imgs, objective=InfoNCE(0.5), augment="flip", steps=1, batch_size=8)


def test_multi_crop_views_of_two_sizes_train_a_pooling_model(sgd_step_by_hand):
    class Pool(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(1, 6, 3, padding=1)

        def forward(self, x):
            return self.conv(x).mean((-2, -1))  # global pooling: any spatial size

    torch.manual_seed(0)
    imgs = torch.rand(16, 1, 8, 8, dtype=DT)
    crop = lambda x, g: x[..., 1:7, 1:7]  # noqa: E731
    net = Pool().to(DT)
    ref = Pool().to(DT)
    ref.load_state_dict(net.state_dict())
    res = train_ssl(net, imgs, objective=InfoNCE(0.5), augment=[jitter, jitter, crop, crop], steps=2,
                    batch_size=8, every=1, optimizer=lambda p: torch.optim.SGD(p, lr=0.1),
                    generator=torch.Generator().manual_seed(1))  # fmt: skip
    assert res.trajectory.meta["views"] == 4
    # written out: two 8x8 views (jitter draws), two 6x6 crops (no draws), each view embedded on its own, the
    # loss the mean of info_nce over the 6 pairs; then one hand-written SGD step and the same for the next batch
    g = torch.Generator().manual_seed(1)
    perm = torch.randperm(16, generator=g)
    want = []
    for k in range(2):
        xb = imgs[perm[8 * k : 8 * k + 8]]
        views = [jitter(xb, g), jitter(xb, g), xb[..., 1:7, 1:7], xb[..., 1:7, 1:7]]
        zs = [ref(v) for v in views]
        loss = sum(info_nce(zs[i], zs[j], 0.5) for i, j in itertools.combinations(range(4), 2)) / 6
        want.append(float(loss.detach()))
        if k == 0:
            sgd_step_by_hand(ref, loss, 0.1)
    np.testing.assert_allclose(res.trajectory.series("loss")[1][:2], want, rtol=1e-12)
    crops_only = float(info_nce(zs[2], zs[3], 0.5).detach())  # the crops alone (pair 2-3, step 1) differ
    assert abs(want[1] - crops_only) > 1e-6


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error raised without CUDA")
def test_cuda_without_cuda_is_one_clear_error():
    with pytest.raises(ValueError, match="device='cuda' but CUDA is not available"):
        train_ssl(nn.Linear(6, 4).to(DT), data(), objective=InfoNCE(0.5), augment=jitter, steps=1, batch_size=8,
                  device="cuda")  # fmt: skip


def test_a_probe_returning_a_dict_is_one_clear_error():
    with pytest.raises(ValueError, match="probe 'stats' returned a dict .* one probe per key"):
        train_ssl(nn.Linear(6, 4).to(DT), data(), objective=InfoNCE(0.5), augment=jitter, steps=1, batch_size=8,
                  probes={"stats": lambda z: {"mean": z.mean(), "std": z.std()}})  # fmt: skip


def test_scheduler_bound_to_another_optimizer_and_half_checkpoint_settings_are_rejected(tmp_path):
    net = nn.Linear(6, 4).to(DT)
    other = torch.optim.SGD(nn.Linear(2, 2).parameters(), lr=0.1)
    kw = dict(objective=InfoNCE(0.5), augment=jitter, steps=1, batch_size=8)
    with pytest.raises(ValueError, match="bound to another optimizer"):
        train_ssl(net, data(), scheduler=torch.optim.lr_scheduler.StepLR(other, 2), **kw)
    with pytest.raises(ValueError, match="checkpoint .* together"):
        train_ssl(net, data(), checkpoint=tmp_path / "c.pt", **kw)
    with pytest.raises(ValueError, match="no such checkpoint"):
        train_ssl(net, data(), resume=tmp_path / "missing.pt", **kw)


def test_a_seeded_dataloader_run_resumes_exactly(tmp_path):
    from torch.utils.data import DataLoader, TensorDataset

    def go(resume=None, callbacks=()):
        torch.manual_seed(0)
        net = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 4)).to(DT)
        loader = DataLoader(
            TensorDataset(data()), batch_size=6, shuffle=True, generator=torch.Generator().manual_seed(3)
        )
        return train_ssl(net, loader, objective=InfoNCE(0.5), augment=jitter, steps=9, every=1,
                         checkpoint=tmp_path / "dl.pt", checkpoint_every=3, resume=resume,
                         callbacks=callbacks)  # fmt: skip

    full = go().trajectory.series("loss")[1]
    with pytest.raises(Interrupt):
        go(callbacks=[StopAt(4)])
    resumed = go(resume=tmp_path / "dl.pt").trajectory.series("loss")[1]
    np.testing.assert_array_equal(resumed, full)


# ---------------------------------------------------------------------------- from the mutation audit of the engine
class _FakeSummaryWriter:
    """Records what TensorBoardLogger writes (tensorboard itself is an optional extra, absent in CI)."""

    def __init__(self, log_dir):
        self.scalars, self.hparams, self.closed = [], None, False

    def add_scalar(self, tag, value, step):
        self.scalars.append((tag, value, step))

    def add_hparams(self, hparams, metrics, run_name=None):
        self.hparams = (hparams, metrics)

    def flush(self):
        pass

    def close(self):
        self.closed = True


def test_tensorboard_logger_writes_one_curve_per_member_and_the_member_mean_as_the_metric(monkeypatch, tmp_path):
    """A two-member loss (t, 3t) at the logged steps 0, 2, 3: tags loss/member_0 and loss/member_1 with those values;
    the HPARAMS metric is the mean over the members of the last value, (3 + 9) / 2 = 6."""
    import sys
    import types

    from ssldyn.dynamics import run

    fake = types.ModuleType("torch.utils.tensorboard")
    fake.SummaryWriter = _FakeSummaryWriter
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", fake)
    logger = TensorBoardLogger(tmp_path, hparams={"lr": 0.1})
    run(0, lambda s, t: (s + 1, torch.tensor([1.0, 3.0]) * t), steps=3, every=2, callbacks=[logger])
    w = logger.writer
    assert sorted(w.scalars, key=lambda r: (r[0], r[2])) == [
        ("loss/member_0", 0.0, 0), ("loss/member_0", 2.0, 2), ("loss/member_0", 3.0, 3),
        ("loss/member_1", 0.0, 0), ("loss/member_1", 6.0, 2), ("loss/member_1", 9.0, 3),
    ]  # fmt: skip
    assert w.hparams == ({"lr": 0.1}, {"hparam/loss": 6.0}) and w.closed
