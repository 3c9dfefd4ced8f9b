"""The run store's cache of shared sub-results (``Context.cached``): keys, versions, integrity."""

import io
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

import ssldyn
from ssldyn.contract.context import Context
from ssldyn.lab import cache as cache_mod
from ssldyn.lab.cache import CacheWarning, RunCache, code_version


def _counting(value):
    calls = []

    def compute():
        calls.append(1)
        return value

    return compute, calls


def test_hit_miss_and_keys(tmp_path):
    ctx = Context(cache=RunCache(tmp_path))
    compute, calls = _counting({"x": np.arange(4.0), "n": 3})
    a = ctx.cached({"lr": 0.1, "steps": 10}, compute)
    b = ctx.cached({"steps": 10, "lr": 0.1}, compute)  # same key (order does not matter)
    assert len(calls) == 1
    np.testing.assert_array_equal(a["x"], b["x"])
    assert int(b["n"]) == 3
    ctx.cached({"lr": 0.2, "steps": 10}, compute)  # other settings: a miss
    assert len(calls) == 2
    Context(cache=RunCache(tmp_path), device=__import__("torch").device("meta")).cached(
        {"lr": 0.1, "steps": 10}, compute
    )
    assert len(calls) == 3  # the device type is part of the key
    ctx.cached({"lr": 0.1, "steps": 10}, compute, namespace="other")
    assert len(calls) == 4  # namespaces are separate folders
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other", "shared"]


def test_outside_the_lab_nothing_is_stored(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    compute, calls = _counting({"x": np.ones(2)})
    ctx = Context()  # cache_dir None
    ctx.cached("k", compute)
    ctx.cached("k", compute)
    assert len(calls) == 2 and list(tmp_path.iterdir()) == []
    assert ctx.cache_lookup("k") is None


def test_code_version_changes_invalidate(tmp_path, monkeypatch):
    compute, calls = _counting({"x": np.ones(2)})
    Context(cache=RunCache(tmp_path)).cached("k", compute)
    Context(cache=RunCache(tmp_path)).cached("k", compute)
    assert len(calls) == 1
    monkeypatch.setattr(cache_mod, "code_version", lambda: "edited")
    Context(cache=RunCache(tmp_path)).cached("k", compute)
    assert len(calls) == 2


def test_code_version_covers_every_computing_module(tmp_path, monkeypatch):
    """Any module that can change a value counts (the old token cache hashed five hand-picked files);
    the lab and the figures do not."""
    root = Path(ssldyn.__file__).resolve().parent
    copy = tmp_path / "ssldyn"
    shutil.copytree(root, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(cache_mod, "_package_root", lambda: copy)
    version = code_version.__wrapped__
    v0 = version()
    assert version() == v0  # deterministic
    for rel in ("objectives/info_nce.py", "data/tokens.py", "experiments/nonlinearity/token_grid.py"):
        f = copy / rel
        original = f.read_bytes()
        f.write_bytes(original + b"\n# edited\n")
        assert version() != v0, rel
        f.write_bytes(original)
    for rel in ("lab/report.py", "viz/common.py"):
        f = copy / rel
        f.write_bytes(f.read_bytes() + b"\n# edited\n")
        assert version() == v0, rel
    (copy / "models" / "new_model.py").write_text("X = 1\n")
    assert version() != v0  # a new module counts too


def _entry(tmp_path):
    ctx = Context(cache=RunCache(tmp_path))
    value = {"x": np.arange(6.0).reshape(2, 3), "label": np.array("relu")}
    ctx.cached({"run": 1}, lambda: value)
    (path,) = (tmp_path / "shared").glob("*.entry")
    return ctx, value, path


def test_truncated_entry_is_recomputed_and_named(tmp_path):
    ctx, value, path = _entry(tmp_path)
    good = path.read_bytes()
    for cut in (len(good) - 1, len(good) // 2, 20, 3, 0):
        path.write_bytes(good[:cut])
        compute, calls = _counting(value)
        with pytest.warns(CacheWarning, match=str(path)):
            got = ctx.cached({"run": 1}, compute)
        assert len(calls) == 1
        np.testing.assert_array_equal(got["x"], value["x"])
        assert path.read_bytes() == good  # replaced by the recomputed entry


def test_edited_value_is_recomputed(tmp_path):
    ctx, value, path = _entry(tmp_path)
    data = path.read_bytes()
    magic, header, payload = data.split(b"\n", 2)
    arrays = dict(np.load(io.BytesIO(payload)))
    arrays["x"] = arrays["x"] * 10  # a silently edited value (it would flow into tables)
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    path.write_bytes(magic + b"\n" + header + b"\n" + buf.getvalue())
    compute, calls = _counting(value)
    with pytest.warns(CacheWarning, match="checksum"):
        got = ctx.cached({"run": 1}, compute)
    assert len(calls) == 1
    np.testing.assert_array_equal(got["x"], value["x"])
    # a sound entry copied under another key's name is not served for that key
    cache = RunCache(tmp_path)
    key2 = {"key": {"run": 2}, "device": "cpu"}
    shutil.copy(path, cache.path("shared", key2))
    with pytest.warns(CacheWarning, match="another key"):
        assert cache.get("shared", key2) is None


def test_entries_are_checked_pickle_free_arrays(tmp_path):
    ctx, _, path = _entry(tmp_path)
    header = json.loads(path.read_bytes().split(b"\n", 2)[1])
    assert set(header) == {"key", "sha256"} and len(header["sha256"]) == 64
    with pytest.raises(ValueError, match="object arrays"):
        ctx.cached({"run": 9}, lambda: {"x": np.array([{"a": 1}], dtype=object)})
    with pytest.raises(ValueError, match="JSON"):
        ctx.cached({"run": object()}, lambda: {"x": np.ones(1)})


def test_writes_are_atomic_and_fsynced(tmp_path, monkeypatch):
    synced = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd))[1])
    ctx, value, path = _entry(tmp_path)
    assert len(synced) >= 2  # the file and its folder
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary file left
    good = path.read_bytes()

    def crash(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", crash)
    cache = RunCache(tmp_path)
    key = {"key": {"run": 1}, "device": "cpu"}
    with pytest.warns(CacheWarning, match="could not be written"):
        assert cache.put("shared", key, {"x": np.zeros(3)}) is None
    assert path.read_bytes() == good  # the old entry is intact
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # and no partial file


def test_unreadable_store_does_not_stop_the_run(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        if os.access(ro, os.W_OK):
            pytest.skip("running as a user who can write anywhere")
        compute, calls = _counting({"x": np.ones(2)})
        with pytest.warns(CacheWarning, match="could not be written"):
            got = Context(cache=RunCache(ro)).cached("k", compute)
        assert len(calls) == 1 and got["x"].tolist() == [1.0, 1.0]
    finally:
        ro.chmod(0o700)
