"""A(w) for Gaussian-mixture and quadrature populations (nonlinearity Sec. 3) against Monte Carlo and eq. 3."""

import math

import numpy as np
import pytest
import torch

from ssldyn.data.circle_mixture import CircleMixture
from ssldyn.dynamics.alpha_cl import make_A_fn
from ssldyn.dynamics.alpha_cl_mixture import (
    gaussian_mixture_A_fn,
    gaussian_mixture_relu_A,
    population_contrastive_covariance,
)
from ssldyn.objectives import contrastive_covariance

D = torch.float64


def gen(s):
    return torch.Generator().manual_seed(s)


def test_gaussian_mixture_A_against_monte_carlo():
    g = gen(0)
    mu = torch.randn(3, 4, generator=g, dtype=D)
    p = torch.tensor([0.2, 0.5, 0.3], dtype=D)
    sigma = 0.7
    w = torch.randn(2, 4, generator=g, dtype=D)
    A = gaussian_mixture_relu_A(w, mu, p, sigma)
    batches = []
    for _ in range(20):  # 20 × 100k samples: the standard error of each entry from the batch spread
        c = torch.multinomial(p, 100_000, True, generator=g)
        x = mu[c] + sigma * torch.randn(100_000, 4, generator=g, dtype=D)
        batches.append(make_A_fn(x, "relu")(w / w.norm(dim=-1, keepdim=True)))
    B = torch.stack(batches)
    se = B.std(0) / math.sqrt(len(batches))
    z = ((B.mean(0) - A).abs() / se.clamp_min(1e-12)).max()
    assert float(z) < 5.0
    # (d,) in, (d, d) out; scale invariance in w
    torch.testing.assert_close(gaussian_mixture_relu_A(3.0 * w[0], mu, p, sigma), A[0])
    torch.testing.assert_close(gaussian_mixture_A_fn(mu, p, sigma)(w), A)


def test_gaussian_mixture_A_rejects_bad_input():
    with pytest.raises(ValueError, match="sigma"):
        gaussian_mixture_relu_A(torch.ones(2, dtype=D), torch.ones(1, 2, dtype=D), torch.ones(1, dtype=D), 0.0)
    with pytest.raises(ValueError, match="means"):
        gaussian_mixture_relu_A(torch.ones(2, dtype=D), torch.ones(2, dtype=D), torch.ones(1, dtype=D), 1.0)


def test_population_contrastive_covariance_equals_eq3_on_a_batch():
    g = gen(1)
    a = torch.randn(30, 3, generator=g, dtype=D)
    K = torch.exp(-(torch.cdist(a, a) ** 2))  # any symmetric α with α_ii = 1
    p = torch.full((30,), 1 / 30, dtype=D)
    # no augmentation: eq. 3 is ½ Σ_ij α_ij (a_i − a_j)(a_i − a_j)ᵀ / N², the population form with p = 1/N
    torch.testing.assert_close(population_contrastive_covariance(a, p, K), contrastive_covariance(a, a, alpha=K))
    torch.testing.assert_close(population_contrastive_covariance(a, p), contrastive_covariance(a, a))


def test_circle_mixture_quadrature_against_monte_carlo():
    mix = CircleMixture((-0.6, 0.1, 0.9), kappa=40.0, weights=(1.0, 2.0, 1.0), delta=0.2)
    th = torch.tensor([0.4], dtype=D)
    x, p, _ = mix.nodes(th, [math.pi / 2, -math.pi / 2], max_arc=math.radians(3), n_gl=4, n_r=4)
    assert float(p.sum()) == pytest.approx(1.0, abs=1e-10)
    # draw the mixture: von Mises angles (torch.distributions) and uniform radii
    g = gen(2)
    n = 400_000
    comp = torch.multinomial(torch.tensor([0.25, 0.5, 0.25], dtype=D), n, True, generator=g)
    torch.manual_seed(3)
    ang = torch.distributions.VonMises(torch.tensor(mix.centres, dtype=D)[comp], torch.tensor(40.0, dtype=D)).sample()
    r = 1 + 0.2 * (2 * torch.rand(n, generator=g, dtype=D) - 1)
    xs = torch.stack([ang.cos(), ang.sin()], -1) * r[:, None]
    w = torch.stack([th.cos(), th.sin()], -1)
    A_mc = make_A_fn(xs, "relu")(w)[0]
    xt = x[0] * ((x[0] @ w[0]) > 0).to(D)[:, None]
    A_q = population_contrastive_covariance(xt, p[0])
    torch.testing.assert_close(A_q, A_mc, atol=3e-3, rtol=0)  # Monte Carlo error ~1e-3
    # the density's maximum on a line through the origin, by brute force over the line: p(x) = p_φ(φ) p_r(r) / r
    # with p_φ the von Mises mixture (scipy), p_r = U[1 − δ, 1 + δ]; the grid holds the argmax r = 1 − δ, so the
    # brute force equals the closed form (an over-estimate would pass a one-sided bound)
    from scipy import stats

    s = np.linspace(0.8, 1.2, 2001)
    wts = np.array([1.0, 2.0, 1.0]) / 4
    brute = max(
        float((sum(wj * stats.vonmises.pdf(float(th) + sgn * math.pi / 2, 40.0, loc=cj)
                   for wj, cj in zip(wts, (-0.6, 0.1, 0.9))) / (2 * 0.2) / s).max())
        for sgn in (1.0, -1.0)
    )  # fmt: skip
    assert float(mix.max_density_on_line(th)[0]) == pytest.approx(brute, rel=1e-10)
    assert CircleMixture((0.0,), kappa=1.0).C0 == pytest.approx(1.1)
