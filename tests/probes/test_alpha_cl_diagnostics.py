import math

import numpy as np
import pytest
import torch

from ssldyn.data.latent import latent_summation_support, random_orthonormal_basis
from ssldyn.dynamics.alpha_cl import make_A_fn
from ssldyn.probes.alpha_cl import (
    angle_deg,
    ball_min_cos,
    circ_sep_deg,
    correlation,
    eigen_summary,
    irregularity,
    lipschitz_estimate,
    lme_test,
    local_roughness,
    mu_value,
    nu_value,
    prominent_maxima,
    sample_cap,
    stability_test,
    tangent_basis,
    theorem3_condition,
    theorem3_condition_discrete,
    theta_grid,
)

D = torch.float64


def gen(s=0):
    return torch.Generator().manual_seed(s)


def test_local_roughness_matches_autograd_jacobian():
    """Smooth A (quadratic activation): ρ(w) = ‖∂/∂v [A(v) w]|_{v=w} restricted to w⊥‖₂."""
    x = torch.randn(60, 4, generator=gen(), dtype=D)
    A_fn = make_A_fn(x, "quadratic")
    w = torch.randn(4, generator=gen(1), dtype=D)
    w = w / w.norm()
    J = torch.autograd.functional.jacobian(lambda v: A_fn(v[None])[0] @ w, w)  # (d, d): ∂(A(v)w)/∂v
    ref = torch.linalg.matrix_norm(J @ tangent_basis(w).T, ord=2)
    assert float(local_roughness(A_fn, w, eps=1e-5)) == pytest.approx(float(ref), rel=1e-6)


def test_summation_lme_threshold_and_stability():
    """Eq. 9: u_m is an LME iff (1-q)² > q, i.e. q < (3-√5)/2; stable (ρ = 0 at the population)."""
    d = 4
    U = random_orthonormal_basis(d, d, generator=gen(2))
    thr = (3 - math.sqrt(5)) / 2
    for q, expect in [(0.3, True), (0.37, True), (0.40, False), (0.6, False)]:
        xs, ps = latent_summation_support(U, q)
        A_fn = make_A_fn(xs, "relu", weights=ps)
        t = lme_test(A_fn, U[:, 0])
        assert t.is_lme == expect == (q < thr)
        if expect:
            assert t.gap == pytest.approx((1 - q) ** 2 - q, abs=1e-12)
            st = stability_test(A_fn, U[:, 0])
            assert st.stable and st.rho < 1e-8


def test_correlation_and_eigs():
    A = torch.diag(torch.tensor([3.0, 1.0, 0.5], dtype=D))
    lam1, lam2, gap, phi = eigen_summary(A)
    assert (float(lam1), float(lam2), float(gap)) == (3.0, 1.0, 2.0)
    w = torch.tensor([0.6, 0.8, 0.0], dtype=D)
    assert float(correlation(lambda W: A.expand(W.shape[0], 3, 3), w)) == pytest.approx(0.6)


def test_irregularity_formula_by_hand():
    A = torch.diag(torch.tensor([2.0, 1.0, 0.5], dtype=D))
    A_fn = lambda W: A.expand(W.shape[0], 3, 3)  # noqa: E731
    w = torch.tensor([0.8, 0.6, 0.0], dtype=D)
    irr = irregularity(A_fn, w, L=0.3)
    c, l1, l2, gap = 0.8, 2.0, 1.0, 1.0
    mu = (1 + c) / (2 * c * c) * (l2 / l1) ** 2
    assert float(mu_value(torch.tensor(c), torch.tensor(l1), torch.tensor(l2))) == pytest.approx(mu)
    kappa = 2.5 / gap**2
    nu = 2 * kappa * 0.09 * (1 + mu * c) + 2 * 0.3 / gap * math.sqrt(mu * (1 + mu * c))
    assert float(irr.mu) == pytest.approx(mu) and float(irr.omega) == pytest.approx(mu + nu)
    assert float(irregularity(A_fn, w, L=0.3, kappa=0.0).nu) == pytest.approx(2 * 0.3 * math.sqrt(mu * (1 + mu * c)))


