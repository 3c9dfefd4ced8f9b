"""``nonlinearity.lme``'s helpers (Sec. 3.1): the z-score of an estimated ``A(u_m)`` against a closed form
(eq. 8 / eq. 9), written out in numpy and calibrated by Monte Carlo, and the count of distinct directions the
power iteration ends at, on hand-built rows."""

import math

import numpy as np
import pytest
import torch

from ssldyn.experiments.nonlinearity.lme import _n_distinct, _z_score

DT = torch.float64


def test_z_score_hand_worked_uses_the_sample_std_of_the_mean():
    """Two 1 × 1 batch estimates 1 and 3: sample std √2 (ddof 1), standard error √2/√2 = 1, so A = 5 against
    ref = 2 is 3 standard errors away (ddof 0 would give 3√2 = 4.24, a std without the 1/√B 3/√2 = 2.12)."""
    b = [torch.tensor([[1.0]], dtype=DT), torch.tensor([[3.0]], dtype=DT)]
    assert _z_score(b, torch.tensor([[5.0]], dtype=DT), torch.tensor([[2.0]], dtype=DT)) == pytest.approx(3.0)
    # the sign of the error does not matter (a norm)
    assert _z_score(b, torch.tensor([[-1.0]], dtype=DT), torch.tensor([[2.0]], dtype=DT)) == pytest.approx(3.0)


def test_z_score_is_the_frobenius_ratio_written_out():
    rng = np.random.default_rng(0)
    B, d = 7, 4
    Ab = rng.normal(size=(B, d, d)) * rng.uniform(0.1, 2.0, size=(d, d))  # entry-wise different spreads
    A, ref = rng.normal(size=(d, d)), rng.normal(size=(d, d))
    se = Ab.std(axis=0, ddof=1) / math.sqrt(B)  # (d, d): the entry-wise standard error of the batch mean
    want = np.linalg.norm(A - ref) / np.linalg.norm(se)
    got = _z_score([torch.from_numpy(a) for a in Ab], torch.from_numpy(A), torch.from_numpy(ref))
    assert got == pytest.approx(want, rel=1e-12)


def test_z_score_of_an_unbiased_estimate_is_about_one():
    """Monte Carlo calibration: batches iid around ref, A their mean ⇒ z² ≈ χ²_{d²}/d² (mean 1). A biased
    estimate (ref shifted by 3 standard errors per entry) gives z ≈ 3."""
    rng = np.random.default_rng(1)
    B, d, trials = 40, 3, 400
    sig = rng.uniform(0.5, 1.5, size=(d, d))
    ref = rng.normal(size=(d, d))
    z2, zb = [], []
    for _ in range(trials):
        Ab = ref + sig * rng.normal(size=(B, d, d))
        A = Ab.mean(0)
        bat = [torch.from_numpy(a) for a in Ab]
        z2.append(_z_score(bat, torch.from_numpy(A), torch.from_numpy(ref)) ** 2)
        zb.append(_z_score(bat, torch.from_numpy(A), torch.from_numpy(ref + 3 * sig / math.sqrt(B))))
    assert np.mean(z2) == pytest.approx(1.0, abs=0.12)  # sd of the mean ≈ √(2/9)/20 = 0.024
    assert np.median(zb) == pytest.approx(3.0, abs=0.4)


def test_z_score_zero_spread_stays_finite():
    b = [torch.eye(2, dtype=DT)] * 3
    assert _z_score(b, torch.eye(2, dtype=DT), torch.eye(2, dtype=DT)) == 0.0
    z = _z_score(b, torch.eye(2, dtype=DT), torch.zeros(2, 2, dtype=DT))
    assert math.isfinite(z) and z > 1e290


def test_n_distinct_counts_directions_up_to_sign():
    e1, e2, e3 = torch.eye(3, dtype=DT)
    near = (e1 + 1e-3 * e2) / math.sqrt(1 + 1e-6)  # cos = 0.9999995 with e1: the same direction
    apart = (e1 + 0.1 * e2) / math.sqrt(1.01)  # cos = 0.995: a different direction at the default 0.999
    W = torch.stack([e1, -e1, e2, near, -e2, (e1 + e2) / math.sqrt(2), apart])
    assert _n_distinct(W) == 4  # e1, e2, (e1 + e2)/√2, apart
    assert _n_distinct(W, cos_tol=0.99) == 3  # apart merges into e1
    assert _n_distinct(torch.stack([e1, e2, e3])) == 3
    assert _n_distinct(torch.stack([-e3] * 5 + [e3] * 2)) == 1
