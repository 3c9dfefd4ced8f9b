"""α-CL objectives (nonlinearity Sec. 2, eq. 1-3, Lemma 1) against loops and identities."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import logsumexp

from ssldyn.objectives import (
    AlphaCLEnergy,
    QuadraticContrastiveLoss,
    alpha_cl_energy,
    alpha_gaussian,
    alpha_infonce,
    alpha_uniform,
    contrastive_covariance,
    info_nce,
    quadratic_contrastive_loss,
)


def _rand(*shape, seed=0, dtype=torch.float64):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def ref_covariance(a, a_pos, b, b_pos, alpha):
    """Eq. (3) literally: 1/(2N²) Σ_{i,j} α_ij [(a_i-a_j)(b_i-b_j)ᵀ - (a_i-a_i')(b_i-b_i')ᵀ]."""
    a, a_pos, b, b_pos, alpha = (np.asarray(t, np.float64) for t in (a, a_pos, b, b_pos, alpha))
    n = a.shape[0]
    c = np.zeros((a.shape[1], b.shape[1]))
    for i in range(n):
        for j in range(n):
            c += alpha[i, j] * (np.outer(a[i] - a[j], b[i] - b[j]) - np.outer(a[i] - a_pos[i], b[i] - b_pos[i]))
    return c / (2 * n * n)


def ref_alpha_infonce(z1, z2, tau, eps):
    z1, z2 = np.asarray(z1, np.float64), np.asarray(z2, np.float64)
    n = len(z1)
    d2 = lambda u, v: 0.5 * np.sum((u - v) ** 2)  # noqa: E731
    alpha = np.zeros((n, n))
    for i in range(n):
        z = eps * math.exp(-d2(z1[i], z2[i]) / tau) + sum(math.exp(-d2(z1[i], z1[k]) / tau) for k in range(n) if k != i)
        for j in range(n):
            if j != i:
                alpha[i, j] = math.exp(-d2(z1[i], z1[j]) / tau) / z
    return alpha


def ref_alpha_infonce_log(z1, z2, tau, eps):
    """ref_alpha_infonce in the log domain (scipy's logsumexp): exact where e^{-d²/τ} underflows."""
    z1, z2 = np.asarray(z1, np.float64), np.asarray(z2, np.float64)
    n = len(z1)
    alpha = np.zeros((n, n))
    for i in range(n):
        logits = [-0.5 * np.sum((z1[i] - z1[k]) ** 2) / tau for k in range(n) if k != i]
        if eps > 0:
            logits.append(-0.5 * np.sum((z1[i] - z2[i]) ** 2) / tau + math.log(eps))
        log_z = logsumexp(logits)
        for j in range(n):
            if j != i:
                alpha[i, j] = math.exp(-0.5 * np.sum((z1[i] - z1[j]) ** 2) / tau - log_z)
    return alpha


def ref_quadratic(z1, z2, t, similarity):
    z1, z2 = np.asarray(z1, np.float64), np.asarray(z2, np.float64)
    if similarity == "cosine":
        z1 = z1 / np.linalg.norm(z1, axis=1, keepdims=True)
        z2 = z2 / np.linalg.norm(z2, axis=1, keepdims=True)
    s = (lambda u, v: -0.5 * np.sum((u - v) ** 2)) if similarity == "sqdist" else (lambda u, v: float(u @ v))
    n = len(z1)
    pos = sum(s(z1[i], z2[i]) for i in range(n))
    neg = sum(s(z1[i], z1[j]) for i in range(n) for j in range(n) if j != i)
    return -pos / (n * t) + neg / (n * n * t)


# --------------------------------------------------------------------------- contrastive covariance
def test_covariance_matches_loop_reference():
    a, a_pos = _rand(5, 3, seed=0), _rand(5, 3, seed=1)
    b, b_pos = _rand(5, 2, seed=2), _rand(5, 2, seed=3)
    alpha = torch.rand(5, 5, generator=torch.Generator().manual_seed(4), dtype=torch.float64)  # asymmetric, diag ≠ 0
    got = contrastive_covariance(a, a_pos, b, b_pos, alpha=alpha)
    assert got.shape == (3, 2)
    np.testing.assert_allclose(got.numpy(), ref_covariance(a, a_pos, b, b_pos, alpha), rtol=1e-12, atol=1e-14)
    # default b = a, alpha = 1
    np.testing.assert_allclose(
        contrastive_covariance(a, a_pos).numpy(),
        ref_covariance(a, a_pos, a, a_pos, np.ones((5, 5))),
        rtol=1e-12,
        atol=1e-14,
    )


def test_uniform_alpha_without_augmentation_is_the_covariance():
    """Corollary 1 / Assumption 2: α ≡ 1 and no augmentation give C_α[g] = V[g] (biased, finite N exact)."""
    a = _rand(7, 3, seed=5)
    got = contrastive_covariance(a, a, alpha=alpha_uniform(7, dtype=torch.float64))
    np.testing.assert_allclose(got.numpy(), np.cov(a.numpy().T, bias=True), rtol=1e-12, atol=1e-14)


def test_linear_features_pull_out():
    """Sec. 3: C_α[Wx] = W C_α[x] Wᵀ (the linear case reduces to an eigenproblem)."""
    x, x_pos, w = _rand(6, 4, seed=6), _rand(6, 4, seed=7), _rand(2, 4, seed=8)
    alpha = alpha_gaussian(_rand(6, 3, seed=9), 2.0)
    lhs = contrastive_covariance(x @ w.T, x_pos @ w.T, alpha=alpha)
    rhs = w @ contrastive_covariance(x, x_pos, alpha=alpha) @ w.T
    torch.testing.assert_close(lhs, rhs, rtol=1e-12, atol=1e-14)


def test_energy_is_half_trace_and_stop_gradient():
    f, f_pos = _rand(5, 3, seed=10), _rand(5, 3, seed=11)
    alpha = torch.rand(5, 5, generator=torch.Generator().manual_seed(12), dtype=torch.float64).requires_grad_(True)
    e = alpha_cl_energy(f, f_pos, alpha)
    assert e.item() == pytest.approx(0.5 * np.trace(ref_covariance(f, f_pos, f, f_pos, alpha.detach())), rel=1e-12)
    assert not e.requires_grad  # α detached and f constant: nothing to differentiate
    e2 = alpha_cl_energy(f, f_pos, alpha, stop_gradient=False)
    assert e2.requires_grad


# --------------------------------------------------------------------------- pairwise importance
@pytest.mark.parametrize("eps", [0.0, 0.7])
def test_alpha_infonce_matches_loop_reference(eps):
    z1, z2 = _rand(5, 3, seed=13), _rand(5, 3, seed=14)
    got = alpha_infonce(z1, z2, 0.6, eps=eps)
    np.testing.assert_allclose(got.numpy(), ref_alpha_infonce(z1, z2, 0.6, eps), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(ref_alpha_infonce_log(z1, z2, 0.6, eps), ref_alpha_infonce(z1, z2, 0.6, eps), rtol=1e-12)
    assert torch.all(got.diagonal() == 0)
    if eps == 0:
        torch.testing.assert_close(got.sum(-1), torch.ones(5, dtype=torch.float64))
        torch.testing.assert_close(alpha_infonce(z1, None, 0.6), got)  # z2 not needed when ε = 0
    d2 = 0.5 * torch.cdist(z1, z1) ** 2
    d2.diagonal().copy_(0.5 * (z1 - z2).pow(2).sum(-1))
    torch.testing.assert_close(alpha_infonce(d2=d2, temperature=0.6, eps=eps), got)


def test_alpha_gaussian_matches_loop_reference_and_is_psd():
    x0 = _rand(6, 3, seed=15)
    g = torch.relu
    got = alpha_gaussian(x0, 0.8, g=g)
    y = torch.relu(x0).numpy()
    want = np.array([[math.exp(-np.sum((y[i] - y[j]) ** 2) / (2 * 0.8)) for j in range(6)] for i in range(6)])
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12)
    assert torch.all(got.diagonal() == 1)
    assert torch.linalg.eigvalsh(got).min() > -1e-12  # kernel structure (Def. 1) => PSD


def test_alpha_uniform():
    assert torch.equal(alpha_uniform(3), torch.ones(3, 3))
    with pytest.raises(ValueError, match=r"alpha_uniform: n must be an integer >= 1"):
        alpha_uniform(0)


# --------------------------------------------------------------------------- quadratic loss and identities
@pytest.mark.parametrize("similarity", ["cosine", "sqdist", "dot"])
def test_quadratic_matches_loop_reference(similarity):
    z1, z2 = _rand(5, 3, seed=16), _rand(5, 3, seed=17)
    got = quadratic_contrastive_loss(z1, z2, 0.3, similarity=similarity)
    assert got.item() == pytest.approx(ref_quadratic(z1, z2, 0.3, similarity), rel=1e-12)


def test_quadratic_matches_reference_code_formula():
    """The nonlinearity reference code: -(1 + 1/N)·mean(diag(M/T)) + mean(M/T)."""
    z1, z2 = _rand(6, 4, seed=18), _rand(6, 4, seed=19)
    a, b = F.normalize(z1, dim=1), F.normalize(z2, dim=1)
    m = a @ a.T
    m[range(6), range(6)] = (a * b).sum(1)
    x = m / 0.5
    want = -(1 + 1 / 6) * x.diagonal().mean() + x.mean()
    assert quadratic_contrastive_loss(z1, z2, 0.5).item() == pytest.approx(want.item(), rel=1e-12)


def test_quadratic_loss_is_minus_two_energy_over_T_for_uniform_alpha():
    """Quadratic loss = α-CL with α ≡ 1: L = -tr C_1[f] / T = -2 E_1 / T (sqdist similarity)."""
    f, f_pos = _rand(2, 6, 3, seed=20), _rand(2, 6, 3, seed=21)
    loss = quadratic_contrastive_loss(f, f_pos, 0.7, similarity="sqdist")
    energy = alpha_cl_energy(f, f_pos, alpha_uniform(6, dtype=torch.float64))
    torch.testing.assert_close(loss, -2 * energy / 0.7, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("eps", [0.0, 1.0, 0.3])
def test_infonce_gradient_is_alpha_cl_gradient(eps):
    """nonlinearity eq. (1)-(3): ∇ L_nce = -N² ∇ tr C_sg(α) with InfoNCE α; info_nce = L_nce/(Nτ)."""
    n, tau = 6, 0.4
    f = _rand(n, 3, seed=22).requires_grad_(True)
    f_pos = _rand(n, 3, seed=23).requires_grad_(True)
    loss = info_nce(f, f_pos, tau, eps=eps, similarity="sqdist", negatives="view1")
    energy = alpha_cl_energy(f, f_pos, alpha_infonce(f, f_pos, tau, eps=eps))
    g_loss = torch.autograd.grad(loss, (f, f_pos))
    g_energy = torch.autograd.grad(energy, (f, f_pos))
    for gl, ge in zip(g_loss, g_energy):
        torch.testing.assert_close(gl, -(2 * n / tau) * ge, rtol=1e-10, atol=1e-12)


# --------------------------------------------------------------------------- gradcheck, ensemble, stability
def test_gradcheck():
    a, a_pos = _rand(4, 3, seed=24).requires_grad_(True), _rand(4, 3, seed=25).requires_grad_(True)
    b, b_pos = _rand(4, 2, seed=26).requires_grad_(True), _rand(4, 2, seed=27).requires_grad_(True)
    alpha = torch.rand(4, 4, generator=torch.Generator().manual_seed(28), dtype=torch.float64).requires_grad_(True)
    assert torch.autograd.gradcheck(lambda *t: contrastive_covariance(*t[:4], alpha=t[4]), (a, a_pos, b, b_pos, alpha))
    assert torch.autograd.gradcheck(
        lambda f, fp, al: alpha_cl_energy(f, fp, al, stop_gradient=False), (a, a_pos, alpha)
    )
    assert torch.autograd.gradcheck(lambda f, fp: alpha_infonce(f, fp, 0.5, eps=0.5), (a, a_pos))
    assert torch.autograd.gradcheck(lambda x: alpha_gaussian(x, 0.9), (a,))
    for sim in ("cosine", "sqdist", "dot"):
        assert torch.autograd.gradcheck(
            lambda u, v, sim=sim: quadratic_contrastive_loss(u, v, 0.5, similarity=sim), (a, a_pos)
        )


def test_ensemble_axis_equals_separate_calls():
    e = 3
    f, f_pos, x0 = _rand(e, 5, 3, seed=29), _rand(e, 5, 3, seed=30), _rand(e, 5, 2, seed=31)
    alpha = alpha_gaussian(x0, 0.5)  # (E, N, N)
    cov = contrastive_covariance(f, f_pos, alpha=alpha)
    en = alpha_cl_energy(f, f_pos, alpha_infonce(f, f_pos, 0.5, eps=0.2))
    q = quadratic_contrastive_loss(f, f_pos, 0.5)
    assert cov.shape == (e, 3, 3) and en.shape == (e,) and q.shape == (e,)
    for k in range(e):
        torch.testing.assert_close(cov[k], contrastive_covariance(f[k], f_pos[k], alpha=alpha_gaussian(x0[k], 0.5)))
        ek = alpha_cl_energy(f[k], f_pos[k], alpha_infonce(f[k], f_pos[k], 0.5, eps=0.2))
        assert en[k].item() == pytest.approx(ek.item(), rel=1e-12)
        assert q[k].item() == pytest.approx(quadratic_contrastive_loss(f[k], f_pos[k], 0.5).item(), rel=1e-12)
    # a shared (N, N) α broadcasts over members
    shared = contrastive_covariance(f, f_pos, alpha=alpha[0])
    torch.testing.assert_close(shared[2], contrastive_covariance(f[2], f_pos[2], alpha=alpha[0]))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_stable_at_tiny_temperature(dtype):
    f = F.normalize(_rand(2, 16, 8, seed=32, dtype=dtype), dim=-1).requires_grad_(True)
    f_pos = F.normalize(_rand(2, 16, 8, seed=33, dtype=dtype), dim=-1).requires_grad_(True)
    a, b = f.detach().double().numpy(), f_pos.detach().double().numpy()  # the same (rounded) inputs in float64
    tol = dict(rtol=1e-10, atol=1e-12) if dtype == torch.float64 else dict(rtol=1e-3, atol=1e-4)
    for eps in (0.0, 1.0):
        alpha = alpha_infonce(f, f_pos, 1e-3, eps=eps)
        assert alpha.dtype == dtype and torch.isfinite(alpha).all()
        if eps == 0:
            torch.testing.assert_close(alpha.sum(-1), torch.ones(2, 16, dtype=dtype))
        # against the log-domain float64 reference: at τ = 1e-3 the naive loop gives 0/0
        ref_alpha = [ref_alpha_infonce_log(a[e], b[e], 1e-3, eps) for e in range(2)]
        np.testing.assert_allclose(alpha.detach().double().numpy(), ref_alpha, **tol)
        energy = alpha_cl_energy(f, f_pos, alpha)
        ref_energy = [0.5 * np.trace(ref_covariance(a[e], b[e], a[e], b[e], ref_alpha[e])) for e in range(2)]
        np.testing.assert_allclose(energy.detach().double().numpy(), ref_energy, **tol)
        assert all(torch.isfinite(g).all() for g in torch.autograd.grad(energy.sum(), (f, f_pos)))
    q = quadratic_contrastive_loss(f, f_pos, 1e-3)
    assert torch.isfinite(q).all() and all(torch.isfinite(g).all() for g in torch.autograd.grad(q.sum(), (f, f_pos)))
    ref_q = [ref_quadratic(a[e], b[e], 1e-3, "cosine") for e in range(2)]
    np.testing.assert_allclose(q.detach().double().numpy(), ref_q, rtol=1e-10 if dtype == torch.float64 else 1e-3)
    ga = alpha_gaussian(f, 1e-3)
    assert torch.isfinite(ga).all() and torch.isfinite(torch.autograd.grad(ga.sum(), f)[0]).all()


def test_modules_and_validation():
    f, f_pos = _rand(4, 3, seed=34), _rand(4, 3, seed=35)
    assert AlphaCLEnergy()(f, f_pos).item() == pytest.approx(alpha_cl_energy(f, f_pos).item())
    assert QuadraticContrastiveLoss(0.2, similarity="dot")(f, f_pos).item() == pytest.approx(
        quadratic_contrastive_loss(f, f_pos, 0.2, similarity="dot").item()
    )
    with pytest.raises(ValueError, match="alpha must have shape"):
        contrastive_covariance(f, f_pos, alpha=torch.ones(3, 3, dtype=torch.float64))
    with pytest.raises(ValueError, match="both b and b_pos"):
        contrastive_covariance(f, f_pos, b=f)
    with pytest.raises(ValueError, match="a and a_pos must have the same shape"):
        contrastive_covariance(f, f_pos[:3])
    with pytest.raises(ValueError, match="z2 is required when eps > 0"):
        alpha_infonce(f, None, 0.5, eps=1.0)
    with pytest.raises(ValueError, match="not both"):
        alpha_infonce(f, d2=torch.ones(4, 4, dtype=torch.float64))
    with pytest.raises(ValueError, match="temperature"):
        alpha_gaussian(f, 0.0)
    with pytest.raises(ValueError, match="similarity .*: allowed values are"):
        quadratic_contrastive_loss(f, f_pos, similarity="l1")


def test_b_of_another_dtype_is_one_error_and_the_cast_matches_the_loop_reference():
    # b in float64 with a in float32 used to die inside a matmul (torch's "expected m1 and m2 to have the same dtype")
    a, a_pos = _rand(6, 3, seed=36, dtype=torch.float32), _rand(6, 3, seed=37, dtype=torch.float32)
    b, b_pos = _rand(6, 2, seed=38), _rand(6, 2, seed=39)
    with pytest.raises(
        ValueError,
        match=r"^contrastive_covariance: b and b_pos must have the dtype of a \(torch\.float32\), got torch\.float64$",
    ):
        contrastive_covariance(a, a_pos, b, b_pos)
    got = contrastive_covariance(a, a_pos, b.float(), b_pos.float())
    want = ref_covariance(a, a_pos, b.float(), b_pos.float(), np.ones((6, 6)))
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-6)


def test_alpha_whose_ensemble_axes_do_not_broadcast_is_one_error():
    # alpha (2, N, N) against features (3, N, p) used to fail inside torch's matmul
    f, f_pos = _rand(3, 6, 3, seed=40), _rand(3, 6, 3, seed=41)
    alpha = torch.rand(2, 6, 6, generator=torch.Generator().manual_seed(42), dtype=torch.float64)
    with pytest.raises(
        ValueError,
        match=r"^contrastive_covariance: the ensemble axes \(\.\.\.\) of alpha \(2, 6, 6\) do not broadcast "
        r"against those of a \(3, 6, 3\)$",
    ):
        contrastive_covariance(f, f_pos, alpha=alpha)
    with pytest.raises(
        ValueError, match=r"^alpha_cl_energy: the ensemble axes \(\.\.\.\) of alpha \(2, 6, 6\) .* of f "
    ):
        alpha_cl_energy(f, f_pos, alpha)
    # axes that broadcast still work: (1, N, N) and (3, N, N) against (3, N, p), (2, 1, N, N) against (3, N, p)
    a3 = torch.rand(3, 6, 6, generator=torch.Generator().manual_seed(43), dtype=torch.float64)
    got = contrastive_covariance(f, f_pos, alpha=a3[:1])
    got4 = contrastive_covariance(f, f_pos, alpha=torch.stack([a3[:1], a3[1:2]]))  # (2, 1, 6, 6)
    assert got4.shape == (2, 3, 3, 3)
    for k in range(3):
        want = ref_covariance(f[k], f_pos[k], f[k], f_pos[k], a3[0])
        np.testing.assert_allclose(got[k].numpy(), want, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(got4[1, k].numpy(), ref_covariance(f[k], f_pos[k], f[k], f_pos[k], a3[1]),
                                   rtol=1e-12, atol=1e-14)  # fmt: skip


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(2, 7))
def test_property_gaussian_alpha_covariance_is_psd_without_augmentation(seed, n):
    """Lemma 2 (finite N, no augmentation): C_α[g] = (1/2N²) Σ α_ij (g_i-g_j)(g_i-g_j)ᵀ is PSD for α >= 0."""
    x0 = _rand(n, 3, seed=seed)
    c = contrastive_covariance(x0, x0, alpha=alpha_gaussian(x0, 0.5))
    assert torch.linalg.eigvalsh(c).min() > -1e-12


# validation of contrastive_covariance the other tests never reached
def test_alpha_of_another_float_dtype_is_cast_to_the_features_dtype():
    a, a_pos = _rand(5, 3, seed=1), _rand(5, 3, seed=2)
    alpha32 = torch.rand(5, 5, generator=torch.Generator().manual_seed(3))  # e.g. α from a float32 network
    got = contrastive_covariance(a, a_pos, alpha=alpha32)
    assert got.dtype == torch.float64
    A, P, W = a.numpy(), a_pos.numpy(), alpha32.double().numpy()
    ref = ref_covariance(A, P, A, P, W)  # eq. (3) literally
    np.testing.assert_allclose(got.numpy(), ref, rtol=1e-12, atol=1e-14)
    assert alpha_cl_energy(a, a_pos, alpha32).item() == pytest.approx(0.5 * np.trace(ref), rel=1e-12)


def test_b_with_other_leading_axes_is_one_error():
    a, a_pos = _rand(5, 3, seed=4), _rand(5, 3, seed=5)
    b, b_pos = _rand(2, 5, 2, seed=6), _rand(2, 5, 2, seed=7)  # an ensemble axis a does not have
    with pytest.raises(ValueError, match=r"b must have the same leading shape \(\.\.\., N\) as a"):
        contrastive_covariance(a, a_pos, b, b_pos)


def test_energy_module_forwards_stop_gradient():
    """AlphaCLEnergy(stop_gradient=False): ∂E/∂α_ij = (‖f_i − f_j‖² − ‖f_i − f_i'‖²)/(4N²) (eq. 3, linear in α)."""
    from ssldyn.objectives import AlphaCLEnergy

    f, f_pos = _rand(4, 3, seed=8), _rand(4, 3, seed=9)
    alpha = torch.rand(4, 4, generator=torch.Generator().manual_seed(10), dtype=torch.float64).requires_grad_(True)
    (g,) = torch.autograd.grad(AlphaCLEnergy(stop_gradient=False)(f, f_pos, alpha), alpha)
    F, P = f.numpy(), f_pos.numpy()
    ref = [[(np.sum((F[i] - F[j]) ** 2) - np.sum((F[i] - P[i]) ** 2)) / (4 * 16) for j in range(4)] for i in range(4)]
    np.testing.assert_allclose(g.numpy(), ref, rtol=1e-12, atol=1e-15)
    assert not AlphaCLEnergy()(f, f_pos, alpha).requires_grad  # default: α detached
