"""Atomic file writes, for every layer (the run store, the cache, the report, training checkpoints).

At the package root (like :mod:`ssldyn.memory`): it imports nothing of the package, so the
dynamics (checkpoints of :func:`~ssldyn.dynamics.ssl.train_ssl`) and the lab (the run store,
which turns a failure into a :class:`~ssldyn.lab.store.StoreWriteError`) share one implementation.
"""

from __future__ import annotations

import contextlib
import io
import os
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["atomic_write_bytes", "fsync_dir", "npz_bytes"]


def npz_bytes(arrays: Mapping[str, Any], *, what: str, verb: str, compressed: bool = False) -> bytes:
    """The ``.npz`` bytes of ``arrays`` (each through ``np.asarray``, under its name), pickling nothing: an
    object array is a ``ValueError`` "``{what} {name!r}: object arrays cannot be {verb}``". (No ``allow_pickle``
    keyword either: numpy up to 2.1 would save it as an array of that name.)"""
    import numpy as np

    out = {}
    for k, v in arrays.items():
        a = np.asarray(v)
        if a.dtype == object:
            raise ValueError(f"{what} {k!r}: object arrays cannot be {verb} (numbers and strings only)")
        out[str(k)] = a
    buf = io.BytesIO()
    (np.savez_compressed if compressed else np.savez)(buf, **out)
    return buf.getvalue()


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temp file in the same folder + fsync + rename (+ fsync
    of the folder): a reader sees the old file or the new one, never a part of either, and a crash
    mid-write leaves the old file. On any failure the temp file is removed and the error (an
    ``OSError`` for a full disk or a read-only folder) is raised as it is; the folder must exist."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    fsync_dir(path.parent)


def fsync_dir(d: str | os.PathLike) -> None:
    """Flush a folder's entries (a rename in it) to disk; a no-op where folders cannot be opened."""
    try:
        fd = os.open(d, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
