"""The run store under unreadable files, interrupted replacements, full disks, read-only folders,
hostile table names, stopped lock holders and symlinks (issue 32, items 1-7).

Tests run as root here, where ``chmod 000`` stops nothing: an unreadable file or a read-only
folder is made by making ``open``/``os.fsync`` of that path raise the error the kernel would.
"""

from __future__ import annotations

import builtins
import errno
import fcntl
import json
import os
import signal
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from ssldyn.contract.result import Result
from ssldyn.errors import UserError
from ssldyn.lab import run_experiment
from ssldyn.lab import store as store_mod
from ssldyn.lab.report import build_report
from ssldyn.lab.store import DONE, RunStore, StoreWriteError, atomic_write_bytes, verify_run
from ssldyn.results import load

ROOT = Path(__file__).resolve().parents[2]
EXP = "variational.zz-store"


def commit(store: RunStore, digest: str, value: float, exp: str = EXP, tables: dict | None = None) -> Path:
    """Commit a small run straight through the store API (what ``commit_run`` does)."""
    with store.lock(exp, digest):
        partial = store.new_partial(exp, digest)
        res = Result(summary={"value": value}, seed=0, tables=tables or {"t": pd.DataFrame({"v": [value]})})
        store.write_result(partial, {"experiment": exp, "hash": digest, "seeds": [0]}, {"label": digest}, [res], [])
        return store.commit(partial, exp, digest).path


def leftovers(out: Path) -> list[Path]:
    """Temp files, partial directories and replaced copies anywhere under ``out`` (links included)."""
    return sorted(p for p in out.rglob("*") if ".tmp-" in p.name or ".partial-" in p.name or ".old-" in p.name)


def _unreadable(monkeypatch, victim: Path) -> None:
    """``open(victim)`` raises PermissionError, as after ``chmod 000`` for a non-root user (that file:
    its inode, so a new file written at the same path later is readable)."""
    real, ino = builtins.open, os.stat(victim).st_ino

    def fake(file, *a, **kw):
        if isinstance(file, (str, Path)) and os.path.exists(file) and os.stat(file).st_ino == ino:
            raise PermissionError(errno.EACCES, "Permission denied", str(file))
        return real(file, *a, **kw)

    monkeypatch.setattr(builtins, "open", fake)


# ---------------------------------------------------------------- 1. an unreadable file
def test_unreadable_file_is_one_damaged_run_not_an_empty_report(tmp_path, monkeypatch):
    store = RunStore(tmp_path)
    a, b = commit(store, "aaaaaaaaaaaa", 1.0), commit(store, "bbbbbbbbbbbb", 2.0)
    _unreadable(monkeypatch, a / "claims.json")
    assert verify_run(a) == "claims.json cannot be read (Permission denied)"
    assert [r.path for r in store.finished()] == [b]  # the other run is kept
    assert store.damaged() == [(a, "claims.json cannot be read (Permission denied)")]
    res = load(tmp_path)
    assert [r.path for r in res.records] == [b]
    assert [p for p, _ in res.damaged_list] == [str(a)]
    html = build_report(tmp_path).read_text()
    assert "Damaged runs" in html and "aaaaaaaaaaaa" in html and "bbbbbbbbbbbb" in html


def test_run_on_a_store_with_an_unreadable_file_sets_it_aside_and_recomputes(toy, tmp_path, monkeypatch):
    first = run_experiment(toy.name, out=tmp_path, quick=True, seeds=1)
    _unreadable(monkeypatch, first.run.path / "claims.json")
    again = run_experiment(toy.name, out=tmp_path, quick=True, seeds=1)  # no PermissionError
    assert not again.cached and verify_run(again.run.path) is None
    assert len(list(first.run.path.parent.glob(f".damaged-{first.run.path.name}-*"))) == 1