def test_lipschitz_estimate_of_projector_family():
    """A(w) = wwᵀ: ‖wwᵀ − vvᵀ‖₂ / ‖w − v‖ = √((1 + wᵀv)/2) → 1 for close points."""
    A_fn = lambda W: W[:, :, None] * W[:, None, :]  # noqa: E731
    w0 = torch.tensor([1.0, 0.0, 0.0], dtype=D)
    pts = sample_cap(w0, math.cos(0.05), 40, generator=gen(3))
    assert float((pts @ w0).min()) >= math.cos(0.05) - 1e-12
    L = lipschitz_estimate(A_fn, pts)
    assert 0.999 < L <= 1.0 + 1e-12
    # exactly the max over pairs of the closed form (unit points: ‖wwᵀ − vvᵀ‖₂ = sin θ, ‖w − v‖ = √(2 − 2cos θ))
    P = pts.numpy()
    np.testing.assert_allclose(np.linalg.norm(P, axis=1), 1.0, rtol=1e-12)
    ref = max(math.sqrt((1 + P[i] @ P[j]) / 2) for i in range(40) for j in range(i + 1, 40))
    assert L == pytest.approx(ref, rel=1e-9)
    # A(w) = diag(w): ‖diag(w − v)‖₂ / ‖w − v‖₂ = ‖w − v‖_∞ / ‖w − v‖₂, max over pairs written out
    Q = torch.randn(30, 3, generator=gen(13), dtype=D)
    Q = Q / Q.norm(dim=1, keepdim=True)
    q = Q.numpy()
    ref = max(np.abs(q[i] - q[j]).max() / np.linalg.norm(q[i] - q[j]) for i in range(30) for j in range(i + 1, 30))
    assert lipschitz_estimate(torch.diag_embed, Q, chunk=7) == pytest.approx(ref, rel=1e-12)


def test_theorem3_condition_near_pattern_and_fails_far():
    d = 5
    U = random_orthonormal_basis(d, d, generator=gen(4))
    xs, ps = latent_summation_support(U, 0.2)
    A_fn = make_A_fn(xs, "relu", weights=ps)
    near = U[:, 0] + 0.02 * torch.randn(d, generator=gen(5), dtype=D)
    out = theorem3_condition(A_fn, near, n_samples=24, generator=gen(6))
    assert out["holds"] and out["c0"] > 0.99
    # around the uniform direction the top eigenvector is far from w: c0 small, condition fails
    far = torch.ones(d, dtype=D)
    assert not theorem3_condition(A_fn, far, n_samples=24, generator=gen(7))["holds"]


def test_mu_and_nu_are_the_formulas_of_lemma7_and_lemma10_written_out():
    """μ = (1 + c)/(2c²)(λ₂/λ₁)² (eq. 182), ν = 2κL²(1 + μc) + 2Lλ_gap⁻¹√(μ(1 + μc)) (eq. 193), κ = 5/(2λ_gap²)."""
    c = torch.tensor([0.9, 0.5, -0.3], dtype=D)  # a negative c (a sign flip of the iterate) is the formula's too
    l1, l2 = torch.tensor([2.0, 3.0, 1.5], dtype=D), torch.tensor([1.0, 0.5, 1.2], dtype=D)
    mu = mu_value(c, l1, l2)
    for i in range(3):
        ci, ratio = float(c[i]), float(l2[i] / l1[i])
        mu_i = (1 + ci) / (2 * ci * ci) * ratio * ratio
        assert float(mu[i]) == pytest.approx(mu_i, rel=1e-14)
        gap, L = float(l1[i] - l2[i]), 0.7
        kappa = 5 / (2 * gap * gap)
        ref = 2 * kappa * L * L * (1 + mu_i * ci) + 2 * L / gap * math.sqrt(mu_i * (1 + mu_i * ci))
        assert float(nu_value(c, mu, l1 - l2, L)[i]) == pytest.approx(ref, rel=1e-14)
        with_kappa = 2 * 0.1 * L * L * (1 + mu_i * ci) + 2 * L / gap * math.sqrt(mu_i * (1 + mu_i * ci))
        assert float(nu_value(c, mu, l1 - l2, L, 0.1)[i]) == pytest.approx(with_kappa, rel=1e-14)
    assert math.isinf(float(mu_value(torch.tensor(0.0, dtype=D), torch.tensor(1.0, dtype=D), torch.tensor(0.5))))
    # an L per point (the secant constants of a power-iteration step)
    Ls = torch.tensor([0.1, 0.2, 0.3], dtype=D)
    assert float(nu_value(c, mu, l1 - l2, Ls)[1]) == pytest.approx(
        float(nu_value(c[1:2], mu[1:2], (l1 - l2)[1:2], 0.2))
    )


def test_ball_min_cos_is_the_cap_of_theorem3():
    """B_γ = {w : wᵀw(0) ≥ (c₀ − c_γ)/(1 − c_γ)}, c_γ = 2√γ/(1 + γ): γ = 1/4 gives c_γ = 0.8."""
    assert ball_min_cos(0.9, 0.25) == pytest.approx((0.9 - 0.8) / (1 - 0.8), rel=1e-14)
    assert ball_min_cos(0.8, 0.25) == pytest.approx(0.0, abs=1e-15)  # c₀ = c_γ: a hemisphere
    assert ball_min_cos(1.0, 0.5) == pytest.approx(1.0)  # c₀ = 1: the cap is the point w(0) only
    # both Thm. 3 checks use this bound
    d = 4
    U = random_orthonormal_basis(d, d, generator=gen(8))
    xs, ps = latent_summation_support(U, 0.2)
    A_fn = make_A_fn(xs, "relu", weights=ps)
    w0 = U[:, 0] + 0.01 * torch.randn(d, generator=gen(9), dtype=D)
    for out in (theorem3_condition(A_fn, w0, gammas=(0.3, 0.6), n_samples=8, generator=gen(10)),
                theorem3_condition_discrete(A_fn, xs, w0, gammas=(0.3, 0.6))):  # fmt: skip
        cg = [2 * math.sqrt(g) / (1 + g) for g in (0.3, 0.6)]
        assert [r["min_cos"] for r in out["per_gamma"]] == pytest.approx([(out["c0"] - c) / (1 - c) for c in cg])


