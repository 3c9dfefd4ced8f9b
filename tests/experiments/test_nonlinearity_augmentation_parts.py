"""nonlinearity.augmentation's landscape ``E_α(θ; a)`` (eq. 105, uniform α) against scipy quadrature."""

import math

import numpy as np
import pytest
import torch
from scipy.integrate import quad

from ssldyn.experiments.nonlinearity.augmentation import smoothed_energy


@pytest.mark.parametrize("a", [0.0, 0.4, 1.3])
def test_smoothed_energy_is_half_the_variance_of_the_arc_means(a):
    """``E(θ) = ½ V_i[b_i]``, ``b_i = (1/2a) ∫_{−a}^{a} relu(cos(θ − φ_i − t)) dt`` (``a = 0``: ``relu(cos(θ − φ_i))``),
    the variance over the data angles φ_i with weights 1/n (population, not the unbiased one)."""
    angles = np.array([0.0, 0.5, 2.0, 2.2, -1.7])
    thetas = np.array([-2.5, -0.4, 0.0, 0.9, 3.0])

    def b(th, ph):
        if a == 0:
            return max(math.cos(th - ph), 0.0)
        kinks = [k for k in (th - ph - math.pi / 2 + 2 * math.pi * j for j in (-2, -1, 0, 1, 2)) if -a < k < a]
        kinks += [k for k in (th - ph + math.pi / 2 + 2 * math.pi * j for j in (-2, -1, 0, 1, 2)) if -a < k < a]
        f = lambda t: max(math.cos(th - ph - t), 0.0)  # noqa: E731
        return quad(f, -a, a, points=kinks or None, epsabs=1e-14, limit=200)[0] / (2 * a)

    ref = [0.5 * np.var([b(th, ph) for ph in angles]) for th in thetas]
    got = smoothed_energy(torch.tensor(thetas, dtype=torch.float64), torch.tensor(angles, dtype=torch.float64), a)
    np.testing.assert_allclose(got.numpy(), ref, rtol=1e-10, atol=1e-14)
    # linear activation: b_i = cos(θ − φ_i)·sin(a)/a, so E = ½ (sin a / a)² V_i[cos(θ − φ_i)]
    s = 1.0 if a == 0 else math.sin(a) / a
    lin = [0.5 * s**2 * np.var(np.cos(th - angles)) for th in thetas]
    got_lin = smoothed_energy(torch.tensor(thetas, dtype=torch.float64), torch.tensor(angles, dtype=torch.float64), a,
                              "linear")  # fmt: skip
    np.testing.assert_allclose(got_lin.numpy(), lin, rtol=1e-12, atol=1e-15)


def test_full_rotation_makes_the_landscape_flat():
    """a = π (SO(2)): every arc mean is the mean of relu(cos) over a period, 1/π, so E ≡ 0 (up to round-off)."""
    th = torch.linspace(-math.pi, math.pi, 37, dtype=torch.float64)
    e = smoothed_energy(th, torch.tensor([0.0, 0.5, 2.0], dtype=torch.float64), math.pi)
    assert float(e.abs().max()) < 1e-28


def test_relu_cos_integral_differences_are_scipy_integrals_of_relu_cos():
    """``G(b) − G(a) = ∫_a^b max(cos s, 0) ds`` (scipy quad with the kinks at π/2 + kπ), over spans shorter than, equal
    to and longer than a period, on both sides of 0; and hand values: one positive half-wave is 2, a period is 2."""
    from ssldyn.experiments.nonlinearity.augmentation import _relu_cos_integral

    def G(u):
        return float(_relu_cos_integral(torch.tensor(u, dtype=torch.float64)))

    for lo, hi in [(-0.3, 0.9), (0.2, 2.9), (-7.5, -1.0), (-4.0, 11.3), (2.0, 2.0 + 2 * math.pi), (5.0, 3.0)]:
        kinks = [
            math.pi / 2 + k * math.pi for k in range(-5, 6) if min(lo, hi) < math.pi / 2 + k * math.pi < max(lo, hi)
        ]
        ref = quad(lambda s: max(math.cos(s), 0.0), lo, hi, points=kinks or None, epsabs=1e-13, limit=200)[0]
        if lo > hi:  # quad of a reversed interval is the negative
            ref = -quad(lambda s: max(math.cos(s), 0.0), hi, lo, points=kinks or None, epsabs=1e-13, limit=200)[0]
        assert G(hi) - G(lo) == pytest.approx(ref, abs=1e-11)
    assert G(math.pi / 2) - G(-math.pi / 2) == pytest.approx(2.0, abs=1e-14)  # the positive half-wave
    assert G(3 * math.pi / 2) - G(math.pi / 2) == pytest.approx(0.0, abs=1e-14)  # the negative half-wave adds nothing
    for u in (-9.0, -1.0, 0.0, 4.0):
        assert G(u + 2 * math.pi) - G(u) == pytest.approx(2.0, abs=1e-12)  # one period
    # G' = relu(cos) (central differences, away from the kinks): G is non-decreasing and continuous
    u = torch.tensor([-5.0, -2.0, -0.4, 0.3, 1.0, 3.5, 8.0], dtype=torch.float64)
    h = 1e-6
    fd = (_relu_cos_integral(u + h) - _relu_cos_integral(u - h)) / (2 * h)
    np.testing.assert_allclose(fd.numpy(), np.maximum(np.cos(u.numpy()), 0.0), atol=1e-8)


