"""NaN/inf guards of the α-CL flows: ``sphere_flow`` (eq. 7) and ``thm5_flow`` (eq. 15).

The flows ascend an energy (the α-CL loss is ``−E_α``); a non-finite energy must stop the run with
:class:`NonFiniteLossError` naming the step, the member and its last finite value, and NaN input must be a
``ValueError`` before the first step. Expected steps and values come from reference loops written
out here, with the energies from independent formulas (``½ Var[ReLU(wᵀx)]``, ``½ λ_max V[f1]``).
"""

import math

import pytest
import torch

from ssldyn.data.latent import TwoRFModel
from ssldyn.dynamics import two_layer_alpha_cl as tl
from ssldyn.dynamics.alpha_cl import make_A_fn, sphere_flow
from ssldyn.dynamics.guards import LossGuard, NonFiniteLossError
from ssldyn.dynamics.two_layer_alpha_cl import thm5_closed_form, thm5_flow, two_layer_features

D = torch.float64


def gen(s=0):
    return torch.Generator().manual_seed(s)


def _unit(w):
    return w / w.norm(dim=-1, keepdim=True)


def relu_energy(x, w):
    """``E_α(w) = ½ Var[ReLU(wᵀx)]`` (uniform α, no augmentation), per row of ``w (E, d)``."""
    return 0.5 * torch.relu(x @ w.T).var(0, unbiased=False)


def relu_A(x, w):
    """``A(w) = Cov[x·1(wᵀx > 0)]`` (Lemma 3) written out for one ``w (d,)``."""
    xt = x * (x @ w > 0).to(x.dtype)[:, None]
    xc = xt - xt.mean(0)
    return xc.T @ xc / x.shape[0]


def reference_sphere_flow(x, w0, dt, n_steps):
    """Projected Euler of eq. 7 by hand: ``(first non-finite step or None, energies before it)``."""
    w, energies = _unit(w0), []
    for step in range(n_steps + 1):
        e = relu_energy(x, w) if bool(torch.isfinite(w).all()) else torch.full((w.shape[0],), math.nan, dtype=D)
        if not bool(torch.isfinite(e).all()):
            return step, energies
        energies.append(e)
        aw = torch.stack([relu_A(x, wi) @ wi for wi in w])
        w = _unit(w + dt * (aw - (aw * w).sum(-1, keepdim=True) * w))
    return None, energies


# dt = 1e308: w + dt·g = ±inf -> NaN after the retraction (step 1);
# dt = 1e306: w + dt·g is finite but its norm overflows -> w = 0 (energy 0), then 0/0 = NaN (step 2)
@pytest.mark.parametrize("dt, expected_step", [(1e308, 1), (1e306, 2)])
@pytest.mark.parametrize("block", [1, 3, 64])
def test_sphere_flow_too_large_step_raises_with_step_and_last_finite(dt, expected_step, block):
    x = 10.0 * torch.randn(60, 3, generator=gen(0), dtype=D)
    w0 = torch.randn(4, 3, generator=gen(1), dtype=D)
    bad, energies = reference_sphere_flow(x, w0, dt, 10)
    assert bad == expected_step and float(energies[0].mean()) > 1.0
    guard = LossGuard("energy", lazy=True, check_every=block)
    match = rf"^energy of member 0 became nan at step {bad} \(last finite value: "
    with pytest.raises(NonFiniteLossError, match=match) as e:
        sphere_flow(w0, make_A_fn(x, "relu"), steps=10, dt=dt, guard=guard)
    assert e.value.step == bad and e.value.member == 0
    assert e.value.last_finite == pytest.approx(float(energies[-1][0]), rel=1e-10)


def test_sphere_flow_diverging_A_names_step_and_matches_a_finite_run():
    x = torch.randn(80, 3, generator=gen(2), dtype=D)
    w0 = torch.randn(5, 3, generator=gen(3), dtype=D)
    base = make_A_fn(x, "relu")
    calls = {"n": 0}

    def blowing_up(w):  # one call per step: A(w) for steps 0-5, entries ±inf/NaN from step 6 on
        calls["n"] += 1
        return base(w) * (1.0 if calls["n"] <= 6 else math.inf)

    guard = LossGuard("energy", lazy=True, check_every=4)  # deferred, as on an accelerator
    with pytest.raises(NonFiniteLossError, match=r"at step 6 \(last finite value: ") as e:
        sphere_flow(w0, blowing_up, steps=20, dt=0.1, every=None, guard=guard)
    # step 0 is logged (checked alone), then blocks of 4: 1-4, 5-8 -> stopped at the end of block 5-8
    assert e.value.step == 6 and calls["n"] == 9
    # independent runs: the same flow stopped at step 5 (energy logged there), and the hand-written loop
    ok = sphere_flow(w0, base, steps=5, dt=0.1)
    assert e.value.last_finite == pytest.approx(ok.trajectory.last("energy", member=e.value.member), rel=1e-12)
    ref_bad, ref_e = reference_sphere_flow(x, w0, 0.1, 5)
    assert ref_bad is None and e.value.last_finite == pytest.approx(float(ref_e[5][e.value.member]), rel=1e-9)


