"""Thm. 1 / Thm. 3 diagnostics on the branches the existing tests never take: a non-LME eigenvector, the shifted
eigenvalues, a cap crossed by an atom's plane, the discrete sup over the cap, the sign of φ₁, sample_cap's first row."""

import math

import numpy as np
import pytest
import torch

from ssldyn.probes.alpha_cl import (
    correlation,
    irregularity,
    mu_value,
    sample_cap,
    stability_test,
    theorem3_condition,
    theorem3_condition_discrete,
)

D = torch.float64


def _const(A):
    return lambda W: A.expand(W.shape[0], *A.shape)


def test_correlation_does_not_depend_on_the_sign_eigh_gives_phi1():
    A = torch.diag(torch.tensor([3.0, 1.0, 0.5], dtype=D))
    w = torch.tensor([0.6, 0.8, 0.0], dtype=D)
    assert float(correlation(_const(A), w)) == pytest.approx(0.6, rel=1e-14)
    assert float(correlation(_const(A), -w)) == pytest.approx(0.6, rel=1e-14)  # c(w) = |wᵀφ₁| ≥ 0
    assert torch.allclose(correlation(_const(A), torch.stack([w, -w])), torch.tensor([0.6, 0.6], dtype=D))


def test_stability_needs_an_lme_not_only_a_gap_above_rho():
    """A constant A: ρ = 0 < λ_gap everywhere, but e₂ is an eigenvector of λ₂, not an LME (Def. 3): not Thm. 1's case."""
    A = torch.diag(torch.tensor([3.0, 1.0, 0.5], dtype=D))
    st = stability_test(_const(A), torch.tensor([0.0, 1.0, 0.0], dtype=D))
    assert not st.is_lme and st.rho == pytest.approx(0.0, abs=1e-12) and st.gap > st.rho
    assert st.stable is False
    assert stability_test(_const(A), torch.tensor([1.0, 0.0, 0.0], dtype=D)).stable is True


def test_irregularity_with_shift_uses_both_shifted_eigenvalues():
    """shift=True: Â = A − λ_min I, so λ₁ → λ₁ − λ_min and λ₂ → λ₂ − λ_min in μ (same φ₁, c, λ_gap)."""
    A = torch.diag(torch.tensor([2.0, 1.0, -0.5], dtype=D))
    w = torch.tensor([0.8, 0.6, 0.0], dtype=D)
    irr = irregularity(_const(A), w, L=0.0, shift=True)
    c, l1, l2 = 0.8, 2.5, 1.5
    assert float(irr.lam1) == pytest.approx(l1, rel=1e-10) and float(irr.lam2) == pytest.approx(l2, rel=1e-10)
    assert float(irr.mu) == pytest.approx((1 + c) / (2 * c * c) * (l2 / l1) ** 2, rel=1e-10)
    assert float(irr.gap) == pytest.approx(1.0, rel=1e-12)


def test_sample_cap_starts_at_w0_and_stays_in_the_cap():
    w0 = torch.tensor([3.0, 4.0, 0.0], dtype=D)
    pts = sample_cap(w0, 0.9, 50, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(pts[0], w0 / 5.0, rtol=0, atol=1e-15)  # "the first row is w0 itself"
    np.testing.assert_allclose(pts.norm(dim=1).numpy(), 1.0, rtol=1e-12)
    assert float((pts @ (w0 / 5.0)).min()) >= 0.9 - 1e-12


def test_theorem3_condition_holds_is_sup_omega_at_most_gamma():
    A = torch.diag(torch.tensor([2.0, 1.2, 0.1], dtype=D))  # λ₂/λ₁ = 0.6: μ ≈ 0.36 even at c = 1
    w0 = torch.tensor([1.0, 0.05, 0.0], dtype=D)
    out = theorem3_condition(_const(A), w0, gammas=(0.05, 0.1, 0.3, 0.6, 0.9), n_samples=16,
                             generator=torch.Generator().manual_seed(1))  # fmt: skip
    sups = [r["sup_omega"] for r in out["per_gamma"]]
    assert any(s > g for s, g in zip(sups, (0.05, 0.1, 0.3, 0.6, 0.9)))  # not every γ holds ...
    assert any(s <= g for s, g in zip(sups, (0.05, 0.1, 0.3, 0.6, 0.9)))  # ... and not none
    for r in out["per_gamma"]:
        assert r["holds"] == (math.isfinite(r["sup_omega"]) and r["sup_omega"] <= r["gamma"])
    ok = [r["gamma"] for r in out["per_gamma"] if r["holds"]]
    assert out["holds"] == bool(ok) and out["gamma"] == (min(ok) if ok else None)


def _atoms_parallel_to(w0):
    return (w0 / w0.norm())[None].clone()  # one atom along w(0): its plane wᵀx = 0 is as far as it can be


def test_discrete_theorem3_sup_is_mu_at_the_worst_point_of_the_cap():
    """No crossing: A ≡ A(w(0)) on the cap and sup ω = max over the cap of μ(|wᵀφ₁|); check against dense samples."""
    A = torch.diag(torch.tensor([2.0, 0.6, 0.3], dtype=D))
    w0 = torch.tensor([math.cos(0.1), math.sin(0.1), 0.0], dtype=D)
    gammas = (0.05, 0.1, 0.2)
    out = theorem3_condition_discrete(_const(A), _atoms_parallel_to(w0), w0, gammas=gammas)
    g = torch.Generator().manual_seed(2)
    for r in out["per_gamma"]:
        assert not r["crossing"] and 0 < r["min_cos"] < 1 and math.isfinite(r["sup_omega"])
        pts = sample_cap(w0, r["min_cos"], 4000, generator=g)  # includes the boundary only approximately
        mus = mu_value(pts[:, 0].abs(), torch.tensor(2.0, dtype=D), torch.tensor(0.6, dtype=D))  # φ₁ = e₁
        assert float(mus.max()) <= r["sup_omega"] * (1 + 1e-12)  # a sup over the cap bounds every point of it
        assert float(mus.max()) == pytest.approx(r["sup_omega"], rel=2e-2)  # ... and is reached at its edge


def test_discrete_theorem3_sees_an_atom_plane_that_cuts_the_cap():
    """min_cos > 0 but an atom x nearly orthogonal to w(0): the plane wᵀx = 0 meets the cap, A jumps there: L = ∞."""
    A = torch.diag(torch.tensor([2.0, 0.6, 0.3], dtype=D))
    a = 0.2
    w0 = torch.tensor([math.cos(a), math.sin(a), 0.0], dtype=D)  # c₀ = cos 0.2 < 1: a cap of positive radius
    u = torch.tensor([-math.sin(a), math.cos(a), 0.0], dtype=D)  # ⊥ w(0)
    atoms = torch.stack([w0, math.sin(0.05) * w0 + math.cos(0.05) * u])  # 2nd: its plane is 0.05 rad from w(0)
    out = theorem3_condition_discrete(_const(A), atoms, w0, gammas=(0.5,))
    r = out["per_gamma"][0]
    assert 0 < r["min_cos"] < math.cos(0.05)  # the cap reaches angles > 0.05 rad from w(0): past the atom's plane
    # without that atom nothing crosses and the sup is finite: the infinity comes from the plane alone
    alone = theorem3_condition_discrete(_const(A), atoms[:1], w0, gammas=(0.5,))["per_gamma"][0]
    assert not alone["crossing"] and math.isfinite(alone["sup_omega"])
    assert r["crossing"] and math.isinf(r["sup_omega"]) and not r["holds"]