def test_theta_grid_is_evenly_spaced_on_minus_pi_to_pi():
    th = theta_grid(12)
    assert th.dtype == D and th.shape == (12,)
    np.testing.assert_allclose(th.numpy(), -math.pi + 2 * math.pi * np.arange(12) / 12, rtol=0, atol=1e-15)
    assert float(th.max()) < math.pi - 0.5  # the end point π (= −π on the circle) is left out


def test_angle_deg_against_math_acos():
    g = gen(11)
    a = torch.randn(5, 3, generator=g, dtype=D)
    b = torch.randn(5, 3, generator=g, dtype=D)
    a, b = a / a.norm(dim=-1, keepdim=True), b / b.norm(dim=-1, keepdim=True)
    ref = [math.degrees(math.acos(float(a[i] @ b[i]))) for i in range(5)]
    np.testing.assert_allclose(angle_deg(a, b).numpy(), ref, rtol=1e-12)
    w = torch.tensor([0.6, 0.8], dtype=D)
    assert float(angle_deg(w, w)) == 0.0 and float(angle_deg(w, -w)) == pytest.approx(180.0)
    assert float(angle_deg(w, torch.tensor([-0.8, 0.6], dtype=D))) == pytest.approx(90.0)
    assert float(angle_deg(w * (1 + 1e-15), w)) == 0.0  # a cosine just above 1 is clipped, not NaN


def test_circ_sep_deg_wraps_around():
    seps = circ_sep_deg(np.radians([350.0, 10.0, 100.0]))  # sorted on [0, 360): 10, 100, 350
    np.testing.assert_allclose(seps, [90.0, 250.0, 20.0], rtol=1e-12)
    assert circ_sep_deg(torch.tensor([-math.pi / 2, math.pi / 2])) == pytest.approx([180.0, 180.0])
    assert len(circ_sep_deg(np.array([1.0]))) == 0


def test_prominent_maxima_counts_real_maxima_only():
    th = np.linspace(-math.pi, math.pi, 2000, endpoint=False)
    # 3 maxima of cos 3θ and a ripple of relative height ~1e-6 on the valleys (clipped at −0.5)
    v = np.maximum(np.cos(3 * th), -0.5) + 1e-6 * np.sin(97 * th)
    idx, prom = prominent_maxima(v, 1e-4)
    assert len(idx) == 3 and np.all(prom > 0.5)
    np.testing.assert_allclose(np.sort(np.mod(th[idx], 2 * math.pi)), [0, 2 * math.pi / 3, 4 * math.pi / 3], atol=0.01)
    assert len(prominent_maxima(v, 1e-9)[0]) > 3  # without the floor the ripple's bumps count
    w = np.roll(np.maximum(np.cos(th), 0.5), 1000)  # a flat top straddling the wrap-around counts once
    assert len(prominent_maxima(w, 1e-4)[0]) == 1
    assert len(prominent_maxima(np.ones(10))[0]) == 0


def test_prominent_maxima_are_the_periodic_strict_local_maxima_of_a_smooth_curve():
    """Without a floor (and no plateaus) the maxima are the i with v[i] > v[i ± 1] on the circle."""
    rng = np.random.default_rng(12)
    th = np.linspace(-math.pi, math.pi, 997, endpoint=False)
    v = sum(rng.normal() * np.cos(k * th + rng.uniform(0, 6.3)) for k in range(1, 8))
    ref = np.flatnonzero((v > np.roll(v, 1)) & (v > np.roll(v, -1)))
    idx, prom = prominent_maxima(torch.from_numpy(v), 1e-12)
    np.testing.assert_array_equal(idx, ref)

    def prominence(i: int) -> float:  # walk each way around the circle until the curve exceeds v[i]
        n, lows = len(v), []
        for step in (-1, 1):
            lo, j = v[i], i
            for _ in range(n - 1):
                j = (j + step) % n
                if v[j] > v[i]:
                    break
                lo = min(lo, v[j])
            lows.append(lo)
        return (v[i] - max(lows)) / np.ptp(v)

    np.testing.assert_allclose(prom, [prominence(i) for i in idx], rtol=1e-12)
    assert prom[np.argmax(v[idx])] == pytest.approx(1.0)  # the highest maximum descends to the global minimum
