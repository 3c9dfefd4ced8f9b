import math

import numpy as np
import pytest
import scipy.linalg
import torch

from ssldyn.dynamics.guards import LossGuard, NonFiniteLossError
from ssldyn.dynamics.manifold import (
    ManifoldGD,
    PlainGD,
    grassmann_tangent,
    orthogonality_error,
    polar_retract,
    qr_retract,
    random_stiefel,
    retract,
    retract_finite,
    sgd_step_,
    stiefel_tangent,
    train_gd,
)
from ssldyn.objectives import trace_loss

D = torch.float64


def test_polar_is_scipy_polar_and_qr_has_positive_diagonal():
    X = torch.randn(9, 4, dtype=D)
    U, _ = scipy.linalg.polar(X.numpy())
    np.testing.assert_allclose(polar_retract(X).numpy(), U, atol=1e-12)
    Q = qr_retract(X)
    R = Q.T @ X  # X = Q R with R upper triangular, positive diagonal
    assert np.allclose(np.tril(R.numpy(), -1), 0, atol=1e-12) and (np.diag(R.numpy()) > 0).all()
    # wide matrices: orthonormal rows
    Xw = torch.randn(3, 7, dtype=D)
    np.testing.assert_allclose(polar_retract(Xw).numpy(), scipy.linalg.polar(Xw.numpy())[0], atol=1e-12)


def test_retractions_are_identity_on_the_manifold():
    W = random_stiefel(10, 3, 2, dtype=D)
    for m in ("polar", "qr"):
        np.testing.assert_allclose(retract(W, m).numpy(), W.numpy(), atol=1e-12)


@pytest.mark.parametrize(
    "mode,retr", [("projected", "polar"), ("projected", "qr"), ("riemannian", "qr"), ("riemannian", "polar")]
)
def test_stiefel_steps_keep_constraint_float32(mode, retr):
    g = torch.Generator().manual_seed(0)
    C = torch.randn(5, 5, generator=g)
    C = C + C.T
    W1 = random_stiefel(40, 5, 3, generator=g).requires_grad_()
    W2 = random_stiefel(40, 2, 3, generator=g).requires_grad_()
    # one step in float64 against the update written out in numpy: X = W − η·G (projected) or
    # X = W − η·(G − W sym(WᵀG)) (riemannian, Stiefel tangent), then scipy's polar factor or QR with diag(R) > 0
    A1, A2 = (W.detach().double().numpy() for W in (W1, W2))
    Cn = C.double().numpy()
    G1 = 2 * A2 @ A2.transpose(0, 2, 1) @ A1 @ Cn  # ∇_{W1} Tr(W2ᵀW1CW1ᵀW2), C symmetric
    G2 = 2 * A1 @ Cn @ A1.transpose(0, 2, 1) @ A2  # ∇_{W2}
    want = []
    for A, G in ((A1, G1), (A2, G2)):
        if mode == "riemannian":
            S = A.transpose(0, 2, 1) @ G
            G = G - A @ (S + S.transpose(0, 2, 1)) / 2
        out = []
        for X in A - 0.05 * G:
            if retr == "polar":
                out.append(scipy.linalg.polar(X)[0])
            else:
                Q, R = np.linalg.qr(X)
                out.append(Q * np.sign(np.diag(R)))
        want.append(np.stack(out))
    B1, B2 = (W.detach().double().requires_grad_() for W in (W1, W2))
    one = ManifoldGD([B1, B2], lr=0.05, mode=mode, retraction=retr)
    trace_loss(B1, B2, C.double()).sum().backward()
    one.step()
    np.testing.assert_allclose(B1.detach().numpy(), want[0], rtol=0, atol=1e-12)
    np.testing.assert_allclose(B2.detach().numpy(), want[1], rtol=0, atol=1e-12)
    # 100 float32 steps: the constraint holds to float32 round-off and the loss went down
    L0 = trace_loss(W1, W2, C).detach()
    opt = ManifoldGD([W1, W2], lr=0.05, mode=mode, retraction=retr)
    for _ in range(100):
        opt.zero_grad()
        trace_loss(W1, W2, C).sum().backward()
        opt.step()
    assert orthogonality_error(W1).max() < 1e-6 and orthogonality_error(W2).max() < 1e-6
    assert bool((trace_loss(W1, W2, C).detach() < L0 - 0.1).all())