def test_sphere_flow_nan_input_raises_before_any_step():
    x = torch.randn(20, 3, generator=gen(4), dtype=D)
    calls = {"n": 0}
    A = make_A_fn(x, "relu")

    def counting(w):
        calls["n"] += 1
        return A(w)

    w0 = torch.randn(2, 3, generator=gen(5), dtype=D)
    w0[1, 2] = math.nan
    with pytest.raises(ValueError, match=r"^w0: 1 non-finite"):
        sphere_flow(w0, counting, steps=10)
    assert calls["n"] == 0
    bad = x.clone()
    bad[3, 0] = math.inf
    with pytest.raises(ValueError, match="x: contains NaN or inf"):
        sphere_flow(w0[:1], make_A_fn(bad, "relu"), steps=10)


def _population():
    m = TwoRFModel.random(K=3, d=3, C=2, P=3, generator=gen(6))
    xs, zs, ws = m.conditional_support()
    xa, _, pa = m.support()
    return xs, zs, ws, xa, pa


def half_lam_max(W, xa, pa):
    """``½ λ_max V[f1]`` on the full population (the two-layer energy with the best unit top layer)."""
    out = []
    for Wm in W.reshape(-1, *W.shape[-2:]):
        f1 = two_layer_features(xa, Wm[:, None, :])  # (A, K)
        m = pa @ f1
        V = (f1 * pa[:, None]).T @ f1 - torch.outer(m, m)
        out.append(0.5 * torch.linalg.eigvalsh(V)[-1])
    return torch.stack(out)


def reference_thm5_flow(W0, xs, zs, ws, xa, pa, dt, n_steps):
    W, energies = _unit(W0), []
    for step in range(n_steps + 1):
        if not bool(torch.isfinite(W).all()):
            return step, energies
        energies.append(half_lam_max(W, xa, pa))
        W = _unit(W + dt * thm5_closed_form(W, xs, zs, weights=ws).w_dot)
    return None, energies


@pytest.mark.parametrize("dt, expected_step", [(1e308, 1), (1e306, 2)])  # as for sphere_flow
@pytest.mark.parametrize("block", [1, 64])
def test_thm5_flow_too_large_step_raises_with_step_and_last_finite(dt, expected_step, block):
    xs, zs, ws, xa, pa = _population()
    xs, xa = 10.0 * xs, 10.0 * xa
    W0 = torch.randn(4, 3, 3, generator=gen(7), dtype=D)
    bad, energies = reference_thm5_flow(W0, xs, zs, ws, xa, pa, dt, 10)
    assert bad == expected_step and float(energies[0].mean()) > 1.0
    guard = LossGuard("energy", lazy=True, check_every=block)
    with pytest.raises(NonFiniteLossError, match=rf"^energy of member 0 became nan at step {bad} ") as e:
        thm5_flow(W0, xs, zs, weights=ws, steps=10, dt=dt, guard=guard)
    assert e.value.step == bad
    assert e.value.last_finite == pytest.approx(float(energies[-1][0]), rel=1e-9)


def _count_thm5_terms(monkeypatch) -> dict[str, int]:
    """Counts the calls of the flow's term function (``calls["n"]``): 0 means no step was computed."""
    calls = {"n": 0}
    real = tl._thm5_terms

    def counting(*a, **k):
        calls["n"] += 1
        return real(*a, **k)

    monkeypatch.setattr(tl, "_thm5_terms", counting)
    return calls


def test_thm5_flow_nan_input_raises_before_any_step(monkeypatch):
    xs, zs, ws, _, _ = _population()
    calls = _count_thm5_terms(monkeypatch)
    W0 = torch.randn(2, 3, 3, generator=gen(8), dtype=D)
    bad_W0, bad_x, bad_w = W0.clone(), xs.clone(), ws.clone()
    bad_W0[0, 1, 2] = math.nan
    bad_x[1, 0, 0] = math.inf
    bad_w[0, 0] = math.nan
    for name, (W, x, w) in (("W0", (bad_W0, xs, ws)), ("x", (W0, bad_x, ws)), ("weights", (W0, xs, bad_w))):
        with pytest.raises(ValueError, match=rf"^{name}: 1 non-finite"):
            thm5_flow(W, x, zs, weights=w, steps=10, dt=0.1)
    assert calls["n"] == 0
    res = thm5_flow(W0, xs, zs, weights=ws, steps=10, dt=0.1)  # finite input: runs (11 energy evaluations)
    assert calls["n"] == 11
    # the record: the energy of the start and of the returned filters (first and last step)
    steps, energy = res.trajectory.series_members("energy")
    assert steps.tolist() == [0, 10]
    torch.testing.assert_close(
        torch.from_numpy(energy[-1]), half_lam_max(res.state, *_population()[3:]), rtol=1e-9, atol=0
    )