# ---------------------------------------------------------------- 2. a crash between the two renames
def _interrupt_force(run: Path) -> Path:
    old = run.with_name(f".{run.name}.old-dead00")
    os.replace(run, old)  # the first rename of a --force commit; the process died before the second
    return old


def test_interrupted_force_is_repaired_by_the_report(tmp_path):
    store = RunStore(tmp_path)
    a = commit(store, "aaaaaaaaaaaa", 1.0)
    before = (a / "summary.json").read_bytes()
    _interrupt_force(a)
    res = load(tmp_path)  # a reader, not a `run`: the run is back
    assert [r.path for r in res.records] == [a] and res.damaged_list == []
    assert (a / "summary.json").read_bytes() == before and verify_run(a) is None
    assert leftovers(tmp_path) == []
    assert "aaaaaaaaaaaa" in build_report(tmp_path).read_text()


def test_interrupted_force_on_a_read_only_store_is_listed_as_damaged(tmp_path, monkeypatch):
    store = RunStore(tmp_path)
    a = commit(store, "aaaaaaaaaaaa", 1.0)
    old = _interrupt_force(a)

    def no_lock(self, *a, **kw):
        raise PermissionError(errno.EROFS, "Read-only file system", str(tmp_path / ".locks"))

    monkeypatch.setattr(RunStore, "lock", no_lock)
    assert store.finished() == []
    ((path, reason),) = store.damaged()
    assert path == a and old.name in reason and "interrupted --force" in reason
    assert old.is_dir()  # nothing was lost


# ---------------------------------------------------------------- 3. set_aside re-checks under the lock
def test_set_aside_never_moves_an_intact_run(tmp_path):
    p1, p2 = RunStore(tmp_path), RunStore(tmp_path)  # two processes' views of one store
    a = commit(p1, "aaaaaaaaaaaa", 1.0)
    (a / "summary.json").write_text("{}")
    assert p1.damage(EXP, a.name) and p2.damage(EXP, a.name)  # both found it damaged
    aside = p1.set_aside(EXP, a.name)  # the first sets it aside and recomputes it
    assert aside is not None and aside.is_dir()
    commit(p1, a.name, 1.0)
    assert p2.set_aside(EXP, a.name) is None  # the second re-checks under the lock: intact now
    assert verify_run(a) is None and len(list(a.parent.glob(".damaged-*"))) == 1


# ---------------------------------------------------------------- 4. full disk, read-only folder
def _fail_writes_under(monkeypatch, root: Path, err: int) -> None:
    """Every fsync of a file under ``root`` fails with ``err`` (ENOSPC shows at write/fsync time)."""
    real = os.fsync

    def fake(fd):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            target = ""
        if target.startswith(str(root)) and not os.path.isdir(target):
            raise OSError(err, os.strerror(err))
        return real(fd)

    monkeypatch.setattr(store_mod.os, "fsync", fake)


@pytest.mark.parametrize("err", [errno.ENOSPC, errno.EROFS, errno.EACCES])
def test_full_disk_or_read_only_report_is_one_clear_error_and_leaves_no_temp_file(tmp_path, monkeypatch, err):
    store = RunStore(tmp_path)
    commit(store, "aaaaaaaaaaaa", 1.0)
    _fail_writes_under(monkeypatch, tmp_path, err)
    with pytest.raises(StoreWriteError) as info:
        build_report(tmp_path)
    assert isinstance(info.value, UserError) and isinstance(info.value, OSError) and info.value.errno == err
    assert str(info.value).startswith(f"cannot write {tmp_path}") and os.strerror(err) in str(info.value)
    assert leftovers(tmp_path) == []


def test_cli_report_on_a_full_disk_is_one_error_line(tmp_path, monkeypatch, capsys):
    from ssldyn.lab.cli import main

    commit(RunStore(tmp_path), "aaaaaaaaaaaa", 1.0)
    _fail_writes_under(monkeypatch, tmp_path, errno.ENOSPC)
    with pytest.raises(SystemExit) as ex:
        main(["report", str(tmp_path)])
    err = capsys.readouterr().err.strip()
    assert ex.value.code == 2 and err.startswith("error: cannot write") and "disk is full" in err
    assert "internal" not in err and len(err.splitlines()) == 1
    assert leftovers(tmp_path) == []


