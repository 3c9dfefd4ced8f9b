"""Smoothness of flattened non-square filters (M, h·w) with shape=(h, w): read row-major, as the image they are.
Square filters cannot tell a row-major from a transposed read (both measures are transpose-invariant)."""

import numpy as np
import pytest

from ssldyn.probes.filters import laplacian_energy, total_variation


def _ref(img):
    h, w = img.shape
    lap = [4 * img[i, j] - img[i - 1, j] - img[i + 1, j] - img[i, j - 1] - img[i, j + 1]
           for i in range(1, h - 1) for j in range(1, w - 1)]  # fmt: skip
    tv = sum(abs(img[i + 1, j] - img[i, j]) for i in range(h - 1) for j in range(w)) + sum(
        abs(img[i, j + 1] - img[i, j]) for i in range(h) for j in range(w - 1)
    )
    return np.sum(np.square(lap)) / np.sum(img**2), tv / np.sum(np.abs(img))


def test_flat_non_square_filters_are_read_row_major():
    rng = np.random.default_rng(0)
    h, w = 4, 7
    imgs = rng.normal(size=(3, h, w)).cumsum(axis=2)  # smooth along rows, rough across: orientation matters
    flat = imgs.reshape(3, h * w)  # row-major flattening, as numpy / torch do
    lap_ref, tv_ref = zip(*[_ref(im) for im in imgs])
    assert laplacian_energy(flat, shape=(h, w)) == pytest.approx(np.mean(lap_ref), rel=1e-12)
    assert total_variation(flat, shape=(h, w)) == pytest.approx(np.mean(tv_ref), rel=1e-12)