def test_thm5_energy_is_half_top_eigenvalue():
    xs, zs, ws, xa, pa = _population()
    W = _unit(torch.randn(3, 3, 3, generator=gen(9), dtype=D))
    t = thm5_closed_form(W, xs, zs, weights=ws)
    torch.testing.assert_close(tl.thm5_energy(t), half_lam_max(W, xa, pa), rtol=1e-10, atol=1e-14)


def test_deferred_guard_reports_first_bad_step_and_member():
    g = LossGuard(lazy=True, check_every=4)
    for s, v in enumerate([1.0, 2.0, 3.0, 4.0, 5.0]):  # the first block of 4 is checked: all finite
        g.update(s, torch.tensor([v, v]))
    assert g.last_finite == 5.0
    g.update(5, torch.tensor([6.0, math.inf]))  # member 1 goes bad at step 5 (last finite 5.0)
    with pytest.raises(
        NonFiniteLossError, match=r"^loss of member 1 became inf at step 5 \(last finite value: 5\)"
    ) as e:
        g.update(6, torch.tensor([math.nan, 0.0]))  # member 0 at step 6: later, not reported
        g.check()
    assert (e.value.step, e.value.member, e.value.last_finite, e.value.value) == (5, 1, 5.0, math.inf)


def test_thm5_flow_names_mismatched_shapes_before_any_step():
    x, z = torch.randn(10, 2, 4), torch.randint(0, 2, (10,))
    W0 = torch.randn(3, 2, 4)
    cases = [
        (dict(W0=torch.randn(3, 4), x=x, z=z), r"^thm5_flow: W0 must be \(\.\.\., K=2, d=4\) like x"),
        (dict(W0=W0, x=torch.randn(10, 8), z=z), r"^thm5_flow: x must be \(N, K, d\)"),
        (dict(W0=W0, x=x, z=torch.randint(0, 2, (9,))), r"^thm5_flow: z must be the N=10 latent classes in \{0, 1\}"),
        (dict(W0=W0, x=x, z=z + 2), r"^thm5_flow: z must be the N=10 latent classes"),
        (dict(W0=W0, x=x, z=z, weights=torch.rand(10, 3)), r"^thm5_flow: weights must be \(N=10,\) or \(N, K=2\)"),
    ]
    for kw, match in cases:
        with pytest.raises(ValueError, match=match):
            thm5_flow(steps=1, **kw)
    assert thm5_flow(W0, x, z, steps=1).state.shape == (3, 2, 4)  # the shapes it takes


def test_sphere_flow_freeze_policy_keeps_a_diverged_member_and_trains_the_others_as_alone():
    """LossGuard(policy="freeze") in a pure flow: member 1's operator becomes NaN from step 2 on. It was recorded as
    frozen but kept being updated (its w ended NaN), with no error. Now its w stays at its state of step 2 (the run
    of member 1 alone stopped after 2 steps) and members 0 and 2 follow the run without member 1."""
    x = torch.randn(60, 3, generator=gen(10), dtype=D)
    w0 = torch.randn(3, 3, generator=gen(11), dtype=D)
    base = make_A_fn(x, "relu")
    calls = {"n": 0}

    def member_1_breaks(w):  # one call per step: member 1's A(w) is NaN from step 2 on
        calls["n"] += 1
        A = base(w).clone()  # (E, d, d)
        if calls["n"] >= 3:
            A[1] = math.nan
        return A

    guard = LossGuard("energy", policy="freeze")
    res = sphere_flow(w0, member_1_breaks, steps=8, dt=0.1, guard=guard, keep_path=True)
    others = sphere_flow(w0[[0, 2]], base, steps=8, dt=0.1)  # the run without the bad member
    torch.testing.assert_close(res.state[[0, 2]], others.state, rtol=1e-12, atol=1e-14)
    at_2 = sphere_flow(w0[1:2], base, steps=2, dt=0.1).state[0]  # member 1 alone, up to its divergence
    torch.testing.assert_close(res.state[1], at_2, rtol=1e-12, atol=1e-14)
    for t, w in res.trajectory.snapshots("w").items():
        assert bool(torch.isfinite(torch.as_tensor(w)).all()), t
    assert guard.alive.tolist() == [True, False, True] and float(guard.diverged_at[1]) == 2.0


def test_thm5_flow_zero_filter_is_a_bad_input_not_a_diverged_flow(monkeypatch):
    """A zero filter in W0 passed the finiteness check, became NaN in the normalisation W0/‖W0‖, and was reported as a
    diverged energy ("lower the learning rate"). It is a ValueError naming W0, before any step (as alpha_cl's w0)."""
    xs, zs, ws, _, _ = _population()
    calls = _count_thm5_terms(monkeypatch)
    W0 = torch.randn(2, 3, 3, generator=gen(12), dtype=D)
    W0[1, 2] = 0.0
    with pytest.raises(ValueError, match=r"^thm5_flow: W0 has a zero filter \(a direction on the sphere is needed\)"):
        thm5_flow(W0, xs, zs, weights=ws, steps=3)
    assert calls["n"] == 0
