"""grassmann losses (eq. 1, 2, 7, 8, Prop. 3) against loops and the linear-model identity."""

import numpy as np
import pytest
import torch

from ssldyn.objectives import (
    NonContrastiveLoss,
    SimpleContrastiveLoss,
    TraceLoss,
    contrast_matrix,
    non_contrastive,
    non_contrastive_matrix,
    scaled_trace_loss,
    simple_contrastive,
    trace_loss,
)


def _rand(*shape, seed=0, dtype=torch.float64):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def _agg(v, how):
    """(p, z) -> (z) by sum/mean; (z,) stays."""
    v = np.asarray(v, np.float64)
    if v.ndim == 1:
        return v
    return v.sum(0) if how == "sum" else v.mean(0)


def ref_simple_contrastive(u, u_pos, u_neg, how="sum"):
    return sum(float(u[i] @ (_agg(u_neg[i], how) - _agg(u_pos[i], how))) for i in range(len(u)))


def ref_non_contrastive(u, u_pos, how="sum"):
    return -sum(float(u[i] @ _agg(u_pos[i], how)) for i in range(len(u)))


def ref_c_tilde(x, x_pos, x_neg, how="sum"):
    """Text after eq. (7): C̃ = Σ_i (Σ_j^q x_i x_j⁻ᵀ - Σ_j^p x_i x_j⁺ᵀ) (loops over i and j)."""
    x = np.asarray(x, np.float64)
    d = x.shape[1]
    c = np.zeros((d, d))
    for i in range(len(x)):
        negs = np.atleast_2d(np.asarray(x_neg[i]))
        poss = np.atleast_2d(np.asarray(x_pos[i]))
        wn = 1.0 if how == "sum" else 1.0 / len(negs)
        wp = 1.0 if how == "sum" else 1.0 / len(poss)
        for xn in negs:
            c += wn * np.outer(x[i], xn)
        for xp in poss:
            c -= wp * np.outer(x[i], xp)
    return c


def _linear(W1, W2, x):
    """u(x) = W2ᵀ W1 x applied to (..., d) rows."""
    return x @ (W2.mT @ W1).mT


@pytest.mark.parametrize("how", ["sum", "mean"])
@pytest.mark.parametrize("p,q", [(None, None), (3, 2)])
def test_simple_contrastive_matches_loops(how, p, q):
    n, z = 5, 3
    u = _rand(n, z, seed=0)
    u_pos = _rand(n, z, seed=1) if p is None else _rand(n, p, z, seed=1)
    u_neg = _rand(n, z, seed=2) if q is None else _rand(n, q, z, seed=2)
    got = simple_contrastive(u, u_pos, u_neg, reduce_pairs=how)
    assert got.shape == ()
    assert got.item() == pytest.approx(ref_simple_contrastive(u.numpy(), u_pos.numpy(), u_neg.numpy(), how), rel=1e-12)
    got_nc = non_contrastive(u, u_pos, reduce_pairs=how)
    assert got_nc.item() == pytest.approx(ref_non_contrastive(u.numpy(), u_pos.numpy(), how), rel=1e-12)


def test_sum_and_mean_differ_with_several_pairs():
    u, u_pos, u_neg = _rand(4, 2, seed=3), _rand(4, 3, 2, seed=4), _rand(4, 2, 2, seed=5)
    s = simple_contrastive(u, u_pos, u_neg)
    m = simple_contrastive(u, u_pos, u_neg, reduce_pairs="mean")
    assert abs(s.item() - m.item()) > 1e-6


@pytest.mark.parametrize("how", ["sum", "mean"])
def test_contrast_matrix_matches_loops_and_is_symmetric(how):
    x, x_pos, x_neg = _rand(6, 4, seed=6), _rand(6, 2, 4, seed=7), _rand(6, 3, 4, seed=8)
    c_tilde = contrast_matrix(x, x_pos, x_neg, reduce_pairs=how, symmetrize=False)
    want = ref_c_tilde(x.numpy(), x_pos.numpy(), x_neg.numpy(), how)
    np.testing.assert_allclose(c_tilde.numpy(), want, rtol=1e-12, atol=1e-13)
    c = contrast_matrix(x, x_pos, x_neg, reduce_pairs=how)
    np.testing.assert_allclose(c.numpy(), 0.5 * (want + want.T), rtol=1e-12, atol=1e-13)
    nc = non_contrastive_matrix(x, x_pos[:, 0], symmetrize=False)
    np.testing.assert_allclose(nc.numpy(), -x.numpy().T @ x_pos[:, 0].numpy(), rtol=1e-12)


