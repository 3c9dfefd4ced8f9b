"""The engine (ssldyn.dynamics.engine.run): schedule, final evaluation, guard policies, callbacks, early stop,
resume; and the structural rule that no loop outside the engine steps an optimizer or calls the guard."""

import ast
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from ssldyn.dynamics import LossGuard, NonFiniteLossError, run
from ssldyn.dynamics.callbacks import History
from ssldyn.dynamics.engine import preserved_buffers
from ssldyn.dynamics.trajectory import Trajectory
from ssldyn.models import build_simclr_net

D = torch.float64


def _quadratic(seed=0):
    g = torch.Generator().manual_seed(seed)
    M = torch.randn(4, 4, generator=g, dtype=D)
    A = M @ M.T / 4 + 0.1 * torch.eye(4, dtype=D)  # SPD
    return A, torch.randn(4, generator=g, dtype=D)


def test_a_pure_flow_is_gradient_descent_written_out():
    """x_{k+1} = (I − ηA) x_k; the record at k is the energy ½ x_kᵀA x_k of the state after k updates."""
    A, x0 = _quadratic()
    eta, steps = 0.3, 7
    hist = History()

    def step(x, t):
        return x - eta * (A @ x), 0.5 * x @ A @ x, {"norm": x.norm()}

    res = run(x0, step, steps=steps, every=3, probes={"x0": lambda x: x[0]}, callbacks=[hist])
    P = torch.eye(4, dtype=D) - eta * A
    xs = [torch.linalg.matrix_power(P, k) @ x0 for k in range(steps + 1)]
    frame = res.trajectory.to_frame()
    assert frame.step.tolist() == [0, 0, 0, 3, 3, 3, 6, 6, 6, 7, 7, 7]  # 0, 3, 6 and the last
    assert frame.probe.tolist()[:3] == ["loss", "norm", "x0"]  # loss, extras, probes
    for k in (0, 3, 6, 7):
        row = frame[frame.step == k].set_index("probe").value
        assert row["loss"] == pytest.approx(float(0.5 * xs[k] @ A @ xs[k]), rel=1e-13)
        assert row["norm"] == pytest.approx(float(xs[k].norm()), rel=1e-13)
        assert row["x0"] == pytest.approx(float(xs[k][0]), rel=1e-13)
    torch.testing.assert_close(res.state, xs[steps], rtol=1e-13, atol=0)  # the final evaluation does not update
    assert [s for s, _ in hist.steps] == list(range(steps)) and [s for s, _ in hist.logs] == [0, 3, 6, 7]
    assert hist.ended


def test_an_optimizer_flow_evaluates_the_final_state_without_training_on_it():
    """BatchNorm statistics after the run are those of `steps` training forwards, not steps + 1."""
    torch.manual_seed(0)
    x = torch.randn(16, 3, dtype=D)
    net = nn.Sequential(nn.Linear(3, 5), nn.BatchNorm1d(5), nn.Linear(5, 2)).to(D)
    ref = nn.Sequential(nn.Linear(3, 5), nn.BatchNorm1d(5), nn.Linear(5, 2)).to(D)
    ref.load_state_dict(net.state_dict())
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    res = run(net, lambda m, t: (m, m(x).pow(2).mean()), steps=3, every=1, optimizer=opt, modules=net)
    ropt = torch.optim.SGD(ref.parameters(), lr=0.1)
    losses = []
    for _ in range(3):
        loss = ref(x).pow(2).mean()
        losses.append(float(loss.detach()))
        ropt.zero_grad()
        loss.backward()
        ropt.step()
    trained_mean = ref[1].running_mean.clone()
    with torch.no_grad():
        losses.append(float(ref(x).pow(2).mean()))  # the final loss (train mode: moves ref's statistics)
    np.testing.assert_allclose(res.trajectory.series("loss")[1], losses, rtol=1e-13)
    assert int(res.state[1].num_batches_tracked) == 3  # three training forwards, the final one preserved
    torch.testing.assert_close(res.state[1].running_mean, trained_mean, rtol=1e-13, atol=0)
    assert not torch.equal(ref[1].running_mean, trained_mean)  # the final forward would have moved them


def test_preserved_buffers_keep_tensors_saved_for_backward_valid():
    bn = nn.BatchNorm1d(3).double()
    x = torch.randn(8, 3, dtype=D, requires_grad=True)
    y = bn(x).pow(2).sum()  # saves the running statistics for the backward pass
    before = bn.running_mean.clone()
    with torch.no_grad(), preserved_buffers(bn):
        bn(torch.randn(8, 3, dtype=D))
    y.backward()  # an in-place restore would raise "modified by an inplace operation"
    assert torch.equal(bn.running_mean, before)