def test_cli_raw_oserror_of_a_write_is_one_error_line(tmp_path, monkeypatch, capsys):
    """A write error raised outside the atomic writer (e.g. a mkdir) is still a clear line, not 'internal'."""
    from ssldyn.lab import cli

    def boom(*a, **kw):
        raise PermissionError(errno.EACCES, "Permission denied", "/store/report")

    monkeypatch.setattr("ssldyn.lab.report.build_report", boom)
    with pytest.raises(SystemExit) as ex:
        cli.main(["report", str(tmp_path)])
    err = [ln for ln in capsys.readouterr().err.splitlines() if not ln.startswith("warning: no finished runs")]
    assert ex.value.code == 1 and err == ["error: cannot write /store/report: Permission denied"]  # (empty store)


def test_record_failure_never_raises_while_recording_a_failure(tmp_path, monkeypatch):
    store = RunStore(tmp_path)
    _fail_writes_under(monkeypatch, tmp_path, errno.ENOSPC)
    with pytest.warns(RuntimeWarning, match="not recorded.*No space left"):
        assert store.record_failure(EXP, "aaaaaaaaaaaa", "error: boom") is False
    assert leftovers(tmp_path) == [] and store.failures() == []


def test_commit_on_a_full_disk_leaves_nothing_behind(tmp_path, monkeypatch):
    store = RunStore(tmp_path)
    _fail_writes_under(monkeypatch, tmp_path, errno.ENOSPC)
    with store.lock(EXP, "aaaaaaaaaaaa"):
        partial = store.new_partial(EXP, "aaaaaaaaaaaa")
        with pytest.raises(StoreWriteError, match="config.json: No space left on device"):
            store.write_result(partial, {"experiment": EXP, "hash": "aaaaaaaaaaaa"}, {}, [Result(seed=0)], [])
    assert [p.name for p in partial.iterdir()] == []  # no temp file in the (process-owned) partial either


def test_atomic_write_failure_at_rename_leaves_no_temp_file(tmp_path, monkeypatch):
    def no_replace(src, dst):
        raise OSError(errno.EXDEV, "Invalid cross-device link")

    monkeypatch.setattr(store_mod.os, "replace", no_replace)
    with pytest.raises(StoreWriteError, match="Invalid cross-device link"):
        atomic_write_bytes(tmp_path / "x" / "f.bin", b"data")
    assert list((tmp_path / "x").iterdir()) == []


# ---------------------------------------------------------------- 5. table names stay inside the run
@pytest.mark.parametrize("name", ["../../../../x", "/etc/x", "a/b", ".hidden", "..", "x" * 200, "", "a\x00b"])
def test_table_names_are_confined(tmp_path, name):
    store = RunStore(tmp_path / "out")
    with pytest.raises(ValueError, match="table name .*plain file name"):
        commit(store, "aaaaaaaaaaaa", 1.0, tables={name: pd.DataFrame({"v": [1]})})
    written = {p.relative_to(tmp_path).parts[0] for p in tmp_path.rglob("*")}
    assert written == {"out"}  # nothing outside the store
    assert not list((tmp_path / "out").rglob("*.parquet"))


def test_plain_table_names_still_work(tmp_path):
    p = commit(RunStore(tmp_path), "aaaaaaaaaaaa", 1.0, tables={"token_grid-v2.final": pd.DataFrame({"v": [1]})})
    assert (p / "tables" / "token_grid-v2.final.parquet").is_file() and verify_run(p) is None


# ---------------------------------------------------------------- 6. "waiting for PID …"
HOLDER = """
import sys, time
from ssldyn.lab.store import RunStore
with RunStore(sys.argv[1]).lock("variational.zz-store", "aaaaaaaaaaaa"):
    print("locked", flush=True)
    time.sleep(60)
"""


