"""Shared input handling of the probes (private).

Probes take tensors or anything numpy can read (arrays, nested lists) and never keep a graph.
"""

from __future__ import annotations

import numpy as np
import torch

__all__ = ["as_tensor"]


def as_tensor(x) -> torch.Tensor:
    """``x`` as a tensor without a graph: a tensor is detached (same device and dtype), anything else goes
    through ``np.asarray``; integer and boolean values become float64 (floating and complex values are kept)."""
    t = x.detach() if isinstance(x, torch.Tensor) else torch.as_tensor(np.asarray(x))
    if not (t.is_floating_point() or t.is_complex()):
        t = t.to(torch.float64)
    return t
