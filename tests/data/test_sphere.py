import math

import numpy as np
import pytest
import torch
from scipy.spatial import ConvexHull
from scipy.spatial.distance import pdist

from ssldyn.data.sphere import (
    POLYTOPES,
    circle_angles_even,
    circle_points_even,
    fibonacci_sphere,
    regular_polytope,
)


@pytest.mark.parametrize("n", [1, 2, 3, 7, 64])
def test_circle_points_are_the_written_out_angles(n):
    ang = [2 * math.pi * k / n for k in range(n)]
    np.testing.assert_allclose(circle_angles_even(n).numpy(), ang, rtol=1e-15, atol=0)
    ref = np.array([[math.cos(a), math.sin(a)] for a in ang])  # (n, 2)
    np.testing.assert_allclose(circle_points_even(n).numpy(), ref, rtol=0, atol=1e-15)
    if n > 1:  # neighbours at squared distance 2 − 2 cos(2π/n), every one
        p = circle_points_even(n)
        gaps = ((p - p.roll(-1, 0)) ** 2).sum(1)
        np.testing.assert_allclose(gaps.numpy(), 2 - 2 * math.cos(2 * math.pi / n), rtol=1e-12)


def test_circle_phase_rotates_the_set():
    phase = torch.tensor(0.3, dtype=torch.float64)
    rot = torch.tensor([[math.cos(0.3), -math.sin(0.3)], [math.sin(0.3), math.cos(0.3)]], dtype=torch.float64)
    torch.testing.assert_close(circle_points_even(5, phase=phase), circle_points_even(5) @ rot.T, rtol=0, atol=1e-15)
    torch.testing.assert_close(circle_points_even(5, phase=0.3), circle_points_even(5, phase=phase), rtol=0, atol=0)


def test_dtype_device_and_bad_input():
    for fn in (circle_points_even, fibonacci_sphere, circle_angles_even):
        out = fn(6, dtype=torch.float32, device="cpu")
        assert out.dtype == torch.float32 and out.device.type == "cpu"
        for bad in (0, -3, 2.5, True):
            with pytest.raises(ValueError, match="n must be an integer >= 1"):
                fn(bad)  # type: ignore[arg-type]
    assert regular_polytope("cube", dtype=torch.float32).dtype == torch.float32
    with pytest.raises(ValueError, match="'tetrahedron', 'octahedron', 'cube', 'icosahedron'"):
        regular_polytope("dodecahedron")  # type: ignore[arg-type]


def test_fibonacci_lattice_written_out_and_its_golden_angle_mirror():
    n = 400
    p = fibonacci_sphere(n).numpy()
    # the lattice with the golden angle γ = π(3 − √5), in plain floats: ours is its mirror image y → −y
    gamma = math.pi * (3 - math.sqrt(5))
    ref = []
    for k in range(n):
        i = k + 0.5
        z = 1 - 2 * i / n
        r = math.sqrt(1 - z * z)
        ref.append([r * math.cos(gamma * i), -r * math.sin(gamma * i), z])
    np.testing.assert_allclose(p, np.array(ref), rtol=0, atol=1e-12)
    np.testing.assert_allclose(pdist(p), pdist(np.array(ref) * [1, -1, 1]), rtol=0, atol=1e-12)  # same distances
    np.testing.assert_allclose(np.linalg.norm(p, axis=1), 1.0, rtol=1e-15)
    # nearly uniform: mean 0 and E[z²] = 1/3 as for the uniform measure on S²
    assert np.abs(p.mean(0)).max() < 1e-2
    assert (p[:, 2] ** 2).mean() == pytest.approx(1 / 3, abs=1e-3)


@pytest.mark.parametrize(
    ("name", "vertices", "faces", "dots"),
    [
        ("tetrahedron", 4, 4, {-1 / 3}),
        ("octahedron", 6, 8, {0.0, -1.0}),
        ("cube", 8, 12, {1 / 3, -1 / 3, -1.0}),  # 6 squares = 12 triangles of the hull
        ("icosahedron", 12, 20, {1 / math.sqrt(5), -1 / math.sqrt(5), -1.0}),
    ],
)
def test_regular_polytopes_against_their_hulls_and_angles(name, vertices, faces, dots):
    v = regular_polytope(name)
    assert v.shape == (vertices, 3)
    np.testing.assert_allclose(v.norm(dim=1).numpy(), 1.0, rtol=1e-15)
    hull = ConvexHull(v.numpy())  # scipy's hull: every vertex is a corner, the solid's number of (triangular) faces
    assert len(hull.vertices) == vertices and len(hull.simplices) == faces
    g = (v @ v.T).numpy()
    off = g[~np.eye(vertices, dtype=bool)]
    assert {round(float(x), 12) for x in off} == {round(x, 12) for x in dots}
    # vertex-transitive: every vertex sees the same multiset of angles to the others
    rows = {tuple(sorted(round(float(x), 12) for x in g[i])) for i in range(vertices)}
    assert len(rows) == 1
    assert POLYTOPES == ("tetrahedron", "octahedron", "cube", "icosahedron")