@pytest.mark.parametrize("tangent", ["stiefel", "grassmann"])
def test_riemannian_gradient_against_finite_differences(tangent):
    g = torch.Generator().manual_seed(1)
    C = torch.randn(4, 4, generator=g, dtype=D)
    C = C + C.T
    W1 = random_stiefel(12, 4, generator=g, dtype=D)
    W2 = random_stiefel(12, 2, generator=g, dtype=D)
    f = lambda A: float(trace_loss(A, W2, C))  # noqa: E731
    G = 2 * W2 @ W2.T @ W1 @ C  # Euclidean gradient of Tr(W2ᵀW1CW1ᵀW2) in W1, written out
    grad = stiefel_tangent(W1, G)
    # it is tangent: W1ᵀ grad is skew
    A = W1.T @ grad
    np.testing.assert_allclose((A + A.T).numpy(), 0, atol=1e-12)
    for _ in range(3):
        xi = (
            stiefel_tangent(W1, torch.randn(12, 4, generator=g, dtype=D))
            if tangent == "stiefel"
            else grassmann_tangent(W1, torch.randn(12, 4, generator=g, dtype=D))
        )
        t = 1e-5
        fd = (f(retract(W1 + t * xi, "qr")) - f(retract(W1 - t * xi, "qr"))) / (2 * t)
        assert abs(fd - float((grad * xi).sum())) < 1e-7 * max(1.0, abs(fd))
    # Grassmann projection agrees with the Riemannian gradient on horizontal directions
    xi = grassmann_tangent(W1, torch.randn(12, 4, generator=g, dtype=D))
    assert abs(float((grassmann_tangent(W1, G) * xi).sum()) - float((grad * xi).sum())) < 1e-10


def test_projected_gd_is_first_order_riemannian():
    # polar(W − ηG) = W − η(G − W sym(WᵀG)) + O(η²)
    W = random_stiefel(15, 4, dtype=D)
    G = torch.randn(15, 4, dtype=D)
    errs = []
    for eta in (1e-2, 5e-3):
        errs.append(float((polar_retract(W - eta * G) - (W - eta * stiefel_tangent(W, G))).abs().max()))
    assert errs[1] < errs[0] / 3.5  # second order: ratio ~4


def test_random_stiefel_is_haar_monte_carlo():
    from scipy import stats

    # E[W Wᵀ] = (p/n) I for Haar-uniform W ∈ St(n, p): the span is uniform on the Grassmannian
    n, draws = 6, 4000
    W = random_stiefel(n, 2, draws, generator=torch.Generator().manual_seed(0), dtype=D)
    M = (W @ W.mT).mean(0).numpy()
    np.testing.assert_allclose(M, (2 / 6) * np.eye(6), atol=0.02)
    # the frame too (E[WWᵀ] holds without QR's sign fix): a Haar frame's column is uniform on S^{n−1}, so each
    # entry is sign-symmetric (mean 0, std 1/√n) and W_ij² ~ Beta(1/2, (n − 1)/2); a plain QR without the sign fix
    # gives W[0, 0] ≤ 0 on every draw (mean −0.34)
    se = math.sqrt(1 / n / draws)
    for i, j in [(0, 0), (1, 1), (5, 0), (0, 1)]:
        w = W[:, i, j].numpy()  # (draws,)
        assert abs(w.mean()) < 5 * se, (i, j, w.mean())
        assert stats.kstest(w**2, stats.beta(0.5, (n - 1) / 2).cdf).pvalue > 1e-3, (i, j)


# --- guards of the training loop (train_gd) ---------------------------------------------------------------------
def _stiefel_problem(seed=0, ensemble=2):
    g = torch.Generator().manual_seed(seed)
    C = torch.randn(4, 4, generator=g, dtype=D)
    C = (C + C.T) / 2
    W1 = random_stiefel(12, 4, ensemble, generator=g, dtype=D)
    W2 = random_stiefel(12, 2, ensemble, generator=g, dtype=D)
    return C, W1, W2


