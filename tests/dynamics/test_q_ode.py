import numpy as np
import pytest
import torch

from ssldyn.dynamics.guards import NonFiniteLossError
from ssldyn.dynamics.manifold import ManifoldGD, random_stiefel
from ssldyn.dynamics.q_ode import (
    eigh_ascending,
    euler,
    ode_time,
    projected_gd_rhs,
    q_from_weights,
    q_ode_predict,
    q_ode_rhs,
    q_ode_rhs_numpy,
    solve_adaptive,
    solve_reference,
    trace_loss_q,
)
from ssldyn.objectives import trace_loss

D = torch.float64


def _eq9_by_hand(q, lam):
    # appendix A.5, row j: u̇(v_j) = −2(2λ_j u_j − Σ_i λ_i u_i u_iᵀu_j − λ_j Σ_i u_i u_iᵀ u_j)
    d, z = q.shape
    out = np.zeros_like(q)
    for j in range(d):
        s1 = sum(lam[i] * q[i] * (q[i] @ q[j]) for i in range(d))
        s2 = lam[j] * sum(q[i] * (q[i] @ q[j]) for i in range(d))
        out[j] = -2 * (2 * lam[j] * q[j] - s1 - s2)
    return out


def _problem(d=4, z=2, h=30, seed=0, shift=0.0):
    g = torch.Generator().manual_seed(seed)
    C = torch.randn(d, d, generator=g, dtype=D)
    C = (C + C.T) / 2 + shift * torch.eye(d, dtype=D)
    lam, V = eigh_ascending(C)
    W1 = random_stiefel(h, d, generator=g, dtype=D)
    W2 = random_stiefel(h, z, generator=g, dtype=D)
    return C, lam, V, W1, W2


def test_rhs_is_eq9_written_out():
    q = np.random.default_rng(0).normal(size=(5, 3))
    lam = np.random.default_rng(1).normal(size=5)
    np.testing.assert_allclose(q_ode_rhs(torch.tensor(q), torch.tensor(lam)).numpy(), _eq9_by_hand(q, lam), atol=1e-12)
    np.testing.assert_allclose(q_ode_rhs_numpy(q, lam), _eq9_by_hand(q, lam), atol=1e-12)
    # batched
    qb = torch.tensor(np.stack([q, 2 * q]))
    np.testing.assert_allclose(q_ode_rhs(qb, torch.tensor(lam))[1].numpy(), _eq9_by_hand(2 * q, lam), atol=1e-12)


def test_integrators_against_scipy_reference():
    _, lam, V, W1, W2 = _problem()
    q0 = q_from_weights(W1, W2, V)
    T = 2.0
    ref = solve_reference(q0, lam, t=np.array([0.0, T])).state.numpy()
    errs = []
    for lr in (0.01, 0.005):
        steps = int(round(T / lr))
        q_end = euler(q0, lam, lr=lr, steps=steps).state
        errs.append(np.abs(q_end.numpy() - ref).max())
    assert errs[0] < 0.02 and 1.8 < errs[0] / errs[1] < 2.2  # first order
    # printed eq. 12 runs at half speed: step k ↔ t = kη/2
    res12 = euler(q0, lam, lr=0.005, steps=800, form="eq12", every=400)
    assert ode_time(800, 0.005, "eq12") == pytest.approx(T)
    assert np.abs(res12.state.numpy() - ref).max() < 0.02
    assert res12.trajectory.series("t")[1].tolist() == pytest.approx([0.0, 1.0, T])
    ad = solve_adaptive(q0, lam, t=torch.tensor([0.0, 1.0, T], dtype=D), rtol=1e-10, atol=1e-12)
    assert np.abs(ad.state.numpy() - ref).max() < 1e-7
    steps, qs = ad.trajectory.stack("q")  # step i ↔ t[i]
    assert steps.tolist() == [0, 1, 2] and np.array_equal(qs[-1], ad.state.numpy())
    assert ad.trajectory.series("t")[1].tolist() == [0.0, 1.0, T]
    # every adaptive method agrees with the float64 scipy reference; a fixed-step one (no error control) is refused
    for method in ("bosh3", "dopri8"):
        other = solve_adaptive(q0, lam, t=torch.tensor([0.0, T], dtype=D), method=method, rtol=1e-10, atol=1e-12)
        assert np.abs(other.state.numpy() - ref).max() < 1e-7, method
    with pytest.raises(ValueError, match=r"^solve_adaptive: method 'rk4': allowed values are 'dopri5', "):
        solve_adaptive(q0, lam, t=torch.tensor([0.0, T], dtype=D), method="rk4")  # type: ignore[arg-type]
    # one time is the initial value, for both solvers (solve_reference failed inside scipy's empty span)
    for solve in (solve_reference, solve_adaptive):
        one = solve(q0, lam, t=torch.tensor([T], dtype=D))
        assert torch.equal(one.state, q0) and one.trajectory.series("t")[1].tolist() == [T]


