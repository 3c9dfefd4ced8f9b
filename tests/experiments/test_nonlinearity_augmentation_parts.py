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