@pytest.mark.parametrize("scaled", [False, True], ids=["plain", "grad-scaler"])
def test_freeze_policy_stops_a_diverging_member_and_the_others_train_as_alone(scaled):
    """Member 1's loss overflows at step 2; member 0 follows exactly the run of member 0 alone, member 1 keeps its
    weights (momentum cannot move it). With a gradient scaler (float16 AMP's path) the frozen member's NaN gradient
    must not make the scaler skip every member's step: it did, and member 0 stopped training at step 2."""
    A, x0 = _quadratic()
    scaler = (lambda: torch.amp.GradScaler("cpu")) if scaled else (lambda: None)  # a power-of-2 scale: exact

    def make(E):
        w = nn.Parameter(torch.stack([x0] * E))  # (E, 4)
        return w, torch.optim.SGD([w], lr=0.1, momentum=0.9)

    def loss_of(w, t):
        L = 0.5 * torch.einsum("ei,ij,ej->e", w, A, w)  # (E,)
        if w.shape[0] > 1 and t >= 2:
            L = L * torch.tensor([1.0, math.inf], dtype=D)
        return L

    w2, opt2 = make(2)
    guard = LossGuard(policy="freeze")
    res = run(w2, lambda w, t: (w, loss_of(w, t)), steps=6, every=1, optimizer=opt2, guard=guard, scaler=scaler(),
              snapshots={"w": lambda w: w.detach().clone()}, snapshot_every=range(7))  # fmt: skip
    w1, opt1 = make(1)
    alone = run(w1, lambda w, t: (w, loss_of(w, t)), steps=6, every=1, optimizer=opt1, scaler=scaler())
    torch.testing.assert_close(res.state[0], alone.state[0], rtol=0, atol=0)
    assert not torch.equal(alone.state[0], x0)  # member 0 trained
    ws = res.trajectory.snapshots("w")
    for t in range(3, 7):  # member 1 keeps its weights of step 2, where it diverged: no update from then on
        torch.testing.assert_close(ws[t][1], ws[2][1], rtol=0, atol=0)
    assert guard.alive.tolist() == [True, False]
    assert guard.diverged_at[0].isnan() and float(guard.diverged_at[1]) == 2.0
    w_at_2 = res.trajectory.series("loss", member=1)[1]
    assert np.isinf(w_at_2[2:]).all() and np.isfinite(w_at_2[:2]).all()