def test_trace_loss_matches_explicit_trace():
    W1, W2, C = _rand(7, 4, seed=9), _rand(7, 2, seed=10), _rand(4, 4, seed=11)
    w1, w2, c = W1.numpy(), W2.numpy(), C.numpy()
    assert trace_loss(W1, W2, C).item() == pytest.approx(np.trace(w2.T @ w1 @ c @ w1.T @ w2), rel=1e-12)
    # batched over an ensemble axis, C broadcast; ensemble axes that do not broadcast are one error (was torch's)
    E1, E2 = torch.stack([W1, 2 * W1, -W1]), torch.stack([W2, W2, 3 * W2])  # (3, 7, 4), (3, 7, 2)
    ref = [np.trace(b.T @ a @ c @ a.T @ b) for a, b in zip(E1.numpy(), E2.numpy())]
    np.testing.assert_allclose(trace_loss(E1, E2, C).numpy(), ref, rtol=1e-12)
    with pytest.raises(ValueError, match=r"trace_loss: the ensemble axes .* do not broadcast"):
        trace_loss(E1, E2[:2], C)


@pytest.mark.parametrize("how", ["sum", "mean"])
@pytest.mark.parametrize("multi", [False, True])
def test_trace_loss_equals_losses_for_linear_model(how, multi):
    """Sec. 4: for u(x) = W2ᵀW1x, eq. (1) = Tr(W2ᵀW1 C W1ᵀW2) with C of eq. (7); same for eq. (2)."""
    n, d, h, z = 8, 4, 6, 3
    W1, W2 = _rand(h, d, seed=12), _rand(h, z, seed=13)
    x = _rand(n, d, seed=14)
    x_pos = _rand(n, 3, d, seed=15) if multi else _rand(n, d, seed=15)
    x_neg = _rand(n, 2, d, seed=16) if multi else _rand(n, d, seed=16)
    u, u_pos, u_neg = (_linear(W1, W2, t) for t in (x, x_pos, x_neg))
    c = contrast_matrix(x, x_pos, x_neg, reduce_pairs=how)
    assert trace_loss(W1, W2, c).item() == pytest.approx(
        simple_contrastive(u, u_pos, u_neg, reduce_pairs=how).item(), rel=1e-12
    )
    c_nc = contrast_matrix(x, x_pos, non_contrastive=True, reduce_pairs=how)
    assert trace_loss(W1, W2, c_nc).item() == pytest.approx(
        non_contrastive(u, u_pos, reduce_pairs=how).item(), rel=1e-12
    )


def test_scaled_trace_loss_prop3():
    W1, W2, C = _rand(6, 4, seed=17), _rand(6, 2, seed=18), _rand(4, 4, seed=19)
    C = 0.5 * (C + C.T)
    s = scaled_trace_loss(W1, W2, C)
    want = np.trace(W2.numpy().T @ W1.numpy() @ C.numpy() @ W1.numpy().T @ W2.numpy()) / (
        np.linalg.norm(W2.numpy(), 2) ** 2 * np.linalg.norm(W1.numpy(), 2) ** 2
    )
    assert s.item() == pytest.approx(want, rel=1e-12)
    # invariant to rescaling the weights
    assert scaled_trace_loss(3.0 * W1, 0.2 * W2, C).item() == pytest.approx(s.item(), rel=1e-12)
    # equals the trace loss under the orthogonality constraints W1ᵀW1 = I_d, W2ᵀW2 = I_z
    Q1, Q2 = torch.linalg.qr(W1).Q, torch.linalg.qr(W2).Q
    assert scaled_trace_loss(Q1, Q2, C).item() == pytest.approx(trace_loss(Q1, Q2, C).item(), rel=1e-12)


def test_gradcheck():
    u, u_pos, u_neg = (_rand(4, 2, 3, seed=s).requires_grad_(True) for s in (20, 21, 22))
    u = u[:, 0].detach().requires_grad_(True)
    assert torch.autograd.gradcheck(simple_contrastive, (u, u_pos, u_neg))
    assert torch.autograd.gradcheck(lambda a, b: non_contrastive(a, b, reduce_pairs="mean"), (u, u_pos))
    W1, W2, C = (_rand(*s, seed=k).requires_grad_(True) for k, s in enumerate([(5, 3), (5, 2), (3, 3)]))
    assert torch.autograd.gradcheck(trace_loss, (W1, W2, C))
    assert torch.autograd.gradcheck(scaled_trace_loss, (W1, W2, C))
    x, xp, xn = (_rand(4, 3, seed=k).requires_grad_(True) for k in (30, 31, 32))
    assert torch.autograd.gradcheck(contrast_matrix, (x, xp, xn))


