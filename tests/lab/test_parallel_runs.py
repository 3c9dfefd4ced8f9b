"""Runs computed at the same time in worker processes (``--jobs``) equal runs computed one after another."""

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
