"""The orthogonal noise of ``clustered_data`` is uniform in the ball of radius δ of
M^⊥ (Monte Carlo against the closed form of the radius' distribution)."""

import torch

from ssldyn.data.clustered import clustered_data


def test_orthogonal_noise_is_uniform_in_the_complement_ball_of_radius_delta():
    # ε in k = D − d dimensions, uniform in ‖ε‖ < δ: P(‖ε‖ ≤ rδ) = r^k, E‖ε‖/δ = k/(k + 1), Var = k/(k+2) − (k/(k+1))²
    delta, k = 0.3, 3
    data = clustered_data([1500, 1500], d=2, D=2 + k, delta=delta, noise="orthogonal",
                          generator=torch.Generator().manual_seed(0), dtype=torch.float64)  # fmt: skip
    eps = data.x - data.centers[data.labels]
    assert torch.all(eps[:, :2] == 0)
    r = eps[:, 2:].norm(dim=1) / delta  # (n,)
    n = r.numel()
    mean, var = k / (k + 1), k / (k + 2) - (k / (k + 1)) ** 2
    assert abs(float(r.mean()) - mean) < 5 * (var / n) ** 0.5
    assert float(r.max()) < 1 and float(r.max()) > 0.98
    for q in (0.5, 0.8, 0.95):  # the CDF r^k at a few radii (binomial 5σ bounds)
        p = q**k
        assert abs(float((r <= q).double().mean()) - p) < 5 * (p * (1 - p) / n) ** 0.5