def test_ensemble_axis_equals_separate_calls():
    e = 3
    u, u_pos, u_neg = _rand(e, 5, 2, seed=40), _rand(e, 5, 2, 2, seed=41), _rand(e, 5, 2, seed=42)
    x, x_pos, x_neg = _rand(e, 5, 4, seed=43), _rand(e, 5, 4, seed=44), _rand(e, 5, 4, seed=45)
    W1, W2 = _rand(e, 6, 4, seed=46), _rand(e, 6, 2, seed=47)
    C_shared = _rand(4, 4, seed=48)
    sc = simple_contrastive(u, u_pos, u_neg)
    nc = non_contrastive(u, u_pos)
    cm = contrast_matrix(x, x_pos, x_neg)
    tl = trace_loss(W1, W2, cm)
    tls = scaled_trace_loss(W1, W2, C_shared)
    assert sc.shape == nc.shape == tl.shape == tls.shape == (e,) and cm.shape == (e, 4, 4)
    for k in range(e):
        assert sc[k].item() == pytest.approx(simple_contrastive(u[k], u_pos[k], u_neg[k]).item(), rel=1e-12)
        assert nc[k].item() == pytest.approx(non_contrastive(u[k], u_pos[k]).item(), rel=1e-12)
        torch.testing.assert_close(cm[k], contrast_matrix(x[k], x_pos[k], x_neg[k]))
        assert tl[k].item() == pytest.approx(trace_loss(W1[k], W2[k], cm[k]).item(), rel=1e-12)
        assert tls[k].item() == pytest.approx(scaled_trace_loss(W1[k], W2[k], C_shared).item(), rel=1e-12)


def test_float32():
    W1, W2, C = _rand(5, 3, seed=50), _rand(5, 2, seed=51), _rand(3, 3, seed=52)
    l32 = scaled_trace_loss(W1.float(), W2.float(), C.float())
    assert l32.dtype == torch.float32
    assert l32.item() == pytest.approx(scaled_trace_loss(W1, W2, C).item(), rel=1e-5)


def test_modules_and_validation():
    u, u_pos, u_neg = _rand(4, 2, seed=60), _rand(4, 2, seed=61), _rand(4, 2, seed=62)
    assert SimpleContrastiveLoss()(u, u_pos, u_neg).item() == pytest.approx(simple_contrastive(u, u_pos, u_neg).item())
    assert NonContrastiveLoss()(u, u_pos).item() == pytest.approx(non_contrastive(u, u_pos).item())
    W1, W2, C = _rand(5, 3, seed=63), _rand(5, 2, seed=64), _rand(3, 3, seed=65)
    assert TraceLoss(scaled=True)(W1, W2, C).item() == pytest.approx(scaled_trace_loss(W1, W2, C).item())
    with pytest.raises(ValueError, match="u_pos must have shape"):
        simple_contrastive(u, u_pos[:3], u_neg)
    with pytest.raises(ValueError, match="share the hidden size h"):
        trace_loss(W1, W2[:4], C)
    with pytest.raises(ValueError, match="C must have shape"):
        trace_loss(W1, W2, C[:2, :2])
    with pytest.raises(ValueError, match="x_neg is required"):
        contrast_matrix(u, u_pos)
    with pytest.raises(ValueError, match="x_neg must be None"):
        contrast_matrix(u, u_pos, u_neg, non_contrastive=True)
    with pytest.raises(ValueError, match="reduce_pairs .*: allowed values are"):
        simple_contrastive(u, u_pos, u_neg, reduce_pairs="max")


@pytest.mark.parametrize("loss", [trace_loss, scaled_trace_loss])
def test_weights_and_C_of_different_dtypes_are_one_error_naming_the_function(loss):
    # C of float64 data (half_moons, make_views) with a float32 network used to die inside a matmul
    W1, W2 = _rand(5, 3, seed=70, dtype=torch.float32), _rand(5, 2, seed=71, dtype=torch.float32)
    x, x_pos, x_neg = _rand(8, 3, seed=72), _rand(8, 3, seed=73), _rand(8, 3, seed=74)
    C = contrast_matrix(x, x_pos, x_neg)  # float64
    name = loss.__name__
    with pytest.raises(
        ValueError,
        match=rf"^{name}: W1, W2 and C must have one dtype, got torch\.float32, torch\.float32 and torch\.float64 "
        r"\(cast C with C\.to\(torch\.float32\)\)$",
    ):
        loss(W1, W2, C)
    with pytest.raises(ValueError, match=rf"^{name}: W1, W2 and C must have one dtype, got torch\.float64, "):
        loss(W1.double(), W2, C)
    # the fix the message names: the float32 loss of the float64 reference, up to float32 rounding
    w1, w2, c = W1.double().numpy(), W2.double().numpy(), C.numpy()
    want = np.trace(w2.T @ w1 @ c @ w1.T @ w2)
    if loss is scaled_trace_loss:
        want /= np.linalg.norm(w1, 2) ** 2 * np.linalg.norm(w2, 2) ** 2
    assert loss(W1, W2, C.to(torch.float32)).item() == pytest.approx(want, rel=1e-5)
