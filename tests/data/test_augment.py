"""Augmentations: crop parameters follow torchvision's rule, crops equal slicing, seeded, shapes/ranges."""

import math

import numpy as np
import pytest
import torch

from ssldyn.data.augment import RandomResizedCrop, SimCLRAugment, resized_crop, sample_resized_crop, two_views


def test_crop_params_respect_scale_and_ratio():
    g = torch.Generator().manual_seed(0)
    p = sample_resized_crop(20000, 28, 28, scale=(0.5, 1.0), ratio=(0.5, 1.5), generator=g)
    top, left, h, w = p.T
    assert (top >= 0).all() and (left >= 0).all() and (top + h <= 28).all() and (left + w <= 28).all()
    # rounding of w = round(√(s·A·r)), h = round(√(s·A/r)) moves area and ratio by at most half a pixel per side
    area = (h * w).double() / 784
    lo_area = (torch.sqrt(torch.tensor(0.5 * 784 * 0.5)) - 0.5) * (torch.sqrt(torch.tensor(0.5 * 784 / 1.5)) - 0.5)
    assert area.max() <= 1.0 and area.min() >= 0.45
    for hh, ww in zip(h[:2000].tolist(), w[:2000].tolist()):
        # some real (s, r) in the given ranges rounds to (h, w)
        s_lo, s_hi = (hh - 0.5) * (ww - 0.5) / 784, (hh + 0.5) * (ww + 0.5) / 784
        r_lo, r_hi = (ww - 0.5) / (hh + 0.5), (ww + 0.5) / (hh - 0.5)
        assert s_hi >= 0.5 and s_lo <= 1.0 and r_hi >= 0.5 and r_lo <= 1.5
    # distribution: same as torchvision's scalar rule, written out here (Monte Carlo reference)
    rng = np.random.default_rng(0)
    ref_area, ref_ratio = [], []
    for _ in range(20000):
        for _try in range(10):
            sa = rng.uniform(0.5, 1.0) * 784
            r = math.exp(rng.uniform(math.log(0.5), math.log(1.5)))
            ww, hh = round(math.sqrt(sa * r)), round(math.sqrt(sa / r))
            if 0 < ww <= 28 and 0 < hh <= 28:
                break
        else:
            ww, hh = 28, 28
        ref_area.append(ww * hh / 784)
        ref_ratio.append(ww / hh)
    assert abs(area.mean().item() - np.mean(ref_area)) < 0.005
    assert abs(area.std().item() - np.std(ref_area)) < 0.005
    assert abs(float((w.double() / h.double()).mean()) - np.mean(ref_ratio)) < 0.01
    assert lo_area > 0


def test_crop_fallback_is_centred():
    g = torch.Generator().manual_seed(0)
    # impossible: ratio 10 on a square image with full area -> centred crop with ratio clamped (torchvision)
    p = sample_resized_crop(5, 20, 20, scale=(1.0, 1.0), ratio=(10.0, 10.0), generator=g)
    assert p.tolist() == [[9, 0, 2, 20]] * 5


def test_resized_crop_equals_slicing_and_identity():
    x = torch.rand(3, 2, 16, 16, dtype=torch.float64)
    full = torch.tensor([[0, 0, 16, 16]] * 3)
    torch.testing.assert_close(resized_crop(x, full), x, atol=1e-10, rtol=0)
    p = torch.tensor([[3, 5, 8, 6], [0, 0, 8, 6], [8, 10, 8, 6]])
    out = resized_crop(x, p, size=(8, 6))
    for b, (t, l, h, w) in enumerate(p.tolist()):
        torch.testing.assert_close(out[b], x[b, :, t : t + h, l : l + w], atol=1e-10, rtol=0)
    # 2× upsampling of a crop is bilinear interpolation with aligned corners: a linear ramp stays linear
    ramp = torch.arange(16, dtype=torch.float64).view(1, 1, 1, 16).expand(1, 1, 16, 16)
    up = resized_crop(ramp, torch.tensor([[0, 4, 16, 8]]), size=(16, 15))  # columns 4..11 -> 15 samples
    torch.testing.assert_close(up[0, 0, 0], torch.linspace(4, 11, 15, dtype=torch.float64), atol=1e-10, rtol=0)
    # boxes that do not fit the image were filled with zeros by kornia, and params of the wrong shape failed inside it
    with pytest.raises(ValueError, match=r"every box \(top, left, h, w\) must lie inside the 16×16 image"):
        resized_crop(x, torch.tensor([[0, 0, 16, 16], [0, 0, 16, 16], [4, 4, 16, 8]]))
    with pytest.raises(ValueError, match=r"params must be \(B=3, 4\) rows .* got \(2, 4\)"):
        resized_crop(x, full[:2])


