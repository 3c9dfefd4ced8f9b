import math

import pytest
import torch

from ssldyn.data.latent import latent_summation_support, random_orthonormal_basis
from ssldyn.dynamics.alpha_cl import make_A_fn
from ssldyn.probes.alpha_cl import (
    correlation,
    eigen_summary,
    irregularity,
    lipschitz_estimate,
    lme_test,
    local_roughness,
    mu_value,
    sample_cap,
    stability_test,
    tangent_basis,
    theorem3_condition,
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
