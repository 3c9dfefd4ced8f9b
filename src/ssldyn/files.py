"""Atomic file writes, for every layer (the run store, the cache, the report, training checkpoints).

At the package root (like :mod:`ssldyn.memory`): it imports nothing of the package, so the
dynamics (checkpoints of :func:`~ssldyn.dynamics.ssl.train_ssl`) and the lab (the run store,
which turns a failure into a :class:`~ssldyn.lab.store.StoreWriteError`) share one implementation.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from pathlib import Path

__all__ = ["atomic_write_bytes", "fsync_dir"]


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