@pytest.mark.parametrize("scaled", [False, True], ids=["plain", "grad-scaler"])
def test_freeze_policy_keeps_the_flat_member_major_batchnorm_parameters_of_an_ensemble_encoder(scaled):
    """The ensemble encoders keep BatchNorm's affine parameters as one flat member-major vector (E·F,); the freeze
    only masked parameters with a leading axis of exactly E. So the frozen member's BN weights became NaN, and with a
    gradient scaler its NaN gradient made the scaler skip every member's step: member 0 stopped training at step 2.
    Reference: member 0 alone (the same seed, a one-member net) — identical losses and parameters."""
    x = torch.randn(16, 1, 4, 4, generator=torch.Generator().manual_seed(0), dtype=D)

    def make(seeds):
        net = build_simclr_net("mlp", (1, 4, 4), ensemble=len(seeds), hidden=(8,), feature_dim=4, proj_hidden=4,
                               proj_dim=3, seeds=seeds, dtype=D)  # fmt: skip
        return net, torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)

    def step(net, t):
        L = net(x).pow(2).mean((-2, -1))  # (E,)
        if L.shape[0] > 1 and t >= 2:
            L = L * torch.tensor([1.0, math.inf], dtype=D)  # member 1 diverges at step 2
        return net, L

    scaler = (lambda: torch.amp.GradScaler("cpu")) if scaled else (lambda: None)
    net2, opt2 = make([0, 1])
    assert any(p.shape[0] == 2 * 8 for p in net2.parameters())  # BatchNorm1d(E·8) affine vectors: (E·F,)
    names = [n for n, _ in net2.named_parameters()]
    snaps = {n: (lambda m, n=n: m.get_parameter(n)) for n in names}  # every parameter at every step
    guard = LossGuard(policy="freeze")
    res = run(net2, step, steps=6, every=1, optimizer=opt2, guard=guard, scaler=scaler(), snapshots=snaps,
              snapshot_every=range(7))  # fmt: skip
    net1, opt1 = make([0])
    alone = run(net1, step, steps=6, every=1, optimizer=opt1, scaler=scaler())
    losses0 = res.trajectory.series("loss", member=0)[1]
    np.testing.assert_array_equal(losses0, alone.trajectory.series("loss", member=0)[1])
    assert len(set(losses0[2:].tolist())) == 5  # member 0 keeps training after step 2 (it stopped under a scaler)
    for p2, p1 in zip(net2.parameters(), net1.parameters()):  # member 0's slices (BN included) are member 0 alone's
        torch.testing.assert_close(p2[: p2.shape[0] // 2], p1, rtol=0, atol=0)
    for n in names:  # every slice of member 1 (BN included) keeps its value of step 2: finite, unchanged
        ps = res.trajectory.snapshots(n)
        half = ps[2].shape[0] // 2
        for t in range(3, 7):
            torch.testing.assert_close(ps[t][half:], ps[2][half:], rtol=0, atol=0, msg=f"{n} at step {t}")
    assert all(bool(torch.isfinite(p).all()) for p in net2.parameters())
    assert guard.alive.tolist() == [True, False] and float(guard.diverged_at[1]) == 2.0


@pytest.mark.parametrize("scaled", [False, True], ids=["plain", "grad-scaler"])
def test_freeze_policy_freezes_a_one_member_model_with_a_scalar_loss(scaled):
    """E = 1 (a scalar loss): no parameter has a leading axis of length 1, so the frozen model was still updated by
    its NaN gradient and its weights became NaN. Every parameter (a 0-d one and BatchNorm's included) must keep its
    value from the step of the divergence on; before it, the run is the run without a guard (a plain loop)."""
    torch.manual_seed(0)
    x = torch.randn(8, 3, dtype=D)

    def make():
        net = nn.Sequential(nn.Linear(3, 5), nn.BatchNorm1d(5), nn.Linear(5, 2)).to(D)
        scale = nn.Parameter(torch.tensor(1.0, dtype=D))  # a 0-d parameter
        return net, scale, torch.optim.SGD([*net.parameters(), scale], lr=0.1, momentum=0.9)

    net, scale, opt = make()
    ref, ref_scale, ref_opt = make()
    ref.load_state_dict(net.state_dict())

    def loss_of(m, s, t):
        L = s * m(x).pow(2).mean()
        return L * torch.exp(torch.tensor(800.0, dtype=D)) if t >= 2 else L  # overflows to inf at step 2

    snaps = {n: (lambda m, n=n: m.get_parameter(n)) for n, _ in net.named_parameters()}
    snaps["scale"] = lambda m: scale
    guard = LossGuard(policy="freeze")
    scaler = torch.amp.GradScaler("cpu") if scaled else None
    res = run(net, lambda m, t: (m, loss_of(m, scale, t)), steps=5, every=1, optimizer=opt, guard=guard,
              scaler=scaler, snapshots=snaps, snapshot_every=range(6))  # fmt: skip
    for _ in range(2):  # the reference: two plain updates, then nothing
        ref_opt.zero_grad()
        loss_of(ref, ref_scale, 0).backward()
        ref_opt.step()
    assert not np.array_equal(res.trajectory.snapshots("0.weight")[2], res.trajectory.snapshots("0.weight")[0])
    for n in snaps:  # it trained before the divergence, and no parameter moved from step 2 on
        ps = res.trajectory.snapshots(n)
        for t in range(3, 6):
            torch.testing.assert_close(ps[t], ps[2], rtol=0, atol=0, msg=f"{n} at step {t}")
    for p, r in zip([*net.parameters(), scale], [*ref.parameters(), ref_scale]):
        torch.testing.assert_close(p, r, rtol=1e-14, atol=0)
    assert guard.alive.tolist() == [False] and float(guard.diverged_at[0]) == 2.0


def test_raise_policy_names_the_step_member_and_last_finite_value():
    def step(x, t):
        return x, torch.tensor([1.0, 2.0 if t < 3 else math.nan], dtype=D)

    with pytest.raises(NonFiniteLossError, match="loss of member 1 became nan at step 3 .*last finite value: 2"):
        run(torch.zeros(1), step, steps=5)
    with pytest.raises(NonFiniteLossError) as e:  # deferred (no host sync per step): the same step
        run(torch.zeros(1), step, steps=5, every=None, guard=LossGuard(lazy=True, check_every=None))
    assert e.value.step == 3 and e.value.member == 1


def test_stop_ends_early_and_logs_the_stopping_step():
    hist = History()
    res = run(0, lambda s, t: (s + 1, torch.tensor(float(t))), steps=10, every=4, final=False,
              stop=lambda s, t: s == 6, snapshots={"s": lambda s: torch.tensor(s)},
              snapshot_every=range(11), callbacks=[hist])  # fmt: skip
    assert res.state == 6 and res.trajectory.series("loss")[0].tolist() == [0, 4, 5]
    assert sorted(res.trajectory.snapshots("s")) == list(range(7))  # states 0 .. 6


def test_without_a_final_evaluation_the_last_record_is_the_final_state_with_the_last_loss():
    res = run(0, lambda s, t: (s + 1, torch.tensor(10.0 * t)), steps=5, every=2, final=False,
              probes={"s": lambda s: s})  # fmt: skip
    f = res.trajectory.to_frame().pivot(index="step", columns="probe", values="value")
    assert f.index.tolist() == [0, 2, 4, 5]
    assert f.loss.tolist() == [0.0, 20.0, 40.0, 40.0] and f.s.tolist() == [0, 2, 4, 5]


def test_start_resumes_the_schedule_into_the_given_trajectory():
    step = lambda x, t: (x + 1, torch.tensor(float(x)))  # noqa: E731
    full = run(0, step, steps=6, every=2)
    first = run(0, step, steps=6, every=2, stop=lambda x, t: t == 2)
    traj = Trajectory()
    traj.load_state_dict(first.trajectory.state_dict())
    rest = run(first.state, step, steps=6, every=2, start=3, trajectory=traj)
    assert rest.trajectory.to_frame().equals(full.trajectory.to_frame())


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda s: run(s, lambda x, t: x.sum(), steps=2), r"step 0: the step function must return \(state, loss\) or "
         r"\(state, loss, extras\), got Tensor"),
        (lambda s: run(s, lambda x, t: (x, x.sum(), 1.0), steps=2), r"step 0: extras must be a mapping"),
        (lambda s: run(s, lambda x, t: (x, [1.0]), steps=2), r"step 0: the loss must be a number or a tensor"),
        (lambda s: run(s, lambda x, t: (x, x.sum()), steps=-1), r"steps must be an int >= 0, got -1"),
        (lambda s: run(s, lambda x, t: (x, x.sum()), steps=2, start=3), r"start=3: the first step must be in 0\.\.steps=2"),
        (lambda s: run(s, lambda x, t: (x, x.sum()), steps=2, probes={"a": 3}), r"probes: 'a' must be a callable"),
        (lambda s: run(s, lambda x, t: (x, x.sum()), steps=2, snapshots={"z": None}), r"snapshots: 'z' must be"),
    ],
)  # fmt: skip
def test_a_step_function_or_setting_outside_the_contract_is_one_error_before_any_update(call, message):
    """Each was a TypeError / IndexError / AttributeError from inside the loop, or (steps = -1, a snapshot that is not
    a callable, a list as the loss) no error at all: an empty or mis-logged run."""
    with pytest.raises(ValueError, match=message):
        call(torch.ones(2, dtype=D))