def test_maxima_counts_prominent_peaks_and_none_on_a_curve_flat_relative_to_the_reference():
    """``cos 3θ`` on a periodic grid: 3 maxima (θ = 0, ±2π/3), each of relative prominence 1; a curve whose range is
    ≤ 1e-12 of the un-augmented range has none, a relative (not absolute) floor."""
    from ssldyn.experiments.nonlinearity.augmentation import _maxima

    theta = np.linspace(-math.pi, math.pi, 360, endpoint=False)
    idx, prom = _maxima(np.cos(3 * theta), ref_span=2.0, prominence=1e-4)
    np.testing.assert_array_equal(np.sort(idx), [60, 180, 300])  # θ = −2π/3, 0, 2π/3
    np.testing.assert_allclose(prom, 1.0, atol=1e-12)
    # a bump of relative height 1e-6 in the flat part of relu(cos 2θ) (range 1) is below the floor 1e-4, a maximum
    # at the floor 1e-7
    e = np.maximum(np.cos(2 * theta), 0.0)
    e[90] += 1e-6  # θ = −π/2, where relu(cos 2θ) = 0 around it
    assert len(_maxima(e, 1.0, 1e-4)[0]) == 2
    idx, prom = _maxima(e, 1.0, 1e-7)
    np.testing.assert_array_equal(idx, [0, 90, 180])
    assert prom[1] == pytest.approx(1e-6, rel=1e-6)
    # the flatness test is relative to ref_span: a curve of range 2e-11 has its two maxima at ref_span 1 ...
    tiny = 1e-11 * np.cos(2 * theta)
    assert len(_maxima(tiny, 1.0, 1e-4)[0]) == 2
    # ... and none at ref_span 100 (2e-11 ≤ 1e-12 · 100), nor for a constant curve
    idx, prom = _maxima(tiny, 100.0, 1e-4)
    assert idx.size == 0 and prom.size == 0 and idx.dtype.kind == "i"
    assert _maxima(np.full(50, 3.0), 1.0, 1e-4)[0].size == 0


@pytest.mark.parametrize("a_deg", [10.0, 60.0, 135.0])
def test_rel_span_closed_forms_linear_and_quadratic_and_relu_by_quadrature(a_deg):
    """Linear h: ``b_a = cos(φ)·sin a / a``, so ``E_α(·; a) = (sin a / a)² E_α(·; 0)`` and the relative span is
    ``(sin a / a)²``; quadratic h: ``b_a = ½ + ½ cos 2φ · sin 2a / 2a``, span ``(sin 2a / 2a)²`` (``a`` in radians,
    ``a_deg`` in degrees). ReLU: the span of ``½ V_i[b_i]`` on a coarse grid with b by scipy quad."""
    from ssldyn.data.latent import FIG8_ANGLES
    from ssldyn.experiments.nonlinearity.augmentation import _rel_span

    a = math.radians(a_deg)
    theta = torch.linspace(-math.pi, math.pi, 721, dtype=torch.float64)[:-1]
    angles = torch.tensor(FIG8_ANGLES, dtype=torch.float64)
    assert _rel_span(theta, angles, a_deg, "linear") == pytest.approx((math.sin(a) / a) ** 2, rel=1e-10)
    assert _rel_span(theta, angles, a_deg, "quadratic") == pytest.approx((math.sin(2 * a) / (2 * a)) ** 2, rel=1e-9)
    # ReLU on a 24-point grid, independent quadrature of the arc means
    th = np.linspace(-math.pi, math.pi, 24, endpoint=False)

    def b(t, ph, aa):
        if aa == 0:
            return max(math.cos(t - ph), 0.0)
        f = lambda s: max(math.cos(t - ph - s), 0.0)  # noqa: E731
        kinks = [k for k in (t - ph + m * math.pi / 2 for m in range(-9, 10, 2)) if -aa < k < aa]
        return quad(f, -aa, aa, points=kinks or None, epsabs=1e-13, limit=200)[0] / (2 * aa)

    def energy(aa):
        return np.array([0.5 * np.var([b(t, ph, aa) for ph in FIG8_ANGLES]) for t in th])

    ref = np.ptp(energy(a)) / np.ptp(energy(0.0))
    got = _rel_span(torch.tensor(th, dtype=torch.float64), angles, a_deg, "relu")
    assert got == pytest.approx(ref, rel=1e-8)


def test_plotted_counts_are_the_claims_counts(tmp_path):
    """augmentation.png's right panel draws removes-some's dense grid for the activation and the linear control; the
    dots on the left panel are the maxima the config-grid table counts."""
    from ssldyn.experiments.nonlinearity.augmentation import _maxima
    from ssldyn.lab import run_experiment

    out = run_experiment("nonlinearity.augmentation", quick=True, out=tmp_path)
    r = out.run.result()
    claim = {c.id: c for c in out.claims}["removes-some"]
    d = r.tables["dense_counts"]
    assert d["range_deg"].iloc[0] == 0 and d["range_deg"].is_monotonic_increasing
    assert d["n_maxima"].iloc[0] - d["n_maxima"].iloc[1:].min() == claim.measured
    assert d["n_maxima_linear"].iloc[0] - d["n_maxima_linear"].iloc[1:].min() == claim.control_values[0]
    c, m = r.tables["curves"], r.tables["maxima"]
    ref = float(np.ptp(c["a=0"]))
    for a, n in zip(m["range_deg"], m["n_maxima"]):
        assert len(_maxima(c[f"a={a:g}"].to_numpy(), ref, 1e-4)[0]) == n