def _stiefel_run(C, W1, W2, steps, lr, loss_fn=None):
    W1, W2 = W1.clone().requires_grad_(), W2.clone().requires_grad_()
    opt = ManifoldGD([W1, W2], lr=lr, mode="projected", retraction="polar")
    fn = loss_fn(W1, W2) if loss_fn else (lambda: trace_loss(W1, W2, C))
    return train_gd([W1, W2], fn, update=opt.step, steps=steps), W1, W2


def test_train_gd_rejects_nan_data_before_any_step():
    C, W1, W2 = _stiefel_problem()
    bad = C.clone()
    bad[1, 2] = math.nan
    calls = []
    W1 = W1.clone().requires_grad_()
    with pytest.raises(ValueError, match=r"^C: 1 non-finite value"):
        train_gd(
            [W1], lambda: calls.append(1) or trace_loss(W1, W2, bad), update=lambda: None, steps=5, inputs={"C": bad}
        )
    assert calls == []  # not a single loss evaluated


def test_stiefel_gd_injected_nan_names_step_and_last_finite_loss():
    C, W1, W2 = _stiefel_problem()
    s = 7  # the loss becomes NaN at step 7 (8th evaluation)

    def poisoned(A, B):
        n = {"k": 0}

        def fn():
            out = trace_loss(A, B, C) * (math.nan if n["k"] == s else 1.0)
            n["k"] += 1
            return out

        return fn

    with pytest.raises(
        NonFiniteLossError, match=rf"^loss of member 0 became nan at step {s} \(last finite value: "
    ) as e:
        _stiefel_run(C, W1, W2, steps=20, lr=0.05, loss_fn=poisoned)
    # independent reference: s − 1 plain steps, then the loss written out as Tr(a C aᵀ), a = W2ᵀW1
    res, A1, A2 = _stiefel_run(C, W1, W2, steps=s - 1, lr=0.05)
    with torch.no_grad():
        a = A2.mT @ A1
        ref = torch.einsum("ezd,df,ezf->e", a, C, a)  # (E,)
    assert e.value.step == s and e.value.last_finite == pytest.approx(float(ref[0]), rel=1e-12, abs=1e-14)
    # the record of the finite run: the loss per member at its first and last step, and the state
    assert res.trajectory.series("loss", member=1)[0].tolist() == [0, s - 1]
    assert res.trajectory.last("loss", member=1) == pytest.approx(float(ref[1]), rel=1e-12)
    assert res.state[0] is A1 and res.state[1] is A2


def test_stiefel_gd_overflowing_step_is_not_retracted_but_reported():
    # η = 1e308: W − η∇W overflows to inf. Retracting it would fail inside the SVD (or, for a single inf entry,
    # map it to an arbitrary orthonormal matrix and go on); instead the next loss is non-finite and the guard
    # stops at step 1.
    C, W1, W2 = _stiefel_problem(seed=3)
    C = 100.0 * C  # gradient entries >> 1, so that η∇W overflows already at the first update
    X = W1.clone()
    X[0, 0, 0] = math.inf
    assert torch.isfinite(polar_retract(X[0])).all()  # the silent case the guard must not miss
    with pytest.raises(NonFiniteLossError) as e:
        _stiefel_run(C, W1, W2, steps=10, lr=1e308)
    L0 = float(trace_loss(W1, W2, C)[e.value.member])  # loss of the initial weights = a run of 0 steps
    assert e.value.step == 1 and e.value.last_finite == pytest.approx(L0, rel=1e-12)
    assert not math.isfinite(e.value.value)


def test_retract_finite_keeps_bad_members_and_retracts_the_others():
    X = torch.randn(3, 9, 4, dtype=D)
    X[1, 2, 0] = math.nan
    X[2, 0, 3] = math.inf
    out = retract_finite(X, "polar")
    # a batched SVD is not bit-identical to a single one (LAPACK blocking): equal to round-off
    np.testing.assert_allclose(out[0].numpy(), polar_retract(X[0]).numpy(), rtol=0, atol=1e-13)
    assert torch.isnan(out[1, 2, 0]) and torch.isinf(out[2, 0, 3])
    np.testing.assert_array_equal(out[1:].numpy(), X[1:].numpy())  # unchanged, NaN in place


