"""Runs computed at the same time in worker processes (``--jobs``) equal runs computed one after another."""

import errno

import pytest

from ssldyn.errors import UserError
from ssldyn.lab import executors
from ssldyn.lab.executors import execute
from ssldyn.lab.runner import plan_run
from ssldyn.lab.store import verify_run

EXPS = ["nonlinearity.fig8", "variational.ill-posed", "grassmann.fig5"]


def test_parallel_runs_equal_sequential_runs(tmp_path):
    specs = [plan_run(name, quick=True, seeds=2) for name in EXPS]
    seq = execute(specs, tmp_path / "seq", jobs=1)
    par = execute(specs, tmp_path / "par", jobs=2)
    assert [it.status for it in par] == ["done"] * len(EXPS)
    for a, b in zip(seq, par):
        assert a.run.path.name == b.run.path.name and verify_run(b.run.path) is None
        assert [c.to_dict() for c in a.run.claims] == [c.to_dict() for c in b.run.claims]
    again = execute(specs, tmp_path / "par", jobs=2)  # finished runs come from the store
    assert [it.status for it in again] == ["cached"] * len(EXPS)


def test_a_run_that_reuses_cached_results_starts_after_its_source():
    from ssldyn.lab.executors import next_run

    reuses = {"b": ("a",), "c": (), "a": ()}.__getitem__
    assert next_run(["a", "b", "c"], [], reuses) == 0  # longest first
    assert next_run(["b", "c"], ["a"], reuses) == 1  # b waits for a: c starts
    assert next_run(["b"], ["a"], reuses) is None  # nothing else: wait
    assert next_run(["b"], ["c"], reuses) == 0  # a finished: b starts
    cycle = {"x": ("y",), "y": ("x",)}.__getitem__
    assert next_run(["x", "y"], [], cycle) == 0  # a cycle does not stall the batch


def test_critical_paths_add_the_runs_that_wait_for_a_source():
    from ssldyn.lab.executors import critical_paths

    # the measured paper-scale case: fig1 2100 s, fig4 1470 s (fig10 reads it: 10 s), fig11 1200 s
    # then table1 770 s; by the estimate alone fig4 would start before fig11 and table1 come last
    reuses = {"fig1": (), "fig4": (), "fig10": ("fig4",), "fig11": (), "table1": ("fig11",), "x": ()}.__getitem__
    names = ["fig1", "fig4", "fig10", "fig11", "table1", "x"]
    paths = critical_paths(names, [2100.0, 1470.0, 10.0, 1200.0, 770.0, 30.0], reuses)
    assert paths == [2100.0, 1480.0, 10.0, 1970.0, 770.0, 30.0]
    chain = {"a": (), "b": ("a",), "c": ("b",)}.__getitem__  # a <- b <- c: a's path is the whole chain
    assert critical_paths(["c", "b", "a"], [1.0, 2.0, 4.0], chain) == [1.0, 3.0, 7.0]
    cycle = {"x": ("y",), "y": ("x",)}.__getitem__
    assert critical_paths(["x", "y"], [1.0, 2.0], cycle) == [3.0, 2.0]  # a cycle ends, it does not recurse


def test_start_order_puts_sources_first_and_keeps_the_rest():
    from ssldyn.lab.executors import start_order

    names = ["nonlinearity.table1", "nonlinearity.fig10", "grassmann.fig3", "nonlinearity.fig4", "nonlinearity.fig11"]
    order = start_order(names, [10, 11, 12, 13, 14])
    assert order.index(13) < order.index(11) and order.index(14) < order.index(10)  # fig4 < fig10, fig11 < table1
    assert start_order(["grassmann.fig3", "variational.fig3"], [1, 0]) == [1, 0]  # nothing reused: as given


