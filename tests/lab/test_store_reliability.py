"""The run store under concurrency and damage (run-store issue, items 1, 2, 6, 12)."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ssldyn.lab import run_experiment
from ssldyn.lab.report import build_report
from ssldyn.lab.runner import commit_run, compute_run, plan_run
from ssldyn.lab.store import DONE, RunStore, verify_run

ROOT = Path(__file__).resolve().parents[2]


def _env():
    return {
        **os.environ,
        "SSLDYN_PLUGINS": "tests.lab.toy_plugin",
        "SSLDYN_THREADS": "1",
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]),
    }


def _all_done_runs_complete(out: Path) -> None:
    runs = [p.parent for p in out.glob("*/*/DONE")]
    assert runs
    for d in runs:
        assert verify_run(d) is None, (d, verify_run(d))
        for f in ("config.json", "meta.json", "summary.json", "claims.json", "MANIFEST.json"):
            assert (d / f).is_file(), (d, f)


def test_two_processes_on_one_store_both_succeed(tmp_path):
    """Two `ssldyn run` of the same (slow) run on one --out, many times: both exit 0, every DONE run complete."""
    for trial in range(3):
        out = tmp_path / f"t{trial}"
        cmd = [sys.executable, "-m", "ssldyn.lab.cli", "run", "variational.zz-slow", "--quick", "--seeds", "2",
               "--set", "sleep=0.3", "--out", str(out)]  # fmt: skip
        procs = [subprocess.Popen(cmd, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for _ in range(2)]  # fmt: skip
        outs = [p.communicate(timeout=300) for p in procs]
        assert [p.returncode for p in procs] == [0, 0], outs
        _all_done_runs_complete(out)
        assert not list(out.glob("*/.*partial*")) and not list(out.glob("*/.*old*"))
        assert len(list(out.glob("*/*/DONE"))) == 1


def _hold_lock_and_commit(out: str, ready, release) -> None:  # runs in a child process
    os.environ["SSLDYN_PLUGINS"] = "tests.lab.toy_plugin"
    from ssldyn.lab import registry

    registry._LOADED = False
    spec = plan_run("variational.zz-toy", quick=True, seeds=1)
    store = RunStore(out)
    computed = compute_run(spec)
    with store.lock(spec.experiment, spec.digest):
        partial = store.new_partial(spec.experiment, spec.digest)
        (partial / "config.json").write_text("{}")
        ready.set()
        release.wait(30)
        import shutil

        shutil.rmtree(partial)
        commit_run(store, computed)


def test_forced_interleaving_never_deletes_a_live_partial(toy, tmp_path, monkeypatch):
    ctx = mp.get_context("spawn")
    ready, release = ctx.Event(), ctx.Event()
    child = ctx.Process(target=_hold_lock_and_commit, args=(str(tmp_path), ready, release))
    child.start()
    try:
        assert ready.wait(120)
        spec = plan_run(toy.name, quick=True, seeds=1)
        store = RunStore(tmp_path)
        partials = list((tmp_path / toy.name).glob(f".{spec.digest}.partial-*"))
        assert len(partials) == 1  # the child's
        with store.lock(spec.experiment, spec.digest, blocking=False) as got:
            assert not got  # another live process owns this run
        computed = compute_run(spec)

        def second_copy(*a, **k):
            raise AssertionError("the waiting process wrote its own copy over the child's run")

        monkeypatch.setattr(store, "new_partial", second_copy)
        release.set()
        run = commit_run(store, computed)  # waits for the child, then keeps the child's run
    finally:
        release.set()
        child.join(60)
    assert child.exitcode == 0
    assert verify_run(run.path) is None and run.claims[0].passed
    _all_done_runs_complete(tmp_path)


@pytest.mark.parametrize("victim, damage", [
    ("claims.json", "truncate"), ("meta.json", "garble"), ("summary.json", "garble"), ("config.json", "delete"),
    ("claims.json", "edit"),
])  # fmt: skip
def test_damaged_run_is_reported_and_recomputed(toy, tmp_path, victim, damage):
    good = run_experiment(toy.name, out=tmp_path, quick=True)
    f = good.run.path / victim
    if damage == "truncate":
        f.write_bytes(f.read_bytes()[:20])
    elif damage == "garble":
        f.write_text("{not json")
    elif damage == "delete":
        f.unlink()
    else:  # an edited claim that still parses
        f.write_text(f.read_text().replace('"passed": true', '"passed": false'))
    store = RunStore(tmp_path)
    assert store.get(toy.name, good.run.path.name) is None
    (bad,) = store.damaged()
    assert bad[0] == good.run.path and victim in bad[1] or "config.json" in bad[1]
    html = build_report(tmp_path).read_text()  # the report does not die; it names the damaged run
    assert "Damaged runs" in html and good.run.path.name in html
    again = run_experiment(toy.name, out=tmp_path, quick=True)
    assert not again.cached and verify_run(again.run.path) is None and again.run.claims[0].passed
    kept = list((tmp_path / toy.name).glob(f".damaged-{good.run.path.name}-*"))
    assert len(kept) == 1  # the old copy is kept aside
    assert RunStore(tmp_path).damaged() == []


def test_run_filed_under_another_experiment_is_damaged(toy, tmp_path):
    o = run_experiment(toy.name, out=tmp_path, quick=True)
    other = tmp_path / "variational.fig3" / o.run.path.name
    other.parent.mkdir()
    os.replace(o.run.path, other)
    assert "names another run" in verify_run(other)
    assert RunStore(tmp_path).finished() == []


def test_crash_between_the_two_renames_of_force_is_repaired(toy, tmp_path):
    o = run_experiment(toy.name, out=tmp_path, quick=True)
    d = o.run.path
    before = json.loads((d / "claims.json").read_text())
    # a --force commit that died after moving the finished run aside and before moving the new one in
    os.replace(d, d.with_name(f".{d.name}.old-abc123"))
    partial = d.with_name(f".{d.name}.partial-999-xyz")
    partial.mkdir()
    (partial / "config.json").write_text("{half")
    store = RunStore(tmp_path)
    run = store.get(toy.name, d.name)
    assert run is not None and json.loads((run.path / "claims.json").read_text()) == before
    assert not list(d.parent.glob(".*old*")) and not list(d.parent.glob(".*partial*"))
    assert (d / DONE).is_file()


def test_commit_needs_the_lock(toy, tmp_path):
    spec = plan_run(toy.name, quick=True, seeds=1)
    with pytest.raises(RuntimeError, match="lock"):
        RunStore(tmp_path).new_partial(spec.experiment, spec.digest)


def test_relative_store_path_lock_is_reentrant(toy, tmp_path, monkeypatch):
    """A relative --out (the default ./ssldyn-runs) must not deadlock on the run's own lock."""
    monkeypatch.chdir(tmp_path)
    o = run_experiment(toy.name, out="ssldyn-runs", quick=True, seeds=1)
    assert verify_run(o.run.path) is None