def test_two_layer_gd_divergence_names_first_non_finite_step():
    # plain GD on the unconstrained trace loss (C has a negative eigenvalue): unbounded below, the weights
    # blow up in finite time; the guard must stop at the first step whose loss is not finite.
    from ssldyn.models.two_layer import TwoLayerNet

    C = torch.diag(torch.tensor([-1.0, 0.5, 2.0], dtype=D))
    lr = 0.5

    def run(steps):
        net = TwoLayerNet(3, 6, 2, "linear", "unconstrained", ensemble=2, seeds=[1, 2], dtype=D)
        res = train_gd(
            net.weights(),
            lambda: trace_loss(net.W1, net.W2, C),
            update=lambda: sgd_step_(net.weights(), lr),
            steps=steps,
        )
        return res, net

    with pytest.raises(NonFiniteLossError, match=r"^loss of member \d became -?(nan|inf) at step \d+") as e:
        run(500)
    s = e.value.step
    assert s > 2
    # independent reference, written out: W ← W − η∇W with ∇ by autograd, s updates, loss Tr(a C aᵀ)
    net = TwoLayerNet(3, 6, 2, "linear", "unconstrained", ensemble=2, seeds=[1, 2], dtype=D)
    W1, W2 = net.W1.detach().clone().requires_grad_(), net.W2.detach().clone().requires_grad_()
    losses = []
    for k in range(s + 1):
        a = W2.mT @ W1
        loss = torch.einsum("ezd,df,ezf->e", a, C, a)
        losses.append(loss.detach())
        if k == s:
            break
        g1, g2 = torch.autograd.grad(loss.sum(), [W1, W2])
        with torch.no_grad():
            W1 -= lr * g1
            W2 -= lr * g2
    assert torch.isfinite(losses[s - 1]).all() and not torch.isfinite(losses[s]).all()
    m = e.value.member
    assert not torch.isfinite(losses[s][m]) and bool(torch.isfinite(losses[s][:m]).all())  # the first bad member
    assert e.value.last_finite == pytest.approx(float(losses[s - 1][m]), rel=1e-9)
    res, _ = run(s - 1)  # the same loop stopped one step earlier ends on the last finite loss
    assert res.trajectory.last("loss", member=m) == e.value.last_finite


def test_guard_deferred_mode_reports_the_same_step():
    # the accelerator mode (checked in blocks, one transfer each) must name the same step, member and last
    # finite value as an eager guard; lazy=True only selects the mode here, the losses are CPU tensors.
    losses = [torch.tensor([1.0 + k, 2.0 * k]) for k in range(10)] + [torch.tensor([math.inf, 0.0])]
    losses += [torch.tensor([math.nan, 1.0])] * 5
    eager, lazy = LossGuard(lazy=False), LossGuard(lazy=True, check_every=4)
    with pytest.raises(NonFiniteLossError) as e1:
        for k, v in enumerate(losses):
            eager.update(k, v)
    with pytest.raises(NonFiniteLossError) as e2:
        for k, v in enumerate(losses):
            lazy.update(k, v)
        lazy.check()
    assert (e1.value.step, e1.value.member, e1.value.last_finite) == (10, 0, 1.0 + 9)
    assert (e2.value.step, e2.value.member, e2.value.last_finite, e2.value.value) == (10, 0, 10.0, math.inf)
    ok = LossGuard(lazy=True, check_every=100)
    for k in range(5):
        ok.update(k, torch.tensor(float(k)))
    ok.check()
    assert ok.last_finite == 4.0


def test_plain_gd_is_the_step_of_sgd_step_bit_for_bit():
    g = torch.Generator().manual_seed(5)
    W0, G = torch.randn(3, 40, 7, generator=g, dtype=D), torch.randn(3, 40, 7, generator=g, dtype=D)
    ref = W0.clone().requires_grad_()
    ref.grad = G.clone()
    sgd_step_([ref], 0.037)
    W = W0.clone().requires_grad_()
    W.grad = G.clone()
    PlainGD([W], lr=0.037).step()
    assert torch.equal(W.detach(), ref.detach())
    torch.testing.assert_close(W.detach(), W0 - 0.037 * G, rtol=0, atol=0)  # W − η∇W, η∇W rounded first
    with pytest.raises(ValueError, match="lr must be a finite number >= 0"):
        PlainGD([W], lr=-1.0)


