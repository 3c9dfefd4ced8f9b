"""Image augmentations on batched tensors (kornia), seeded, on the images' device.

* :func:`sample_resized_crop` / :class:`RandomResizedCrop` — the crop of ``nonlinearity`` App. E.3,
  ``transforms.RandomResizedCrop((28, 28), scale=(0.5, 1.0), ratio=(0.5, 1.5))``: torchvision's
  sampling rule (up to 10 tries of area fraction ``s ~ U(scale)`` and log-uniform aspect ratio
  ``r = w/h``, ``w = round(√(s·H·W·r))``, ``h = round(√(s·H·W/r))``, position uniform; if no try fits,
  a centred crop with the ratio clamped to ``ratio``), vectorised over the batch; the crop is
  resized back with :func:`kornia.geometry.transform.crop_and_resize` (bilinear).
* :class:`SimCLRAugment` — a SimCLR-style pipeline (Chen et al. 2020; ``variational`` Sec. 1's
  "transformations"): random resized crop, small rotation, colour jitter and random grayscale
  for RGB, Gaussian blur, additive Gaussian noise, values clamped to [0, 1].

All random parameters are drawn from a CPU :class:`torch.Generator` (so a seed gives the same
views on CPU and CUDA) and applied to images ``(B, C, H, W)`` on their own device. The
augmentations are callables ``augment(x, generator) -> x_view`` (the one augmentation convention
of :mod:`ssldyn.dynamics`) on images with values in [0, 1]: another range (e.g. raw 0–255 or
0–16 pixels, or standardised images) is a ``ValueError`` — the photometric steps and the final
clamp assume [0, 1]. The range is checked on every call on the CPU and on the first call on an
accelerator (one host synchronisation, not one per training step).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from kornia.enhance import adjust_contrast, adjust_saturation
from kornia.filters import gaussian_blur2d
from kornia.geometry.transform import crop_and_resize, rotate

from ssldyn.checks import nonnegative, unit_interval

__all__ = [
    "check_unit_range",
    "sample_resized_crop",
    "crop_boxes",
    "resized_crop",
    "RandomResizedCrop",
    "SimCLRAugment",
    "two_views",
]


def _check_images(x: torch.Tensor) -> None:
    if not isinstance(x, torch.Tensor) or x.dim() != 4:
        raise ValueError(f"images must be a tensor (B, C, H, W), got shape {tuple(getattr(x, 'shape', ()))}")
    if not x.is_floating_point():
        raise ValueError(f"images must be floating point with values in [0, 1], got dtype {x.dtype}")


RANGE_TOL = 1e-6


def check_unit_range(x: torch.Tensor, name: str = "images") -> None:
    """``ValueError`` naming the value range found when ``x`` is not in [0, 1] (NaN included)."""
    lo, hi = torch.aminmax(x)
    lo, hi = float(lo), float(hi)
    if not (lo >= -RANGE_TOL and hi <= 1 + RANGE_TOL):  # also False for NaN
        raise ValueError(
            f"{name}: values must lie in [0, 1], got the range [{lo:.4g}, {hi:.4g}]; scale the images "
            "(e.g. divide raw pixels by their maximum) before augmenting"
        )


def _check_range_once(aug, x: torch.Tensor) -> None:
    """Every call on the CPU; the first call per augmentation object on an accelerator."""
    if x.device.type == "cpu" or not getattr(aug, "_range_checked", False):
        check_unit_range(x)
        if x.device.type != "cpu":
            object.__setattr__(aug, "_range_checked", True)  # frozen dataclass: not a field


def _uniform(n: int, lo: float, hi: float, g: torch.Generator | None, *shape: int) -> torch.Tensor:
    return lo + (hi - lo) * torch.rand(n, *shape, generator=g, dtype=torch.float64)


def _interval(value: object) -> tuple[float, float] | None:
    """``(lo, hi)`` of two real numbers, else None."""
    try:
        lo, hi = value  # type: ignore[misc]
        return float(lo), float(hi)
    except (TypeError, ValueError):
        return None


def _check_crop(where: str, scale: object, ratio: object) -> None:
    """The crop's area fraction ``scale`` in (0, 1] and aspect ratio ``ratio`` in (0, ∞), each ``(lo, hi)``."""
    s, r = _interval(scale), _interval(ratio)
    if s is None or not (0 < s[0] <= s[1] <= 1.0):
        raise ValueError(f"{where}: scale={scale}: need 0 < lo <= hi <= 1")
    if r is None or not (0 < r[0] <= r[1] < math.inf):
        raise ValueError(f"{where}: ratio={ratio}: need 0 < lo <= hi < inf")