def test_trajectory_keeps_device_tensors_until_read_and_copies_them():
    traj = Trajectory()
    v = torch.tensor([1.0, 2.0])
    traj.log_members(0, "a", v)
    v.add_(10)  # a later in-place change must not reach the record
    traj.log(1, a=torch.tensor(5.0))
    assert traj.to_frame().value.tolist() == [1.0, 2.0, 5.0]
    assert traj.columns().columns.tolist() == ["step", "member", "a"]


# ---------------------------------------------------------------------------- the structural rule
SRC = Path(__file__).resolve().parents[2] / "src" / "ssldyn"
ENGINE = {"dynamics/engine.py"}
# Loops outside the contract (issue 29 item 1): none since every experiment's loop is a step function on
# the engine. A file that must loop on its own would be listed here, with the reason.
KNOWN_EXCEPTIONS: set[str] = set()


def _loop_calls(path: Path) -> list[str]:
    """Calls that belong to the engine alone: ``<opt>.step()``, ``<x>.backward()``, ``guard.update/check``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        owner = ast.unparse(node.func.value)
        attr = node.func.attr
        if attr == "step" and not node.args and "opt" in owner.lower():
            found.append(f"{owner}.step()")
        elif attr == "backward":
            found.append(f"{owner}.backward()")
        elif attr in ("update", "check") and owner.split(".")[-1] == "guard":
            found.append(f"{owner}.{attr}()")
    return found


def test_no_loop_outside_the_engine_steps_an_optimizer_or_calls_the_guard():
    offenders = {}
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        calls = _loop_calls(path)
        if calls and rel not in ENGINE:
            offenders[rel] = calls
    dynamics = {k: v for k, v in offenders.items() if k.startswith("dynamics/")}
    assert not dynamics, f"a loop in dynamics outside the engine: {dynamics}"
    assert set(offenders) <= KNOWN_EXCEPTIONS, f"new loops outside the engine: {set(offenders) - KNOWN_EXCEPTIONS}"
    stale = {k for k in KNOWN_EXCEPTIONS if (SRC / k).exists() and k not in offenders}
    assert not stale, f"these files no longer loop: remove them from KNOWN_EXCEPTIONS: {stale}"


def test_the_wide_table_of_an_empty_trajectory_is_empty():
    """Trajectory.columns() raised NameError on an empty trajectory (pandas was imported for type checking only),
    e.g. a run with every=() and loss_name=None."""
    assert list(Trajectory().columns().columns) == ["step", "member"]
    res = run(0, lambda s, t: (s + 1, torch.tensor(1.0)), steps=2, every=(), loss_name=None)
    assert res.trajectory.columns().empty


def test_freeze_policy_in_a_pure_flow_keeps_the_frozen_members_rows_of_the_state():
    """Without an optimizer the engine took the step's state as is: a member frozen by LossGuard(policy="freeze") kept
    being updated and ended NaN, with no error. Reference: the formula x_t = x_0 + t (member 1 stops at its step 2)."""
    x0 = torch.tensor([[0.0, 1.0], [10.0, 11.0], [5.0, 5.0]], dtype=D)  # (E, 2)

    def step(x, t):  # x + 1 per member; member 1's loss is NaN from step 2 on and so is its next state
        bad = torch.tensor([False, t >= 2, False])[:, None]  # (E, 1)
        nxt = torch.where(bad, torch.full_like(x, math.nan), x + 1)  # (E, 2)
        return nxt, torch.where(bad[:, 0], torch.full((3,), math.nan, dtype=D), x.sum(-1))  # (E,)

    guard = LossGuard(policy="freeze")
    res = run(x0, step, steps=5, every=1, guard=guard, snapshots={"x": lambda x: x}, snapshot_every=range(6))
    expected = x0 + torch.tensor([5.0, 2.0, 5.0], dtype=D)[:, None]  # member 1 keeps its state of step 2
    torch.testing.assert_close(res.state, expected, rtol=0, atol=0)
    for t, xt in res.trajectory.snapshots("x").items():
        np.testing.assert_array_equal(xt[1], (x0[1] + min(t, 2)).numpy())  # snapshots are read as arrays
    assert guard.alive.tolist() == [True, False, True] and float(guard.diverged_at[1]) == 2.0
    # E = 1 (a scalar loss): the whole state is the member's
    one = run(torch.zeros(2, dtype=D), lambda x, t: (x + 1, torch.tensor(math.nan if t >= 3 else 1.0)), steps=6,
              guard=LossGuard(policy="freeze"))  # fmt: skip
    torch.testing.assert_close(one.state, torch.full((2,), 3.0, dtype=D), rtol=0, atol=0)


def test_freeze_policy_in_a_pure_flow_needs_an_ensemble_first_tensor_state():
    """A state the engine cannot mask per member (not a tensor, or a leading axis other than E) is one error at the
    first step, before any update: it used to go on updating the frozen members."""
    match = r"^run: guard policy='freeze' needs an optimizer or an ensemble-first tensor state \(E, \.\.\.\) with E=2"
    steps_seen = []

    def step(s, t):
        steps_seen.append(t)
        return s, torch.ones(2)

    with pytest.raises(ValueError, match=match + r" members \(the loss's length\), got a state of type int"):
        run(0, step, steps=3, guard=LossGuard(policy="freeze"))
    with pytest.raises(ValueError, match=match + r" members \(the loss's length\), got a tensor of shape \(3, 4\)"):
        run(torch.zeros(3, 4), step, steps=3, guard=LossGuard(policy="freeze"))
    assert steps_seen == [0, 0]  # no update ran
    res = run(0, step, steps=3, every=None, guard=LossGuard())  # policy "raise": any state
    assert res.state == 0 and steps_seen[2:] == [0, 1, 2, 3]


def test_a_run_without_updates_logs_no_made_up_loss():
    """final=False with steps=0 (no update ran) recorded a scalar NaN "loss" (as member 0, whatever E) next to the
    per-member probes. No loss was measured: the record holds the probes only."""
    hist = History()
    step = lambda x, t: (x + 1, torch.tensor([1.0, 2.0]) * x)  # noqa: E731
    res = run(torch.tensor(3.0), step, steps=0, final=False, probes={"s": lambda x: x}, callbacks=[hist])
    f = res.trajectory.to_frame()
    assert f.probe.tolist() == ["s"] and f.step.tolist() == [0] and f.value.tolist() == [3.0]
    assert [(t, list(row)) for t, row in hist.logs] == [(0, ["s"])]  # callbacks see no loss either
    with_updates = run(torch.tensor(3.0), step, steps=1, final=False, probes={"s": lambda x: x})
    g = with_updates.trajectory.to_frame()
    assert g[g.probe == "loss"].value.tolist() == [3.0, 6.0, 3.0, 6.0]  # steps 0 and 1: the loss of step 0


def test_explicit_logged_steps_outside_the_run_are_an_error_not_dropped():
    """``every=[0, 7]`` with ``steps=5``: step 7 is never reached; it used to be dropped silently (a missing row the
    caller had to notice). In range, the logged losses are those of the steps asked for (loss at t = t²)."""
    step = lambda s, t: (s + 1, torch.tensor(float(t * t)))  # noqa: E731
    res = run(0, step, steps=5, every=[0, 2, 5])
    assert res.trajectory.series("loss")[0].tolist() == [0, 2, 5]
    assert res.trajectory.series("loss")[1].tolist() == [0.0, 4.0, 25.0]
    with pytest.raises(ValueError, match=r"^run: every: the steps 7 are not integers in 0\.\.steps=5"):
        run(0, step, steps=5, every=[0, 7])
    with pytest.raises(ValueError, match=r"^run: snapshot_every: the steps -1 are not integers in 0\.\.steps=5"):
        run(0, step, steps=5, snapshots={"s": lambda s: s}, snapshot_every=[-1])


# ---------------------------------------------------------------------------- from the mutation audit of the engine
def test_only_the_final_evaluation_runs_without_gradients():
    """The final evaluation (t = steps) runs under torch.no_grad(); every trained step runs with gradients on."""
    seen = []

    def step(x, t):
        seen.append((t, torch.is_grad_enabled()))
        return x + 1, x.sum()

    run(torch.zeros(2), step, steps=3, every=1)
    assert seen == [(0, True), (1, True), (2, True), (3, False)]
    seen.clear()
    run(torch.zeros(2), step, steps=3, every=1, final=False)  # no final evaluation: three trained steps
    assert seen == [(0, True), (1, True), (2, True)]


def test_a_resumed_run_checks_its_first_step_and_its_state_before_any_update():
    """The contract checks (the step's answer, a freezable state) are made at the first step of the run, which is
    ``start`` for a resumed run, not only at t = 0."""
    with pytest.raises(ValueError, match=r"^step 2: the step function must return \(state, loss\) or"):
        run(torch.zeros(2), lambda x, t: x.sum(), steps=4, start=2)
    with pytest.raises(ValueError, match=r"^run: guard policy='freeze' needs an optimizer .* got a state of type int"):
        run(0, lambda s, t: (s + 1, torch.ones(2)), steps=3, start=1, guard=LossGuard(policy="freeze"))


def test_a_deferred_guard_fails_before_recording_a_non_finite_step_and_at_the_end():
    """A deferred guard (as on an accelerator) is checked before a logged step is recorded, so the non-finite step
    never reaches the trajectory or the callbacks; with no logged step at all the check at the end still fails."""
    hist = History()

    def step(x, t):
        return x + 1, torch.tensor(math.nan if t == 3 else float(t), dtype=D)

    with pytest.raises(NonFiniteLossError) as e:
        run(torch.zeros(1), step, steps=6, every=1, guard=LossGuard(lazy=True, check_every=None), callbacks=[hist])
    assert e.value.step == 3 and e.value.last_finite == 2.0
    assert [s for s, _ in hist.logs] == [0, 1, 2]
    with pytest.raises(NonFiniteLossError) as e:  # nothing logged (every=()), final=False: only the end checks
        run(torch.zeros(1), step, steps=5, every=(), final=False, guard=LossGuard(lazy=True, check_every=None))
    assert e.value.step == 3


def test_freeze_policy_masks_a_frozen_members_loss_out_of_the_shared_parameters(sgd_step_by_hand):
    """A member frozen at the limit (a finite loss) must not move the parameters shared by the members (a 0-d one,
    not masked by the engine): they train on the alive members' losses alone. Reference: member 0 alone, SGD by hand."""
    A, x0 = _quadratic()
    lr, steps = 0.1, 4

    def loss_of(w, b):  # (E,): ½ (w_e + b)ᵀ A (w_e + b)
        v = w + b
        return 0.5 * torch.einsum("ei,ij,ej->e", v, A, v)

    w = nn.Parameter(torch.stack([x0, 3 * x0]))  # member 1 starts with 9 times member 0's loss
    b = nn.Parameter(torch.tensor(0.5, dtype=D))  # shared by the members
    limit = float(loss_of(w, b)[1].detach())  # member 1 is frozen at step 0 (|loss| >= limit), member 0 never
    guard = LossGuard(policy="freeze", limit=limit)
    run(w, lambda p, t: (p, loss_of(p, b)), steps=steps, every=None, optimizer=torch.optim.SGD([w, b], lr=lr),
        guard=guard)  # fmt: skip
    ref = nn.ParameterList([nn.Parameter(x0[None].clone()), nn.Parameter(torch.tensor(0.5, dtype=D))])
    for _ in range(steps):
        sgd_step_by_hand(ref, loss_of(ref[0], ref[1]).sum(), lr)
    assert guard.alive.tolist() == [True, False] and float(guard.diverged_at[1]) == 0.0
    torch.testing.assert_close(b.detach(), ref[1].detach(), rtol=1e-13, atol=0)
    torch.testing.assert_close(w[0].detach(), ref[0][0].detach(), rtol=1e-13, atol=0)
    torch.testing.assert_close(w[1].detach(), 3 * x0, rtol=0, atol=0)  # the frozen member did not move


def test_a_member_frozen_at_a_non_finite_loss_does_not_poison_the_shared_parameters(sgd_step_by_hand):
    """Member 1's loss becomes inf at step 1: in its backward pass 0·inf = NaN reaches the shared 0-d b. Before, b
    became NaN and member 0 was frozen at the next step; now b's NaN gradient is dropped (b keeps its value after
    step 0: the entry member 1's NaN covers gets no update while it is frozen) and member 0 trains on, written out
    with SGD by hand from the state after step 0."""
    lr, steps = 0.1, 4
    w = nn.Parameter(torch.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=D))  # (E=2, 2): one row per member
    b = nn.Parameter(torch.tensor(0.5, dtype=D))  # shared by both members (0-d)

    def step(p, t):
        L = ((p + b) ** 2).sum(-1)  # (E,)
        return p, L * torch.tensor([1.0, math.inf if t >= 1 else 1.0], dtype=D)  # member 1 overflows at step 1

    guard = LossGuard(policy="freeze")
    run(w, step, steps=steps, every=None, optimizer=torch.optim.SGD([w, b], lr=lr), guard=guard)
    assert guard.alive.tolist() == [True, False] and float(guard.diverged_at[1]) == 1.0
    assert math.isnan(float(guard.diverged_at[0]))
    # reference: step 0 on both members, then member 0 alone
    ref = nn.ParameterList([nn.Parameter(torch.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=D)),
                            nn.Parameter(torch.tensor(0.5, dtype=D))])  # fmt: skip
    sgd_step_by_hand(ref, ((ref[0] + ref[1]) ** 2).sum(), lr)
    w1_after_step0 = ref[0][1].detach().clone()
    w0 = nn.ParameterList([nn.Parameter(ref[0][0].detach().clone())])
    for _ in range(steps - 1):
        sgd_step_by_hand(w0, ((w0[0] + ref[1].detach()) ** 2).sum(), lr)
    torch.testing.assert_close(b.detach(), ref[1].detach(), rtol=1e-13, atol=0)  # −1.9, finite
    torch.testing.assert_close(w[0].detach(), w0[0].detach(), rtol=1e-13, atol=0)
    torch.testing.assert_close(w[1].detach(), w1_after_step0, rtol=0, atol=0)  # frozen after its last finite step


