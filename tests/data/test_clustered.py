import math

import pytest
import torch

from ssldyn.data.clustered import ball_noise, clustered_data, clusters_3d, four_clusters_2d


def test_eq16_orthogonal_centers_and_bounded_noise():
    g = torch.Generator().manual_seed(0)
    data = clustered_data(
        [3, 5, 7], d=4, D=6, delta=0.2, center_norm=2.0, rotate=True, generator=g, dtype=torch.float64
    )
    gram = data.centers @ data.centers.T
    assert torch.allclose(gram, 4.0 * torch.eye(3, dtype=torch.float64), atol=1e-12)  # ξ_q·ξ_q' = 4 δ_qq'
    assert torch.all(data.centers[:, 4:] == 0)  # centers in the first d coordinates
    eps = data.x - data.centers[data.labels]
    assert eps.norm(dim=1).max() < 0.2
    assert data.labels.tolist() == [0] * 3 + [1] * 5 + [2] * 7
    assert torch.allclose(data.ratios, torch.tensor([3, 5, 7], dtype=torch.float64) / 15)


def test_orthogonal_noise_lives_in_the_complement():
    data = clustered_data([4, 4], d=2, D=5, delta=0.3, noise="orthogonal", generator=torch.Generator().manual_seed(1))
    eps = data.x - data.centers[data.labels]
    assert torch.all(eps[:, :2] == 0) and eps[:, 2:].abs().max() > 0
    with pytest.raises(ValueError, match="D > d"):
        clustered_data([2], d=2, D=2, delta=0.1, noise="orthogonal")
    with pytest.raises(ValueError, match="N <= d"):
        clustered_data([1, 1, 1], d=2, D=4, delta=0.1)


def test_ball_noise_is_uniform_in_the_ball():
    # Monte Carlo: P(‖ε‖ < r/2) = (1/2)^D for the uniform distribution in a D-ball
    e = ball_noise(40000, 3, 1.0, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    assert e.norm(dim=1).max() < 1.0
    frac = (e.norm(dim=1) < 0.5).double().mean().item()
    assert abs(frac - 0.125) < 4 * math.sqrt(0.125 * 0.875 / 40000)
    assert e.mean(0).abs().max() < 0.02


def test_fig5_and_fig6_sets():
    d2 = four_clusters_2d(10, delta=0.4, generator=torch.Generator().manual_seed(0))
    assert d2.centers[:, 0].tolist() == [-3.0, -1.0, 1.0, 3.0] and torch.all(d2.centers[:, 1] == 0)
    assert (d2.x - d2.centers[d2.labels]).norm(dim=1).max() < 0.4
    d3 = clusters_3d(5, delta=0.2, radius=2.0)
    c = d3.centers.double()
    assert torch.allclose(c.norm(dim=1), torch.full((4,), 2.0, dtype=torch.float64), atol=1e-6)
    dist = torch.cdist(c, c)[~torch.eye(4, dtype=torch.bool)]
    assert torch.allclose(dist, torch.full_like(dist, 2.0 * math.sqrt(8.0 / 3.0)), atol=1e-5)  # regular tetrahedron


def test_device_gets_the_cpu_draws():
    # device=...: drawn on the CPU from the generator (the same draws), then moved; the meta device stands in for
    # CUDA here (a CPU tensor mixed into a meta computation raises)
    g_cpu, g_meta = torch.Generator().manual_seed(4), torch.Generator().manual_seed(4)
    cpu = clustered_data([3, 5], d=2, D=4, delta=0.2, noise="orthogonal", generator=g_cpu, dtype=torch.float64)
    meta = clustered_data(
        [3, 5], d=2, D=4, delta=0.2, noise="orthogonal", generator=g_meta, dtype=torch.float64, device="meta"
    )
    assert torch.equal(g_cpu.get_state(), g_meta.get_state())  # the same draws were taken from the generator
    assert {t.device.type for t in (meta.x, meta.labels, meta.centers, meta.ratios)} == {"meta"}
    assert meta.x.shape == cpu.x.shape and meta.labels.dtype == torch.long
    back = cpu.to("meta")
    assert back.x.device.type == "meta" and back.sizes == cpu.sizes and cpu.x.device.type == "cpu"
    for make in (four_clusters_2d, clusters_3d):
        d = make(4, delta=0.3, generator=torch.Generator().manual_seed(0), device="meta")
        assert d.x.device.type == d.labels.device.type == d.centers.device.type == "meta"
    assert ball_noise(5, 3, 1.0, generator=torch.Generator().manual_seed(0), device="meta").device.type == "meta"
