"""Shared sub-results of experiments, cached through the run store (``<out>/.cache``).

An entry is a mapping of names to numpy arrays (what experiments share: traces, filters,
tables as columns), stored under a key derived from what determines it — a JSON-able
description (the settings) plus the code version (:func:`code_version`) — so any change of
settings or code is a miss, and a cached value is the value a recomputation with the same key
gives. "The same" means bit-identical when the computation itself is deterministic in its key;
a value computed inside a batch (an ensemble) can depend on the batch's shapes through float
round-off, so experiments that batch keep the batch fixed whatever is cached (the token grid
retrains a whole ensemble when one of its runs is missing) and state the bound across batches.

Entries are written atomically (temporary file, ``fsync``, rename, ``fsync`` of the folder) and
carry a SHA-256 checksum of their payload and their full key. On reading, a truncated,
edited or otherwise damaged entry is never used: it is reported as a :class:`CacheWarning`
naming its path and recomputed (the new value replaces it). Arrays are read with
``allow_pickle=False``: an entry cannot execute code.

File format: one line ``ssldyn-cache 1``, one line of JSON ``{"key": ..., "sha256": ...}``,
then the payload (an uncompressed ``.npz``); files are named ``<namespace>/<sha256 of key and version>.entry``.
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ssldyn.files import npz_bytes

__all__ = ["CacheWarning", "RunCache", "code_version"]

_MAGIC = b"ssldyn-cache 1\n"
# subpackages whose code never changes a computed value (machinery, figures)
_NOT_COMPUTING = ("lab", "viz")

Arrays = dict[str, np.ndarray]


class CacheWarning(UserWarning):
    """A cache entry could not be used (damaged) or written; the value was recomputed / not kept."""


@functools.lru_cache(maxsize=1)
def code_version() -> str:
    """Hash of the code that computes results: every ``.py`` file of the ``ssldyn`` package outside
    ``lab/`` and ``viz/`` (relative path and bytes, in sorted order), with the package, torch and
    numpy versions. Any edit to a module that can change a value changes it; no list of files
    to keep up to date."""
    import torch

    from ssldyn._version import __version__

    root = _package_root()
    h = hashlib.sha256()
    h.update(f"ssldyn {__version__} torch {torch.__version__} numpy {np.__version__}\n".encode())
    files = sorted(p for p in root.rglob("*.py") if p.relative_to(root).parts[0] not in _NOT_COMPUTING)
    for p in files:
        h.update(p.relative_to(root).as_posix().encode() + b"\0")
        h.update(p.read_bytes())
        h.update(b"\0")
    return h.hexdigest()[:16]


def _package_root() -> Path:
    """The ``ssldyn`` package folder (``src/ssldyn``) whose modules :func:`code_version` hashes."""
    return Path(__file__).resolve().parents[1]


def _canonical(key: Any) -> str:
    try:
        return json.dumps(key, sort_keys=True, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as e:
        raise ValueError(f"cache key must be JSON data (dicts, lists, str, finite numbers): {e}") from None


class RunCache:
    """Entries under ``root`` (normally ``<out>/.cache``), or no disk cache when ``root`` is None.

    Args:
        root: the cache folder; None: :meth:`get` always misses and :meth:`put` keeps nothing.
        version: the code version mixed into every key (default :func:`code_version`).
    """

    def __init__(self, root: str | Path | None, version: str | None = None) -> None:
        self.root = Path(root) if root is not None else None
        self.version = version if version is not None else code_version()

    def path(self, namespace: str, key: Any) -> Path:
        """Where the entry of ``key`` lives: ``<root>/<namespace>/<sha256(key, version)>.entry``."""
        if self.root is None:
            raise ValueError("RunCache.path: this cache has no folder (root=None)")
        if not namespace or "/" in namespace or namespace.startswith("."):
            raise ValueError(f"cache namespace {namespace!r}: a plain folder name")
        digest = hashlib.sha256(self._full_key(key).encode()).hexdigest()[:40]
        return self.root / namespace / f"{digest}.entry"

    def _full_key(self, key: Any) -> str:
        return _canonical({"key": key, "code": self.version})

    def get(self, namespace: str, key: Any) -> Arrays | None:
        """The stored arrays of ``key``, or None (missing, or damaged: then a :class:`CacheWarning`)."""
        if self.root is None:
            return None
        path = self.path(namespace, key)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as e:
            warnings.warn(f"cache entry {path} cannot be read ({e}); recomputing it", CacheWarning, stacklevel=2)
            return None
        try:
            return self._decode(data, self._full_key(key))
        except Exception as e:  # any damage means: recompute
            warnings.warn(f"cache entry {path} is damaged ({e}); recomputing it", CacheWarning, stacklevel=2)
            return None

    def put(self, namespace: str, key: Any, arrays: Mapping[str, Any]) -> Path | None:
        """Store ``arrays`` (name -> array-like, no object arrays) atomically; returns the path.

        A failed write (read-only store, full disk) is a :class:`CacheWarning`, not an error:
        the value is returned to the caller anyway, only not kept.
        """
        if self.root is None:
            return None
        payload = npz_bytes(arrays, what="cache value", verb="cached")
        path = self.path(namespace, key)
        header = json.dumps({"key": self._full_key(key), "sha256": hashlib.sha256(payload).hexdigest()})
        try:
            _atomic_write(path, _MAGIC + header.encode() + b"\n" + payload)
        except OSError as e:
            warnings.warn(f"cache entry {path} could not be written ({e}); not cached", CacheWarning, stacklevel=2)
            return None
        return path

    def cached(self, namespace: str, key: Any, compute: Callable[[], Mapping[str, Any]]) -> Arrays:
        """``get`` or ``compute()`` + ``put``."""
        hit = self.get(namespace, key)
        if hit is not None:
            return hit
        value = {k: np.asarray(v) for k, v in compute().items()}
        self.put(namespace, key, value)
        return value

    @staticmethod
    def _decode(data: bytes, full_key: str) -> Arrays:
        if not data.startswith(_MAGIC):
            raise ValueError("not a cache entry (bad header)")
        nl = data.find(b"\n", len(_MAGIC))
        if nl < 0:
            raise ValueError("truncated header")
        header = json.loads(data[len(_MAGIC) : nl])
        payload = data[nl + 1 :]
        if hashlib.sha256(payload).hexdigest() != header.get("sha256"):
            raise ValueError("checksum mismatch: truncated or edited")
        if header.get("key") != full_key:
            raise ValueError("entry belongs to another key")
        with np.load(io.BytesIO(payload), allow_pickle=False) as npz:
            return {k: npz[k] for k in npz.files}


def _atomic_write(path: Path, data: bytes) -> None:
    """The lab's one atomic write (:func:`ssldyn.lab.store.atomic_write_bytes`: temp file, ``fsync``,
    rename, ``fsync`` of the folder; no temp file left on failure)."""
    from ssldyn.lab.store import atomic_write_bytes

    atomic_write_bytes(path, data)