def test_an_optimizer_flow_applies_after_update_and_the_scheduler_after_every_update():
    """Projected GD on the unit sphere with a halving learning rate, written out: w ← normalise(w − lr_k A w),
    lr_k = 0.2 / 2^k; the record at k is ½ wᵀAw of the state after k updates."""
    A, x0 = _quadratic()
    w = nn.Parameter(x0 / x0.norm())
    opt = torch.optim.SGD([w], lr=0.2)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)

    def renormalise():
        with torch.no_grad():
            w.div_(w.norm())

    res = run(w, lambda p, t: (p, 0.5 * p @ A @ p), steps=3, every=1, optimizer=opt, scheduler=sched,
              after_update=renormalise)  # fmt: skip
    v, lr, losses = x0 / x0.norm(), 0.2, []
    for _ in range(3):
        losses.append(float(0.5 * v @ A @ v))
        v = v - lr * (A @ v)
        v, lr = v / v.norm(), lr / 2
    losses.append(float(0.5 * v @ A @ v))
    torch.testing.assert_close(res.state.detach(), v, rtol=1e-13, atol=0)
    np.testing.assert_allclose(res.trajectory.series("loss")[1], losses, rtol=1e-13)


def test_callbacks_get_the_detached_loss_of_each_update_and_a_scalar_row_value():
    """w ← w − 0.25·2w = w/2 from w = (1, 2): the losses ‖w‖² of steps 0, 1 are 5 and 1.25 (by hand), handed to
    on_step detached; the row of a scalar loss holds a scalar (0-d), not a one-member vector."""
    hist = History()
    w = nn.Parameter(torch.tensor([1.0, 2.0], dtype=D))
    run(w, lambda p, t: (p, (p**2).sum()), steps=2, every=1, optimizer=torch.optim.SGD([w], lr=0.25),
        callbacks=[hist])  # fmt: skip
    assert [(s, float(loss)) for s, loss in hist.steps] == [(0, 5.0), (1, 1.25)]
    assert not any(loss.requires_grad for _, loss in hist.steps)
    assert [(s, tuple(row["loss"].shape), float(row["loss"])) for s, row in hist.logs] == [
        (0, (), 5.0), (1, (), 1.25), (2, (), 0.3125)
    ]  # fmt: skip