def test_gd_on_weights_follows_eq9_at_time_k_eta():
    C, lam, V, W1, W2 = _problem(h=40, seed=2)
    W1, W2 = W1.clone().requires_grad_(), W2.clone().requires_grad_()
    q0 = q_from_weights(W1, W2, V).detach()
    devs = []
    for lr in (0.02, 0.01):
        A, B = W1.detach().clone().requires_grad_(), W2.detach().clone().requires_grad_()
        opt = ManifoldGD([A, B], lr=lr, mode="riemannian", tangent="grassmann", retraction="polar")
        steps = int(round(1.0 / lr))
        for _ in range(steps):
            opt.zero_grad()
            trace_loss(A, B, C).backward()
            opt.step()
        ref = solve_reference(q0, lam, t=np.array([0.0, ode_time(steps, lr)])).state.numpy()
        devs.append(np.abs(q_from_weights(A, B, V).detach().numpy() - ref).max())
        # the loss in q coordinates is the trace loss
        with torch.no_grad():
            assert float(trace_loss_q(q_from_weights(A, B, V), lam)) == pytest.approx(
                float(trace_loss(A, B, C)), rel=1e-10
            )
    assert devs[1] < devs[0] * 0.6 and devs[1] < 0.02


def test_projected_gd_follows_its_own_flow():
    C, lam, V, W1, W2 = _problem(h=40, seed=3)
    A, B = W1.clone().requires_grad_(), W2.clone().requires_grad_()
    q0 = q_from_weights(A, B, V).detach()
    opt = ManifoldGD([A, B], lr=0.005, mode="projected", retraction="polar")
    for _ in range(200):
        opt.zero_grad()
        trace_loss(A, B, C).backward()
        opt.step()
    q = q_from_weights(A, B, V).detach().numpy()

    def own_flow(q, lam):  # manifold module docstring, written out: q̇ = −(4Λq − 3qqᵀΛq − Λqqᵀq)
        Lq = lam[..., :, None] * q
        return -(4 * Lq - 3 * q @ (q.mT @ Lq) - Lq @ (q.mT @ q))

    torch.testing.assert_close(projected_gd_rhs(q0, lam), own_flow(q0, lam), rtol=1e-12, atol=1e-14)
    ref_own = solve_reference(q0, lam, t=np.array([0.0, 1.0]), rhs=own_flow).state.numpy()
    assert np.abs(q - ref_own).max() < 0.01
    # and it is not eq. (9): the same run is further from the Grassmann flow
    ref_eq9 = solve_reference(q0, lam, t=np.array([0.0, 1.0])).state.numpy()
    assert np.abs(q - ref_eq9).max() > 3 * np.abs(q - ref_own).max()


def test_predict_new_points_matches_network():
    C, lam, V, W1, W2 = _problem()
    q = q_from_weights(W1, W2, V)
    x = torch.randn(7, 4, dtype=D)
    np.testing.assert_allclose(q_ode_predict(q, V, x).numpy(), (x @ W1.T @ W2).numpy(), atol=1e-12)


