"""Ensemble trainer: element-wise SGD vs torch.optim.SGD, members vs lone runs, grouping, no host syncs."""

import numpy as np
import pytest
import torch

from ssldyn.data.tokens import TokenSpec
from ssldyn.dynamics.ensemble_trainer import (
    MAX_ELEMS,
    EnsembleSGD,
    TokenRun,
    group_token_runs,
    plan_ensembles,
    train_ensemble,
    train_token_ensemble,
)
from ssldyn.dynamics.trajectory import FlowResult


def _series(res, probe, member):
    return res.trajectory.series(probe, member)[1]


def _steps_beside_torch_sgd(opt, p, lrs, momentum, steps):
    """``steps`` steps of ``opt`` on ``p (E, ...)`` and of ``torch.optim.SGD`` on a copy of each member (its own lr,
    weight decay 5e-3), fed the same random gradients; returns the reference members stacked ``(E, ...)``."""
    refs = [torch.nn.Parameter(p.detach()[e].clone()) for e in range(len(lrs))]
    ropts = [torch.optim.SGD([r], lr=lr, momentum=momentum, weight_decay=5e-3) for r, lr in zip(refs, lrs)]
    for _ in range(steps):
        g = torch.randn(p.shape, dtype=p.dtype)  # (E, ...)
        p.grad = g.clone()
        opt.step()
        for e, (r, ropt) in enumerate(zip(refs, ropts)):
            r.grad = g[e].clone()
            ropt.step()
    return torch.stack([r.detach() for r in refs])


def test_ensemble_sgd_equals_torch_sgd_per_member():
    torch.manual_seed(0)
    lrs = [0.1, 0.02, 0.5]
    p = torch.nn.Parameter(torch.randn(3, 4, 5, dtype=torch.float64))
    opt = EnsembleSGD([p], torch.tensor(lrs, dtype=torch.float64), momentum=0.9, weight_decay=5e-3)
    ref = _steps_beside_torch_sgd(opt, p, lrs, 0.9, steps=5)
    for e in range(3):
        torch.testing.assert_close(p.detach()[e], ref[e], rtol=1e-12, atol=1e-12)


def test_uniform_lr_fused_step_equals_torch_sgd():
    torch.manual_seed(1)
    p0 = torch.randn(3, 4, 5, dtype=torch.float64)
    p = torch.nn.Parameter(p0.clone())
    opt = EnsembleSGD([p], torch.full((3,), 0.05, dtype=torch.float64), momentum=0.9, weight_decay=5e-3)
    assert opt._fused
    ref = torch.nn.Parameter(p0.clone())
    ropt = torch.optim.SGD([ref], lr=0.05, momentum=0.9, weight_decay=5e-3)
    for _ in range(6):
        g = torch.randn(3, 4, 5, dtype=torch.float64)
        p.grad, ref.grad = g.clone(), g.clone()
        opt.step()
        ropt.step()
    torch.testing.assert_close(p.detach(), ref.detach(), rtol=1e-12, atol=1e-12)
    assert not torch.equal(p.detach(), p0)


def test_member_trajectory_equals_lone_run():
    """Tolerance: 1e-4 on χ̄± over 60 steps (float32; only the padded sums' round-off differs)."""
    small = dict(batch=32)
    runs = [
        TokenRun(spec=TokenSpec(P=3), beta=2, activation="relu", loss="infonce", bn="mean_only", seed=1, **small),
        TokenRun(spec=TokenSpec(P=1), beta=1, activation="linear", loss="quadratic", bn="off", seed=2, **small),
        TokenRun(
            spec=TokenSpec(P=5, zeta=5.0),
            beta=1,
            activation="quadratic",
            loss="infonce",
            bn="standard",
            seed=3,
            lr=0.01,
            **small,
        ),
    ]
    ens = train_token_ensemble(runs, steps=60, every=20)
    assert isinstance(ens, FlowResult) and ens.state.ensemble == 3
    assert ens.trajectory.meta["runs"] == [r.describe() for r in runs]
    for m, r in enumerate(runs):
        lone = train_token_ensemble([r], steps=60, every=20)
        np.testing.assert_array_equal(ens.trajectory.series("chi_plus", m)[0], [0, 20, 40, 60])
        for probe, tol in (("chi_plus", 1e-4), ("chi_minus", 1e-4), ("loss", 1e-4)):
            np.testing.assert_allclose(_series(ens, probe, m), _series(lone, probe, 0), rtol=tol, atol=tol)
        # the state is the trained ensemble, member m = runs[m]
        torch.testing.assert_close(ens.state.W[m, :, : r.filters], lone.state.W[0], rtol=1e-4, atol=1e-5)
    # training moves χ̄₊ of the ReLU run
    assert abs(_series(ens, "chi_plus", 0)[-1] - _series(ens, "chi_plus", 0)[0]) > 1e-3


def test_plan_ensembles_partitions_and_bounds_padding():
    Ms = [b * p for b in (1, 2, 5, 10) for p in (1, 3, 5, 10) for _ in range(24)]
    for max_elems in (MAX_ELEMS, 10**9):
        groups = plan_ensembles(Ms, overhead=8, slack=0.25, max_elems=max_elems)
        flat = sorted(i for g in groups for i in g)
        assert flat == list(range(len(Ms)))
        for g in groups:
            pad = max(Ms[i] for i in g)
            assert (pad + 8) * len(g) <= 1.25 * sum(Ms[i] + 8 for i in g) + 1e-9
            assert len(g) * 256 * 10 * pad <= max_elems
    assert len(groups) < 16  # without the size cap: fewer ensembles than distinct (β, P) cells