def test_callable_extras_are_evaluated_at_the_logged_steps_only():
    """Extras given as a callable are computed only where they are logged: steps=7, every=3 logs 0, 3, 6, 7."""
    calls = []

    def step(x, t):
        return x + 1, torch.tensor(float(t)), lambda: calls.append(t) or {"x": float(x)}

    res = run(0, step, steps=7, every=3)
    assert calls == [0, 3, 6, 7]
    assert res.trajectory.series("x")[1].tolist() == [0.0, 3.0, 6.0, 7.0]  # the state before each step's update


def test_probes_run_without_gradients_so_they_can_read_outputs_as_arrays():
    """A probe reading a model's output with .numpy() works (no graph is built for a probe). Reference: the output
    norm of the same linear map, by hand."""
    torch.manual_seed(0)
    x = torch.randn(5, 3, dtype=D)
    net = nn.Linear(3, 2, bias=False).to(D)
    W0 = net.weight.detach().clone()
    res = run(net, lambda m, t: (m, m(x).pow(2).mean()), steps=1, every=[0], optimizer=torch.optim.SGD(
        net.parameters(), lr=0.1), probes={"out": lambda m: float(np.linalg.norm(m(x).numpy()))})  # fmt: skip
    assert res.trajectory.series("out")[1].tolist() == pytest.approx([float((x @ W0.T).norm())], rel=1e-13)