def test_train_gd_with_a_scheduler_matches_the_closed_form_of_an_annealed_rate():
    """``f(W) = ½‖W‖²`` (∇f = W): ``W_k = W_0 · Π_{j<k} (1 − η(j))``; the scheduler sets ``η(k)`` for update ``k``
    (``LambdaLR`` on a base rate 1.0), after ``after_step``; the optimizer passed as ``update``."""
    from torch.optim.lr_scheduler import LambdaLR

    def eta(k):
        return 0.1 / (k + 1)

    W = torch.ones(2, 3, dtype=D, requires_grad=True)
    opt, calls = PlainGD([W], lr=1.0), []
    sched = LambdaLR(opt, eta)
    assert opt.param_groups[0]["lr"] == 0.1  # η(0) is set at once
    train_gd([W], lambda: 0.5 * W.pow(2).sum(), update=opt, after_step=lambda: calls.append(opt.param_groups[0]["lr"]),
             scheduler=sched, steps=4)  # fmt: skip
    expected = math.prod(1.0 - eta(j) for j in range(4))
    torch.testing.assert_close(W.detach(), torch.full((2, 3), expected, dtype=D), rtol=1e-15, atol=0)
    assert calls == [eta(j) for j in range(4)]  # after_step runs before the scheduler sets the next rate
    assert opt.param_groups[0]["lr"] == eta(4)


def test_manifold_gd_refuses_a_start_off_the_stiefel_manifold():
    """A non-orthonormal start was accepted and the first retraction jumped to the manifold whatever the gradient
    (polar(2Q) = Q: a loss quadratic in W drops by the factor 4 in one step of any size). The tolerance is max(1e-6, √ε) of the dtype on
    orthogonality_error = max|WᵀW − I| (computed here by hand): 1e-6 in float64, √ε ≈ 3.5e-4 in float32."""
    g = torch.Generator().manual_seed(0)
    Q = random_stiefel(8, 3, generator=g, dtype=D)  # (8, 3) orthonormal columns
    with pytest.raises(ValueError, match=r"^ManifoldGD: parameter 1 of shape \(8, 3\) does not start on the Stiefel "
                                         r"manifold: orthogonality_error max\|WᵀW − I\| = 3 > 1e-06 .*polar_retract"):  # fmt: skip
        ManifoldGD([Q.clone(), 2 * Q], lr=0.1)  # 2Q: WᵀW = 4I
    eye = torch.eye(3, dtype=D)
    for scale, ok in ((1 + 2e-7, True), (1 + 2e-6, False)):  # |WᵀW − I| = scale² − 1 ≈ 4e-7 / 4e-6
        W = Q * scale
        assert ((W.T @ W - eye).abs().max() <= 1e-6) == ok  # the hand-computed error is on the expected side
        if ok:
            ManifoldGD([W], lr=0.1)
        else:
            with pytest.raises(ValueError, match=r"does not start on the Stiefel manifold"):
                ManifoldGD([W], lr=0.1)
    Q32 = Q.float()
    ManifoldGD([Q32 * (1 + 1e-4)], lr=0.1)  # float32: |WᵀW − I| ≈ 2e-4 <= √ε
    with pytest.raises(ValueError, match=r"> 0\.00035 \(max\(1e-6, √ε\) of torch\.float32\)"):
        ManifoldGD([Q32 * (1 + 1e-3)], lr=0.1)  # ≈ 2e-3
    batch = random_stiefel(8, 3, 4, generator=g, dtype=D)  # (4, 8, 3): one bad member is enough
    batch[2] *= 1.01
    with pytest.raises(ValueError, match=r"parameter 0 of shape \(4, 8, 3\)"):
        ManifoldGD([batch], lr=0.1)
    ManifoldGD([retract(batch), polar_retract(batch.mT)], lr=0.1)  # the suggested fix; wide (rows) too
    nan = Q.clone()
    nan[0, 0] = math.nan
    with pytest.raises(ValueError, match=r"= nan > 1e-06"):
        ManifoldGD([nan], lr=0.1)
