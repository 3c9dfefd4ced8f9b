"""The run store: ``<out>/<experiment>/<config-hash>/`` (docs/architecture.md, "The run store").

A run directory holds ``config.json``, ``meta.json``, ``summary.json``, ``tables/*.parquet``,
``arrays.npz``, ``claims.json``, ``figures/``, ``MANIFEST.json`` (the SHA-256 of every file)
and a ``DONE`` marker (the SHA-256 of the manifest).

Guarantees:

* **Atomic.** A run is written into a hidden partial directory owned by the writing process;
  ``DONE`` is written last and the directory is moved into place with one ``rename``. A
  directory under its hash name is always complete; an interrupted run leaves a partial
  directory that the next writer of that run removes.
* **Concurrent writers.** Every writer of a run holds that run's lock (``fcntl.flock`` on
  ``<out>/.locks/<experiment>/<hash>.lock``, released by the OS if the process dies) from the moment it checks the store
  until it has committed; a second process asking for the same run waits and then reads the
  finished run. Nobody deletes a directory another live process owns.
* **Damage is detected.** A finished run whose files do not match its manifest (truncated,
  edited, missing) or whose manifest does not match ``DONE`` is *damaged*: it is not served,
  :meth:`RunStore.damaged` lists it by path, and ``run``/``reproduce`` move it aside
  (``.damaged-<hash>-<time>``) and recompute it.
* **Crash-safe replacement.** ``--force`` renames the old run aside before renaming the new one
  in; a crash between the two renames is repaired at the next access, reads included
  (:meth:`RunStore.finished` and :meth:`RunStore.damaged` put the old run back, leftovers are
  removed); a store too read-only to repair lists it as damaged, never as absent.
* **Unreadable files are damage, not errors.** A file that cannot be read (permissions, I/O
  error) makes its run damaged with the reason; every other run is still listed.
* **Writes fail cleanly.** Every file is written by :func:`atomic_write_bytes` (temp file, fsync,
  rename): on a full disk or a read-only folder no temp file is left and the error is a
  :class:`StoreWriteError` (a :class:`~ssldyn.errors.UserError` and an :class:`OSError`) naming
  the path and the reason. Table and figure names are confined to one plain file name.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import io
import json
import math
import os
import re
import shutil
import sys
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ssldyn._version import __version__
from ssldyn.contract.claims import Claim
from ssldyn.contract.result import Result
from ssldyn.errors import UserError
from ssldyn.files import atomic_write_bytes as write_file_atomically
from ssldyn.files import fsync_dir, npz_bytes

__all__ = [
    "DONE",
    "MANIFEST",
    "StoreWriteError",
    "check_name",
    "atomic_write_bytes",
    "atomic_write_text",
    "file_manifest",
    "verify_run",
    "config_hash",
    "record_seeds",
    "StoredRun",
    "check_out_given",
    "check_out_dir",
    "check_not_inside_store",
    "enclosing_store",
    "looks_like_store",
    "RunStore",
]

DONE = "DONE"
MANIFEST = "MANIFEST.json"


class StoreWriteError(UserError, OSError):
    """A file of the store could not be written (full disk, read-only folder, permissions).

    Both a :class:`~ssldyn.errors.UserError` (the CLI prints one ``error:`` line) and an
    :class:`OSError` (``errno`` and ``filename`` are those of the failed call).
    """

    def __init__(self, path: Path | str, err: OSError) -> None:
        OSError.__init__(self, err.errno, err.strerror or str(err), str(path))
        reason = err.strerror or type(err).__name__
        hint = {errno.ENOSPC: " (the disk is full: free space, then run the same command again)",
                errno.EROFS: " (read-only file system: give another --out)",
                errno.EDQUOT: " (disk quota exceeded)"}.get(err.errno or 0, "")  # fmt: skip
        self.message = f"cannot write {_cut(str(path))}: {reason}{hint}"

    def __str__(self) -> str:
        return self.message


def _cut(text: str, n: int = 200) -> str:
    """``text`` cut to ``n`` characters (long paths and names are never echoed whole)."""
    return text if len(text) <= n else f"{text[: n - 20]}…[{len(text)} characters]"


_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.=+,-]{0,127}")


def check_name(name: str, what: str = "table name") -> str:
    """A name that becomes one file name inside a run (a table, a figure): letters, digits and
    ``_.=+,-``, not starting with a dot, at most 128 characters; anything else is a ValueError."""
    if not isinstance(name, str) or not _NAME.fullmatch(name) or ".." in name:
        shown = _cut(repr(name), 80)
        raise ValueError(f"{what} {shown}: must be a plain file name (letters, digits, _.=+,-; no '/', no leading '.')")
    return name


def atomic_write_bytes(path: Path, data: bytes, *, make_parents: bool = True) -> None:
    """Write ``data`` to ``path`` through a temp file + fsync + rename (+ fsync of the folder).

    The one atomic-write helper of the lab (the run store, the cache, the report and indexes).
    With ``make_parents=False`` only the last directory level may be created: a write into a
    directory that has disappeared fails instead of silently re-creating it. On any failure the
    temp file is removed; an ``OSError`` (full disk, read-only folder) becomes a
    :class:`StoreWriteError` naming ``path``.
    """
    path = Path(path)
    try:
        if make_parents:
            path.parent.mkdir(parents=True, exist_ok=True)
        elif not path.parent.is_dir():
            if not path.parent.parent.is_dir():
                raise FileNotFoundError(f"{path.parent.parent} disappeared while a run was being written")
            path.parent.mkdir(exist_ok=True)
        write_file_atomically(path, data)
    except FileNotFoundError:
        raise
    except OSError as e:
        raise StoreWriteError(path, e) from None


def atomic_write_text(path: Path, text: str, *, make_parents: bool = True) -> None:
    atomic_write_bytes(path, text.encode("utf-8"), make_parents=make_parents)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def file_manifest(run_dir: Path) -> dict[str, str]:
    """``{relative path: sha256}`` of every file of a run directory except ``DONE`` and the manifest."""
    out = {}
    for f in sorted(run_dir.rglob("*")):
        rel = f.relative_to(run_dir).as_posix()
        if f.is_file() and rel not in (DONE, MANIFEST):
            out[rel] = _sha256(f)
    return out


def verify_run(run_dir: Path) -> str | None:
    """``None`` when a finished run directory is intact, else the reason it is damaged."""
    done, man = run_dir / DONE, run_dir / MANIFEST
    if not done.is_file():
        return "no DONE marker"
    if not man.is_file():
        return "no MANIFEST.json (written by an older ssldyn, or damaged)"
    try:
        man_bytes = man.read_bytes()
        if done.read_text().strip() != hashlib.sha256(man_bytes).hexdigest():
            return "MANIFEST.json does not match DONE"
        expected = json.loads(man_bytes)
    except (OSError, ValueError) as e:
        return f"unreadable manifest ({type(e).__name__})"
    try:
        actual = file_manifest(run_dir)
    except OSError as e:  # one unreadable file makes this run damaged, never the listing fail
        where = Path(e.filename).name if e.filename else "a file"
        return f"{where} cannot be read ({e.strerror or type(e).__name__})"
    missing = sorted(set(expected) - set(actual))
    if missing:
        return f"missing {missing[0]}"
    extra = sorted(set(actual) - set(expected))
    if extra:
        return f"unexpected file {extra[0]}"
    changed = [k for k in expected if expected[k] != actual[k]]
    if changed:
        return f"{changed[0]} does not match its checksum"
    try:
        rec = json.loads((run_dir / "config.json").read_text())
    except (OSError, ValueError):
        return "config.json unreadable"
    if not isinstance(rec, dict):
        return "config.json is not a record"
    if rec.get("experiment") != run_dir.parent.name or rec.get("hash") != run_dir.name:
        return "config.json names another run"
    return None


def _json(obj: Any, *, allow_nan: bool = True) -> str:
    return json.dumps(obj, indent=2, sort_keys=True, default=_json_default, allow_nan=allow_nan)


#: how ``summary.json`` writes a non-finite number (strict JSON has no NaN or Infinity; claims.json does the same)
NONFINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


def finite_json(obj: Any) -> Any:
    """``obj`` with every non-finite float (numpy scalars and arrays included) as the string ``"nan"``, ``"inf"``
    or ``"-inf"``, so that it serialises as strict JSON (any JSON reader parses it); :func:`nonfinite_back` inverts."""
    if isinstance(obj, dict):
        return {k: finite_json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite_json(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return finite_json(obj.tolist())
    if isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return str(obj)
    return obj


def nonfinite_back(obj: Any) -> Any:
    """Inverse of :func:`finite_json`: the strings ``"nan"``, ``"inf"``, ``"-inf"`` back to floats."""
    if isinstance(obj, dict):
        return {k: nonfinite_back(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [nonfinite_back(v) for v in obj]
    return NONFINITE.get(obj, obj) if isinstance(obj, str) else obj


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


def record_seeds(config_record: Mapping[str, Any]) -> list[int]:
    """The seeds of a run from its ``config.json`` record: ``seeds``, or the one ``seed`` (default 0) of older runs."""
    return [int(s) for s in config_record.get("seeds", [config_record.get("seed", 0)])]


@dataclass
class StoredRun:
    """A finished run directory: one experiment, one config, every seed of the run."""

    path: Path

    @property
    def experiment(self) -> str:
        """The experiment this run belongs to (its directory; the manifest check ties config.json to it)."""
        return self.path.parent.name

    def _read_json(self, name: str) -> Any:
        return json.loads((self.path / name).read_text())

    @property
    def config_record(self) -> dict[str, Any]:
        return self._read_json("config.json")

    @property
    def seeds(self) -> list[int]:
        return record_seeds(self.config_record)

    @property
    def meta(self) -> dict[str, Any]:
        return self._read_json("meta.json")

    @property
    def claims(self) -> list[Claim]:
        return [Claim.from_dict(d) for d in self._read_json("claims.json")]

    def _summary_file(self) -> dict[str, Any]:
        data = nonfinite_back(self._read_json("summary.json"))  # NaN/inf stored as strings (strict JSON)
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


def check_out_given(out: str | Path) -> None:
    """``--out`` must name a directory: an empty value is a UserError (checked before anything is planned)."""
    if str(out).strip() == "":
        raise UserError("--out '': give a directory (default: ssldyn-runs)")


def _is_file(p: Path) -> bool:
    try:
        return p.is_file()
    except OSError:
        return False


def _is_dir(p: Path) -> bool:
    try:
        return p.is_dir()
    except OSError:
        return False


def _shown(p: Path) -> str:
    """A path as the user reads it: relative to the working directory when below it, else absolute."""
    try:
        rel = os.path.relpath(p)
    except ValueError:
        return str(p)
    return str(p) if rel.startswith("..") else rel


def enclosing_store(path: str | Path) -> tuple[str, Path, Path] | None:
    """``(what, folder, store)`` when ``path`` is, or is inside, a run directory (``what = "run directory"``: a
    folder with ``DONE`` or ``MANIFEST.json``) or an experiment folder (a folder the store next to it holds
    ``.locks`` for) of a run store; ``None`` otherwise. Writing there (a report, a store's ``.locks``) would damage
    the run."""
    here = Path(os.path.abspath(Path(path).expanduser()))
    for p in (here, *here.parents):
        if _is_file(p / DONE) or _is_file(p / MANIFEST):
            return "run directory", p, p.parent.parent
        if _holds_runs(p.name) and p.parent != p and _is_dir(p.parent / ".locks" / p.name):
            return "experiment folder", p, p.parent
    return None


def check_not_inside_store(path: str | Path, what: str = "--out") -> None:
    """Refuse (one :class:`UserError`) a directory inside a run directory or an experiment folder of a store,
    naming the store to give instead: ``--out s/exp/hash`` would write ``.locks`` into a finished run."""
    found = enclosing_store(path)
    if found is not None:
        kind, folder, store = found
        where = "is" if folder == Path(os.path.abspath(Path(path).expanduser())) else "is inside"
        raise UserError(f"{what} {str(path)!r} {where} the {kind} {_shown(folder)!r} of the run store "
                        f"{_shown(store)!r}; give the store ({_shown(store)})")  # fmt: skip


def looks_like_store(path: str | Path) -> bool:
    """Whether the existing directory ``path`` is a run store: empty (a new store), or holding what ``run`` writes
    (``.locks``, ``.cache``, a report, or an experiment folder with runs, failures or studies)."""
    p = Path(path)
    try:
        entries = list(p.iterdir())
    except OSError:
        return True  # unreadable: the command's own read says why
    if not entries or {e.name for e in entries} & {".locks", ".cache"} or _is_file(p / "report" / "index.html"):
        return True
    for e in entries:
        if not _holds_runs(e.name) or not _is_dir(e):
            continue
        if _is_file(e / "runs.csv") or _is_dir(e / "studies"):
            return True
        try:
            if any(e.glob(f"*/{DONE}")) or any(e.glob("*.failed.json")) or any(e.glob(".*.partial-*")):
                return True
        except OSError:
            continue
    return False


def check_out_dir(out: str | Path) -> None:
    """``--out`` must be a directory (or creatable as one) that we can write to, and not inside a run directory or an
    experiment folder of a run store."""
    check_out_given(out)
    p = Path(out)
    if p.exists() and not p.is_dir():
        raise UserError(f"--out {str(p)!r}: exists and is not a directory")
    check_not_inside_store(p)
    probe = p
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir() or not os.access(probe, os.W_OK | os.X_OK):
        raise UserError(f"--out {str(p)!r}: not writable")
    if not p.exists():  # creatable? (os.access says yes for root even where no folder can be made, e.g. /proc)
        try:
            p.mkdir(parents=True)
        except OSError as e:
            raise UserError(f"--out {str(p)!r}: cannot be created ({e.strerror or e})") from None
        made = p
        while made != probe:  # leave no trace: a dry run has no side effects, and the run creates it again
            made.rmdir()
            made = made.parent


class RunStore:
    """Finished runs under one output directory (see the module docstring for the guarantees)."""

    _held: dict[str, tuple[int, int]] = {}  # lock path -> (fd, depth): this process's locks (re-entrant)

    def __init__(self, out: str | Path) -> None:
        self.out = Path(out)
        self._unrepaired: list[tuple[str, str, Path]] = []

    @property
    def cache_dir(self) -> Path:
        """``<out>/.cache``: computations experiments share between runs (safe to delete)."""
        return self.out / ".cache"

    def run_dir(self, experiment: str, digest: str) -> Path:
        return self.out / experiment / digest

    # -- locking ---------------------------------------------------------------------------
    def _lock_path(self, experiment: str, digest: str) -> Path:
        return self.out / ".locks" / experiment / f"{digest}.lock"

    @contextlib.contextmanager
    def lock(self, experiment: str, digest: str, *, blocking: bool = True) -> Iterator[bool]:
        """Hold the run's lock (re-entrant within a process); yields whether it was acquired.

        With ``blocking=False`` it yields ``False`` at once when another process holds it.
        """
        path = self._lock_path(experiment, digest)
        key = os.path.abspath(path)  # the same key whether or not the directory exists yet
        if key in self._held:
            fd, depth = self._held[key]
            self._held[key] = (fd, depth + 1)
            try:
                yield True
            finally:
                fd, depth = self._held[key]
                self._held[key] = (fd, depth - 1)
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if not blocking:
                os.close(fd)
                yield False
                return
            self.on_wait(self._wait_message(fd, experiment, digest))
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
            except BaseException:
                os.close(fd)
                raise
        with contextlib.suppress(OSError):  # the holder's PID, for the "waiting for PID" line of others
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._held[key] = (fd, 1)
        try:
            self._recover(experiment, digest)
            yield True
        finally:
            self._held.pop(key, None)
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    @staticmethod
    def on_wait(message: str) -> None:
        """Called once when a lock is held by another process, before waiting for it (default:
        the message on stderr)."""
        print(message, file=sys.stderr, flush=True)

    @staticmethod
    def _wait_message(fd: int, experiment: str, digest: str) -> str:
        try:
            raw = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        except OSError:
            raw = ""
        pid = int(raw) if raw.isdigit() else None
        who = f"PID {pid}" if pid is not None else "another process"
        state = ""
        if pid is not None:
            try:
                stat = Path(f"/proc/{pid}/stat").read_text()
                code = stat[stat.rindex(")") + 2 :].split()[0]
                state = {"T": " (stopped: it holds the lock until it is continued or ends)",
                         "t": " (stopped by a debugger)", "Z": " (exiting)"}.get(code, "")  # fmt: skip
            except (OSError, ValueError, IndexError):
                pass
        return f"waiting for {who}{state}, which is computing {experiment} {digest} in this --out …"

    def _holds(self, experiment: str, digest: str) -> bool:
        return os.path.abspath(self._lock_path(experiment, digest)) in self._held

    def _recover(self, experiment: str, digest: str) -> None:
        """Under the lock: undo a crash between the two renames of a replacement, drop stale partials."""
        parent = self.out / experiment
        final = parent / digest
        olds = sorted(parent.glob(f".{digest}.old-*"))
        if not final.exists():
            for old in olds:
                if (old / DONE).is_file():
                    os.replace(old, final)  # the crash happened after the old run was moved aside
                    olds.remove(old)
                    break
        for leftover in [*olds, *parent.glob(f".{digest}.partial-*")]:
            _remove(leftover)

    def _interrupted(self) -> list[tuple[str, str, Path]]:
        """``(experiment, digest, old copy)`` of replacements interrupted between their two renames."""
        out = []
        for old in self.out.glob("*/.*.old-*"):
            exp, digest = old.parent.name, old.name[1:].split(".old-")[0]
            if not _holds_runs(exp) or not digest:
                continue
            if not os.path.lexists(old.parent / digest):
                out.append((exp, digest, old))
        return out

    def _leftovers(self) -> set[tuple[str, str]]:
        """Runs with a partial directory or a replaced copy on disk (a writer at work, or one that died)."""
        out = set()
        for p in [*self.out.glob("*/.*.partial-*"), *self.out.glob("*/.*.old-*")]:
            exp, digest = p.parent.name, p.name[1:].split(".partial-")[0].split(".old-")[0]
            if _holds_runs(exp) and digest:
                out.add((exp, digest))
        return out

    def repair(self) -> list[tuple[str, str, Path]]:
        """Repair what crashed writers left, for every run whose lock is free (readers call this first):
        an interrupted replacement is completed backwards (the old run is put back) and partial
        directories of dead writers are removed. Returns the interrupted replacements that cannot be
        repaired here (a read-only store). A run whose lock another process holds is being written
        right now: it is left to that process."""
        interrupted = {(e, d): old for e, d, old in self._interrupted()}
        unrepaired = []
        for exp, digest in sorted(self._leftovers()):
            try:
                with self.lock(exp, digest, blocking=False):  # the lock repairs (see _recover)
                    pass
            except OSError:
                if (exp, digest) in interrupted:
                    unrepaired.append((exp, digest, interrupted[(exp, digest)]))
        return unrepaired

    # -- reading ---------------------------------------------------------------------------
    def get(self, experiment: str, digest: str) -> StoredRun | None:
        """The finished, intact run, or ``None`` (absent, unfinished or damaged)."""
        d = self.run_dir(experiment, digest)
        if not (d / DONE).is_file():
            if not d.exists() and any((self.out / experiment).glob(f".{digest}.old-*")):
                with self.lock(experiment, digest):  # repairs an interrupted replacement
                    pass
                return self.get(experiment, digest) if (d / DONE).is_file() else None
            return None
        return StoredRun(d) if verify_run(d) is None else None

    def damage(self, experiment: str, digest: str) -> str | None:
        """Why a run directory with a DONE marker is damaged (``None``: absent or intact)."""
        d = self.run_dir(experiment, digest)
        return verify_run(d) if (d / DONE).is_file() else None

    def _done_dirs(self) -> list[Path]:
        self._unrepaired = self.repair()
        dirs = [p.parent for p in self.out.glob(f"*/*/{DONE}") if not p.parent.name.startswith(".")]
        return [d for d in dirs if _holds_runs(d.parent.name)]

    def finished(self) -> list[StoredRun]:
        """Every intact finished run, newest first (damaged runs are left out: see :meth:`damaged`)."""
        runs = []
        for d in self._done_dirs():
            if verify_run(d) is None:
                try:
                    runs.append(((d / DONE).stat().st_mtime, StoredRun(d)))
                except OSError:  # replaced or removed meanwhile
                    continue
        return [r for _, r in sorted(runs, key=lambda t: t[0], reverse=True)]

    def damaged(self) -> list[tuple[Path, str]]:
        """``(run directory, reason)`` of every finished run whose files do not verify."""
        out = []
        for d in self._done_dirs():
            reason = verify_run(d)
            if reason is not None:
                out.append((d, reason))
        for _, digest, old in self._unrepaired:  # not repairable here (a read-only store)
            out.append((old.parent / digest, f"interrupted --force replacement: the run is at {old.name}; "
                                             "run it again to repair"))  # fmt: skip
        return sorted(out)

    def set_aside(self, experiment: str, digest: str) -> Path | None:
        """Move a damaged run out of the way (kept as ``.damaged-<hash>-<time>``) and return where it went.

        The damage is checked again under the run's lock: when another process has meanwhile set
        it aside and recomputed it (or removed it), nothing is moved and ``None`` is returned —
        an intact run is never set aside.
        """
        d = self.run_dir(experiment, digest)
        with self.lock(experiment, digest):
            if self.damage(experiment, digest) is None:
                return None
            aside = d.with_name(f".damaged-{digest}-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:4]}")
            os.replace(d, aside)
        return aside

    # -- failures --------------------------------------------------------------------------
    def failure_path(self, experiment: str, digest: str) -> Path:
        return self.out / experiment / f"{digest}.failed.json"

    def record_failure(self, experiment: str, digest: str, error: str, config: dict[str, Any] | None = None) -> bool:
        """Mark a run failed (its error and config); a later successful run removes the mark.

        Recording a failure never fails itself: when the mark cannot be written (full disk,
        read-only store) a warning says so and ``False`` is returned.
        """
        try:
            atomic_write_text(
                self.failure_path(experiment, digest),
                _json({"experiment": experiment, "hash": digest, "error": error, "config": config}),
            )
        except OSError as e:
            import warnings

            warnings.warn(f"the failure of {experiment} {digest} was not recorded: {e}", RuntimeWarning, stacklevel=2)
            return False
        return True

    def clear_failure(self, experiment: str, digest: str) -> None:
        with contextlib.suppress(OSError):  # a stale mark only shows an old failure; never fail a finished run
            self.failure_path(experiment, digest).unlink(missing_ok=True)

    def failures(self) -> list[dict[str, Any]]:
        out = []
        for p in sorted(self.out.glob("*/*.failed.json")):
            try:
                out.append(json.loads(p.read_text()))
            except (OSError, ValueError):
                continue
        return out

    # -- writing ---------------------------------------------------------------------------
    def new_partial(self, experiment: str, digest: str) -> Path:
        """A fresh hidden directory, owned by this process, to write a run into (call under :meth:`lock`)."""
        if not self._holds(experiment, digest):
            raise RuntimeError(f"new_partial({experiment}, {digest}) must be called while holding the run's lock")
        parent = self.out / experiment
        parent.mkdir(parents=True, exist_ok=True)
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
        if not partial.is_dir():
            raise FileNotFoundError(f"partial run directory {partial} disappeared")
        w = {"make_parents": False}
        atomic_write_text(partial / "config.json", _json(config_record), **w)
        names = list(dict.fromkeys(n for r in results for n in r.tables))
        for name in names:
            check_name(name, "table name")
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
            atomic_write_bytes(partial / "tables" / f"{name}.parquet", buf.getvalue(), **w)
        arrays = {f"seed={r.seed}/{k}": v for r in results for k, v in r.arrays.items()}
        if arrays:  # no pickles in the store
            data = npz_bytes(arrays, what="result array", verb="stored", compressed=True)
            atomic_write_bytes(partial / "arrays.npz", data, **w)
        notes = list(dict.fromkeys(n for r in results for n in r.notes))
        summary = {"seeds": [r.seed for r in results], "per_seed": {str(r.seed): r.summary for r in results},
                   "notes": notes}  # fmt: skip
        atomic_write_text(partial / "summary.json", _json(finite_json(summary), allow_nan=False), **w)
        atomic_write_text(partial / "claims.json", _json([c.to_dict() for c in claims]), **w)
        atomic_write_text(partial / "meta.json", _json(meta), **w)

    def commit(self, partial: Path, experiment: str, digest: str) -> StoredRun:
        """Write the manifest and DONE last, then move the partial directory into place (under the lock)."""
        if not self._holds(experiment, digest):
            raise RuntimeError(f"commit({experiment}, {digest}) must be called while holding the run's lock")
        man = _json(file_manifest(partial)).encode()
        atomic_write_bytes(partial / MANIFEST, man, make_parents=False)
        atomic_write_text(partial / DONE, hashlib.sha256(man).hexdigest(), make_parents=False)
        final = self.run_dir(experiment, digest)
        old = None
        if os.path.lexists(final):  # a run directory, or a link to one (the link is replaced, not followed)
            old = final.with_name(f".{digest}.old-{uuid.uuid4().hex[:6]}")
            os.replace(final, old)
        os.replace(partial, final)
        if old is not None:
            _remove(old)
        fsync_dir(final.parent)
        return StoredRun(final)


def _holds_runs(name: str) -> bool:
    """Whether the folder ``<out>/<name>`` holds an experiment's runs (not ``report/``, ``.cache``, ``.locks``)."""
    return not name.startswith(".") and name != "report"


def _remove(path: Path) -> None:
    """Remove a run directory, a link to one (the link only) or a file; errors are ignored."""
    with contextlib.suppress(OSError):
        if path.is_symlink() or not path.is_dir():
            path.unlink()
            return
    shutil.rmtree(path, ignore_errors=True)