def test_waiting_for_a_stopped_lock_holder_says_so_at_once(tmp_path, monkeypatch):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path)], env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        os.kill(holder.pid, signal.SIGSTOP)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # the signal is asynchronous: wait until the kernel shows it stopped
            stat = Path(f"/proc/{holder.pid}/stat").read_text()
            if stat[stat.rindex(")") + 2] == "T":
                break
            time.sleep(0.01)
        said: list[str] = []
        events: list[str] = []  # what the waiting thread did, in order
        monkeypatch.setattr(RunStore, "on_wait", staticmethod(lambda m: (said.append(m), events.append("said"))))
        real_flock = fcntl.flock

        def flock(fd, op):  # a blocking request (no LOCK_NB) is where the thread starts to wait
            if op == fcntl.LOCK_EX:
                events.append("blocks")
            return real_flock(fd, op)

        monkeypatch.setattr(store_mod, "fcntl", SimpleNamespace(**{k: getattr(fcntl, k) for k in dir(fcntl)
                                                                    if k.startswith("LOCK_")}, flock=flock))  # fmt: skip
        got = threading.Event()

        def wait_for_lock():
            with RunStore(tmp_path).lock(EXP, "aaaaaaaaaaaa"):
                got.set()

        t = threading.Thread(target=wait_for_lock, daemon=True)
        t.start()
        deadline = time.monotonic() + 60  # a hang guard, not a timing
        while "blocks" not in events and time.monotonic() < deadline:
            time.sleep(0.02)
        assert events == ["said", "blocks"]  # at once: the line comes before the wait, not after it
        (msg,) = said
        assert f"waiting for PID {holder.pid} (stopped" in msg and EXP in msg and "aaaaaaaaaaaa" in msg
        assert not got.is_set()
        os.kill(holder.pid, signal.SIGKILL)  # the OS releases its lock
        t.join(10)
        assert got.is_set()
    finally:
        holder.kill()
        holder.wait(10)
        holder.stdout.close()


def test_no_waiting_line_when_the_lock_is_free(tmp_path, monkeypatch):
    said: list[str] = []
    monkeypatch.setattr(RunStore, "on_wait", staticmethod(said.append))
    commit(RunStore(tmp_path), "aaaaaaaaaaaa", 1.0)
    assert said == []


# ---------------------------------------------------------------- 7. --force over a symlinked run
def test_force_over_a_symlinked_run_leaves_no_old_link(tmp_path):
    out = tmp_path / "out"
    store = RunStore(out)
    a = commit(store, "aaaaaaaaaaaa", 1.0)
    elsewhere = tmp_path / "elsewhere"
    os.replace(a, elsewhere)
    os.symlink(elsewhere, a)
    assert verify_run(a) is None
    b = commit(store, "aaaaaaaaaaaa", 2.0)  # what --force does
    assert b == a and not b.is_symlink() and verify_run(b) is None
    assert json.loads((b / "summary.json").read_text())["per_seed"]["0"]["value"] == 2.0
    assert [p.name for p in a.parent.iterdir() if p.name.startswith(".")] == []  # no .old-* link
    assert (elsewhere / DONE).is_file()  # the link's target is the user's: not deleted


