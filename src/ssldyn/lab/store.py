"""The run store: ``<out>/<experiment>/<config-hash>/`` (DESIGN.md, "Run store").

A run directory holds ``config.json``, ``meta.json``, ``summary.json``, ``tables/*.parquet``,
``arrays.npz``, ``claims.json``, ``figures/`` and a ``DONE`` marker. A run is written into
a hidden partial directory next to its final place; ``DONE`` is written last and the whole
directory is then moved into place with one atomic ``rename``. So a directory under its hash
name is always complete, an interrupted run leaves only a partial directory (removed and
redone next time), and readers never see a half-written file.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ssldyn import __version__
from ssldyn.lab.claims import Claim
from ssldyn.lab.result import Result

DONE = "DONE"


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temp file + fsync + rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{uuid.uuid4().hex[:8]}")
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def _json(obj: Any) -> str:
    return json.dumps(obj, indent=2, sort_keys=True, default=_json_default)


def _json_default(o: Any) -> Any:
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def config_hash(experiment: str, config: dict[str, Any], seed: int, device: str, version: str) -> str:
    """Hash of the validated config + seed + device + package and experiment version."""
    key = {
        "experiment": experiment,
        "config": config,
        "seed": seed,
        "device": device,
        "package": __version__,
        "version": version,
    }
    return hashlib.sha256(json.dumps(key, sort_keys=True, default=_json_default).encode()).hexdigest()[:12]


@dataclass
class StoredRun:
    """A finished run directory."""

    path: Path

    @property
    def experiment(self) -> str:
        return self.config_record["experiment"]

    @property
    def config_record(self) -> dict[str, Any]:
        return json.loads((self.path / "config.json").read_text())

    @property
    def meta(self) -> dict[str, Any]:
        return json.loads((self.path / "meta.json").read_text())

    @property
    def claims(self) -> list[Claim]:
        return [Claim.from_dict(d) for d in json.loads((self.path / "claims.json").read_text())]

    @property
    def summary(self) -> dict[str, Any]:
        return json.loads((self.path / "summary.json").read_text())

    @property
    def figures(self) -> list[Path]:
        d = self.path / "figures"
        return sorted(p for p in d.iterdir() if p.suffix.lower() in {".png", ".gif", ".svg"}) if d.is_dir() else []

    def result(self) -> Result:
        """Load tables, arrays and summary back into a :class:`Result`."""
        tables = {p.stem: pd.read_parquet(p) for p in sorted((self.path / "tables").glob("*.parquet"))}
        arrays: dict[str, np.ndarray] = {}
        if (self.path / "arrays.npz").exists():
            with np.load(self.path / "arrays.npz", allow_pickle=False) as npz:
                arrays = {k: npz[k] for k in npz.files}
        summ = self.summary
        notes = summ.pop("__notes__", [])
        return Result(tables=tables, arrays=arrays, summary=summ, notes=notes)


class RunStore:
    """Finished runs under one output directory."""

    def __init__(self, out: str | Path) -> None:
        self.out = Path(out)

    @property
    def cache_dir(self) -> Path:
        """``<out>/.cache``: computations experiments share between runs (safe to delete)."""
        return self.out / ".cache"

    def run_dir(self, experiment: str, digest: str) -> Path:
        return self.out / experiment / digest

    def get(self, experiment: str, digest: str) -> StoredRun | None:
        d = self.run_dir(experiment, digest)
        return StoredRun(d) if (d / DONE).is_file() else None

    def finished(self) -> list[StoredRun]:
        """Every finished run, newest first."""
        runs = [StoredRun(p.parent) for p in self.out.glob(f"*/*/{DONE}") if not p.parent.name.startswith(".")]
        return sorted(runs, key=lambda r: (r.path / DONE).stat().st_mtime, reverse=True)

    def failure_path(self, experiment: str, digest: str) -> Path:
        return self.out / experiment / f"{digest}.failed.json"

    def record_failure(self, experiment: str, digest: str, error: str, config: dict[str, Any] | None = None) -> None:
        """Mark a run failed (its error and config); a later successful run removes the mark."""
        atomic_write_text(
            self.failure_path(experiment, digest),
            _json({"experiment": experiment, "hash": digest, "error": error, "config": config}),
        )

    def clear_failure(self, experiment: str, digest: str) -> None:
        self.failure_path(experiment, digest).unlink(missing_ok=True)

    def failures(self) -> list[dict[str, Any]]:
        out = []
        for p in sorted(self.out.glob("*/*.failed.json")):
            try:
                out.append(json.loads(p.read_text()))
            except (OSError, ValueError):
                continue
        return out

    def new_partial(self, experiment: str, digest: str) -> Path:
        """A fresh hidden directory to write a run into (old partials of this hash are removed)."""
        parent = self.out / experiment
        parent.mkdir(parents=True, exist_ok=True)
        for stale in parent.glob(f".{digest}.partial-*"):
            shutil.rmtree(stale, ignore_errors=True)
        d = parent / f".{digest}.partial-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        d.mkdir()
        return d

    def write_result(
        self, partial: Path, config_record: dict[str, Any], meta: dict[str, Any], result: Result, claims: list[Claim]
    ) -> None:
        """Write every file of a run into ``partial`` (DONE is written by :meth:`commit`)."""
        atomic_write_text(partial / "config.json", _json(config_record))
        for name, frame in result.tables.items():
            buf = io.BytesIO()
            frame.to_parquet(buf, index=False)
            atomic_write_bytes(partial / "tables" / f"{name}.parquet", buf.getvalue())
        if result.arrays:
            buf = io.BytesIO()
            np.savez_compressed(buf, **{k: np.asarray(v) for k, v in result.arrays.items()})
            atomic_write_bytes(partial / "arrays.npz", buf.getvalue())
        atomic_write_text(partial / "summary.json", _json({**result.summary, "__notes__": result.notes}))
        atomic_write_text(partial / "claims.json", _json([c.to_dict() for c in claims]))
        atomic_write_text(partial / "meta.json", _json(meta))

    def commit(self, partial: Path, experiment: str, digest: str) -> StoredRun:
        """Write DONE last, then move the partial directory into place atomically."""
        atomic_write_text(partial / DONE, "")
        final = self.run_dir(experiment, digest)
        old = None
        if final.exists():
            old = final.with_name(f".{digest}.old-{uuid.uuid4().hex[:6]}")
            os.replace(final, old)
        os.replace(partial, final)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
        return StoredRun(final)
