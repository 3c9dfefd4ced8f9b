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
from collections.abc import Sequence
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


def config_hash(experiment: str, config: dict[str, Any], seeds: Sequence[int], device: str, version: str) -> str:
    """Hash of the validated config + seeds + device + package and experiment version."""
    key = {
        "experiment": experiment,
        "config": config,
        "seeds": [int(s) for s in seeds],
        "device": device,
        "package": __version__,
        "version": version,
    }
    return hashlib.sha256(json.dumps(key, sort_keys=True, default=_json_default).encode()).hexdigest()[:12]


@dataclass
class StoredRun:
    """A finished run directory: one experiment, one config, every seed of the run."""

    path: Path

    @property
    def experiment(self) -> str:
        return self.config_record["experiment"]

    @property
    def config_record(self) -> dict[str, Any]:
        return json.loads((self.path / "config.json").read_text())

    @property
    def seeds(self) -> list[int]:
        rec = self.config_record
        return [int(s) for s in rec.get("seeds", [rec.get("seed", 0)])]

    @property
    def meta(self) -> dict[str, Any]:
        return json.loads((self.path / "meta.json").read_text())

    @property
    def claims(self) -> list[Claim]:
        return [Claim.from_dict(d) for d in json.loads((self.path / "claims.json").read_text())]

    def _summary_file(self) -> dict[str, Any]:
        data = json.loads((self.path / "summary.json").read_text())
        if "per_seed" not in data:  # a one-seed run of an earlier layout
            notes = data.pop("__notes__", [])
            return {"seeds": self.seeds[:1], "per_seed": {str(self.seeds[0]): data}, "notes": notes}
        return data

    @property
    def summaries(self) -> dict[int, dict[str, Any]]:
        """Summary numbers per seed: ``{seed: {name: value}}``."""
        return {int(k): v for k, v in self._summary_file()["per_seed"].items()}

    @property
    def summary(self) -> dict[str, Any]:
        """The first seed's summary numbers (:attr:`summaries` has every seed)."""
        return self.summaries[self.seeds[0]]

    @property
    def notes(self) -> list[str]:
        return list(self._summary_file().get("notes", []))

    @property
    def figures(self) -> list[Path]:
        d = self.path / "figures"
        return sorted(p for p in d.iterdir() if p.suffix.lower() in {".png", ".gif", ".svg"}) if d.is_dir() else []

    def table(self, name: str) -> pd.DataFrame:
        """One stored table with every seed (a ``seed`` column says which)."""
        return pd.read_parquet(self.path / "tables" / f"{name}.parquet")

    def result(self, seed: int | None = None) -> Result:
        """One seed's tables, arrays, summary and notes as a :class:`Result` (default: the first seed)."""
        seed = self.seeds[0] if seed is None else int(seed)
        if seed not in self.seeds:
            raise KeyError(f"run {self.path.name} has seeds {self.seeds}, not {seed}")
        tables = {}
        for p in sorted((self.path / "tables").glob("*.parquet")):
            frame = pd.read_parquet(p)
            if "seed" in frame.columns:
                frame = frame[frame["seed"] == seed].drop(columns="seed").reset_index(drop=True)
            tables[p.stem] = frame
        arrays: dict[str, np.ndarray] = {}
        if (self.path / "arrays.npz").exists():
            prefix = f"seed={seed}/"
            with np.load(self.path / "arrays.npz", allow_pickle=False) as npz:
                arrays = {k[len(prefix) :]: npz[k] for k in npz.files if k.startswith(prefix)}
                if not arrays and len(self.seeds) == 1:  # earlier layout: no seed prefix
                    arrays = {k: npz[k] for k in npz.files}
        summ = dict(self.summaries.get(seed, {}))
        return Result(tables=tables, arrays=arrays, summary=summ, notes=self.notes, seed=seed)

    def results(self) -> list[Result]:
        """Every seed's :class:`Result`, in seed order."""
        return [self.result(s) for s in self.seeds]


def check_out_dir(out: str | Path) -> None:
    """``--out`` must be a directory (or creatable as one) that we can write to."""
    from ssldyn.errors import UserError

    if str(out).strip() == "":
        raise UserError("--out '': give a directory (default: ssldyn-runs)")
    p = Path(out)
    if p.exists() and not p.is_dir():
        raise UserError(f"--out {str(p)!r}: exists and is not a directory")
    probe = p
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir() or not os.access(probe, os.W_OK | os.X_OK):
        raise UserError(f"--out {str(p)!r}: not writable")


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
        self,
        partial: Path,
        config_record: dict[str, Any],
        meta: dict[str, Any],
        results: Sequence[Result],
        claims: list[Claim],
    ) -> None:
        """Write every file of a run (all its seeds) into ``partial`` (DONE is written by :meth:`commit`).

        Tables of all seeds are stacked with a leading ``seed`` column; arrays are stored as
        ``seed=<s>/<name>``; ``summary.json`` holds ``{"seeds", "per_seed": {seed: summary}, "notes"}``.
        """
        atomic_write_text(partial / "config.json", _json(config_record))
        names = list(dict.fromkeys(n for r in results for n in r.tables))
        for name in names:
            frames = []
            for r in results:
                if name not in r.tables:
                    continue
                frame = r.tables[name]
                if "seed" in frame.columns:
                    raise ValueError(
                        f"table {name!r} has its own 'seed' column; the lab adds the run seed there — rename it"
                    )
                frames.append(frame.assign(seed=r.seed)[["seed", *frame.columns]])
            buf = io.BytesIO()
            pd.concat(frames, ignore_index=True).to_parquet(buf, index=False)
            atomic_write_bytes(partial / "tables" / f"{name}.parquet", buf.getvalue())
        arrays = {f"seed={r.seed}/{k}": np.asarray(v) for r in results for k, v in r.arrays.items()}
        if arrays:
            buf = io.BytesIO()
            np.savez_compressed(buf, **arrays)
            atomic_write_bytes(partial / "arrays.npz", buf.getvalue())
        notes = list(dict.fromkeys(n for r in results for n in r.notes))
        summary = {"seeds": [r.seed for r in results], "per_seed": {str(r.seed): r.summary for r in results},
                   "notes": notes}  # fmt: skip
        atomic_write_text(partial / "summary.json", _json(summary))
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
