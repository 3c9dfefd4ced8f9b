"""Cosines between filters (``ssldyn.probes.filters``) against scikit-learn and the formula written out."""

import numpy as np
import pytest
import torch
from sklearn.metrics.pairwise import cosine_similarity

from ssldyn.probes.filters import cosine_matrix, distinct_filters, pairwise_cosine, pattern_match


def test_cosine_matrix_equals_scikit_learn_batched_and_between_two_sets():
    rng = np.random.default_rng(0)
    A = rng.normal(size=(3, 5, 7))  # (K, M, d): three groups of five vectors
    B = rng.normal(size=(3, 4, 7))
    C = cosine_matrix(torch.from_numpy(A))
    assert C.dtype == torch.float64 and C.shape == (3, 5, 5)
    for k in range(3):
        np.testing.assert_allclose(C[k].numpy(), cosine_similarity(A[k]), rtol=0, atol=1e-14)
        np.testing.assert_allclose(cosine_matrix(A[k], B[k]).numpy(), cosine_similarity(A[k], B[k]), atol=1e-14)
    a, b = A[1, 2], B[1, 3]
    assert float(cosine_matrix(A, B)[1, 2, 3]) == pytest.approx(a @ b / np.linalg.norm(a) / np.linalg.norm(b))
    # float32 in, float64 out; a zero row has cosine 0 with every row (not NaN)
    Z = np.vstack([np.zeros(7), A[0, :2]]).astype(np.float32)
    Cz = cosine_matrix(Z)
    assert Cz.dtype == torch.float64 and bool((Cz[0] == 0).all()) and bool((Cz[:, 0] == 0).all())


def test_filter_diversity_measures_are_built_on_the_cosines():
    rng = np.random.default_rng(1)
    W = rng.normal(size=(6, 16))
    C = cosine_similarity(W)
    off = C[~np.eye(6, dtype=bool)]
    assert pairwise_cosine(W) == pytest.approx((off.mean(), np.abs(off).mean()), rel=1e-12)
    W[5] = -2 * W[0] + 1e-3 * rng.normal(size=16)  # a near-duplicate (up to sign) of filter 0
    np.fill_diagonal(C := np.abs(cosine_similarity(W)), 0)
    assert distinct_filters(W, 0.9) == int((C.max(1) < 0.9).sum()) == 4
    X = rng.normal(size=(9, 16))
    assert pattern_match(W, X) == pytest.approx(cosine_similarity(W, X).max(1).mean(), rel=1e-12)


def test_filter_measures_refuse_inputs_they_would_misread():
    """A 1-D vector is not a set of filters (it read as M one-pixel filters, cosines ±1); a shape that does not
    hold the filters, and patches of another dimension, are one error each (were torch's reshape/matmul errors)."""
    from ssldyn.probes.filters import total_variation

    rng = np.random.default_rng(2)
    with pytest.raises(ValueError, match=r"pairwise_cosine: filters must be \(M, \.\.\.\)"):
        pairwise_cosine(rng.normal(size=5))
    with pytest.raises(ValueError, match="distinct_filters: filters must be"):
        distinct_filters(rng.normal(size=5))
    with pytest.raises(ValueError, match=r"shape \(3, 4\) does not hold filters of dimension 10"):
        total_variation(rng.normal(size=(3, 10)), (3, 4))
    with pytest.raises(ValueError, match="pattern_match: filters of dimension 16 and patches of dimension 9"):
        pattern_match(rng.normal(size=(4, 16)), rng.normal(size=(5, 9)))
    # image-shaped filters and patches are flattened alike: (M, h, w) against (n, h, w)
    W, X = rng.normal(size=(4, 3, 3)), rng.normal(size=(6, 3, 3))
    assert pattern_match(W, X) == pytest.approx(cosine_similarity(W.reshape(4, 9), X.reshape(6, 9)).max(1).mean())