def test_without_a_final_evaluation_the_final_snapshot_is_taken_at_the_updates_done():
    """final=False: the state after the last update is snapshotted at the number of updates done when that step is
    asked for — after an early stop at t = 5 that is step 6 (asked), never the unreached steps=10."""
    step = lambda s, t: (s + 1, torch.tensor(float(t)))  # noqa: E731
    kw = dict(steps=10, every=None, final=False, stop=lambda s, t: s == 6, snapshots={"s": lambda s: torch.tensor(s)})
    assert run(0, step, snapshot_every=[0, 6], **kw).trajectory.snapshots("s") == {0: 0, 6: 6}
    assert run(0, step, snapshot_every=[0, 10], **kw).trajectory.snapshots("s") == {0: 0}


def test_resolve_device_defaults_and_counts_cuda_devices(monkeypatch):
    """None gives the default device when one is given (else the CPU); cuda:N needs N < the number of devices."""
    from ssldyn.dynamics.engine import resolve_device

    assert resolve_device(None) == torch.device("cpu")
    assert resolve_device(None, torch.device("meta")) == torch.device("meta")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert resolve_device("cuda:1") == torch.device("cuda", 1)
    with pytest.raises(ValueError, match=r"^device='cuda:2': only 2 CUDA device\(s\) present"):
        resolve_device("cuda:2")