@pytest.mark.parametrize("case", ["positive", "negative"])
def test_theorem3_two_regimes_on_random_matrices(case):
    rng = np.random.default_rng(5)
    for trial in range(6):
        d = 4
        Q, _ = np.linalg.qr(rng.normal(size=(d, d)))
        lam = rng.uniform(0.2, 1.5, size=d) if case == "positive" else np.sort(rng.uniform(-1.5, 1.0, size=d))
        if case == "negative":
            lam[0] = -abs(lam[0]) - 0.2
        lam = np.sort(lam)
        W1 = random_stiefel(25, d, generator=torch.Generator().manual_seed(trial), dtype=D)
        W2 = random_stiefel(25, 1, generator=torch.Generator().manual_seed(100 + trial), dtype=D)
        q0 = (W1.T @ W2).numpy()  # q in the eigenbasis (V = I)
        qT = solve_reference(q0, lam, t=np.array([0.0, 60.0]), rtol=1e-10, atol=1e-12).state.numpy().ravel()
        if case == "positive":
            assert np.linalg.norm(qT) < 1e-3
        else:
            assert abs(abs(qT[0]) - 1) < 1e-4 and np.linalg.norm(qT[1:]) < 1e-3


def test_euler_trajectory_logs_loss_time_and_q():
    lam = torch.tensor([-1.0, 0.5], dtype=D)
    q0 = torch.tensor([[[0.3], [0.2]], [[0.1], [-0.4]]], dtype=D)  # (E=2, d=2, z=1)
    res = euler(q0, lam, lr=0.1, steps=20, every=10, form="eq12", probes={"q1": lambda q: q[:, 0, 0]})
    tr = res.trajectory
    steps, vals = tr.series("loss", member=1)
    q = res.state[1, :, 0].numpy()
    assert list(steps) == [0, 10, 20] and vals[-1] == pytest.approx(-1.0 * q[0] ** 2 + 0.5 * q[1] ** 2)
    assert tr.last("t") == pytest.approx(20 * 0.1 / 2)
    assert (
        tr.snapshot_names == {"q"}
        and set(tr.snapshots("q")) == {0, 10, 20}
        and np.array_equal(tr.snapshots("q")[20], res.state.numpy())
    )
    assert tr.last("q1", member=1) == pytest.approx(q[0])  # a per-member probe of q
    # eq. (12) by hand from q0 for 10 steps: q ← q − η[2Λq − Λqqᵀq − qqᵀΛq]
    qh = q0.clone()
    for _ in range(10):
        Lq = lam[:, None] * qh
        qh = qh - 0.1 * (2 * Lq - Lq @ (qh.mT @ qh) - qh @ (qh.mT @ Lq))
    np.testing.assert_allclose(tr.snapshots("q")[10], qh.numpy(), rtol=1e-12)


def test_euler_with_rhs_steps_that_flow_written_out():
    # grassmann Fig. 3's polar-variant path: its own flow q̇ = −(4Λq − 3qqᵀΛq − Λqqᵀq) (manifold module docstring)
    g = torch.Generator().manual_seed(0)
    q0 = 0.3 * torch.randn(2, 3, 1, generator=g, dtype=D)  # (E, d, z)
    lam = torch.tensor([[-1.0, -0.5, 0.2], [-0.3, 0.1, 0.4]], dtype=D)  # (E, d): a spectrum per member
    res = euler(q0, lam, lr=0.01, steps=25, every=10, rhs=projected_gd_rhs)  # records steps 0, 10, 20, 25
    q, ref = q0.clone(), [q0]
    for k in range(1, 26):  # Euler on the flow, written out
        Lq = lam[..., None] * q
        q = q - 0.01 * (4 * Lq - 3 * q @ (q.mT @ Lq) - Lq @ (q.mT @ q))
        if k in (10, 20, 25):
            ref.append(q)
    steps, path = res.trajectory.stack("q", tensors=True)
    assert list(steps) == [0, 10, 20, 25]
    torch.testing.assert_close(path, torch.stack(ref), rtol=0, atol=1e-14)
    assert res.trajectory.last("t") == pytest.approx(25 * 0.01)
    # the default right-hand side (eq. 9) goes elsewhere from the same start
    assert (euler(q0, lam, lr=0.01, steps=25).state - q).abs().max() > 1e-3
    with pytest.raises(ValueError, match="form='eq9' with rhs"):
        euler(q0, lam, lr=0.01, steps=2, form="eq12", rhs=projected_gd_rhs)


