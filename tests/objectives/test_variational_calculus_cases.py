"""variational_calculus on cases the existing tests never reach: η(0) ≠ 1, non-uniform weights, points off the sphere,
an asymmetric measure. References: float64 loops of the documented formulas, and autograd of measure_loss."""

import math

import numpy as np
import pytest
import torch

from ssldyn.objectives.variational_calculus import (
    first_variation,
    measure_loss,
    second_variation,
    sphere_stationarity,
    symmetry_condition_gap,
)

DT = torch.float64
# η(t) = 2/(1 + t): maximal at 0 but η(0) = 2 (every η of the existing tests has η(0) = 1, so /η(0) was never exercised)
ETA = lambda t: 2.0 / (1.0 + t)  # noqa: E731
ETA_NP, DETA_NP, D2ETA_NP = (lambda t: 2.0 / (1 + t)), (lambda t: -2.0 / (1 + t) ** 2), (lambda t: 4.0 / (1 + t) ** 3)


def _measure(seed, n=5, d=3):
    g = torch.Generator().manual_seed(seed)
    y = torch.randn(n, d, generator=g, dtype=DT)
    w = torch.rand(n, generator=g, dtype=DT) + 0.2  # non-uniform, not normalised
    return y, w


def test_measure_loss_with_eta0_not_one_is_the_written_out_eq4():
    y, w = _measure(0)
    Y, W = y.numpy(), (w / w.sum()).numpy()
    n = len(Y)
    G = [sum(W[j] * ETA_NP(0.5 * np.sum((Y[i] - Y[j]) ** 2)) for j in range(n)) / ETA_NP(0.0) for i in range(n)]
    ref = sum(W[i] * math.log1p(G[i]) for i in range(n))
    assert float(measure_loss(y, w, eta=ETA)) == pytest.approx(ref, rel=1e-13)


def test_first_and_second_variation_with_eta0_not_one_equal_autograd_and_scale_is_the_documented_sum():
    y, w = _measure(1)
    h = torch.randn(5, 3, generator=torch.Generator().manual_seed(2), dtype=DT)
    # first variation = (1/w_i) ∂L/∂y_i
    yr = y.clone().requires_grad_(True)
    (g,) = torch.autograd.grad(measure_loss(yr, w, eta=ETA), yr)
    torch.testing.assert_close(first_variation(y, w, eta=ETA), g / (w / w.sum())[:, None], rtol=1e-12, atol=1e-14)
    # second variation = d²/ds² L(y + s h) at 0
    s = torch.zeros((), dtype=DT, requires_grad=True)
    (d1,) = torch.autograd.grad(measure_loss(y + s * h, w, eta=ETA), s, create_graph=True)
    (d2,) = torch.autograd.grad(d1, s)
    val, scale = second_variation(y, h, w, eta=ETA, return_scale=True)
    assert float(val) == pytest.approx(float(d2), rel=1e-11)
    # scale: Σ_i w_i [|Ψ''_i| G_i'² + |Ψ'_i| Σ_j w_j (|η''_ij|⟨Δy,Δh⟩² + |η'_ij|‖Δh‖²)/|η(0)|] (docstring), loops
    Y, H, W = y.numpy(), h.numpy(), (w / w.sum()).numpy()
    n, e0 = len(Y), ETA_NP(0.0)
    ref = 0.0
    for i in range(n):
        Gi = sum(W[j] * ETA_NP(0.5 * np.sum((Y[i] - Y[j]) ** 2)) for j in range(n)) / e0
        G1 = G2 = 0.0
        for j in range(n):
            t = 0.5 * np.sum((Y[i] - Y[j]) ** 2)
            ip, dh2 = float((Y[i] - Y[j]) @ (H[i] - H[j])), float(np.sum((H[i] - H[j]) ** 2))
            G1 += W[j] * DETA_NP(t) * ip / e0
            G2 += W[j] * (abs(D2ETA_NP(t)) * ip**2 + abs(DETA_NP(t)) * dh2)
        ref += W[i] * (1.0 / (1.0 + Gi) ** 2 * G1**2 + 1.0 / (1.0 + Gi) * G2 / abs(e0))
    assert float(scale) == pytest.approx(ref, rel=1e-12)


@pytest.mark.parametrize("eta", [None, ETA])
def test_sphere_stationarity_written_out_for_weighted_points_off_the_sphere(eta):
    """Points of norm ≠ 1 (projected onto S^{d−1}) and non-uniform weights: λ̄ is the w-weighted mean."""
    y0, w = _measure(3, n=6)
    y0 = y0 * torch.linspace(0.5, 3.0, 6, dtype=DT)[:, None]  # off the sphere
    tau = 0.4
    st = sphere_stationarity(y0, w, temperature=tau, eta=eta)
    y = y0 / y0.norm(dim=1, keepdim=True)
    wn = w / w.sum()
    yr = y.clone().requires_grad_(True)
    (g,) = torch.autograd.grad(measure_loss(yr, w, temperature=tau, eta=eta), yr)
    grad = g / wn[:, None]  # ∇L(f)(y_i) at the projected atoms
    lam = (grad * y).sum(1)
    tang = (grad - lam[:, None] * y).norm(dim=1)
    # scale = max_i Σ_j w_j |(Ψ'_i + Ψ'_j) η'_ij| ‖y_i − y_j‖ / η(0), Ψ' = 1/(1 + G), loops in float64
    Y, W = y.numpy(), wn.numpy()
    e = (lambda t: math.exp(-t / tau)) if eta is None else ETA_NP
    de = (lambda t: -math.exp(-t / tau) / tau) if eta is None else DETA_NP
    n = len(Y)
    G = [sum(W[j] * e(0.5 * np.sum((Y[i] - Y[j]) ** 2)) for j in range(n)) / e(0.0) for i in range(n)]
    dpsi = [1.0 / (1.0 + Gi) for Gi in G]
    scale = max(
        sum(
            W[j] * abs((dpsi[i] + dpsi[j]) * de(0.5 * np.sum((Y[i] - Y[j]) ** 2))) * np.linalg.norm(Y[i] - Y[j])
            for j in range(n)
        )
        / abs(e(0.0))
        for i in range(n)
    )
    lam_bar = float((wn * lam).sum())
    torch.testing.assert_close(st.gradient, grad, rtol=1e-11, atol=1e-13)
    torch.testing.assert_close(st.multipliers, lam, rtol=1e-11, atol=1e-13)
    assert st.scale == pytest.approx(scale, rel=1e-12)
    assert st.residual == pytest.approx(float(tang.max()) / scale, rel=1e-10)
    assert st.multiplier_spread == pytest.approx(float((lam - lam_bar).abs().max()) / scale, rel=1e-10)


def test_symmetry_condition_gap_written_out_on_an_asymmetric_weighted_measure():
    y, w = _measure(4, n=5, d=2)
    tau = 0.7
    Y, W = y.numpy(), (w / w.sum()).numpy()
    n = len(Y)
    I = [
        sum(W[j] * (-math.exp(-0.5 * np.sum((Y[i] - Y[j]) ** 2) / tau) / tau) * (Y[i] - Y[j]) for j in range(n))
        for i in range(n)
    ]
    ref = max(np.linalg.norm(I[i] - I[k]) for i in range(n) for k in range(n)) / max(np.linalg.norm(v) for v in I)
    assert symmetry_condition_gap(y, w, temperature=tau) == pytest.approx(ref, rel=1e-12)