def test_fig10_is_computed_after_fig4_and_reads_its_grid(tmp_path):
    import json

    specs = [plan_run(name, quick=True, seeds=1) for name in ("nonlinearity.fig10", "nonlinearity.fig4")]
    items = execute(specs, tmp_path, jobs=2)
    assert [it.status for it in items] == ["done", "done"]
    meta = {it.spec.experiment: json.loads((it.run.path / "meta.json").read_text()) for it in items}
    f4, f10 = meta["nonlinearity.fig4"], meta["nonlinearity.fig10"]
    from datetime import datetime, timedelta

    t4, t10 = datetime.fromisoformat(f4["started"]), datetime.fromisoformat(f10["started"])
    # started once fig4 (its source) had finished, not beside it (timestamps are whole seconds)
    assert t10 >= t4 + timedelta(seconds=f4["total_seconds"] - 1.0)
    # one at a time, in the given order (fig10 first): fig4 is still computed first, so both read the
    # same cached grid entries and give the same claims (linear runs under the quadratic loss amplify
    # round-off, so a grid grouped into other ensembles differs at the 1e-2 level in χ̄₊)
    seq = execute(specs, tmp_path / "seq", jobs=1)
    for a, b in zip(seq, items):
        assert [c.to_dict() for c in a.run.claims] == [c.to_dict() for c in b.run.claims]


def test_a_store_that_cannot_be_written_is_one_error_naming_out_with_one_job_or_several(tmp_path, monkeypatch):
    """Both paths (one job, several jobs) turn a permission error inside the store into one UserError naming --out
    and the file; an error outside the store is not the store's and propagates as it is."""
    specs = [plan_run(name, quick=True, seeds=1) for name in EXPS[:2]]
    where = {"file": str(tmp_path / "store" / "variational.ill-posed" / "x")}

    def refuse(store, computed, force=False):
        raise PermissionError(errno.EACCES, "Permission denied", where["file"])

    monkeypatch.setattr(executors, "commit_run", refuse)
    for jobs in (1, 2):
        with pytest.raises(UserError, match=r"^--out '.*store': cannot write there \(Permission denied: .*/x\)$"):
            execute(specs, tmp_path / "store", jobs=jobs)
    where["file"] = "/elsewhere/x"
    with pytest.raises(PermissionError):
        execute(specs, tmp_path / "store", jobs=1)


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_run_asked_for_twice_is_computed_once(tmp_path, jobs):
    """Two robustness maps can share a grid point: the same spec twice in one batch. It used to be computed by two
    workers and its re-entrant lock released out of order (KeyError in the store's lock)."""
    a, b = (plan_run(name, quick=True, seeds=1) for name in ("variational.ill-posed", "grassmann.fig5"))
    items = execute([a, b, a], tmp_path, jobs=jobs)
    assert [it.spec.experiment for it in items] == [a.experiment, b.experiment, a.experiment]
    assert [it.status for it in items] == ["done", "done", "cached"]
    assert items[0].run.path == items[2].run.path and verify_run(items[2].run.path) is None
    runs = list((tmp_path / a.experiment).iterdir())
    assert [p.name for p in runs] == [a.digest]  # one directory, nothing left aside


def test_a_run_that_raises_in_a_worker_keeps_its_message(tmp_path):
    """--jobs 2: a run whose experiment raises is marked failed with the exception's type and message (as with one
    job), and the other run of the sweep finishes; the store's failure record says the same."""
    from tests.lab.conftest import plugin_loaded

    with plugin_loaded():  # the plugin's own toys are computed in the worker processes (SSLDYN_PLUGINS)
        sets = [{"sleep": 0.0, "fail": fail} for fail in ("toy failure in a worker", "")]
        specs = [plan_run("variational.zz-slow", quick=True, seeds=1, sets=s) for s in sets]
        assert all(executors._discoverable(s.experiment) for s in specs)  # so jobs = 2 uses the worker pool
        bad, good = execute(specs, tmp_path, jobs=2)
        one = execute(specs[:1], tmp_path / "seq", jobs=1)[0]
    assert bad.status == "failed" and good.status == "done"
    want = "RuntimeError: toy failure in a worker"
    assert want in bad.error and want in one.error
    from ssldyn.lab.store import RunStore

    assert any(want in f.get("error", "") for f in RunStore(tmp_path).failures())
