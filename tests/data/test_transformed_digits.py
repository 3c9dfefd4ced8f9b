"""The transformation family of the Fig. 1 stand-in, against exact references (rot90, roll, 1 − x)."""

import math

import pytest
import torch

from ssldyn.data.images import ImageDataset
from ssldyn.data.transformed_digits import DigitTransform, transformed_digits


def _digits(B=3, side=10, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.zeros(B, 1, side, side, dtype=torch.float64)
    x[:, :, 2:8, 3:6] = torch.rand(B, 1, 6, 3, generator=g, dtype=torch.float64)
    return x


def _params(T, B, **kw):
    p = T.sample(B, 10, 10, generator=torch.Generator().manual_seed(0))
    p.update({"scale": torch.ones(B, dtype=torch.float64), "angle": torch.zeros(B, dtype=torch.float64),
              "shift": torch.zeros(B, 2, dtype=torch.float64), "invert": torch.zeros(B, dtype=torch.bool)})  # fmt: skip
    p.update(kw)
    return p


def test_identity_centres_the_digit_on_the_canvas():
    T = DigitTransform(canvas=14, clutter=0)
    d = _digits()
    out = T.apply(d, _params(T, 3))
    ref = torch.zeros(3, 1, 14, 14, dtype=torch.float64)
    ref[:, :, 2:12, 2:12] = d
    torch.testing.assert_close(out, ref, atol=1e-6, rtol=0)


def test_rotation_by_90_degrees_is_rot90_and_translation_is_a_roll():
    T = DigitTransform(canvas=14, clutter=0)
    d = _digits()
    centred = T.apply(d, _params(T, 3))
    rot = T.apply(d, _params(T, 3, angle=torch.full((3,), math.pi / 2, dtype=torch.float64)))
    # +90° in image coordinates (x right, y down) is a clockwise quarter turn on the screen
    torch.testing.assert_close(rot, torch.rot90(centred, k=-1, dims=(2, 3)), atol=1e-6, rtol=0)
    moved = T.apply(d, _params(T, 3, shift=torch.tensor([[2.0, -1.0]] * 3, dtype=torch.float64)))
    torch.testing.assert_close(moved, torch.roll(centred, shifts=(-1, 2), dims=(2, 3)), atol=1e-6, rtol=0)


def test_inversion_and_clutter():
    T = DigitTransform(canvas=14, clutter=1, clutter_size=3)
    d = _digits()
    p = _params(T, 3, invert=torch.tensor([True, False, False]))
    p["source"] = torch.tensor([[1], [2], [0]])
    p["corner"] = torch.tensor([[[2, 3]]] * 3)
    p["place"] = torch.tensor([[[0, 0]]] * 3)
    out = T.apply(d, p)
    plain = T.apply(d, {**p, "source": torch.zeros(3, 0, dtype=torch.long), "invert": torch.zeros(3, dtype=torch.bool)})
    frag1 = d[2, 0, 2:5, 3:6]  # image 1 gets a fragment of image 2 at the canvas corner
    torch.testing.assert_close(out[1, 0, :3, :3], torch.maximum(plain[1, 0, :3, :3], frag1))
    expected0 = plain[0].clone()  # image 0: a fragment of image 1 at the corner, then the contrast inverted
    expected0[0, :3, :3] = torch.maximum(expected0[0, :3, :3], d[1, 0, 2:5, 3:6])
    torch.testing.assert_close(out[0], 1.0 - expected0)


def test_seeded_and_bounded():
    T = DigitTransform(canvas=20, clutter=2, clutter_size=4)
    d = _digits(B=6)
    a = T(d, torch.Generator().manual_seed(5))
    b = T(d, torch.Generator().manual_seed(5))
    torch.testing.assert_close(a, b)
    assert a.shape == (6, 1, 20, 20) and float(a.min()) >= 0 and float(a.max()) <= 1
    ds = ImageDataset(d.float(), torch.arange(6), "toy")
    out = transformed_digits(ds, T, generator=torch.Generator().manual_seed(1), batch=4)
    assert out.images.shape == (6, 1, 20, 20) and torch.equal(out.labels, ds.labels)
    # the documented chunking: one T per image, drawn chunk after chunk (of `batch` images) from one generator
    g = torch.Generator().manual_seed(1)
    ref = torch.cat([T(ds.images[:4], g), T(ds.images[4:], g)])
    torch.testing.assert_close(out.images, ref, rtol=0, atol=0)
    # clutter fragments come from the same chunk only: a chunk of one image has nothing to paste
    solo = DigitTransform(canvas=20, clutter=2, clutter_size=4, max_rotation=0.0, max_shift=0.0, invert_p=0.0,
                          scale=(1.0, 1.0))  # fmt: skip
    one = transformed_digits(ImageDataset(d[:1].float(), torch.arange(1), "one"), solo,
                             generator=torch.Generator().manual_seed(2), batch=1)  # fmt: skip
    centred = torch.zeros(1, 1, 20, 20)
    centred[:, :, 5:15, 5:15] = d[:1].float()
    torch.testing.assert_close(one.images, centred, atol=1e-6, rtol=0)


@pytest.mark.parametrize("kw", [{"canvas": 4}, {"scale": (1.2, 0.8)}, {"max_shift": 0.7}, {"invert_p": 1.5},
                                {"clutter_size": 0}, {"max_rotation": -5.0}, {"max_rotation": float("inf")},
                                {"max_rotation": float("nan")}])  # fmt: skip
def test_bad_parameters_are_one_clear_error(kw):
    with pytest.raises(ValueError, match="DigitTransform"):
        DigitTransform(**kw)


def test_digits_larger_than_the_canvas_are_rejected():
    with pytest.raises(ValueError, match="canvas"):
        DigitTransform(canvas=8, clutter_size=2)(_digits())