def test_solve_adaptive_with_rhs_matches_scipy_on_that_flow():
    # the polar variant's own flow, written out; scipy's DOP853 (solve_reference) is the independent reference
    def own_flow(q, lam):
        Lq = lam[..., :, None] * q
        return -(4 * Lq - 3 * q @ (q.mT @ Lq) - Lq @ (q.mT @ q))

    g = torch.Generator().manual_seed(1)
    q0 = 0.3 * torch.randn(3, 2, generator=g, dtype=D)  # (d, z)
    lam = torch.tensor([-1.0, -0.4, 0.3], dtype=D)
    t = np.linspace(0.0, 2.0, 5)
    got = solve_adaptive(q0, lam, t=t, rtol=1e-11, atol=1e-13, rhs=projected_gd_rhs).trajectory.stack("q")[1]
    ref = solve_reference(q0, lam, t=t, rhs=own_flow).trajectory.stack("q")[1]
    np.testing.assert_allclose(got, ref, atol=1e-9)
    # and it is not eq. (9)'s solution from the same start
    eq9 = solve_adaptive(q0, lam, t=t, rtol=1e-11, atol=1e-13).trajectory.stack("q")[1]
    assert np.abs(eq9 - ref).max() > 1e-3


def test_euler_rejects_nan_inputs_before_any_step():
    C, lam, V, W1, W2 = _problem()
    q0 = q_from_weights(W1, W2, V)
    bad = q0.clone()
    bad[0, 1] = float("nan")
    with pytest.raises(ValueError, match=r"^q0: 1 non-finite value"):
        euler(bad, lam, lr=0.01, steps=10)
    lam_bad = lam.clone()
    lam_bad[2] = float("inf")
    with pytest.raises(ValueError, match=r"^lam: 1 non-finite value"):
        euler(q0, lam_bad, lr=0.01, steps=10)
    with pytest.raises(ValueError, match=r"^lr must be a finite number > 0"):
        euler(q0, lam, lr=-0.01, steps=10)
    with pytest.raises(ValueError, match=r"^steps must be an int >= 0"):
        euler(q0, lam, lr=0.01, steps=-1)


def test_euler_blow_up_names_first_non_finite_step_and_last_finite_loss():
    # explicit Euler with a huge step on the cubic eq. (9) explodes; the error must name the first step whose
    # state is non-finite, the first member that went bad and its loss Tr(qᵀΛq) at the step before
    C, lam, V, W1, W2 = _problem(d=4, z=2, seed=3)
    q0 = torch.stack([q_from_weights(W1, W2, V), 0.5 * q_from_weights(W1, W2, V)])  # (E=2, d, z)
    lr = 3.0
    match = r"^q-ODE loss Tr\(qᵀΛq\) of member \d became -?(nan|inf) at step \d+ "
    with pytest.raises(NonFiniteLossError, match=match) as e:
        euler(q0, lam, lr=lr, steps=200)
    s = e.value.step
    # independent reference: eq. (9) written out (numpy, per member), Euler with dt = η
    lam_n = lam.numpy()
    qs = [q0[m].numpy().copy() for m in range(2)]
    losses = []
    with np.errstate(all="ignore"):
        for _ in range(s + 1):
            losses.append([float((lam_n[:, None] * q * q).sum()) for q in qs])
            qs = [q + lr * _eq9_by_hand(q, lam_n) for q in qs]
    m = e.value.member
    assert s >= 2 and np.isfinite(losses[s - 1]).all() and not np.isfinite(losses[s][m])
    assert np.isfinite(losses[s][:m]).all()  # the first member that went bad
    assert e.value.last_finite == pytest.approx(losses[s - 1][m], rel=1e-9)
    q_ok = euler(q0, lam, lr=lr, steps=s - 1).state  # stopped one step earlier: ends on the last finite loss
    assert float(trace_loss_q(q_ok, lam)[m]) == e.value.last_finite


