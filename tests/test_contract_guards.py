"""Guards found by a mutation audit of the contract (config, context, experiment, threads, result) and the
root helpers (checks, files, memory): each test checks values against a reference written out here."""

from __future__ import annotations

import os
import random
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from pydantic import ValidationError, confloat, conint

from ssldyn import files, memory
from ssldyn.checks import probabilities
from ssldyn.contract import experiment as contract_experiment
from ssldyn.contract import threads
from ssldyn.contract.claims import ClaimSpec, Robustness, gt
from ssldyn.contract.config import (
    CONFIG_MAX_BYTES,
    ExperimentConfig,
    build_config,
    config_schema_rows,
    deep_merge,
    describe_type,
    format_value,
    load_config_file,
    parse_sets,
    set_keys,
)
from ssldyn.contract.context import Context, resolve_device, seed_everything
from ssldyn.contract.result import Result
from ssldyn.errors import UserError


# ---------------------------------------------------------------- checks
def test_probabilities_refuses_an_empty_last_axis_with_one_value_error():
    for shape in [(0, 0), (3, 0), (0,)]:
        with pytest.raises(ValueError, match="must be a floating tensor"):
            probabilities(torch.empty(shape), "p")


# ---------------------------------------------------------------- context: seeds and devices
def test_seed_everything_seeds_python_numpy_and_torch_from_the_seed():
    seed = 2**33 + 17  # numpy gets seed mod 2^32
    seed_everything(seed)
    got = (random.random(), float(np.random.rand()), float(torch.rand(1)))
    ref_torch = torch.Generator().manual_seed(seed)
    want = (
        random.Random(seed).random(),
        float(np.random.RandomState(seed % 2**32).rand()),
        float(torch.rand(1, generator=ref_torch)),
    )
    assert got == want


def _reference_generator(seed: int, *keys: int) -> torch.Generator:
    # NumPy's SeedSequence child written out: SeedSequence(seed).spawn(k + 1)[k] has spawn_key (k,)
    ss = np.random.SeedSequence(seed)
    for k in keys:
        ss = ss.spawn(k + 1)[k]
    return torch.Generator().manual_seed(int(ss.generate_state(1, np.uint64)[0]) >> 1)


def test_generators_are_one_seed_sequence_child_per_seed():
    ctx = Context(seed=11, seeds=(3, 4, 5))
    got = [torch.randn(4, generator=g) for g in ctx.generators(2)]
    want = [torch.randn(4, generator=_reference_generator(s, 2)) for s in (3, 4, 5)]
    assert all(torch.equal(a, b) for a, b in zip(got, want))
    assert torch.equal(torch.randn(4, generator=Context(seed=8).generator(1)),
                       torch.randn(4, generator=_reference_generator(8, 1)))  # fmt: skip
    assert Context(seed=6).seeds == (6,)
    from ssldyn.streams import stream

    assert torch.equal(
        torch.randn(4, generator=stream(7, 2, 5)), torch.randn(4, generator=_reference_generator(7, 2, 5))
    )


def test_resolve_device_accepts_cpu_and_cuda_only():
    assert resolve_device(None) == torch.device("cpu")
    assert resolve_device("cpu") == torch.device("cpu")
    for bad in ("meta", "tpu", "not a device", 3.5):
        with pytest.raises(UserError, match="allowed values are cpu, cuda"):
            resolve_device(bad)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without CUDA")
def test_resolve_device_refuses_cuda_where_there_is_none():
    for dev in ("cuda", "cuda:0", torch.device("cuda")):
        with pytest.raises(UserError, match="CUDA is not available"):
            resolve_device(dev)


class _DictCache:
    def __init__(self):
        self.store = {}

    def get(self, namespace, key):
        return self.store.get((namespace, repr(key)))

    def put(self, namespace, key, arrays):
        self.store[(namespace, repr(key))] = dict(arrays)

    def cached(self, namespace, key, compute):  # pragma: no cover - not used here
        raise AssertionError


def test_cache_lookup_and_store_keep_namespace_and_device_type():
    cache = _DictCache()
    ctx = Context(cache=cache)
    ctx.cache_store({"n": 1}, {"a": np.arange(3)}, namespace="grid")
    assert ctx.cache_lookup({"n": 1}, namespace="shared") is None
    assert np.array_equal(ctx.cache_lookup({"n": 1}, namespace="grid")["a"], np.arange(3))
    assert set(cache.store) == {("grid", repr({"key": {"n": 1}, "device": "cpu"}))}
    assert Context(device=torch.device("cuda")).cache_key([1]) == {"key": [1], "device": "cuda"}


