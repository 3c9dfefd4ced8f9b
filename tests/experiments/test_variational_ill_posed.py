import math

import numpy as np
import torch

from ssldyn.experiments.variational.ill_posed import augment, invariant_map
from ssldyn.lab import run_experiment


def test_invariant_map_is_invariant_to_augmentations():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(50, 6, dtype=torch.float64, generator=g)
    xa = augment(x, 0.7, g)
    assert not torch.allclose(xa, x)  # the augmentation moves every input (the invariance is not vacuous)
    torch.testing.assert_close(invariant_map(xa), invariant_map(x), rtol=1e-12, atol=1e-12)
    # f(x) = (x₁, x₂)/‖(x₁, x₂)‖, written out in numpy
    xn = x.numpy()
    ref = xn[:, :2] / np.sqrt((xn[:, :2] ** 2).sum(1, keepdims=True))
    np.testing.assert_allclose(invariant_map(x).numpy(), ref, rtol=1e-13, atol=1e-15)


def test_augment_scales_the_plane_and_adds_noise_to_the_rest():
    """T(x): (x₁, x₂) scaled by one s ~ U(0.5, 2) per sample, N(0, noise²) added to x₃..x_D (Monte Carlo moments)."""
    n, D, noise = 20000, 5, 0.7
    g = torch.Generator().manual_seed(1)
    x = 1.0 + torch.rand(n, D, generator=g, dtype=torch.float64)  # first two coordinates away from 0
    xa = augment(x, noise, g).numpy()
    xn = x.numpy()
    s1, s2 = xa[:, 0] / xn[:, 0], xa[:, 1] / xn[:, 1]
    np.testing.assert_allclose(s1, s2, rtol=1e-13)  # one factor for both coordinates
    assert s1.min() >= 0.5 and s1.max() <= 2.0
    se = 1.5 / math.sqrt(12 * n)  # U(0.5, 2): mean 1.25, std 1.5/√12
    assert abs(s1.mean() - 1.25) < 5 * se and abs(s1.std() - 1.5 / math.sqrt(12)) < 0.01
    eps = (xa[:, 2:] - xn[:, 2:]) / noise  # (n, D − 2) should be i.i.d. N(0, 1)
    assert abs(eps.mean()) < 5 / math.sqrt(eps.size) and abs(eps.std() - 1) < 0.01
    assert abs(np.corrcoef(eps[:, 0], s1)[0, 1]) < 0.05 and abs(np.corrcoef(eps[:, 0], eps[:, 1])[0, 1]) < 0.05


def test_quick_run_claims(tmp_path):
    out = run_experiment("variational.ill-posed", quick=True, seeds=1, out=tmp_path)
    claims = {c.id: c for c in out.claims}
    assert len(claims) == 5 and all(c.passed for c in claims.values()), claims
    # the controls: a non-invariant map sees μ₁ ≠ μ₂; 64 clusters (beyond Fig. 3's threshold) are as good as uniform
    assert min(claims[f"same-pushforward-{k}"].control_value for k in ("ntxent", "vicreg", "byol")) > 1e-3
    assert abs(claims["uniform-beats-clusters-s1"].control_value) < 1e-6
    assert claims["uniform-beats-clusters-s2"].kind == "consequence"
    assert math.isfinite(claims["uniform-beats-clusters-s1"].measured)
    assert max(claims[f"same-pushforward-{k}"].measured for k in ("ntxent", "vicreg", "byol")) <= 1e-12