@pytest.mark.parametrize(
    "what, lam_v, t_v, match",
    [
        ("nan lam", float("nan"), 1.0, r"^lam: 1 non-finite"),
        ("inf lam", float("inf"), 1.0, r"^lam: 1 non-finite"),
        ("nan t", 0.5, float("nan"), r"^t: 1 non-finite"),
        ("inf t", 0.5, float("inf"), r"^t: 1 non-finite"),
    ],
)
def test_solvers_reject_non_finite_lam_and_t_instead_of_hanging(what, lam_v, t_v, match):
    # scipy's solve_ivp never returned on these (issue 20); torchdiffeq fails obscurely
    q0 = np.array([[0.3], [0.2]])
    lam = np.array([-1.0, lam_v])
    t = np.array([0.0, t_v])
    with pytest.raises(ValueError, match=match):
        solve_reference(q0, lam, t=t)
    with pytest.raises(ValueError, match=match):
        solve_adaptive(torch.tensor(q0), torch.tensor(lam), t=torch.tensor(t))


def test_solvers_reject_unordered_or_empty_times():
    q0 = np.array([[0.3], [0.2]])
    lam = np.array([-1.0, 0.5])
    with pytest.raises(ValueError, match="strictly monotone"):
        solve_reference(q0, lam, t=np.array([0.0, 2.0, 1.0]))
    with pytest.raises(ValueError, match="non-empty 1-D"):
        solve_reference(q0, lam, t=np.array([]))
    with pytest.raises(ValueError, match=r"^q0: expected shape \(\.\.\., d, z\)"):
        solve_reference(np.array([0.3, 0.2]), lam, t=np.array([0.0, 1.0]))


def test_solvers_name_a_finite_time_blow_up_before_it_and_agree_with_the_closed_form():
    # d = z = 1: q̇ = −2[2λq − 2λq³] = 4λq(q² − 1). With u = q², u̇ = 8λu(u − 1), so
    # (u − 1)/u = (1 − 1/u₀) e^{8λt}: from q₀ = 2, λ = 1 the solution blows up at t* = ln(4/3)/8 ≈ 0.036
    q0, lam = np.array([[2.0]]), np.array([1.0])
    t_star = np.log(4 / 3) / 8
    t = np.array([0.0, 0.5 * t_star, 0.9 * t_star])
    want = np.sqrt(1 / (1 - 0.75 * np.exp(8 * t)))
    ref = solve_reference(q0, lam, t=t).trajectory.stack("q", tensors=True)[1][:, 0, 0].numpy()
    ada = solve_adaptive(torch.tensor(q0), torch.tensor(lam), t=torch.tensor(t)).trajectory.stack("q", tensors=True)
    np.testing.assert_allclose(ref, want, rtol=1e-8)
    np.testing.assert_allclose(ada[1][:, 0, 0].numpy(), want, rtol=1e-5)
    past = np.array([0.0, 1.1 * t_star])  # the solvers' own errors here: an AssertionError / a RuntimeError
    with pytest.raises(ValueError, match=r"^solve_reference: the solver's step size fell to round-off before t = "):
        solve_reference(q0, lam, t=past)
    with pytest.raises(ValueError, match=r"^solve_adaptive: .* blows up in finite time on this interval"):
        solve_adaptive(torch.tensor(q0), torch.tensor(lam), t=torch.tensor(past))
    # the same start with λ < 0 is attracted to ±1: no blow-up, both solvers agree
    ok = solve_reference(q0, -lam, t=np.array([0.0, 1.0])).state
    assert float(ok) == pytest.approx(1.0, abs=1e-3)


def test_q_helpers_name_mismatched_shapes():
    V = torch.eye(4)
    with pytest.raises(ValueError, match=r"^q_from_weights: need W1 \(\.\.\., h, d\), W2 \(\.\.\., h, z\)"):
        q_from_weights(torch.randn(5, 4), torch.randn(6, 2), V)  # h = 5 vs 6
    with pytest.raises(ValueError, match=r"^q_ode_predict: need q \(\.\.\., d, z\), V \(\.\.\., d, d\) and x"):
        q_ode_predict(torch.randn(4, 2), V, torch.randn(3, 5))
    W1, W2, x = torch.randn(5, 4), torch.randn(5, 2), torch.randn(3, 4)  # the identities the checks guard
    torch.testing.assert_close(q_ode_predict(q_from_weights(W1, W2, V), V, x), x @ W1.T @ W2)
