"""Independent-reference checks beside tests/data/test_clustered.py (test audit, 2026-12-06).

``test_eq16_orthogonal_centers_and_bounded_noise`` and ``test_fig5_and_fig6_sets`` bound the noise from above only
(‖ε‖ < δ): noise drawn in a ball of radius δ/2 passes them, and so does ``rotate=True`` ignored (the identity
basis has the same Gram matrix). Here the radius' law P(‖ε‖ ≤ qδ) = q^D (uniform in the D-ball) is checked by
Monte Carlo for eq. (16)'s ball noise and the Fig. 5 / Fig. 6 sets, and ``rotate`` against the law of its first
center (uniform on the sphere of M: E[ξξᵀ] = c²I/d)."""

import math

import torch

from ssldyn.data.clustered import clustered_data, clusters_3d, four_clusters_2d


def _radius_law(r, k):
    """r = ‖ε‖/δ (n,), uniform in a k-ball: mean k/(k + 1), CDF q^k (5σ bounds)."""
    n = r.numel()
    mean, var = k / (k + 1), k / (k + 2) - (k / (k + 1)) ** 2
    assert abs(float(r.mean()) - mean) < 5 * math.sqrt(var / n)
    assert 0.97 < float(r.max()) < 1
    for q in (0.5, 0.8, 0.95):
        p = q**k
        assert abs(float((r <= q).double().mean()) - p) < 5 * math.sqrt(p * (1 - p) / n)


def test_eq16_ball_noise_fills_the_ball_of_radius_delta():
    delta = 0.3
    data = clustered_data([1500, 1500], d=2, D=3, delta=delta, generator=torch.Generator().manual_seed(0),
                          dtype=torch.float64)  # fmt: skip
    _radius_law((data.x - data.centers[data.labels]).norm(dim=1) / delta, 3)


def test_fig5_and_fig6_sets_fill_their_balls():
    d2 = four_clusters_2d(800, delta=0.4, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    _radius_law((d2.x - d2.centers[d2.labels]).norm(dim=1) / 0.4, 2)
    d3 = clusters_3d(800, delta=0.2, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    _radius_law((d3.x - d3.centers[d3.labels]).norm(dim=1) / 0.2, 3)


def test_rotate_draws_a_uniformly_oriented_orthogonal_frame():
    d, c, S = 4, 2.0, 600
    first = []
    for s in range(S):
        data = clustered_data([2, 2, 2], d=d, D=5, delta=0.0, center_norm=c, rotate=True,
                              generator=torch.Generator().manual_seed(s), dtype=torch.float64)  # fmt: skip
        gram = data.centers @ data.centers.T
        torch.testing.assert_close(gram, c * c * torch.eye(3, dtype=torch.float64), atol=1e-12, rtol=0)
        first.append(data.centers[0, :d])
    xi = torch.stack(first)  # (S, d)
    M = xi.T @ xi / S  # E[ξξᵀ] = c²/d · I for a uniform direction; the identity frame would give c² e₁e₁ᵀ
    # per entry: Var(ξ_i ξ_j) ≤ E[ξ⁴] = 3c⁴/(d(d + 2)) → standard error ≤ c²·√(3/24)/√S ≈ 0.029
    assert (M - c * c / d * torch.eye(d, dtype=torch.float64)).abs().max() < 5 * c * c * math.sqrt(3 / 24 / S)