@pytest.mark.parametrize("channels", [1, 3])
def test_simclr_augment_shapes_range_seed(channels):
    x = torch.rand(16, channels, 28, 28)
    aug = SimCLRAugment()
    a = aug(x, torch.Generator().manual_seed(5))
    b = aug(x, torch.Generator().manual_seed(5))
    c = aug(x, torch.Generator().manual_seed(6))
    assert a.shape == x.shape and a.dtype == x.dtype
    assert a.min() >= 0 and a.max() <= 1
    torch.testing.assert_close(a, b, atol=0, rtol=0)
    assert (a - c).abs().max() > 0.1
    v1, v2 = two_views(x, aug, generator=torch.Generator().manual_seed(0))
    assert (v1 - v2).abs().mean() > 0.01  # two different views


def test_simclr_augment_without_randomness_is_identity():
    x = torch.rand(4, 3, 12, 12, dtype=torch.float64)
    aug = SimCLRAugment(scale=(1.0, 1.0), ratio=(1.0, 1.0), rotation=0.0, jitter=0.0, gray_p=0.0, blur_p=0.0, noise=0.0)
    torch.testing.assert_close(aug(x, torch.Generator().manual_seed(0)), x, atol=1e-10, rtol=0)
    # noise only: the added noise has the configured standard deviation
    aug_n = SimCLRAugment(scale=(1.0, 1.0), ratio=(1.0, 1.0), rotation=0.0, jitter=0.0, blur_p=0.0, noise=0.05)
    y = torch.full((64, 1, 16, 16), 0.5, dtype=torch.float64)
    d = aug_n(y, torch.Generator().manual_seed(0)) - y
    assert abs(d.std().item() - 0.05) < 0.002


