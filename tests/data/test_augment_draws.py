"""``augment``'s draws: the crop position is uniform over every admissible offset
(torchvision: ``randint(0, H − h + 1)``), and colour jitter is applied with probability ``jitter_p``."""

import torch

from ssldyn.data.augment import SimCLRAugment, sample_resized_crop


def test_crop_position_is_uniform_over_all_offsets_including_the_last():
    n, H, W = 6000, 8, 8
    params = sample_resized_crop(n, H, W, scale=(0.25, 0.25), ratio=(1.0, 1.0),
                                 generator=torch.Generator().manual_seed(0))  # fmt: skip
    assert torch.all(params[:, 2] == 4) and torch.all(params[:, 3] == 4)  # h = w = √(0.25·64) = 4
    se = (0.2 * 0.8 / n) ** 0.5
    for col in (0, 1):  # top, left ∈ {0, …, H − h}: 5 values, each with probability 1/5
        counts = torch.bincount(params[:, col], minlength=5).double() / n
        assert counts.numel() == 5
        assert torch.all((counts - 0.2).abs() < 5 * se), counts.tolist()


def test_jitter_is_applied_with_probability_jitter_p():
    B = 600
    x = 0.2 + 0.6 * torch.rand(B, 3, 6, 6, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    quiet = dict(rotation=0.0, gray_p=0.0, blur_p=0.0, noise=0.0)
    crop_only = SimCLRAugment(jitter=0.0, **quiet)(x, torch.Generator().manual_seed(2))  # the crops come first
    for p in (0.0, 0.3):
        y = SimCLRAugment(jitter=0.4, jitter_p=p, **quiet)(x, torch.Generator().manual_seed(2))
        changed = ((y - crop_only).abs().amax((1, 2, 3)) > 1e-9).double().mean()
        assert abs(float(changed) - p) < 5 * (max(p * (1 - p), 1e-12) / B) ** 0.5 + 1e-12
