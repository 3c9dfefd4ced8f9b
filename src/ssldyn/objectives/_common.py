"""Shared helpers of the objectives: input validation and pairwise similarities.

Private module. Every public objective validates its inputs here so that a user
mistake gives one ``ValueError`` line that names the argument and what is allowed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal, TypeVar, get_args

import torch
import torch.nn.functional as F
from torch import Tensor

from ssldyn.checks import choice, nonnegative, positive

Similarity = Literal["cosine", "sqdist", "dot"]
SIMILARITIES: tuple[str, ...] = get_args(Similarity)
_T = TypeVar("_T")


# --------------------------------------------------------------------------- validation
def check_tensor(fn: str, name: str, x: object, *, min_dim: int = 2, min_rows: int = 1) -> Tensor:
    """Check that ``x`` is a floating tensor of shape ``(..., N, d)`` with ``N >= min_rows``."""
    if not isinstance(x, Tensor):
        raise ValueError(f"{fn}: {name} must be a torch.Tensor, got {type(x).__name__}")
    if not x.is_floating_point():
        raise ValueError(f"{fn}: {name} must be a floating-point tensor (float32 or float64), got {x.dtype}")
    if x.dim() < min_dim:
        raise ValueError(
            f"{fn}: {name} must have at least {min_dim} dimensions "
            f"(shape (..., N, d), leading dims are ensemble axes), got shape {tuple(x.shape)}"
        )
    rows_axis = x.dim() - min_dim
    if x.shape[rows_axis] < min_rows:
        raise ValueError(
            f"{fn}: {name} needs at least {min_rows} samples along dim {rows_axis - x.dim()}, "
            f"got shape {tuple(x.shape)}"
        )
    return x


def check_same_shape(fn: str, name1: str, x1: Tensor, name2: str, x2: Tensor) -> None:
    if x1.shape != x2.shape:
        raise ValueError(
            f"{fn}: {name1} and {name2} must have the same shape, got {tuple(x1.shape)} and {tuple(x2.shape)}"
        )
    if x1.dtype != x2.dtype:
        raise ValueError(f"{fn}: {name1} and {name2} must have the same dtype, got {x1.dtype} and {x2.dtype}")


def check_pair(fn: str, name1: str, x1: object, name2: str, x2: object, *, min_rows: int = 1) -> None:
    """Two inputs of one shape and dtype: each a floating tensor ``(..., N, d)`` with ``N >= min_rows``
    (:func:`check_tensor`, ``x1`` first), then :func:`check_same_shape`."""
    a = check_tensor(fn, name1, x1, min_rows=min_rows)
    b = check_tensor(fn, name2, x2, min_rows=min_rows)
    check_same_shape(fn, name1, a, name2, b)


def check_exclude(fn: str, exclude: object, z1: Tensor, *, name: str = "exclude") -> Tensor | None:
    """``exclude`` (or another pair mask, ``name``): None, or a bool tensor ``(N, N)`` / ``(..., N, N)``
    broadcastable to the ``(..., N, N)`` pair matrix of ``z1 (..., N, d)``, False on the diagonal (the pair
    ``(i, i)`` is the anchor's positive pair with its other view: it can be neither left out nor added)."""
    if exclude is None:
        return None
    n = z1.shape[-2]
    if not isinstance(exclude, Tensor) or exclude.dtype != torch.bool:
        raise ValueError(f"{fn}: {name} must be a bool tensor (..., N, N) or None, got {type(exclude).__name__}"
                         + (f" of dtype {exclude.dtype}" if isinstance(exclude, Tensor) else ""))  # fmt: skip
    try:
        shape = torch.broadcast_shapes(exclude.shape, (*z1.shape[:-2], n, n))
    except RuntimeError:
        shape = None
    if exclude.dim() < 2 or shape != (*z1.shape[:-2], n, n):
        raise ValueError(f"{fn}: {name} must broadcast to the pair matrix {(*z1.shape[:-2], n, n)}, got "
                         f"{tuple(exclude.shape)}")  # fmt: skip
    if bool(torch.diagonal(exclude, dim1=-2, dim2=-1).any()):
        what = "cannot be left out" if name == "exclude" else "is a positive already (the other view)"
        raise ValueError(f"{fn}: {name} is True on its diagonal (it must be False there: the positive pair (i, i) "
                         f"{what})")  # fmt: skip
    return exclude.to(z1.device)


def check_pair_masks(fn: str, exclude: object, positives: object, z1: Tensor) -> tuple[Tensor | None, Tensor | None]:
    """``(exclude, positives)`` checked (:func:`check_exclude`) and on ``z1``'s device: ``positives`` is True at
    ``(i, j)`` (``i ≠ j``) where ``z1_j`` is a positive of anchor ``i`` besides its other view; no pair may be both
    a positive and left out."""
    exclude = check_exclude(fn, exclude, z1)
    positives = check_exclude(fn, positives, z1, name="positives")
    if positives is not None and exclude is not None and bool((both := positives & exclude).any()):
        at = tuple(int(i) for i in both.nonzero()[0])
        raise ValueError(f"{fn}: positives and exclude must be disjoint (a positive pair cannot be left out); both "
                         f"are True at {at}")  # fmt: skip
    return exclude, positives


def check_positive(fn: str, name: str, value: object) -> float:
    """A finite real number > 0 (Python number or one-element tensor): :func:`ssldyn.checks.positive`."""
    return positive(value, name, where=fn)


def check_nonnegative(fn: str, name: str, value: object) -> float:
    return nonnegative(value, name, where=fn)


def check_choice(fn: str, name: str, value: _T, choices: Sequence[str]) -> _T:
    """``value`` if it is one of ``choices`` (a Literal option keeps its type), else one ``ValueError``
    (:func:`ssldyn.checks.choice`)."""
    return choice(value, name, choices, where=fn)


def check_callable(fn: str, name: str, value: object) -> Callable | None:
    if value is not None and not callable(value):
        raise ValueError(f"{fn}: {name} must be a callable or None, got {type(value).__name__}")
    return value  # type: ignore[return-value]


# --------------------------------------------------------------------------- similarities
def half_sqdist(a: Tensor, b: Tensor) -> Tensor:
    """Pairwise ``‖a_i - b_j‖² / 2`` of ``a (..., N, d)`` and ``b (..., M, d)`` -> ``(..., N, M)``.

    Written through inner products so that it stays smooth (no square root) at
    coincident points; tiny negative round-off is clamped to 0.
    """
    sq_a = a.pow(2).sum(-1)  # (..., N)
    sq_b = b.pow(2).sum(-1)  # (..., M)
    d2 = 0.5 * (sq_a[..., :, None] + sq_b[..., None, :]) - a @ b.mT  # (..., N, M)
    return d2.clamp_min(0.0)


def paired_half_sqdist(a: Tensor, b: Tensor) -> Tensor:
    """Row-wise ``‖a_i - b_i‖² / 2`` of two ``(..., N, d)`` tensors -> ``(..., N)``."""
    return 0.5 * (a - b).pow(2).sum(-1)


def similarity_matrix(a: Tensor, b: Tensor, similarity: str) -> Tensor:
    """Pairwise similarity ``s(a_i, b_j)`` -> ``(..., N, M)``.

    ``cosine``: ``â_i·b̂_j`` (L2-normalised); ``dot``: ``a_i·b_j``;
    ``sqdist``: ``-‖a_i - b_j‖²/2`` on the embeddings as given.
    """
    if similarity == "cosine":
        return F.normalize(a, dim=-1) @ F.normalize(b, dim=-1).mT  # (..., N, M)
    if similarity == "dot":
        return a @ b.mT  # (..., N, M)
    return -half_sqdist(a, b)  # (..., N, M)


def paired_similarity(a: Tensor, b: Tensor, similarity: str) -> Tensor:
    """Row-wise similarity ``s(a_i, b_i)`` -> ``(..., N)``."""
    if similarity == "cosine":
        return (F.normalize(a, dim=-1) * F.normalize(b, dim=-1)).sum(-1)  # (..., N)
    if similarity == "dot":
        return (a * b).sum(-1)  # (..., N)
    return -paired_half_sqdist(a, b)  # (..., N)


def view1_similarity(z1: Tensor, z2: Tensor, similarity: str) -> Tensor:
    """The view-1 similarity matrix of Tian's reference implementation.

    ``M_ij = s(z1_i, z1_j)`` for ``i != j`` and ``M_ii = s(z1_i, z2_i)``: rows are anchors of
    view 1, the diagonal holds the positive pair, the off-diagonal the negatives (all from
    view 1). Shape ``(..., N, N)``.
    """
    n = z1.shape[-2]
    eye = torch.eye(n, dtype=torch.bool, device=z1.device)  # (N, N)
    off = similarity_matrix(z1, z1, similarity)  # (..., N, N)
    pos = paired_similarity(z1, z2, similarity)  # (..., N)
    return torch.where(eye, pos[..., :, None], off)  # (..., N, N)