def test_simclr_augment_grayscale_with_and_without_jitter():
    """``gray_p`` applies to RGB views whether or not colour jitter is on (``jitter = 0`` skipped it too)."""
    x = torch.rand(8, 3, 16, 16, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    for jitter in (0.0, 0.4):
        aug = SimCLRAugment(scale=(1.0, 1.0), ratio=(1.0, 1.0), rotation=0.0, jitter=jitter, gray_p=1.0, blur_p=0.0,
                            noise=0.0)  # fmt: skip
        y = aug(x, torch.Generator().manual_seed(1))
        assert torch.equal(y[:, 0], y[:, 1]) and torch.equal(y[:, 1], y[:, 2]), jitter
        if jitter == 0:  # the luminance of the images themselves (identity crop, no jitter)
            lum = 0.299 * x[:, 0] + 0.587 * x[:, 1] + 0.114 * x[:, 2]
            torch.testing.assert_close(y[:, 0], lum, atol=1e-10, rtol=0)


def test_simclr_brightness_is_a_factor_as_in_torchvision():
    """Colour jitter on (every image), the other steps off: brightness is ``clamp(x·f_b, 0, 1)`` (torchvision's
    ``ColorJitter`` and SimCLR; it used to be kornia's additive ``x + (f_b − 1)``), then contrast
    ``clamp(x·f_c, 0, 1)``; the factors ``U(1 ± jitter)`` are the generator's draws after the crop's."""
    from kornia.enhance import adjust_saturation

    B, H, W, jitter = 6, 8, 8, 0.4
    aug = SimCLRAugment(scale=(1.0, 1.0), ratio=(1.0, 1.0), rotation=0.0, jitter=jitter, jitter_p=1.0, gray_p=0.0,
                        blur_p=0.0, noise=0.0)  # fmt: skip

    def factors(seed):  # the draws of SimCLRAugment.__call__, in its order
        g = torch.Generator().manual_seed(seed)
        params = sample_resized_crop(B, H, W, scale=(1.0, 1.0), ratio=(1.0, 1.0), generator=g)
        lo, hi = 1 - jitter, 1 + jitter
        f = lo + (hi - lo) * torch.rand(B, 3, generator=g, dtype=torch.float64)  # (B, 3): f_b, f_c, f_s
        return params, f[:, 0].view(B, 1, 1, 1), f[:, 1].view(B, 1, 1, 1), f[:, 2]

    # grey RGB images (R = G = B): the saturation step is the identity, the whole jitter is written out
    grey = torch.rand(B, 1, H, W, dtype=torch.float64, generator=torch.Generator().manual_seed(2)).expand(B, 3, H, W)
    grey = grey.clone()
    grey[:, :, 0, 0], grey[:, :, 0, 1] = 0.0, 0.95  # a black pixel stays black; a light one is clipped by f > 1
    params, fb, fc, _ = factors(3)
    x = resized_crop(grey, params)  # the identity crop
    torch.testing.assert_close(x, grey, atol=1e-12, rtol=0)
    want = ((x * fb).clamp(0, 1) * fc).clamp(0, 1)  # (B, 3, H, W)
    got = aug(grey, torch.Generator().manual_seed(3))
    torch.testing.assert_close(got, want, atol=1e-12, rtol=0)
    assert (got[:, :, 0, 0] == 0).all()
    # colour images: the same factors, with kornia's HSV saturation step after brightness and contrast
    rgb = torch.rand(B, 3, H, W, dtype=torch.float64, generator=torch.Generator().manual_seed(4))
    params, fb, fc, fs = factors(5)
    want = adjust_saturation(((resized_crop(rgb, params) * fb).clamp(0, 1) * fc).clamp(0, 1), fs).clamp(0, 1)
    torch.testing.assert_close(aug(rgb, torch.Generator().manual_seed(5)), want, atol=1e-12, rtol=0)


def test_random_resized_crop_seeded_and_mass():
    x = torch.rand(32, 1, 28, 28)
    crop = RandomResizedCrop()
    a = crop(x, torch.Generator().manual_seed(1))
    torch.testing.assert_close(a, crop(x, torch.Generator().manual_seed(1)), atol=0, rtol=0)
    assert a.shape == x.shape and a.min() >= 0 and a.max() <= 1
    const = torch.full((4, 1, 28, 28), 0.3)
    torch.testing.assert_close(crop(const, torch.Generator().manual_seed(0)), const, atol=1e-6, rtol=0)


def test_random_resized_crop_is_bilinear_resampling_of_its_box():
    """Each view = the box drawn by sample_resized_crop (same generator stream), resampled to the input size by
    bilinear interpolation with aligned corners — here scipy's order-1 map_coordinates on the float64 image."""
    from scipy.ndimage import map_coordinates

    x = torch.rand(6, 2, 20, 20, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    out = RandomResizedCrop(size=(16, 24))(x, torch.Generator().manual_seed(4))
    params = sample_resized_crop(
        6, 20, 20, scale=(0.5, 1.0), ratio=(0.5, 1.5), generator=torch.Generator().manual_seed(4)
    )
    assert out.shape == (6, 2, 16, 24)
    for b, (t, l, h, w) in enumerate(params.tolist()):
        rows, cols = np.meshgrid(t + np.linspace(0, h - 1, 16), l + np.linspace(0, w - 1, 24), indexing="ij")
        for c in range(2):
            ref = map_coordinates(x[b, c].numpy(), [rows, cols], order=1)
            np.testing.assert_allclose(out[b, c].numpy(), ref, rtol=0, atol=1e-10)


def test_bad_inputs():
    with pytest.raises(ValueError, match="scale"):
        sample_resized_crop(2, 8, 8, scale=(0.0, 1.0))
    with pytest.raises(ValueError, match=r"\(B, C, H, W\)"):
        RandomResizedCrop()(torch.rand(28, 28))


@pytest.mark.parametrize(
    "kw, message",
    [
        (dict(noise=-0.1), r"noise must be a finite number >= 0, got -0.1"),
        (dict(noise=math.inf), r"noise must be a finite number >= 0, got inf"),  # views of clamped ±inf: 0/1 pixels
        (dict(rotation=math.nan), r"rotation \(degrees\) must be a finite number >= 0, got nan"),
        (dict(blur_p=1.5), r"blur_p must be in \[0, 1\], got 1.5"),
        (dict(gray_p=-0.2), r"gray_p must be in \[0, 1\], got -0.2"),
        (dict(jitter=True), r"jitter must be a real number, got True"),
        # σ = 0: kornia's BaseError at the first call
        (dict(blur_sigma=(0.0, 1.0)), r"blur_sigma=\(0.0, 1.0\): need 0 < lo <= hi < inf"),
        (dict(blur_sigma=(1.0, 0.5)), r"blur_sigma=\(1.0, 0.5\)"),
        (dict(scale=(0.5, 1.5)), r"scale=\(0.5, 1.5\): need 0 < lo <= hi <= 1"),
        (dict(ratio=(0.5, math.inf)), r"ratio=\(0.5, inf\): need 0 < lo <= hi < inf"),
        (dict(ratio=0.5), r"ratio=0.5: need"),
    ],
)
def test_simclr_augment_rejects_bad_settings_when_built(kw, message):
    """One error at construction naming the setting, before any image is drawn (it used to be silent or
    surface at the first call: a negative noise was |noise|, σ = 0 kornia's BaseError, blur_p > 1 meant 'always')."""
    with pytest.raises(ValueError, match=rf"^SimCLRAugment: {message}"):
        SimCLRAugment(**kw)


def test_random_resized_crop_rejects_bad_settings_when_built():
    with pytest.raises(ValueError, match=r"^RandomResizedCrop: scale=\(0.0, 1.0\): need 0 < lo <= hi <= 1$"):
        RandomResizedCrop(scale=(0.0, 1.0))
    with pytest.raises(ValueError, match=r"^RandomResizedCrop: ratio=\(2.0, 1.0\)"):
        RandomResizedCrop(ratio=(2.0, 1.0))
    with pytest.raises(ValueError, match=r"^RandomResizedCrop: size=\(0, 28\)"):
        RandomResizedCrop(size=(0, 28))
    # the edges of the allowed ranges are fine: an identity crop, no blur, no noise
    x = torch.rand(3, 1, 8, 8, generator=torch.Generator().manual_seed(1))
    same = SimCLRAugment(scale=(1.0, 1.0), ratio=(1.0, 1.0), rotation=0, jitter=0, blur_p=0, noise=0)
    torch.testing.assert_close(same(x, torch.Generator().manual_seed(0)), x, atol=1e-6, rtol=0)


@pytest.mark.parametrize("aug", [SimCLRAugment(), RandomResizedCrop()])
def test_augmentations_reject_images_outside_the_unit_range(aug):
    # raw digits (0–16) used to be clamped silently into views in [0.76, 1]; standardised images lose their negatives
    raw = torch.randint(0, 17, (4, 1, 8, 8)).float()
    with pytest.raises(ValueError, match=r"^images: values must lie in \[0, 1\], got the range \[0, 16\]"):
        aug(raw, torch.Generator().manual_seed(0))
    with pytest.raises(ValueError, match=r"got the range \[-0.9"):
        aug(torch.rand(4, 1, 8, 8) * 2 - 1, torch.Generator().manual_seed(0))
    nan = torch.rand(4, 1, 8, 8)
    nan[0, 0, 0, 0] = math.nan
    with pytest.raises(ValueError, match="values must lie in"):
        aug(nan, torch.Generator().manual_seed(0))
    with pytest.raises(ValueError, match="floating point"):
        aug(torch.zeros(4, 1, 8, 8, dtype=torch.uint8), torch.Generator().manual_seed(0))
    ok = aug(torch.rand(4, 1, 8, 8), torch.Generator().manual_seed(0))  # [0, 1]: fine
    assert ok.shape == (4, 1, 8, 8) and float(ok.min()) >= 0 and float(ok.max()) <= 1
