"""nonlinearity.lemma2's smallest eigenvalue of the symmetric part, against hand-worked matrices and numpy."""

import numpy as np
import pytest
import torch

from ssldyn.experiments.nonlinearity.lemma2 import _min_eig


def test_min_eig_is_the_smallest_eigenvalue_of_the_symmetric_part_hand_worked():
    # [[0, 2], [0, 0]]: its own eigenvalues are 0, 0; the symmetric part [[0, 1], [1, 0]] has −1 and 1
    assert float(_min_eig(torch.tensor([[0.0, 2.0], [0.0, 0.0]], dtype=torch.float64))) == pytest.approx(
        -1.0, abs=1e-15
    )
    # the transpose has the same symmetric part (an eigvalsh reading only the lower triangle would see 0 and 2)
    assert float(_min_eig(torch.tensor([[0.0, 0.0], [2.0, 0.0]], dtype=torch.float64))) == pytest.approx(
        -1.0, abs=1e-15
    )
    # diag(3, −2, 5): the smallest, not the first eigenvalue nor the smallest in absolute value
    assert float(_min_eig(torch.diag(torch.tensor([3.0, -2.0, 5.0], dtype=torch.float64)))) == pytest.approx(-2.0)
    # a PSD matrix of rank 1: 0 (to round-off)
    v = torch.tensor([[1.0], [2.0], [-1.0]], dtype=torch.float64)
    assert abs(float(_min_eig(v @ v.T))) < 1e-14


def test_min_eig_batched_against_numpy():
    rng = np.random.default_rng(1)
    C = rng.normal(size=(2, 3, 4, 4))
    got = _min_eig(torch.tensor(C)).numpy()
    ref = np.array([[np.linalg.eigvalsh(0.5 * (c + c.T)).min() for c in row] for row in C])
    assert got.shape == (2, 3)
    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-14)
    # the min over unit vectors of xᵀCx (Rayleigh quotient of the non-symmetric C) is the same number
    x = rng.normal(size=(20000, 4))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    q = np.einsum("ni,ij,nj->n", x, C[0, 0], x)
    assert q.min() >= ref[0, 0] - 1e-12 and q.min() == pytest.approx(ref[0, 0], abs=0.05)
