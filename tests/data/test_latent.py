import math

import numpy as np
import pytest
import torch

from ssldyn.data.latent import (
    FIG8_ANGLES,
    TwoRFModel,
    approx_orthogonal_basis,
    circle_points,
    latent_categorical,
    latent_summation,
    latent_summation_support,
    random_orthonormal_basis,
    standardized_bernoulli_values,
)


def gen(s=0):
    return torch.Generator().manual_seed(s)


def test_standardized_bernoulli_moments_monte_carlo():
    q = torch.tensor([0.1, 0.3, 0.6])
    U = torch.eye(3, dtype=torch.float64)
    x, y = latent_summation(200_000, U, q, generator=gen())
    assert torch.allclose(y.mean(0), torch.zeros(3, dtype=torch.float64), atol=0.01)
    assert torch.allclose((y**2).mean(0), torch.ones(3, dtype=torch.float64), atol=0.02)
    yp, _ = standardized_bernoulli_values(q)
    assert torch.allclose((y == yp).double().mean(0), q.double(), atol=0.005)
    assert torch.allclose(x, y)  # U = I


def test_summation_support_exact_moments():
    U = random_orthonormal_basis(4, 3, generator=gen(1))
    x, p = latent_summation_support(U, [0.2, 0.3, 0.45])
    assert x.shape == (8, 4) and abs(float(p.sum()) - 1) < 1e-12
    mean = (p[:, None] * x).sum(0)
    cov = (x * p[:, None]).T @ x - torch.outer(mean, mean)
    assert torch.allclose(mean, torch.zeros(4, dtype=torch.float64), atol=1e-12)
    assert torch.allclose(cov, U @ U.T, atol=1e-12)  # E[yyᵀ] = I  =>  V[x] = U Uᵀ


def test_random_orthonormal_basis_is_the_sign_fixed_qr_of_a_gaussian():
    U = random_orthonormal_basis(6, 4, generator=gen(5), dtype=torch.float32)
    G = torch.randn(6, 4, generator=gen(5), dtype=torch.float64).numpy()  # the Gaussian it is drawn from
    q, r = np.linalg.qr(G)  # numpy's QR, then the sign fix diag(R) > 0
    ref = q * np.sign(np.diag(r))[None, :]
    assert U.dtype == torch.float32
    np.testing.assert_allclose(U.double().numpy(), ref, atol=1e-6)
    U64 = random_orthonormal_basis(6, 4, generator=gen(5))
    np.testing.assert_allclose(U64.numpy(), ref, atol=1e-12)
    np.testing.assert_allclose(U64.numpy().T @ U64.numpy(), np.eye(4), atol=1e-12)
    assert torch.equal(random_orthonormal_basis(6, 4), random_orthonormal_basis(6, 4, generator=gen(0)))


def test_categorical_frequencies():
    U = random_orthonormal_basis(5, 3, generator=gen(2))
    x, y = latent_categorical(60_000, U, [0.5, 0.3, 0.2], generator=gen())
    assert torch.allclose(
        torch.bincount(y).double() / 60_000, torch.tensor([0.5, 0.3, 0.2], dtype=torch.float64), atol=0.01
    )
    assert torch.allclose(x, U.T[y])


@pytest.mark.parametrize("eps", [0.0, 0.05, 0.3])
def test_approx_orthogonal_gram_norm(eps):
    U = approx_orthogonal_basis(8, 6, eps, generator=gen(3))
    G = U.T @ U
    assert torch.allclose(U.norm(dim=0), torch.ones(6, dtype=torch.float64), atol=1e-12)
    assert abs(float(torch.linalg.matrix_norm(G - torch.eye(6, dtype=torch.float64), ord=2)) - eps) < 1e-10


def test_circle_points_fig8():
    pts = circle_points(FIG8_ANGLES)
    assert pts.shape == (9, 2)
    assert torch.allclose(torch.atan2(pts[:, 1], pts[:, 0]), torch.tensor(FIG8_ANGLES, dtype=torch.float64))
    assert math.isclose(FIG8_ANGLES[0], -4 * math.pi / 5)


def test_two_rf_conditional_independence_monte_carlo():
    m = TwoRFModel.random(K=2, d=3, C=2, P=3, generator=gen(4))
    x, z = m.sample(100_000, generator=gen(5))
    # pattern index per RF = argmax over patterns of the inner product (orthonormal patterns)
    a = torch.einsum("nkd,kpd->nkp", x, m.patterns).argmax(-1)  # (n, K)
    for c in range(2):
        sel = z == c
        joint = torch.zeros(3, 3, dtype=torch.float64)
        for i in range(3):
            for j in range(3):
                joint[i, j] = ((a[sel, 0] == i) & (a[sel, 1] == j)).double().mean()
        ref = torch.outer(m.pattern_probs[0, c], m.pattern_probs[1, c])  # eq. 13: product given z
        assert torch.allclose(joint, ref, atol=0.01)
    xs, zs, ps = m.support()
    assert abs(float(ps.sum()) - 1) < 1e-12 and xs.shape[1:] == (2, 3)
    # every atom: P[z = c] Π_k P[a_k | z = c] (eq. 13) written out, and the sampled frequency of (z, a_1, a_2)
    a_s = torch.einsum("nkd,kpd->nkp", xs, m.patterns).argmax(-1)  # (A, K) pattern indices of each atom
    assert len({(int(c), *map(int, r)) for c, r in zip(zs, a_s)}) == len(ps) == 2 * 3 * 3  # distinct atoms
    for atom, (c, (i, j), p) in enumerate(zip(zs.tolist(), a_s.tolist(), ps.tolist())):
        assert torch.equal(xs[atom, 0], m.patterns[0, i]) and torch.equal(xs[atom, 1], m.patterns[1, j])
        want = float(m.z_probs[c] * m.pattern_probs[0, c, i] * m.pattern_probs[1, c, j])
        assert p == pytest.approx(want, rel=1e-12)
        freq = ((z == c) & (a[:, 0] == i) & (a[:, 1] == j)).double().mean().item()
        assert abs(freq - p) < 5 * math.sqrt(p * (1 - p) / 100_000) + 1e-12


def test_bad_inputs():
    with pytest.raises(ValueError, match="q"):
        latent_summation(10, torch.eye(2, dtype=torch.float64), [0.0, 0.5])
    with pytest.raises(ValueError, match="eps"):
        approx_orthogonal_basis(4, 4, 1.5)


@pytest.mark.parametrize("noise", [-0.1, math.inf, math.nan])
def test_two_rf_model_refuses_a_noise_that_is_not_a_finite_number_ge_0(noise):
    # NaN and inf passed the old `noise < 0` check and gave NaN / inf samples
    patterns = torch.eye(2, dtype=torch.float64).expand(2, 2, 2)  # (K, P, d)
    probs = torch.full((2, 2, 2), 0.5, dtype=torch.float64)  # (K, C, P)
    TwoRFModel(patterns, probs, torch.tensor([0.5, 0.5], dtype=torch.float64), noise=0.0)  # fine
    with pytest.raises(ValueError, match=r"^TwoRFModel: noise must be a finite number >= 0, got "):
        TwoRFModel(patterns, probs, torch.tensor([0.5, 0.5], dtype=torch.float64), noise=noise)
