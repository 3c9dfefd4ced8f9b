"""Independent-reference checks beside tests/data/test_moons.py (test audit, 2026-12-06).

``test_negatives_are_other_points_of_the_dataset`` checks that a negative is some other point, and the expectation
test has atol 0.03: negatives that never pick one of the other points (a shift drawn from 1..n−2 instead of
1..n−1) pass both. prop3's E[C̃]/n = −cov (unbiased) needs the negative uniform over the n − 1 others: checked
here by the frequencies of every (anchor, other point) pair (binomial 5σ)."""

import math

import numpy as np

from ssldyn.data.moons import make_views


def test_each_negative_is_uniform_over_the_other_points():
    n, q = 5, 8000
    x = np.arange(2.0 * n).reshape(n, 2)  # distinct rows: row k is (2k, 2k + 1)
    v = make_views(x, p=1, q=q, seed=3)
    idx = (v.x_neg[..., 0].numpy() / 2).astype(int)  # (n, q) the point each negative copies
    p = 1 / (n - 1)
    for i in range(n):
        freq = np.bincount(idx[i], minlength=n) / q
        assert freq[i] == 0
        others = np.delete(freq, i)
        assert np.all(np.abs(others - p) < 5 * math.sqrt(p * (1 - p) / q)), (i, freq)
