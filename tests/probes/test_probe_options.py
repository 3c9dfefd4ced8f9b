"""Probe options the existing tests pass but never let matter: a per-member `absolute`, output_gap(reduce="max"),
alignment's α, invariance_gap's draws, linear_svm_accuracy(standardize=...)."""

import math

import numpy as np
import pytest
import torch

from ssldyn.probes.chi import best_match
from ssldyn.probes.cluster import alignment, invariance_gap
from ssldyn.probes.subspace import linear_svm_accuracy, output_gap


def test_best_match_with_a_per_member_absolute_flag():
    """Member 0 (absolute False): its one filter is anti-aligned with token 0, so c = −1; member 1 (True): |cos| = 1."""
    W = torch.tensor([[[[-1.0, 0.0]]], [[[-1.0, 0.0]]]], dtype=torch.float64)  # (E=2, K=1, M=1, d=2)
    U = torch.eye(2, dtype=torch.float64)
    c = best_match(W, U, absolute=torch.tensor([False, True]))
    np.testing.assert_allclose(c.numpy(), [[[-1.0, 0.0]], [[1.0, 0.0]]], atol=1e-15)
    for e, flag in enumerate((False, True)):  # the same as one call per member
        torch.testing.assert_close(c[e], best_match(W[e], U, absolute=flag))


def test_output_gap_max_is_the_largest_per_point_distance():
    g = torch.Generator().manual_seed(8)
    a, b = (
        torch.randn(2, 5, 3, generator=g, dtype=torch.float64),
        torch.randn(2, 5, 3, generator=g, dtype=torch.float64),
    )
    ref = np.sqrt(((a - b).numpy() ** 2).sum(-1)).max(-1)
    np.testing.assert_allclose(output_gap(a, b, reduce="max").numpy(), ref, rtol=1e-14)
    assert output_gap(a[0], b[0], reduce="max") == pytest.approx(float(ref[0]), rel=1e-14)


@pytest.mark.parametrize("alpha", [1.0, 3.0])
def test_alignment_uses_the_exponent_alpha(alpha):
    rng = np.random.default_rng(3)
    z, w = rng.normal(size=(6, 3)), rng.normal(size=(6, 3))
    u = z / np.linalg.norm(z, axis=1, keepdims=True)
    v = w / np.linalg.norm(w, axis=1, keepdims=True)
    ref = np.mean([np.linalg.norm(u[i] - v[i]) ** alpha for i in range(6)])
    assert alignment(z, w, alpha=alpha) == pytest.approx(ref, rel=1e-12)


def test_invariance_gap_averages_over_the_draws():
    x = torch.zeros(4, 2, dtype=torch.float64)
    shifts = iter([1.0, 2.0, 6.0])
    perturb = lambda t: t + next(shifts)  # noqa: E731  (draw k shifts every coordinate by s_k: ‖·‖ = s_k √2)
    assert invariance_gap(lambda t: t, x, perturb, draws=3) == pytest.approx(3.0 * math.sqrt(2), rel=1e-12)


def test_linear_svm_standardize_changes_what_the_svm_sees():
    """The class is carried by a feature of scale 1e-3 next to a noise feature of scale 1e3: standardised, LinearSVC
    separates the classes; on raw features the L2 penalty makes the tiny feature unusable (chance level)."""
    rng = np.random.default_rng(0)
    n = 200
    y = np.arange(n) % 2
    X = np.stack([1e-3 * (2 * y - 1 + 0.1 * rng.normal(size=n)), 1e3 * rng.normal(size=n)], axis=1)
    assert linear_svm_accuracy(X, y, standardize=True) > 0.95
    assert linear_svm_accuracy(X, y, standardize=False) < 0.75