def test_closed_form_loss_gradient_matches_objectives_autograd():
    from ssldyn.dynamics.ensemble_trainer import contrastive_loss_and_grad
    from ssldyn.objectives import info_nce, quadratic_contrastive_loss

    torch.manual_seed(3)
    z = torch.randn(6, 2, 16, 5, dtype=torch.float64, requires_grad=True)
    kinds = torch.tensor([True, False, True, True, False, False])
    losses, dz = contrastive_loss_and_grad(z.detach(), kinds, 0.1)
    l2, dz2 = contrastive_loss_and_grad(z.detach(), kinds.tolist(), 0.1)  # host kinds: the same
    assert torch.equal(losses, l2) and torch.equal(dz, dz2)
    ref = torch.cat(
        [
            info_nce(z[i : i + 1, 0], z[i : i + 1, 1], 0.1, negatives="view1")
            if kinds[i]
            else quadratic_contrastive_loss(z[i : i + 1, 0], z[i : i + 1, 1], 0.1)
            for i in range(6)
        ]
    )
    (g,) = torch.autograd.grad(ref.sum(), z)
    torch.testing.assert_close(losses, ref.detach(), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(dz, g, rtol=1e-10, atol=1e-12)
    # the fused path trains like autograd through the objectives
    run = TokenRun(spec=TokenSpec(P=3), beta=2, batch=32, seed=4)
    a = train_token_ensemble([run], steps=30, every=10, closed_form_loss=True)
    b = train_token_ensemble([run], steps=30, every=10, closed_form_loss=False)
    np.testing.assert_allclose(_series(a, "chi_plus", 0), _series(b, "chi_plus", 0), atol=1e-4)


def test_ensemble_loss_guard_reports_first_bad_member():
    from ssldyn.dynamics.guards import LossGuard, NonFiniteLossError

    g = LossGuard(labels=["a", "b", "c"], lazy=True, check_every=None)
    g.update(0, torch.tensor([1.0, 2.0, 3.0]))
    g.update(1, torch.tensor([1.5, float("inf"), 2.5]))  # b goes bad at step 1 (last finite 2.0)
    g.update(2, torch.tensor([float("nan"), 7.0, 2.0]))  # a at step 2 (last finite 1.5); b stays failed
    with pytest.raises(NonFiniteLossError, match=r"loss of b became inf at step 1 \(last finite value: 2\)") as e:
        g.check()
    assert e.value.step == 1 and e.value.last_finite == 2.0
    ok = LossGuard(lazy=True, check_every=None)
    ok.update(0, torch.tensor([1.0]))
    ok.check()


def test_diverging_member_stops_training_with_step_and_last_finite_loss():
    from ssldyn.dynamics.guards import NonFiniteLossError

    good = TokenRun(spec=TokenSpec(P=3), beta=1, bn="off", seed=1, batch=32)
    bad = TokenRun(spec=TokenSpec(P=3), beta=1, bn="off", seed=2, batch=32, lr=1e4)
    with pytest.raises(NonFiniteLossError, match=r"relu/infonce/bn=off/beta=1/P=3/zeta=1.0/seed=2") as e:
        train_token_ensemble([good, bad], steps=200, every=50)
    step = e.value.step
    assert 0 < step < 200
    # the same run alone for exactly `step` steps never sees the non-finite loss; its last loss
    # (step − 1, recorded by the final probe) is the guard's last finite value
    lone = _series(train_token_ensemble([bad], steps=step, every=1), "loss", 0)
    assert np.isfinite(lone).all()
    np.testing.assert_allclose(lone[-1], e.value.last_finite, rtol=1e-3)
    # the healthy member alone trains through
    assert np.isfinite(_series(train_token_ensemble([good], steps=step + 5, every=50), "loss", 0)).all()


def test_groups_order_members_and_cuda_plans_one_ensemble():
    runs = [
        TokenRun(spec=TokenSpec(P=P), beta=b, activation=a, loss=loss, seed=s)
        for loss in ("infonce", "quadratic")
        for a in ("relu", "linear")
        for b in (1, 2, 5, 10)
        for P in (1, 3, 5, 10)
        for s in (0, 1)
    ]
    cpu = group_token_runs(runs)
    assert sorted(i for g in cpu for i in g) == list(range(len(runs))) and len(cpu) > 1
    for g in cpu:  # (activation, loss) contiguous inside an ensemble
        keys = [(runs[i].activation, runs[i].loss) for i in g]
        assert keys == sorted(keys)
    gpu = group_token_runs(runs, device="cuda")  # planning only: no GPU needed
    assert len(gpu) == 1 and sorted(gpu[0]) == list(range(len(runs)))
    # runs that cannot share an ensemble (other batch) stay apart on any device
    other = [*runs[:3], TokenRun(spec=TokenSpec(P=3), batch=64)]
    assert sorted(len(g) for g in group_token_runs(other, device="cuda")) == [1, 3]


class _SyncCounter:
    """Counts the Python-level calls that read a tensor on the host (a device sync on a GPU)."""

    NAMES = ("item", "tolist", "numpy", "cpu", "nonzero", "__bool__", "__float__", "__int__", "__index__")

    def __init__(self, monkeypatch):
        self.calls = {n: 0 for n in self.NAMES}
        for name in self.NAMES:
            orig = getattr(torch.Tensor, name)

            def wrapper(t, *a, _orig=orig, _name=name, **k):
                self.calls[_name] += 1
                return _orig(t, *a, **k)

            monkeypatch.setattr(torch.Tensor, name, wrapper)

    def total(self):
        return sum(self.calls.values())


def test_training_loop_reads_nothing_from_the_device_between_logging_steps(monkeypatch):
    """Host reads per run must not grow with the number of steps: 0 per (non-logging) step."""
    runs = [
        TokenRun(spec=TokenSpec(P=3), beta=2, activation="relu", bn="mean_only", seed=1, batch=16),
        TokenRun(spec=TokenSpec(P=1), beta=1, activation="linear", loss="quadratic", bn="standard", seed=2, batch=16),
        TokenRun(spec=TokenSpec(P=5), beta=1, activation="quadratic", bn="var_only", seed=3, batch=16, lr=0.01),
    ]
    counts = {}
    for steps in (4, 23):
        counter = _SyncCounter(monkeypatch)
        train_token_ensemble(runs, steps=steps, every=1000)  # logs at step 0 and at the end only
        counts[steps] = dict(counter.calls)
        monkeypatch.undo()
    assert counts[4] == counts[23], counts
    # across a chunk boundary of the token stream (50 steps) too
    counter = _SyncCounter(monkeypatch)
    train_token_ensemble(runs, steps=107, every=1000)
    assert counter.calls == counts[4], (counter.calls, counts[4])
    monkeypatch.undo()
    # and each logging step reads a bounded number of values (the guard and the probes, not per step)
    counter = _SyncCounter(monkeypatch)
    train_token_ensemble(runs, steps=20, every=5)
    per_log = (counter.total() - sum(counts[4].values())) / 3  # 3 more logging steps (5, 10, 15)
    monkeypatch.undo()
    assert per_log <= 10, per_log


def _compiled_vs_eager(train, options, tol):
    torch._dynamo.reset()
    eager = train(False)
    compiled = train(options)
    frame_e, frame_c = eager.trajectory.to_frame(), compiled.trajectory.to_frame()
    assert len(frame_e) == len(frame_c) > 0
    np.testing.assert_allclose(frame_c["value"], frame_e["value"], rtol=tol, atol=tol)
    torch.testing.assert_close(compiled.state.W, eager.state.W, rtol=tol, atol=tol)
    torch.testing.assert_close(compiled.state.VT, eager.state.VT, rtol=tol, atol=tol)


@pytest.mark.parametrize("inputs", ["tokens-table", "tokens-samples", "dense"])
def test_compiled_step_equals_eager_step(inputs):
    """``compile=``: the per-step forward + loss with the hand-written backward captured whole by
    torch.compile (``fullgraph``: no graph break, what CUDA graphs need) trains like the eager step.
    (The ``aot_eager`` backend checks the capture, in float64 to 1e-10 — the captured graph may
    reorder float operations; the inductor test below checks code generation, in float32.)"""
    from ssldyn.dynamics.ensemble_trainer import ContrastiveLosses
    from ssldyn.models.rf_net import EnsembleRFNet

    options = {"backend": "aot_eager", "fullgraph": True}
    if inputs == "dense":
        x = torch.randn(8, 1, 2, 16, 3, 5, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
        # x: (steps, 1, 2, N, K, d)

        def train(compile):
            net = EnsembleRFNet(3, 5, [4, 2, 3], out_dim=6, ensemble=3, activation=["relu", "quadratic", "tanh"],
                                bn=["mean_only", "standard", "off"], generator=torch.Generator().manual_seed(1), dtype=torch.float64)  # fmt: skip
            opt = EnsembleSGD([net.W, net.VT], 0.05, momentum=0.9, weight_decay=5e-3)
            loss = ContrastiveLosses(["infonce", "quadratic", "infonce"], 0.1)
            return train_ensemble(net, loss, batches=lambda t: {"x": x[t]}, opt=opt, steps=8, every=4, compile=compile)

        _compiled_vs_eager(train, options, 1e-10)
        return
    if inputs == "tokens-table":
        runs = [
            TokenRun(spec=TokenSpec(P=3), beta=2, activation="relu", bn="mean_only", seed=1, batch=16),
            TokenRun(
                spec=TokenSpec(P=3), beta=2, activation="linear", loss="quadratic", bn="standard", seed=2, batch=16
            ),
        ]  # M = 6: the table form
    else:
        runs = [
            TokenRun(spec=TokenSpec(P=1), beta=1, activation="leaky_relu", bn="var_only", seed=3, batch=16),
            TokenRun(spec=TokenSpec(P=1), beta=1, activation="quadratic", bn="none", seed=4, batch=16),
        ]  # M = 1: the per-sample form
    _compiled_vs_eager(
        lambda compile: train_token_ensemble(runs, steps=6, every=3, compile=compile, dtype=torch.float64),
        options,
        1e-10,
    )


@pytest.mark.slow
def test_inductor_compiled_step_equals_eager_step():
    """The default ``compile=True`` on the CPU: inductor's generated code (~30 s to compile here)."""
    run = TokenRun(spec=TokenSpec(P=3), beta=2, activation="relu", bn="mean_only", seed=1, batch=16)
    _compiled_vs_eager(lambda compile: train_token_ensemble([run], steps=4, every=2, compile=compile), True, 1e-5)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_loop_has_no_synchronising_call_and_compiled_step_equals_eager():
    """On a GPU: CUDA's own sync detector sees no more synchronising calls in a 60-step run than in a
    10-step run (none per step), and the compiled step (CUDA graphs) trains like the eager step."""
    import warnings

    runs = [
        TokenRun(spec=TokenSpec(P=3), beta=2, activation="relu", bn="mean_only", seed=1, batch=32),
        TokenRun(spec=TokenSpec(P=1), beta=1, activation="linear", loss="quadratic", bn="standard", seed=2, batch=32),
    ]
    train_token_ensemble(runs, steps=3, every=1000, device="cuda")  # warm-up: CUDA context, kernels
    counts = {}
    for steps in (10, 60):
        # setting the mode warns that it is a prototype; inside catch_warnings, or the suite's "error" filter
        # raises after the mode is set and leaves it on for the tests that follow (seen on an H200)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.cuda.set_sync_debug_mode("warn")
            try:
                train_token_ensemble(runs, steps=steps, every=1000, device="cuda")
            finally:
                torch.cuda.set_sync_debug_mode("default")
        counts[steps] = sum("called a synchronizing CUDA operation" in str(w.message) for w in caught)
    assert counts[10] == counts[60], counts
    torch._dynamo.reset()
    eager = train_token_ensemble(runs, steps=20, every=5, device="cuda")
    compiled = train_token_ensemble(runs, steps=20, every=5, device="cuda", compile=True)
    np.testing.assert_allclose(
        compiled.trajectory.to_frame()["value"], eager.trajectory.to_frame()["value"], rtol=1e-4, atol=1e-5
    )


@pytest.mark.parametrize(
    "kw, message",
    [
        (dict(lr=0.0), r"lr must be a finite number > 0, got 0.0"),
        (dict(lr=float("nan")), r"lr must be a finite number > 0, got nan"),
        (dict(temperature=float("inf")), r"temperature must be a finite number > 0, got inf"),
        (dict(weight_decay=-1e-3), r"weight_decay must be a finite number >= 0"),
        (dict(momentum=1.0), r"momentum must be in \[0, 1\), got 1.0"),  # SGD with momentum 1 never forgets
        (dict(batch=1), r"batch must be an integer >= 2, got 1"),  # InfoNCE needs a negative in the batch
        (dict(out_dim=0), r"out_dim must be an integer >= 1, got 0"),
        (dict(bn_stats="batch"), r"bn_stats 'batch': allowed values are 'view', 'joint'"),
        (dict(activation="gelu"), r"activation 'gelu': allowed values are 'linear', 'relu', 'leaky_relu'"),
        (dict(bn="batch"), r"bn 'batch': allowed values are 'off', 'standard', 'mean_only'"),
    ],
)
def test_token_run_rejects_bad_hyperparameters_when_built(kw, message):
    """One error naming the setting, before any ensemble is built (before, nothing checked them here:
    lr = 0 trained nothing, a NaN lr gave NaN losses, in the middle of a grid)."""
    with pytest.raises(ValueError, match=rf"^TokenRun: {message}"):
        TokenRun(**kw)


def test_joint_bn_statistics_train_apart_and_never_share_an_ensemble():
    """``bn_stats="joint"`` (App. D: statistics over the 2N samples) reaches the network, changes the
    training of a BN run (not of a run without BN), and runs with the two settings are never one ensemble."""
    base = TokenRun(spec=TokenSpec(P=3), beta=2, bn="mean_only", seed=1, batch=32)
    view, joint = base, TokenRun(**{**base.describe(), "spec": base.spec, "bn_stats": "joint"})
    assert group_token_runs([view, joint, view]) == [[0, 2], [1]]
    with pytest.raises(ValueError, match="must share .* bn_stats"):
        train_token_ensemble([view, joint], steps=1)
    res = {r.bn_stats: train_token_ensemble([r], steps=40, every=20) for r in (view, joint)}
    assert res["joint"].state.bn_stats == "joint"
    assert abs(_series(res["view"], "loss", 0)[-1] - _series(res["joint"], "loss", 0)[-1]) > 1e-4
    no_bn = [TokenRun(**{**base.describe(), "spec": base.spec, "bn": "off", "bn_stats": s}) for s in ("view", "joint")]
    a, b = (train_token_ensemble([r], steps=40, every=20) for r in no_bn)
    np.testing.assert_array_equal(_series(a, "loss", 0), _series(b, "loss", 0))  # without BN the knob is inert


@pytest.mark.parametrize("every, logged", [(None, [0, 3]), ([1, 3], [1, 3]), (range(0, 4, 2), [0, 2]), (2, [0, 2, 3])])
def test_every_takes_every_form_of_the_dynamics_contract(every, logged):
    """train_ensemble / train_token_ensemble refused every=None and iterables (an int check of their own), although the
    contract and the engine's step schedule take an int interval, explicit steps or None (first and last)."""
    res = train_token_ensemble([TokenRun(beta=1, batch=8)], steps=3, every=every)
    assert sorted(res.trajectory.to_frame().step.unique().tolist()) == logged
    with pytest.raises(ValueError, match=r"every must be >= 1"):
        train_token_ensemble([TokenRun(beta=1, batch=8)], steps=3, every=0)


@pytest.mark.parametrize("momentum", [0.0, 0.9])
@pytest.mark.parametrize("per_member", [False, True], ids=["uniform-lr", "per-member-lr"])
def test_ensemble_sgd_equals_torch_sgd_with_and_without_momentum(momentum, per_member):
    """momentum = 0 (valid: TokenRun takes [0, 1)) crashed the fused path of a uniform lr: it passed momentum buffers
    to torch._fused_sgd_, which requires none then. Reference: torch.optim.SGD per member, same grads, lr, decay."""
    torch.manual_seed(5)
    p0 = torch.randn(3, 4, 5, dtype=torch.float64)
    lrs = [0.1, 0.02, 0.5] if per_member else [0.05] * 3
    p = torch.nn.Parameter(p0.clone())
    opt = EnsembleSGD([p], lrs if per_member else 0.05, momentum=momentum, weight_decay=5e-3)
    assert opt._fused is not per_member  # a uniform lr runs the fused kernel
    ref = _steps_beside_torch_sgd(opt, p, lrs, momentum, steps=4)
    torch.testing.assert_close(p.detach(), ref, rtol=1e-12, atol=1e-12)
    assert not torch.equal(p.detach(), p0)


def test_token_run_without_momentum_trains_alone_as_in_an_ensemble():
    """TokenRun(momentum=0.0) alone (a uniform lr: the fused step) crashed at the first step. Reference: the same run
    as member 0 of an ensemble with per-member learning rates (the element-wise step) — the members are independent."""
    small = dict(spec=TokenSpec(P=3), beta=1, batch=16, momentum=0.0)
    run, other = TokenRun(seed=1, **small), TokenRun(seed=2, lr=0.05, **small)
    lone = train_token_ensemble([run], steps=20, every=10)
    ens = train_token_ensemble([run, other], steps=20, every=10)
    for probe in ("loss", "chi_plus", "chi_minus"):
        np.testing.assert_allclose(_series(lone, probe, 0), _series(ens, probe, 0), rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(lone.state.W[0], ens.state.W[0], rtol=1e-4, atol=1e-5)
    assert _series(lone, "loss", 0)[-1] != _series(lone, "loss", 0)[0]  # it trained


def test_ensemble_sgd_rejects_a_per_member_lr_of_another_length():
    """Two rates for a 3-member parameter were accepted and failed at the first step() with a broadcasting error."""
    p = torch.nn.Parameter(torch.randn(3, 5))
    with pytest.raises(ValueError, match=r"^EnsembleSGD: lr has 2 values \(one per member\) but parameter 0 of shape "
                       r"\(3, 5\) has 3 members"):  # fmt: skip
        EnsembleSGD([p], [0.1, 0.2], momentum=0.0)
    with pytest.raises(ValueError, match=r"^EnsembleSGD: lr has 3 values .* parameter 1 of shape \(\) has no ensemble"):
        EnsembleSGD([p, torch.nn.Parameter(torch.tensor(1.0))], torch.tensor([0.1, 0.2, 0.3]))
    with pytest.raises(ValueError, match=r"^EnsembleSGD: no parameters"):
        EnsembleSGD([], 0.1)


@pytest.mark.parametrize("closed_form", [True, False])
def test_contrastive_losses_reject_a_member_count_other_than_the_losses(closed_form):
    """Two losses on a 3-member z: the closed form returned uninitialised memory for member 2 (and an inf gradient),
    autograd a (2,) vector for 3 members; four losses for 3 members were accepted. Now one error, before any loss."""
    from ssldyn.dynamics.ensemble_trainer import ContrastiveLosses, contrastive_loss_and_grad

    z = torch.randn(3, 2, 8, 4, dtype=torch.float64)
    for names in (["infonce"] * 2, ["infonce", "quadratic"] * 2):
        loss = ContrastiveLosses(names, 0.5, closed_form=closed_form)
        with pytest.raises(ValueError, match=rf"^ContrastiveLosses: z has E=3 members but {len(names)} losses"):
            loss(z)
    with pytest.raises(ValueError, match=r"^ContrastiveLosses: z must be \(E, 2, N, d\) \(two views per member\), got "
                       r"\(3, 8, 4\)"):  # fmt: skip
        ContrastiveLosses(["infonce"] * 3, 0.5, closed_form=closed_form)(z[:, 0])
    with pytest.raises(ValueError, match=r"^contrastive_loss_and_grad: z has E=3 members but 2 kinds"):
        contrastive_loss_and_grad(z, [True, False], 0.5)
    # the matching count: each member's loss is the loss of that member alone
    full = ContrastiveLosses(["infonce", "quadratic", "infonce"], 0.5, closed_form=closed_form)(z)
    for e, name in enumerate(["infonce", "quadratic", "infonce"]):
        alone = ContrastiveLosses([name], 0.5, closed_form=closed_form)(z[e : e + 1])
        torch.testing.assert_close(full[e : e + 1], alone, rtol=1e-12, atol=1e-12)


def _losses_written_out(
    z: torch.Tensor, kinds, T: float, X: torch.Tensor, Y: torch.Tensor | None = None
) -> torch.Tensor:
    """Per member, the two losses with the pairs X left out of the negatives (and the extra positives Y), one anchor
    at a time in float64 loops, P_i = {z2_i} ∪ {z1_j: Y_ij}: InfoNCE ℓ_i = −(1/|P_i|) Σ_{p∈P_i} s_p/T +
    log(Σ_{p∈P_i} e^{s_p/T} + Σ_{j≠i, ¬Y_ij, ¬X_ij} e^{S_ij/T}), mean over i (with Y, Khosla et al.'s supervised
    contrastive loss, "out" form); quadratic Σ_i (−(1/|P_i|) Σ_{p∈P_i} s_p + Σ_{j≠i, ¬Y_ij, ¬X_ij} S_ij / N) / (N T);
    S_ij = cos(z1_i, z1_j), s_p the cosine of anchor i with positive p. Without Y, P_i = {z2_i}."""
    Y = torch.zeros_like(X) if Y is None else Y
    out = []
    for e, infonce in enumerate(kinds):
        z1 = torch.nn.functional.normalize(z[e, 0], dim=-1)
        z2 = torch.nn.functional.normalize(z[e, 1], dim=-1)
        N = z1.shape[0]
        terms = []
        for i in range(N):
            pos = [z1[i] @ z2[i], *(z1[i] @ z1[j] for j in range(N) if Y[e, i, j])]
            negs = [z1[i] @ z1[j] for j in range(N) if j != i and not Y[e, i, j] and not X[e, i, j]]
            mean_pos = sum(pos, torch.zeros((), dtype=z.dtype)) / len(pos)
            if infonce:
                terms.append(-mean_pos / T + torch.logsumexp(torch.stack([*(s / T for s in pos + negs)]), 0))
            else:
                terms.append((-mean_pos + sum(negs, torch.zeros((), dtype=z.dtype)) / N) / (N * T))
        out.append(torch.stack(terms).mean() if infonce else torch.stack(terms).sum())
    return torch.stack(out)


@pytest.mark.parametrize("T", [0.1, 0.02])  # 0.02: the max-shifted softmax path of the closed form
def test_left_out_negatives_closed_form_objectives_and_loops_agree(T):
    """`exclude`: the closed form, autograd through the objectives and the per-anchor loops give one loss and one
    gradient; with no pair left out the loss is the plain one, and leaving pairs out changes it."""
    from ssldyn.dynamics.ensemble_trainer import ContrastiveLosses, contrastive_loss_and_grad

    g = torch.Generator().manual_seed(5)
    z = torch.randn(4, 2, 9, 3, dtype=torch.float64, generator=g)
    gid = torch.randint(0, 3, (4, 9), generator=g)  # three "generators": several same-generator pairs per anchor
    X = (gid[:, :, None] == gid[:, None, :]) & ~torch.eye(9, dtype=torch.bool)  # (E, N, N)
    assert X.sum() > 20
    kinds = [True, False, True, False]
    names = ["infonce" if k else "quadratic" for k in kinds]
    losses, dz = contrastive_loss_and_grad(z, kinds, T, exclude=X)
    zr = z.clone().requires_grad_(True)
    ref = _losses_written_out(zr, kinds, T, X)
    (gref,) = torch.autograd.grad(ref.sum(), zr)
    torch.testing.assert_close(losses, ref.detach(), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(dz, gref, rtol=1e-9, atol=1e-12)
    za = z.clone().requires_grad_(True)
    auto = ContrastiveLosses(names, T, closed_form=False)(
        za, exclude=X
    )  # through info_nce / quadratic_contrastive_loss
    (gauto,) = torch.autograd.grad(auto.sum(), za)
    torch.testing.assert_close(auto.detach(), ref.detach(), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(gauto, gref, rtol=1e-9, atol=1e-12)
    none = torch.zeros_like(X)
    plain, _ = contrastive_loss_and_grad(z, kinds, T)
    assert torch.equal(contrastive_loss_and_grad(z, kinds, T, exclude=none)[0], plain)
    assert (losses - plain).abs().min() > 1e-3


def test_exclude_is_refused_with_one_clear_error():
    from ssldyn.dynamics.ensemble_trainer import ContrastiveLosses, contrastive_loss_and_grad
    from ssldyn.objectives import info_nce, quadratic_contrastive_loss

    z1, z2 = torch.randn(5, 3), torch.randn(5, 3)
    with pytest.raises(ValueError, match="exclude is True on its diagonal"):
        info_nce(z1, z2, 0.1, negatives="view1", exclude=torch.eye(5, dtype=torch.bool))
    with pytest.raises(ValueError, match="exclude needs negatives='view1'"):
        info_nce(z1, z2, 0.1, exclude=torch.zeros(5, 5, dtype=torch.bool))
    with pytest.raises(ValueError, match="exclude must be a bool tensor"):
        quadratic_contrastive_loss(z1, z2, 0.1, exclude=torch.zeros(5, 5))
    with pytest.raises(ValueError, match=r"exclude must broadcast to the pair matrix \(5, 5\)"):
        quadratic_contrastive_loss(z1, z2, 0.1, exclude=torch.zeros(4, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"exclude must be a bool tensor \(E, N, N\) = \(2, 5, 5\)"):
        ContrastiveLosses(["infonce", "quadratic"], 0.1)(torch.randn(2, 2, 5, 3), exclude=torch.zeros(5, 5).bool())
    bad = torch.zeros(2, 5, 5, dtype=torch.bool)
    bad[1, 2, 2] = True  # a positive pair left out: InfoNCE would be infinite
    with pytest.raises(ValueError, match="contrastive_loss_and_grad: exclude is True on its diagonal"):
        contrastive_loss_and_grad(torch.randn(2, 2, 5, 3), [True, False], 0.1, exclude=bad)
    with pytest.raises(ValueError, match="ContrastiveLosses: exclude is True on its diagonal"):
        ContrastiveLosses(["infonce", "quadratic"], 0.1)(torch.randn(2, 2, 5, 3), exclude=bad)
    with pytest.raises(ValueError, match="negatives .generators.: allowed values are .batch., .other-generators."):
        TokenRun(negatives="generators")


def test_other_generator_negatives_mask_same_generator_pairs_of_the_drawn_batches():
    """The mask of a step is 'same generator, not the same sample' over the generators the stream drew (the draws of
    TokenGenerator.sample with return_generators), only for the members that ask for it; the tokens are the same
    draws as without the mask, so a run with batch negatives trains exactly as before."""
    from ssldyn.data.tokens import TokenGenerator, TokenStream
    from ssldyn.dynamics.ensemble_trainer import _TokenBatches

    spec = TokenSpec(P=3, G=4)
    gen = TokenGenerator(spec, 7)
    toks, gid = TokenGenerator(spec, 7).sample(TokenStream.CHUNK, 16, return_generators=True)
    b = _TokenBatches([gen], 16, [0, 0], torch.device("cpu"), ["batch", "other-generators"])
    for t in range(3):
        out = b(t)
        assert torch.equal(out["tokens"][0], toks[t]) and torch.equal(out["tokens"][1], toks[t])
        want = torch.tensor([[gid[t, i] == gid[t, j] and i != j for j in range(16)] for i in range(16)])
        assert torch.equal(out["exclude"][1], want) and not out["exclude"][0].any()
        assert want.any()  # 4 generators, 16 samples: some anchors share a generator
    plain = _TokenBatches([TokenGenerator(spec, 7)], 16, [0], torch.device("cpu"))
    assert set(plain(0)) == {"tokens"} and torch.equal(plain(0)["tokens"][0], toks[1])
    run = TokenRun(spec=spec, beta=2, batch=16, seed=3)
    other = TokenRun(spec=spec, beta=2, batch=16, seed=3, negatives="other-generators")
    ens = train_token_ensemble([run, other], steps=20, every=10)
    lone = train_token_ensemble([run], steps=20, every=10)
    np.testing.assert_allclose(_series(ens, "loss", 0), _series(lone, "loss", 0), rtol=1e-5, atol=1e-6)
    assert np.abs(_series(ens, "loss", 1)[1:] - _series(ens, "loss", 0)[1:]).min() > 1e-4  # another loss
    assert "infonce(other-generators)" in other.label


@pytest.mark.parametrize("T", [0.1, 0.02])  # 0.02: the max-shifted softmax path of the closed form
@pytest.mark.parametrize("with_exclude", [False, True])
def test_extra_positives_closed_form_objectives_and_loops_agree(T, with_exclude):
    """`positives` (Fig. 3's caption read in full: same-generator inputs are positive pairs): the closed form, autograd
    through the objectives and the per-anchor loops give one loss and one gradient, alone and beside a disjoint
    `exclude`; an all-False mask gives the plain loss exactly, and real positives change it."""
    from ssldyn.dynamics.ensemble_trainer import ContrastiveLosses, contrastive_loss_and_grad

    g = torch.Generator().manual_seed(6)
    z = torch.randn(4, 2, 9, 3, dtype=torch.float64, generator=g)
    gid = torch.randint(0, 3, (4, 9), generator=g)  # three "generators": several same-generator pairs per anchor
    same = (gid[:, :, None] == gid[:, None, :]) & ~torch.eye(9, dtype=torch.bool)  # (E, N, N)
    coin = torch.rand(4, 9, 9, generator=g) < 0.5
    Y = same & coin if with_exclude else same  # (E, N, N) the extra positives
    X = same & ~coin if with_exclude else torch.zeros_like(same)  # (E, N, N) left out, disjoint from Y
    assert Y.sum() > 10 and (X.sum() > 10 or not with_exclude)
    kinds = [True, False, False, True]
    names = ["infonce" if k else "quadratic" for k in kinds]
    losses, dz = contrastive_loss_and_grad(z, kinds, T, exclude=X if with_exclude else None, positives=Y)
    zr = z.clone().requires_grad_(True)
    ref = _losses_written_out(zr, kinds, T, X, Y)
    (gref,) = torch.autograd.grad(ref.sum(), zr)
    torch.testing.assert_close(losses, ref.detach(), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(dz, gref, rtol=1e-9, atol=1e-12)
    za = z.clone().requires_grad_(True)
    auto = ContrastiveLosses(names, T, closed_form=False)(za, exclude=X if with_exclude else None, positives=Y)
    (gauto,) = torch.autograd.grad(auto.sum(), za)
    torch.testing.assert_close(auto.detach(), ref.detach(), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(gauto, gref, rtol=1e-9, atol=1e-12)
    plain, dplain = contrastive_loss_and_grad(z, kinds, T)
    nothing, dnothing = contrastive_loss_and_grad(z, kinds, T, positives=torch.zeros_like(Y))
    torch.testing.assert_close(nothing, plain, rtol=1e-13, atol=1e-13)  # (another, log-domain, path: not bitwise)
    torch.testing.assert_close(dnothing, dplain, rtol=1e-11, atol=1e-13)
    assert (losses - plain).abs().min() > 1e-3


def test_members_without_a_mask_get_the_same_gradient_bit_for_bit_beside_members_with_one():
    """float32, a mixed ensemble (InfoNCE and quadratic members, some with positives or left-out pairs, some with all-
    False rows): each member without a mask gets exactly the gradient of a call with no masks at all."""
    from ssldyn.dynamics.ensemble_trainer import contrastive_loss_and_grad

    g = torch.Generator().manual_seed(8)
    z = torch.randn(6, 2, 10, 4, generator=g)  # float32
    gid = torch.randint(0, 3, (10,), generator=g)
    same = (gid[:, None] == gid[None, :]) & ~torch.eye(10, dtype=torch.bool)  # (N, N)
    kinds = [True, True, False, False, True, False]
    Y = torch.zeros(6, 10, 10, dtype=torch.bool)
    X = torch.zeros(6, 10, 10, dtype=torch.bool)
    Y[0], Y[2], X[4] = same, same, same  # members 1, 3, 5: no mask (all-False rows)
    for T in (0.1, 0.02):
        plain, dplain = contrastive_loss_and_grad(z, kinds, T)
        got, dgot = contrastive_loss_and_grad(z, kinds, T, exclude=X, positives=Y)
        for e in (1, 3, 5):  # no mask: the same gradient, bit for bit (the same training)
            assert torch.equal(dgot[e], dplain[e]), (T, e)
        # the logged loss: InfoNCE beside a member with positives is read from the logits (log Σ e^L − L_ii, not
        # −log softmax_ii), so equal to float32 round-off only
        torch.testing.assert_close(got[[1, 3, 5]], plain[[1, 3, 5]], rtol=1e-6, atol=0.0)
        assert (got[[0, 2, 4]] - plain[[0, 2, 4]]).abs().min() > 1e-4


def test_positives_are_refused_with_one_clear_error():
    from ssldyn.dynamics.ensemble_trainer import ContrastiveLosses, contrastive_loss_and_grad
    from ssldyn.objectives import info_nce, quadratic_contrastive_loss

    z1, z2 = torch.randn(5, 3), torch.randn(5, 3)
    with pytest.raises(ValueError, match=r"^info_nce: positives is True on its diagonal \(it must be False there: "):
        info_nce(z1, z2, 0.1, negatives="view1", positives=torch.eye(5, dtype=torch.bool))
    with pytest.raises(ValueError, match="^info_nce: positives needs negatives='view1'"):
        info_nce(z1, z2, 0.1, positives=torch.zeros(5, 5, dtype=torch.bool))
    with pytest.raises(ValueError, match="^quadratic_contrastive_loss: positives must be a bool tensor"):
        quadratic_contrastive_loss(z1, z2, 0.1, positives=torch.zeros(5, 5))
    both = torch.zeros(5, 5, dtype=torch.bool)
    both[0, 1] = True  # a pair both positive and left out
    with pytest.raises(ValueError, match=r"^quadratic_contrastive_loss: positives and exclude must be disjoint .*; "
                       r"both are True at \(0, 1\)$"):  # fmt: skip
        quadratic_contrastive_loss(z1, z2, 0.1, exclude=both, positives=both)
    with pytest.raises(ValueError, match=r"^ContrastiveLosses: positives and exclude must be disjoint .* \(0, 0, 1\)$"):
        ContrastiveLosses(["infonce"], 0.1)(torch.randn(1, 2, 5, 3), exclude=both[None], positives=both[None])
    with pytest.raises(ValueError, match=r"^contrastive_loss_and_grad: positives must be a bool tensor \(E, N, N\)"):
        contrastive_loss_and_grad(torch.randn(1, 2, 5, 3), [True], 0.1, positives=both)
    with pytest.raises(ValueError, match=r"^ContrastiveLosses: positives must be on z's device \(cpu\), got meta$"):
        ContrastiveLosses(["infonce"], 0.1)(torch.randn(1, 2, 5, 3), positives=both[None].to("meta"))


def test_generator_positives_mask_same_generator_pairs_per_member():
    """A three-member ensemble, one member per reading of Fig. 3's caption: the batch member gets no mask, the
    other-generators member the same-generator pairs as `exclude`, the generator-positives member the same pairs as
    `positives` (and nothing left out); all three see the same tokens, and the third trains to another loss."""
    from ssldyn.data.tokens import TokenGenerator, TokenStream
    from ssldyn.dynamics.ensemble_trainer import _TokenBatches

    spec = TokenSpec(P=3, G=4)
    toks, gid = TokenGenerator(spec, 7).sample(TokenStream.CHUNK, 16, return_generators=True)
    readings = ["batch", "other-generators", "generator-positives"]
    b = _TokenBatches([TokenGenerator(spec, 7)], 16, [0, 0, 0], torch.device("cpu"), readings)
    for t in range(3):
        out = b(t)
        assert set(out) == {"tokens", "exclude", "positives"}
        assert all(torch.equal(out["tokens"][e], toks[t]) for e in range(3))
        want = torch.tensor([[gid[t, i] == gid[t, j] and i != j for j in range(16)] for i in range(16)])
        assert want.any()
        assert torch.equal(out["exclude"][1], want) and not out["exclude"][0].any() and not out["exclude"][2].any()
        assert torch.equal(out["positives"][2], want) and not out["positives"][:2].any()
    runs = [TokenRun(spec=spec, beta=2, batch=16, seed=3, negatives=n) for n in readings]
    ens = train_token_ensemble(runs, steps=20, every=10)
    lone = train_token_ensemble([runs[2]], steps=20, every=10)
    np.testing.assert_allclose(_series(ens, "loss", 2), _series(lone, "loss", 0), rtol=1e-5, atol=1e-6)
    assert np.abs(_series(ens, "loss", 2)[1:] - _series(ens, "loss", 1)[1:]).min() > 1e-4  # another loss
    assert "infonce(generator-positives)" in runs[2].label


@pytest.mark.parametrize("T", [0.1, 0.02, 0.005])
def test_a_far_positive_gives_a_finite_loss_in_float32(T):
    """A same-generator positive pointing away from its anchor (cos −1) has softmax probability e^{−2/T}/Σ, which
    underflows float32 at small T: the closed form reads the loss from the logits, so it stays finite and equals
    the float64 objective."""
    from ssldyn.dynamics.ensemble_trainer import contrastive_loss_and_grad
    from ssldyn.objectives import info_nce

    g = torch.Generator().manual_seed(9)
    z = torch.randn(1, 2, 6, 3, generator=g)
    z[0, 0, 1] = -z[0, 0, 0]  # sample 1 is anchor 0's positive, pointing away
    Y = torch.zeros(1, 6, 6, dtype=torch.bool)
    Y[0, 0, 1] = Y[0, 1, 0] = True
    loss, dz = contrastive_loss_and_grad(z, [True], T, positives=Y)
    want = info_nce(z[:, 0].double(), z[:, 1].double(), T, negatives="view1", positives=Y)
    assert torch.isfinite(loss).all() and torch.isfinite(dz).all()
    torch.testing.assert_close(loss.double(), want, rtol=1e-5, atol=0.0)
