"""Process-level settings of a run: torch threads and the malloc top pad (no other lab imports).

Light to import (torch is imported by the functions that set threads), so that the command line
checks ``SSLDYN_THREADS`` with :func:`threads_from_env` before it imports anything heavy.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from ssldyn.errors import UserError

if TYPE_CHECKING:  # pragma: no cover
    import torch

__all__ = ["threads_from_env", "set_threads", "torch_threads", "keep_heap_pad"]


def threads_from_env(default: int = 0) -> int:
    """``SSLDYN_THREADS`` as a positive integer (``default`` when unset); anything else is a UserError."""
    raw = os.environ.get("SSLDYN_THREADS", "").strip()
    if not raw:
        return default
    if not (raw.isascii() and raw.isdigit()) or not 1 <= int(raw) <= 4096:  # "²".isdigit() is True
        raise UserError(f"SSLDYN_THREADS={raw[:40]!r}: must be an integer from 1 to 4096 (torch threads)")
    return int(raw)


def set_threads(n: int | None = None) -> int:
    """Set torch intra-op threads deliberately (env ``SSLDYN_THREADS`` or the core count)."""
    import torch

    n = n or threads_from_env() or (os.cpu_count() or 1)
    torch.set_num_threads(max(1, n))
    return torch.get_num_threads()


@contextmanager
def torch_threads(n: int = 1, device: torch.device | str | None = None) -> Iterator[None]:
    """Run torch on ``n`` intra-op threads (only on CPU: a no-op for CUDA ``device``), then restore.

    Experiments made of many tiny tensor ops use ``torch_threads(1)``: on a 2-core machine
    extra threads only add contention (measured up to ~10x slower when the cores are busy).
    """
    import torch

    old = torch.get_num_threads()
    if device is None or torch.device(device).type == "cpu":
        torch.set_num_threads(max(1, n))
    try:
        yield
    finally:
        torch.set_num_threads(old)


def keep_heap_pad(pad_bytes: int = 256 << 20) -> bool:
    """Ask glibc's malloc to keep ``pad_bytes`` of freed heap instead of returning it to the OS.

    A training step of the batched ensembles allocates and frees tensors of a few MB; without
    a pad, glibc trims the heap after each step and the next step page-faults the memory back
    (measured: the 384-run token grid's steps are ~20 % faster with a 256 MB pad). Returns
    whether it took effect (False off glibc). Process-wide: call it in worker processes.
    """
    try:
        import ctypes
        import ctypes.util

        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        M_TOP_PAD = -2
        return bool(libc.mallopt(M_TOP_PAD, int(pad_bytes)))
    except (OSError, AttributeError, TypeError):
        return False