def test_no_temp_files_after_normal_use(tmp_path):
    store = RunStore(tmp_path)
    commit(store, "aaaaaaaaaaaa", 1.0)
    commit(store, "aaaaaaaaaaaa", 2.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        build_report(tmp_path)
    assert leftovers(tmp_path) == []


def test_cli_cached_run_on_a_full_disk_is_one_error_line(toy, tmp_path, monkeypatch, capsys):
    """A cached `ssldyn run` refreshing runs.csv after printing its claims: one line, not an internal error."""
    from ssldyn.lab.cli import main

    argv = ["run", toy.name, "--quick", "--seeds", "1", "--out", str(tmp_path)]
    with pytest.raises(SystemExit) as ex:
        main(argv)
    assert ex.value.code == 0
    capsys.readouterr()
    _fail_writes_under(monkeypatch, tmp_path, errno.ENOSPC)
    with pytest.raises(SystemExit) as ex:
        main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert ex.value.code == 2 and err[-1].startswith("error: cannot write") and "runs.csv" in err[-1]
    assert not any("internal" in line for line in err)
    assert leftovers(tmp_path) == []


def test_arrays_round_trip_without_pickles_and_object_arrays_are_refused(tmp_path):
    # arrays.npz holds exactly the result's arrays (no stray entry: numpy ≤ 2.1 saved an allow_pickle keyword as an
    # array of that name), read back equal; an object array is one clear error, and no run is committed
    store = RunStore(tmp_path)
    x = np.arange(6.0).reshape(2, 3)
    with store.lock(EXP, "aaaaaaaaaaaa"):
        partial = store.new_partial(EXP, "aaaaaaaaaaaa")
        res = Result(seed=0, arrays={"x": x, "labels": np.array(["a", "b"])})
        store.write_result(partial, {"experiment": EXP, "hash": "aaaaaaaaaaaa", "seeds": [0]}, {}, [res], [])
        path = store.commit(partial, EXP, "aaaaaaaaaaaa").path
    with np.load(path / "arrays.npz") as z:
        assert sorted(z.files) == ["seed=0/labels", "seed=0/x"]
        np.testing.assert_array_equal(z["seed=0/x"], x)
    with store.lock(EXP, "bbbbbbbbbbbb"):
        partial = store.new_partial(EXP, "bbbbbbbbbbbb")
        bad = Result(seed=0, arrays={"objs": np.array([{"a": 1}, None], dtype=object)})
        with pytest.raises(ValueError, match="result array 'seed=0/objs': object arrays cannot be stored"):
            store.write_result(partial, {"experiment": EXP, "hash": "bbbbbbbbbbbb", "seeds": [0]}, {}, [bad], [])
    assert not (tmp_path / EXP / "bbbbbbbbbbbb").exists()


# ---------------------------------------------------------------- 8. summary.json is strict JSON
def test_summary_with_nan_and_inf_is_strict_json_and_reads_back_as_floats(tmp_path):
    """A summary's NaN / ±inf (a decay time never reached, say) is stored as "nan" / "inf" / "-inf", so any JSON
    reader parses the file (Python's json alone accepts bare NaN); the run reads them back as floats."""
    import math

    import numpy as np

    store = RunStore(tmp_path / "out")
    with store.lock(EXP, "bbbbbbbbbbbb"):
        partial = store.new_partial(EXP, "bbbbbbbbbbbb")
        summ = {
            "t_half": float("nan"),
            "up": np.float64("inf"),
            "nested": {"v": [1.0, -math.inf]},
            "a": np.array([np.nan, 2.0]),
            "note": "kept",
        }
        res = Result(summary=summ, seed=0, tables={"t": pd.DataFrame({"v": [1.0]})})
        store.write_result(
            partial, {"experiment": EXP, "hash": "bbbbbbbbbbbb", "seeds": [0]}, {"label": "b"}, [res], []
        )
        run = store.commit(partial, EXP, "bbbbbbbbbbbb")

    def strict(token):
        raise ValueError(f"not strict JSON: {token}")

    raw = json.loads((run.path / "summary.json").read_text(), parse_constant=strict)
    assert raw["per_seed"]["0"]["t_half"] == "nan" and raw["per_seed"]["0"]["nested"] == {"v": [1.0, "-inf"]}
    s = run.summary
    assert math.isnan(s["t_half"]) and s["up"] == math.inf and s["nested"]["v"] == [1.0, -math.inf]
    assert math.isnan(s["a"][0]) and s["a"][1] == 2.0 and s["note"] == "kept"