def test_cached_outside_the_lab_returns_numpy_arrays():
    out = Context().cached("k", lambda: {"x": [1.0, 2.0], "t": torch.arange(2)})
    assert all(isinstance(v, np.ndarray) for v in out.values())
    assert out["x"].tolist() == [1.0, 2.0] and out["t"].tolist() == [0, 1]


# ---------------------------------------------------------------- threads
def test_threads_from_env_range_and_default(monkeypatch):
    monkeypatch.delenv("SSLDYN_THREADS", raising=False)
    assert threads.threads_from_env(7) == 7
    for ok in ("1", "4096", " 12 "):
        monkeypatch.setenv("SSLDYN_THREADS", ok)
        assert threads.threads_from_env() == int(ok)
    for bad in ("0", "4097", "-1", "2.0", "two"):
        monkeypatch.setenv("SSLDYN_THREADS", bad)
        with pytest.raises(UserError, match="from 1 to 4096"):
            threads.threads_from_env()


def test_torch_threads_sets_on_cpu_only_and_restores():
    old = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        for dev in (None, "cpu", torch.device("cpu")):
            with threads.torch_threads(2, dev):
                assert torch.get_num_threads() == 2
            assert torch.get_num_threads() == 1
        with threads.torch_threads(2, "cuda"):
            assert torch.get_num_threads() == 1
        with pytest.raises(KeyError), threads.torch_threads(2):
            raise KeyError
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(old)


def test_set_threads_explicit_count_wins_over_the_environment(monkeypatch):
    old = torch.get_num_threads()
    try:
        monkeypatch.setenv("SSLDYN_THREADS", "2")
        assert threads.set_threads(1) == 1
        assert threads.set_threads() == 2
    finally:
        torch.set_num_threads(old)


# ---------------------------------------------------------------- result
class _Traj:
    def __init__(self, values, snap):
        self.values, self.snap = values, snap

    def to_frame(self):
        return pd.DataFrame({"step": range(len(self.values)), "value": self.values})

    def snapshot_arrays(self, prefix=""):
        return {f"{prefix}W": self.snap}


def test_add_trajectory_appends_rows_and_prefixes_snapshots():
    r = Result()
    r.add_trajectory(_Traj([1.0, 2.0], np.zeros(2)))
    r.add_trajectory(_Traj([3.0], np.ones(1)), name="other")
    r.add_trajectory(_Traj([5.0], np.ones(3)))
    assert r.tables["metrics"]["value"].tolist() == [1.0, 2.0, 5.0]
    assert r.tables["metrics"].index.tolist() == [0, 1, 2]
    assert r.tables["other"]["value"].tolist() == [3.0]
    assert sorted(r.arrays) == ["metrics/W", "other/W"]
    assert r.arrays["metrics/W"].tolist() == [1.0, 1.0, 1.0]


# ---------------------------------------------------------------- files
def test_atomic_write_order_temp_fsync_rename_dir_fsync(tmp_path, monkeypatch):
    target = tmp_path / "f.bin"
    target.write_bytes(b"old")
    calls = []
    real_fsync, real_replace, real_open, real_close = os.fsync, os.replace, os.open, os.close
    opened = {}

    def fsync(fd):
        calls.append(("fsync", opened.get(fd, "file")))
        return real_fsync(fd)

    def replace(a, b):
        # at the rename the temp is in the same folder, complete, and the target is still the old file
        calls.append(("replace", Path(a).parent == Path(b).parent, Path(a).read_bytes(), Path(b).read_bytes()))
        return real_replace(a, b)

    def os_open(path, flags, *a):
        fd = real_open(path, flags, *a)
        opened[fd] = "dir"
        calls.append(("open-dir",))
        return fd

    def close(fd):
        if opened.pop(fd, None):
            calls.append(("close-dir",))
        return real_close(fd)

    monkeypatch.setattr(files.os, "fsync", fsync)
    monkeypatch.setattr(files.os, "replace", replace)
    monkeypatch.setattr(files.os, "open", os_open)
    monkeypatch.setattr(files.os, "close", close)
    files.atomic_write_bytes(target, b"new data")
    assert calls == [("fsync", "file"), ("replace", True, b"new data", b"old"),
                     ("open-dir",), ("fsync", "dir"), ("close-dir",)]  # fmt: skip
    assert target.read_bytes() == b"new data"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.bin"]


