"""Independent-reference checks beside tests/data/test_augment.py (test audit, 2026-12-06).

``test_simclr_augment_shapes_range_seed`` (shape, [0, 1] range, determinism, "two seeds differ") is the only test
that runs the rotation and the blur: a rotation drawn in radians instead of degrees, blur applied to every image
whatever ``blur_p``, or σ always at the top of ``blur_sigma`` all pass it. Each step is checked here alone, its
draws replayed in ``SimCLRAugment``'s documented order (crop boxes, then the step's parameters), against an
independent reference: a blob's centroid rotated by the drawn angle about the image centre; the normalised
Gaussian kernel written out in numpy on a single-pixel image."""

import math

import numpy as np
import pytest
import torch

from ssldyn.data.augment import SimCLRAugment, sample_resized_crop

QUIET = dict(scale=(1.0, 1.0), ratio=(1.0, 1.0), rotation=0.0, jitter=0.0, gray_p=0.0, blur_p=0.0, noise=0.0)


def _replay(B, H, W, seed):
    g = torch.Generator().manual_seed(seed)
    sample_resized_crop(B, H, W, scale=(1.0, 1.0), ratio=(1.0, 1.0), generator=g)  # the crop's draws come first
    return g


def _centroid(img):
    H, W = img.shape
    yy, xx = np.mgrid[0:H, 0:W]
    m = img.sum()
    return (img * xx).sum() / m, (img * yy).sum() / m


def test_rotation_is_uniform_in_plus_minus_rotation_degrees_about_the_centre():
    B, H, R = 64, 33, 60.0
    yy, xx = np.mgrid[0:H, 0:H]
    c = (H - 1) / 2
    blob = np.exp(-((xx - c - 8.0) ** 2 + (yy - c) ** 2) / (2 * 1.5**2))  # a blob 8 px right of the centre
    x = torch.tensor(np.broadcast_to(blob, (B, 1, H, H)).copy())
    out = SimCLRAugment(**{**QUIET, "rotation": R})(x, torch.Generator().manual_seed(3)).numpy()
    g = _replay(B, H, H, 3)
    angle = -R + 2 * R * torch.rand(B, generator=g, dtype=torch.float64).numpy()  # degrees
    assert np.abs(angle).max() > 0.8 * R  # large angles are drawn: radians would barely move the blob
    for b in range(B):
        cx, cy = _centroid(out[b, 0])
        a = math.radians(angle[b])
        # positive angle = counter-clockwise on the screen (image y axis points down)
        want = (c + 8.0 * math.cos(a), c - 8.0 * math.sin(a))
        assert (cx, cy) == pytest.approx(want, abs=0.15), (b, angle[b])


def test_blur_is_the_normalised_gaussian_with_the_drawn_sigma_applied_with_probability_blur_p():
    B, H, lo, hi, p = 400, 15, 0.3, 1.0, 0.4
    x = torch.zeros(B, 1, H, H, dtype=torch.float64)
    x[:, 0, 7, 7] = 1.0  # a single bright pixel, far from the borders
    aug = SimCLRAugment(**{**QUIET, "blur_p": p, "blur_sigma": (lo, hi)})
    out = aug(x, torch.Generator().manual_seed(5)).numpy()[:, 0]
    g = _replay(B, H, H, 5)
    sig = lo + (hi - lo) * torch.rand(B, generator=g, dtype=torch.float64).numpy()
    on = (torch.rand(B, generator=g) < p).numpy()
    k = 2 * math.ceil(2 * hi) + 1  # the kernel's support (5 taps at σ_max = 1)
    t = np.arange(k) - k // 2
    for b in range(B):
        want = np.zeros((H, H))
        if on[b]:
            k1 = np.exp(-(t**2) / (2 * sig[b] ** 2))
            k1 /= k1.sum()
            want[7 - k // 2 : 7 + k // 2 + 1, 7 - k // 2 : 7 + k // 2 + 1] = np.outer(k1, k1)
        else:
            want[7, 7] = 1.0
        np.testing.assert_allclose(
            out[b], want, rtol=0, atol=1e-6, err_msg=f"image {b}, σ = {sig[b]:.3f}, on = {on[b]}"
        )
    # the fraction blurred is blur_p (binomial 5σ)
    blurred = (out[:, 7, 7] < 1 - 1e-9).mean()
    assert abs(blurred - p) < 5 * math.sqrt(p * (1 - p) / B)