def sample_resized_crop(
    n: int,
    height: int,
    width: int,
    *,
    scale: tuple[float, float] = (0.5, 1.0),
    ratio: tuple[float, float] = (0.5, 1.5),
    generator: torch.Generator | None = None,
    tries: int = 10,
) -> torch.Tensor:
    """Crop boxes ``(n, 4)`` int64 rows ``(top, left, h, w)`` by torchvision's RandomResizedCrop rule.

    Args:
        n: number of crops; height, width: image size.
        scale: range of the crop's area fraction; ratio: range of the aspect ratio ``w/h``.
        generator: CPU generator (seeded) for all draws.
    """
    _check_crop("sample_resized_crop", scale, ratio)
    area = float(height * width)
    s = _uniform(n, scale[0], scale[1], generator, tries)  # (n, T)
    log_r = _uniform(n, math.log(ratio[0]), math.log(ratio[1]), generator, tries)  # (n, T)
    r = log_r.exp()
    w = torch.round(torch.sqrt(s * area * r)).long()  # (n, T)
    h = torch.round(torch.sqrt(s * area / r)).long()
    ok = (w > 0) & (w <= width) & (h > 0) & (h <= height)  # (n, T)
    first = torch.where(ok.any(1), ok.long().argmax(1), torch.full((n,), -1))  # (n,)
    # fallback: centred crop, ratio clamped (torchvision)
    in_ratio = width / height
    if in_ratio < ratio[0]:
        fw, fh = width, int(round(width / ratio[0]))
    elif in_ratio > ratio[1]:
        fh, fw = height, int(round(height * ratio[1]))
    else:
        fw, fh = width, height
    rows = torch.arange(n)
    pick = first.clamp_min(0)
    hh = torch.where(first >= 0, h[rows, pick], torch.full((n,), fh))  # (n,)
    ww = torch.where(first >= 0, w[rows, pick], torch.full((n,), fw))
    u = torch.rand(n, 2, generator=generator, dtype=torch.float64)
    top = torch.floor(u[:, 0] * (height - hh + 1)).long()
    left = torch.floor(u[:, 1] * (width - ww + 1)).long()
    top = torch.where(first >= 0, top, torch.full((n,), (height - fh) // 2))
    left = torch.where(first >= 0, left, torch.full((n,), (width - fw) // 2))
    return torch.stack([top, left, hh, ww], 1)  # (n, 4)


def crop_boxes(params: torch.Tensor) -> torch.Tensor:
    """``(n, 4)`` rows ``(top, left, h, w)`` -> kornia corner boxes ``(n, 4, 2)`` of (x, y) pixel centres."""
    if params.dim() != 2 or params.shape[1] != 4:
        raise ValueError(f"crop params must be (n, 4) rows (top, left, h, w), got {tuple(params.shape)}")
    top, left, h, w = (params[:, i].double() for i in range(4))
    x0, y0, x1, y1 = left, top, left + w - 1, top + h - 1
    return torch.stack(
        [torch.stack([x0, y0], 1), torch.stack([x1, y0], 1), torch.stack([x1, y1], 1), torch.stack([x0, y1], 1)], 1
    )  # (n, 4, 2)


def resized_crop(images: torch.Tensor, params: torch.Tensor, size: tuple[int, int] | None = None) -> torch.Tensor:
    """Crop each image ``(B, C, H, W)`` by its ``(top, left, h, w)`` and resize (bilinear) to ``size``."""
    _check_images(images)
    B, _, H, W = images.shape
    if params.dim() != 2 or tuple(params.shape) != (B, 4):
        raise ValueError(f"resized_crop: params must be (B={B}, 4) rows (top, left, h, w), one per image, got "
                         f"{tuple(params.shape)}")  # fmt: skip
    top, left, h, w = params.detach().cpu().double().unbind(1)  # (B,) each
    if B and not bool(((top >= 0) & (left >= 0) & (h >= 1) & (w >= 1) & (top + h <= H) & (left + w <= W)).all()):
        raise ValueError(f"resized_crop: every box (top, left, h, w) must lie inside the {H}×{W} image (a box "
                         "outside it would be filled with zeros)")  # fmt: skip
    out_size = size or (int(H), int(W))
    boxes = crop_boxes(params).to(device=images.device, dtype=images.dtype)  # (B, 4, 2)
    return crop_and_resize(images, boxes, out_size, mode="bilinear", align_corners=True)  # (B, C, h, w)


@dataclass(frozen=True)
class RandomResizedCrop:
    """``nonlinearity`` App. E.3 crop: ``RandomResizedCrop(size, scale=(0.5, 1.0), ratio=(0.5, 1.5))``."""

    scale: tuple[float, float] = (0.5, 1.0)
    ratio: tuple[float, float] = (0.5, 1.5)
    size: tuple[int, int] | None = None  # None: the input size

    def __post_init__(self) -> None:
        _check_crop("RandomResizedCrop", self.scale, self.ratio)
        if self.size is not None and not (
            len(self.size) == 2 and all(isinstance(v, int) and v >= 1 for v in self.size)
        ):
            raise ValueError(f"RandomResizedCrop: size={self.size}: need None (the input size) or (h, w), ints >= 1")

    def __call__(self, images: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        _check_images(images)
        _check_range_once(self, images)
        B, _, H, W = images.shape
        params = sample_resized_crop(B, H, W, scale=self.scale, ratio=self.ratio, generator=generator)
        return resized_crop(images, params, self.size)


@dataclass(frozen=True)
class SimCLRAugment:
    """SimCLR-style views of ``(B, C, H, W)`` images in [0, 1].

    Steps (each per image, parameters from the generator): random resized crop (``scale``,
    ``ratio``); rotation by ``U(±rotation)`` degrees; for RGB, with probability ``jitter_p``
    brightness/contrast/saturation factors ``U(1 ± jitter)`` (none when ``jitter`` is 0): brightness
    ``clamp(x·f_b, 0, 1)`` (torchvision's ``ColorJitter``), then contrast ``clamp(x·f_c, 0, 1)`` and the HSV
    saturation ``clamp(s·f_s, 0, 1)`` (kornia's ``adjust_contrast`` / ``adjust_saturation``), then
    grayscale with probability ``gray_p``; Gaussian blur with probability ``blur_p`` and
    ``σ ~ U(blur_sigma)`` pixels; additive noise ``N(0, noise²)``; clamp to [0, 1].

    Settings are checked when the augmentation is built (one ``ValueError`` naming the setting):
    ``scale`` in (0, 1], ``ratio`` in (0, ∞), ``rotation``, ``noise`` finite and >= 0, ``jitter`` and
    the probabilities in [0, 1], ``blur_sigma`` ``0 < lo <= hi``.
    """

    scale: tuple[float, float] = (0.5, 1.0)
    ratio: tuple[float, float] = (0.5, 1.5)
    rotation: float = 10.0
    jitter: float = 0.4
    jitter_p: float = 0.8
    gray_p: float = 0.2
    blur_p: float = 0.5
    blur_sigma: tuple[float, float] = (0.1, 1.0)
    noise: float = 0.05

    def __post_init__(self) -> None:
        where = "SimCLRAugment"
        _check_crop(where, self.scale, self.ratio)
        nonnegative(self.rotation, "rotation (degrees)", where=where)
        nonnegative(self.noise, "noise", where=where)
        for name in ("jitter", "jitter_p", "gray_p", "blur_p"):
            unit_interval(getattr(self, name), name, where=where)
        b = _interval(self.blur_sigma)
        if b is None or not (0 < b[0] <= b[1] < math.inf):
            raise ValueError(f"{where}: blur_sigma={self.blur_sigma}: need 0 < lo <= hi < inf (pixels)")

    def __call__(self, images: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        _check_images(images)
        _check_range_once(self, images)
        B, C, H, W = images.shape
        dev, dt = images.device, images.dtype
        g = generator

        def col(t: torch.Tensor) -> torch.Tensor:  # (B,) -> (B, 1, 1, 1) on the device
            return t.to(device=dev, dtype=dt).view(B, 1, 1, 1)

        params = sample_resized_crop(B, H, W, scale=self.scale, ratio=self.ratio, generator=g)
        x = resized_crop(images, params)  # (B, C, H, W)
        if self.rotation > 0:
            angle = _uniform(B, -self.rotation, self.rotation, g)
            x = rotate(x, angle.to(device=dev, dtype=dt))
        if C == 3:
            if self.jitter > 0:
                f = _uniform(B, 1 - self.jitter, 1 + self.jitter, g, 3)  # (B, 3) brightness, contrast, saturation
                on = torch.rand(B, generator=g) < self.jitter_p
                y = (x * col(f[:, 0])).clamp(0.0, 1.0)  # (B, C, H, W): brightness x·f_b (torchvision's rule)
                y = adjust_contrast(y, f[:, 1].to(device=dev, dtype=dt))
                y = adjust_saturation(y, f[:, 2].to(device=dev, dtype=dt))
                x = torch.where(col(on.double()) > 0, y, x)
            gray = torch.rand(B, generator=g) < self.gray_p  # also without jitter
            lum = (0.299 * x[:, 0:1] + 0.587 * x[:, 1:2] + 0.114 * x[:, 2:3]).expand(-1, 3, -1, -1)
            x = torch.where(col(gray.double()) > 0, lum, x)
        if self.blur_p > 0:
            sig = _uniform(B, self.blur_sigma[0], self.blur_sigma[1], g)  # (B,)
            on = torch.rand(B, generator=g) < self.blur_p
            k = min(2 * math.ceil(2 * self.blur_sigma[1]) + 1, 2 * ((min(H, W) - 1) // 2) + 1)
            blurred = gaussian_blur2d(x, (k, k), sig.to(device=dev, dtype=dt).view(B, 1).expand(B, 2))
            x = torch.where(col(on.double()) > 0, blurred, x)
        if self.noise > 0:
            x = x + self.noise * torch.randn(x.shape, generator=g, dtype=torch.float64).to(device=dev, dtype=dt)
        return x.clamp(0.0, 1.0)


def two_views(
    images: torch.Tensor,
    augment: Callable[[torch.Tensor, torch.Generator | None], torch.Tensor],
    *,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Two independent augmentations of the same images (the positive pairs)."""
    return augment(images, generator), augment(images, generator)
