"""Shared input handling of the probes (private).

Probes take tensors or anything numpy can read (arrays, nested lists) and never keep a graph.
"""

from __future__ import annotations

from typing import TypeAlias

import numpy as np
import numpy.typing as npt
import torch

__all__ = ["ArrayLike", "as_tensor"]

#: what a probe takes: a tensor (detached; its device and dtype kept) or anything ``np.asarray`` reads (an array, a
#: nested list, a pandas frame)
ArrayLike: TypeAlias = torch.Tensor | npt.ArrayLike


def as_tensor(x: ArrayLike) -> torch.Tensor:
    """``x`` as a tensor without a graph: a tensor is detached (same device and dtype), anything else goes
    through ``np.asarray``; integer and boolean values become float64 (floating and complex values are kept)."""
    t = x.detach() if isinstance(x, torch.Tensor) else torch.as_tensor(np.asarray(x))
    if not (t.is_floating_point() or t.is_complex()):
        t = t.to(torch.float64)
    return t