def test_atomic_write_failure_keeps_the_old_file_and_no_temp(tmp_path, monkeypatch):
    target = tmp_path / "f.bin"
    target.write_bytes(b"old")

    def full_disk(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(files.os, "fsync", full_disk)
    with pytest.raises(OSError, match="No space"):
        files.atomic_write_bytes(target, b"new")
    assert target.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.bin"]


# ---------------------------------------------------------------- memory
def test_host_memory_is_meminfo_capped_by_the_cgroup(monkeypatch):
    asked = []
    monkeypatch.setattr(memory, "_meminfo", lambda key: asked.append(key) or 8 * 2**30)
    monkeypatch.setattr(memory, "_cgroup_limit", lambda: 2 * 2**30)
    assert memory.available_memory("cpu") == 2 * 2**30
    assert memory.total_memory() == 2 * 2**30
    monkeypatch.setattr(memory, "_cgroup_limit", lambda: 64 * 2**30)
    assert memory.available_memory() == 8 * 2**30
    assert asked == ["MemAvailable", "MemTotal", "MemAvailable"]


def test_meminfo_is_in_kib():
    meminfo = Path("/proc/meminfo")
    if not meminfo.is_file():
        pytest.skip("no /proc/meminfo (not Linux)")
    want = None
    for line in meminfo.read_text().splitlines():
        if line.startswith("MemTotal:"):
            want = int(line.split()[1]) * 1024
    assert want is not None and memory._meminfo("MemTotal") == want


def test_cgroup_limit_ignores_the_unlimited_sentinel(monkeypatch):
    texts = {"/sys/fs/cgroup/memory.max": "max\n",
             "/sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n"}  # fmt: skip

    class FakePath:
        def __init__(self, p):
            self.p = p

        def read_text(self):
            return texts[self.p]

    monkeypatch.setattr(memory, "Path", FakePath)
    assert memory._cgroup_limit() is None
    texts["/sys/fs/cgroup/memory.max"] = "4294967296\n"
    assert memory._cgroup_limit() == 2**32


@pytest.mark.parametrize(
    ("b", "text"),
    [(1023, "1023 bytes"), (1024, "1 KiB (1024 bytes)"), (2**20, "1 MiB (1048576 bytes)"),
     (2**30, "1 GiB (1073741824 bytes)"), (1_500_000_000, "1.4 GiB (1500000000 bytes)"),
     (2**40, "1 TiB (1099511627776 bytes)")],
)  # fmt: skip
def test_fmt_bytes_by_hand(b, text):
    assert memory.fmt_bytes(b) == text


def test_peak_rss_is_the_high_water_mark():
    # in a fresh process: there a freed 64 MB block leaves the resident set, so the high-water mark (what
    # peak_rss reads) stands above the current VmRSS; a long-lived test process may reuse pages it already holds
    import subprocess
    import sys

    if not Path("/proc/self/status").is_file():
        pytest.skip("no /proc/self/status")
    code = """
from pathlib import Path
from ssldyn import memory

def status(key):
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024

block = bytearray(64 << 20)
block[::4096] = b"\\1" * len(block[::4096])
del block
before = status("VmHWM")
got = memory.peak_rss()
print(before, got, status("VmHWM"), status("VmRSS"))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    before, got, after, rss = map(int, out.split())
    assert before <= got <= after
    assert got >= rss + (32 << 20)


def _reversed_runner(fn, items, *, device=None):
    # an executor whose tasks finish last-first (as a pool's may)
    for i in reversed(range(len(items))):
        yield i, fn(items[i])


def _square(x):
    return x * x


def test_map_returns_results_in_input_order_whatever_order_tasks_finish():
    ctx = Context(tasks=_reversed_runner)
    assert ctx.map(_square, [1, 2, 3, 4]) == [1, 4, 9, 16]
    assert list(ctx.as_completed(_square, [1, 2, 3])) == [(2, 9), (1, 4), (0, 1)]


# ---------------------------------------------------------------- config


class _Inner(ExperimentConfig):
    lr: confloat(gt=0) = 0.1
    momentum: confloat(ge=0, lt=1) = 0.0


class _Cfg(ExperimentConfig):
    n: conint(ge=1) = 3
    scale: float | None = None
    xs: list[float] = [1.0]
    pair: tuple[str, float] = ("a", 1.0)
    flag: bool = False
    optim: _Inner = _Inner(lr=0.3)


def test_bools_are_refused_for_numbers_also_inside_lists_and_tuples_but_not_for_bool_settings():
    assert build_config(_Cfg, {"flag": True}).flag is True
    for layer in ({"n": True}, {"scale": False}, {"xs": [1.0, True]}, {"pair": ["b", True]}, {"optim": {"lr": True}}):
        with pytest.raises(UserError, match="must be a number"):
            build_config(_Cfg, layer)
    assert build_config(_Cfg, {"pair": ["b", 2]}).pair == ("b", 2.0)


def test_non_finite_and_unknown_values_are_refused():
    for layer in ({"scale": float("nan")}, {"xs": [float("inf")]}, {"optim": {"lr": float("inf")}}):
        with pytest.raises(UserError, match="invalid value"):
            build_config(_Cfg, layer)
    with pytest.raises(
        UserError, match="unknown config key 'optim.lrr'.*did you mean 'lr'.*allowed keys: lr, momentum"
    ):
        build_config(_Cfg, {"optim": {"lrr": 1}})


def test_layers_merge_in_order_from_the_parents_defaults():
    cfg = build_config(_Cfg, {"n": 4, "optim": {"momentum": 0.5}}, {"n": 5})
    assert (cfg.n, cfg.optim.lr, cfg.optim.momentum) == (5, 0.3, 0.5)  # lr: the parent's default 0.3, not 0.1
    cfg = build_config(_Cfg, parse_sets(["optim.momentum=0.25"]))
    assert cfg.optim.model_dump() == {"lr": 0.3, "momentum": 0.25}


def test_configs_are_frozen_and_invalid_defaults_are_errors():
    cfg = _Cfg()
    with pytest.raises(ValidationError):
        cfg.n = 7

    class Bad(ExperimentConfig):
        n: conint(ge=1) = 0

    with pytest.raises(ValidationError, match="greater than or equal to 1"):
        Bad()  # what Experiment.default_config() builds
    with pytest.raises(UserError, match="invalid value for 'n'"):
        build_config(Bad)


def test_deep_merge_leaves_its_inputs_alone():
    base = {"a": {"b": 1, "c": [1]}, "d": 2}
    update = {"a": {"b": 5, "e": {"f": 1}}}
    out = deep_merge(base, update)
    assert out == {"a": {"b": 5, "c": [1], "e": {"f": 1}}, "d": 2}
    assert base == {"a": {"b": 1, "c": [1]}, "d": 2} and update == {"a": {"b": 5, "e": {"f": 1}}}
    out["a"]["e"]["f"] = 9
    assert update["a"]["e"]["f"] == 1


def test_parse_sets_overlaps_in_either_order_and_only_on_dot_boundaries():
    assert parse_sets(["optim=1", "optimizer=2"]) == {"optim": 1, "optimizer": 2}
    for pairs in (["n=1", "n=2"], ["optim.lr=0.1", 'optim={"lr": 0.2}'], ['optim={"lr": 0.2}', "optim.lr=0.1"]):
        with pytest.raises(UserError, match="given twice|overlaps"):
            parse_sets(pairs)
    assert parse_sets(["flag=True", "other=FALSE"]) == {"flag": True, "other": False}
    assert parse_sets(["a.b.c=1", "a.d=2"]) == {"a": {"b": {"c": 1}, "d": 2}}
    assert set_keys([" optim.lr =1", "novalue", "n=2"]) == ["optim.lr", "n"]


def test_config_file_size_limit_and_duplicate_keys(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_bytes(b"#" * (CONFIG_MAX_BYTES - 1) + b"\n")  # exactly at the limit: read (a comment: empty)
    assert load_config_file(p) == {}
    p.write_bytes(b"#" * CONFIG_MAX_BYTES + b"\n")
    with pytest.raises(UserError, match="at most"):
        load_config_file(p)
    p.write_text("n: 1\noptim:\n  lr: 0.1\n  lr: 0.2\n")
    with pytest.raises(UserError, match="duplicate key 'lr'"):
        load_config_file(p)
    p.write_text("7\n")
    with pytest.raises(UserError, match="expected a mapping"):
        load_config_file(p)


def test_format_value_and_describe_type_by_hand():
    assert [format_value(v) for v in ("relu", "1", "true", "a b", 0.5, None)] == ["relu", '"1"', '"true"', '"a b"',
                                                                                  "0.5", "null"]  # fmt: skip
    assert describe_type(conint(gt=0)) == "int > 0"
    assert describe_type(conint(ge=1)) == "int ≥ 1"
    assert describe_type(confloat(ge=0, lt=1)) == "float in [0, 1)"
    assert describe_type(confloat(gt=0, le=1)) == "float in (0, 1]"
    assert describe_type(confloat(lt=1)) == "float < 1"
    from pydantic import Field

    # pydantic's own metadata objects for min_length (annotated_types.MinLen, not a declared dependency)
    assert describe_type(list[int], Field(min_length=0).metadata) == "list of int"
    assert describe_type(list[int], Field(min_length=2).metadata) == "list of int, ≥ 2 items"


def test_schema_rows_show_the_parents_default_of_a_nested_config():
    rows = {key: default for key, _, default, _ in config_schema_rows(_Cfg)}
    assert rows["optim.lr"] == "0.3" and rows["optim.momentum"] == "0.0"
    assert rows["n"] == "3" and rows["scale"] == "null"


# ---------------------------------------------------------------- experiment registration


def _claim(cid: str) -> ClaimSpec:
    return ClaimSpec(cid, "The loss decreases.", "Fig. 3", kind="paper", reading="drop", relation=gt(0.0),
                     basis="relation: 'decreases' means a positive drop")  # fmt: skip


def _exp(**attrs):
    base = {"name": "variational.zz-guard", "paper": "variational", "figure": "Fig. 0", "description": "guard",
            "Config": _Cfg, "quick": {"n": 2}, "claims": (_claim("a"),)}  # fmt: skip
    return type("GuardExp", (contract_experiment.Experiment,), {**base, **attrs})


@pytest.fixture
def registry():
    saved = dict(contract_experiment._REGISTRY)
    yield contract_experiment._REGISTRY
    contract_experiment._REGISTRY.clear()
    contract_experiment._REGISTRY.update(saved)


@pytest.mark.parametrize(
    ("attrs", "match"),
    [({"name": "variational."}, "must be '<paper>.<result>'"),
     ({"name": "Variational.x"}, "must be '<paper>.<result>'"),
     ({"name": "nopaper.x", "paper": "nopaper"}, "with paper in"),
     ({"paper": "grassmann"}, "declares paper 'grassmann'"),
     ({"claims": (_claim("a"), _claim("a"))}, "claim id 'a' declared twice"),
     ({"claims": [_claim("a")]}, "claims must be a tuple"),
     ({"reuses": ("variational.zz-guard",)}, "reuses must be"),
     ({"paper_seeds": 0, "paper_seeds_reason": "three runs"}, "paper_seeds must be"),
     ({"paper_seeds": 3}, "paper_seeds must be"),
     ({"paper_seeds": 3, "paper_seeds_reason": "  "}, "paper_seeds must be"),
     ({"robustness": (Robustness(("b",), {"n": [1, 2]}, "open"),)}, "undeclared claims"),
     ({"robustness": (Robustness(("a",), {"nn": [1, 2]}, "open"),)}, "not config keys"),
     ({"quick": {"n": 0}}, "invalid value for 'n'"),
     ({"quick": {"nn": 1}}, "unknown config key 'nn'")],
)  # fmt: skip
def test_register_refuses_a_malformed_experiment(registry, attrs, match):
    with pytest.raises((ValueError, UserError), match=match):
        contract_experiment.register(_exp(**attrs))
    assert "variational.zz-guard" not in registry


def test_register_accepts_a_sound_experiment_once_and_quick_merges_from_defaults(registry):
    cls = _exp(paper_seeds=3, paper_seeds_reason="repeated 3 times", quick={"optim": {"momentum": 0.5}})
    assert contract_experiment.register(cls) is cls and registry["variational.zz-guard"] is cls
    assert contract_experiment.register(cls) is cls  # the same class again: fine
    with pytest.raises(ValueError, match="registered twice"):
        contract_experiment.register(_exp())
    assert registry["variational.zz-guard"] is cls
    q = cls.quick_config()
    assert (q.optim.lr, q.optim.momentum) == (0.3, 0.5)  # the parent's default lr (0.3), not _Inner's (0.1)


# ---------------------------------------------------------------- source bugs the audit found (fixed with these tests)
def test_threads_from_env_non_ascii_digits_are_one_user_error(monkeypatch):
    monkeypatch.setenv("SSLDYN_THREADS", "²")
    with pytest.raises(UserError, match="from 1 to 4096"):
        threads.threads_from_env()


def test_bools_are_refused_for_numbers_inside_a_mapping():
    class WithWeights(ExperimentConfig):
        weights: dict[str, float] = {"a": 1.0}

    with pytest.raises(UserError, match="must be a number"):
        build_config(WithWeights, {"weights": {"a": True}})


def test_register_refuses_a_bool_paper_seeds(registry):
    with pytest.raises(ValueError, match="paper_seeds must be"):
        contract_experiment.register(_exp(paper_seeds=True, paper_seeds_reason="repeated"))
