"""Tiny files must not cost huge memory, and bad labels/pixels are one clear error (run-store issue, items 7, 9, 11)."""

import gzip
import pickle
import struct
import tracemalloc

import numpy as np
import pytest

from ssldyn.data.images import load_cifar10, load_idx_images
from ssldyn.data.mnist import read_idx
from ssldyn.errors import UserError


def _idx(path, type_code, dims, payload=b"", gz=True):
    raw = bytes([0, 0, type_code, len(dims)]) + b"".join(struct.pack(">I", d) for d in dims) + payload
    if gz:
        path.write_bytes(gzip.compress(raw))
    else:
        path.write_bytes(raw)
    return path


def test_idx_declaring_a_huge_array_is_refused_before_allocation(tmp_path):
    # a 0.5 MB gzip of zeros that decompresses to 60,000 × 28 × 28 × 50 bytes and declares all of it
    bomb = _idx(tmp_path / "bomb.gz", 0x08, [60000 * 50, 28, 28], payload=b"\0" * (4 << 20))
    tracemalloc.start()
    with pytest.raises(UserError, match="above the limit"):
        read_idx(bomb)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 64 << 20  # nothing near the declared 2.3 GB was allocated


def test_idx_dimensions_overflowing_int64_are_an_error(tmp_path):
    f = _idx(tmp_path / "huge", 0x0E, [0xFFFFFFFF] * 4, gz=False)  # 8 · (2^32)^4 bytes: beyond int64
    with pytest.raises(UserError, match="above the limit"):
        read_idx(f)


def test_idx_truncated_and_trailing_data(tmp_path):
    with pytest.raises(UserError, match="truncated"):
        read_idx(_idx(tmp_path / "short", 0x08, [10, 2], payload=b"\1" * 5, gz=False))
    with pytest.raises(UserError, match="more data follows"):
        read_idx(_idx(tmp_path / "long", 0x08, [2, 2], payload=b"\1" * 5, gz=False))
    np.testing.assert_array_equal(read_idx(_idx(tmp_path / "ok.gz", 0x08, [2, 2], payload=bytes([1, 2, 3, 4]))),
                                  [[1, 2], [3, 4]])  # fmt: skip


def _mnist_dir(tmp_path, labels, images=None, img_code=0x08):
    n = len(labels)
    if images is None:
        images = np.zeros((n, 2, 2), dtype=np.uint8)
    dt = {0x08: np.uint8, 0x0D: ">f4"}[img_code]
    _idx(tmp_path / "train-images-idx3-ubyte.gz", img_code, list(images.shape), images.astype(dt).tobytes())
    lab = np.asarray(labels)
    code = 0x08 if lab.dtype == np.uint8 else (0x0D if lab.dtype.kind == "f" else 0x09)
    ldt = {0x08: np.uint8, 0x09: np.int8, 0x0D: ">f4"}[code]
    _idx(tmp_path / "train-labels-idx1-ubyte.gz", code, [n], lab.astype(ldt).tobytes())
    return tmp_path


@pytest.mark.parametrize("labels", [np.array([0, -1], dtype=np.int8), np.array([0, 3.7], dtype=np.float32),
                                    np.array([0, 10], dtype=np.uint8)])  # fmt: skip
def test_idx_labels_must_be_classes(tmp_path, labels):
    with pytest.raises(UserError, match="labels must"):
        load_idx_images(_mnist_dir(tmp_path, labels))


@pytest.mark.parametrize("bad", [np.nan, -1.0, 300.0])
def test_idx_pixels_must_be_finite_and_in_range(tmp_path, bad):
    imgs = np.zeros((2, 2, 2), dtype=np.float32)
    imgs[1, 0, 0] = bad
    with pytest.raises(UserError, match="pixel values"):
        load_idx_images(_mnist_dir(tmp_path, np.array([0, 1], dtype=np.uint8), imgs, img_code=0x0D))


class _StrideZero:
    """Pickles as ``numpy.ndarray((150000, 3072), uint8, buffer, 0, (0, 0))``: 150,000 images from a few bytes."""

    def __reduce__(self):
        return (np.ndarray, ((150000, 3072), np.dtype(np.uint8), b"\x07" * 8, 0, (0, 0)))


def test_cifar_stride_zero_array_is_refused(tmp_path):
    d = tmp_path / "cifar-10-batches-py"
    d.mkdir()
    with open(d / "data_batch_1", "wb") as f:
        pickle.dump({b"data": _StrideZero(), b"labels": [0] * 150000}, f, protocol=2)
    assert (d / "data_batch_1").stat().st_size < 1 << 20
    with pytest.raises(UserError, match="declares .* bytes of images"):
        load_cifar10(tmp_path)


@pytest.mark.parametrize("labels", [[0, -1], [0, 3.7], ["a", "b"]])
def test_cifar_labels_must_be_classes(tmp_path, labels):
    d = tmp_path / "cifar-10-batches-py"
    d.mkdir()
    with open(d / "data_batch_1", "wb") as f:
        pickle.dump({b"data": np.zeros((2, 3072), dtype=np.uint8), b"labels": labels}, f, protocol=2)
    with pytest.raises(UserError, match="labels must"):
        load_cifar10(tmp_path)