def test_trajectory_copies_what_it_logs_and_snapshots():
    """A value logged or snapshotted (a tensor or a numpy array) is a copy: changing the original in place after the
    call does not change the record."""
    traj = Trajectory()
    a, v, z = torch.tensor(5.0), np.array([1.0, 2.0]), np.array([[1.0, 2.0]])
    traj.log(0, a=a)
    traj.log_members(1, "v", v)
    traj.snapshot(0, "z", z)
    a.add_(10)
    v += 10
    z += 10
    assert traj.to_frame().values.tolist() == [[0, 0, "a", 5.0], [1, 0, "v", 1.0], [1, 1, "v", 2.0]]
    np.testing.assert_array_equal(traj.snapshots("z")[0], [[1.0, 2.0]])


def test_trajectory_reads_in_step_order_with_members_and_missing_values():
    """Rows logged out of order (a resumed or merged record) are read sorted by step; a member's logged index is
    kept; a member without a value at a step is NaN in series_members; stack orders snapshots by step."""
    traj = Trajectory()
    traj.log(5, member=2, loss=3.0)
    traj.log(1, member=2, loss=1.0)
    traj.log_members(1, "acc", [0.1, 0.2])
    traj.log(5, member=0, acc=0.5)
    traj.snapshot(5, "z", np.array([5.0]))
    traj.snapshot(1, "z", np.array([1.0]))
    steps, values = traj.series("loss", member=2)
    assert steps.tolist() == [1, 5] and values.tolist() == [1.0, 3.0]
    with pytest.raises(KeyError):
        traj.series("loss", member=0)  # member 2's rows are not member 0's
    steps, table = traj.series_members("acc")
    assert steps.tolist() == [1, 5] and table[0].tolist() == [0.1, 0.2]
    assert table[1, 0] == 0.5 and np.isnan(table[1, 1])
    steps, arrays = traj.stack("z")
    assert steps.tolist() == [1, 5] and arrays.tolist() == [[1.0], [5.0]]


def test_trajectory_extend_shifts_members_and_load_replaces_the_content():
    a, b = Trajectory(), Trajectory()
    a.log(0, loss=1.0)
    b.log_members(0, "loss", [2.0, 3.0])
    a.extend(b, member_offset=1, prefix="b/")
    assert a.to_frame().values.tolist() == [[0, 0, "loss", 1.0], [0, 1, "b/loss", 2.0], [0, 2, "b/loss", 3.0]]
    c = Trajectory()
    c.log(7, other=9.0)  # pending rows, replaced by the loaded state
    c.load_state_dict(b.state_dict())
    assert c.to_frame().values.tolist() == [[0, 0, "loss", 2.0], [0, 1, "loss", 3.0]]
