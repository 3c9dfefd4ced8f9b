import json
import os

import numpy as np
import pandas as pd
import pytest

from ssldyn.lab import UserError, run_experiment
from ssldyn.lab.store import RunStore
from tests.lab.toy import CALLS


def test_run_writes_complete_directory(toy, tmp_path):
    o = run_experiment(toy.name, out=tmp_path, seed=3)
    d = o.run.path
    assert not o.cached and d.parent == tmp_path / toy.name and (d / "DONE").is_file()
    for f in (
        "config.json",
        "meta.json",
        "summary.json",
        "claims.json",
        "arrays.npz",
        "tables/metrics.parquet",
        "figures/toy.png",
    ):
        assert (d / f).is_file(), f
    rec = json.loads((d / "config.json").read_text())
    assert rec["config"]["n"] == 8 and rec["seeds"] == [3, 4, 5, 6, 7] and rec["hash"] == d.name  # 5 seeds: paper
    claims = json.loads((d / "claims.json").read_text())
    assert claims[0]["id"] == "decay" and claims[0]["passed"] is True
    assert set(claims[0]) >= {"id", "statement", "location", "passed", "value", "values", "interval", "expected"}
    assert claims[0]["seeds"] == [3, 4, 5, 6, 7] and all(claims[0]["seed_passed"])
    m = pd.read_parquet(d / "tables/metrics.parquet")
    assert list(m.columns) == ["seed", "step", "member", "probe", "value"] and len(m) == 5 * 5
    # (1 - lr)^t decay measured from the stored trajectory of every seed
    for _, g in m.groupby("seed"):
        np.testing.assert_allclose(g["value"].to_numpy() / g["value"].iloc[0], 0.9 ** np.arange(5), rtol=1e-5)
    # one seed's result equals a one-seed run with that seed
    one = run_experiment(toy.name, out=tmp_path, seed=5, seeds=1).run.result()
    np.testing.assert_array_equal(o.run.result(5).arrays["x"], one.arrays["x"])
    assert not [p for p in d.parent.iterdir() if p.name.startswith(".")]


def test_second_run_is_cached_and_force_recomputes(toy, tmp_path):
    a = run_experiment(toy.name, out=tmp_path, quick=True)
    stamp = (a.run.path / "DONE").stat().st_mtime_ns
    b = run_experiment(toy.name, out=tmp_path, quick=True)
    assert b.cached and b.run.path == a.run.path and CALLS["run"] == 3  # 3 seeds with --quick
    assert (a.run.path / "DONE").stat().st_mtime_ns == stamp
    c = run_experiment(toy.name, out=tmp_path, quick=True, force=True)
    assert not c.cached and CALLS["run"] == 6 and c.run.path == a.run.path
    other = run_experiment(toy.name, out=tmp_path, quick=True, sets=["optim.lr=0.2"])
    assert other.run.path != a.run.path
    assert other.run.claims[0].passed


def test_same_seed_same_numbers_different_seed_differs(toy, tmp_path):
    r1 = run_experiment(toy.name, out=tmp_path / "a", seed=7).run.result()
    r2 = run_experiment(toy.name, out=tmp_path / "b", seed=7).run.result()
    r3 = run_experiment(toy.name, out=tmp_path / "c", seed=8).run.result()
    np.testing.assert_array_equal(r1.arrays["x"], r2.arrays["x"])
    assert not np.array_equal(r1.arrays["x"], r3.arrays["x"])
    assert r1.notes == ["label: toy"]


def test_failure_leaves_no_done_run_and_keeps_earlier_results(toy, tmp_path):
    good = run_experiment(toy.name, out=tmp_path)
    before = sorted(p.name for p in (tmp_path / toy.name).iterdir())
    with pytest.raises(RuntimeError, match="toy failure"):
        run_experiment(toy.name, out=tmp_path, sets={"fail": True})
    assert sorted(p.name for p in (tmp_path / toy.name).iterdir()) == before
    assert (good.run.path / "DONE").is_file()
    with pytest.raises(UserError):
        run_experiment(toy.name, out=tmp_path, sets=["n=-2"])
    with pytest.raises(UserError, match="unknown experiment 'variational.fig33'.*did you mean"):
        run_experiment("variational.fig33", out=tmp_path)
    with pytest.raises(UserError, match="cuda|cpu"):
        run_experiment(toy.name, out=tmp_path, device="tpu")
    assert len(RunStore(tmp_path).finished()) == 1


def test_interrupted_partial_is_ignored_and_redone(toy, tmp_path):
    o = run_experiment(toy.name, out=tmp_path)
    digest = o.run.path.name
    # simulate a crash mid-write: a partial directory without DONE, and a finished dir without DONE
    partial = tmp_path / toy.name / f".{digest}.partial-999-abc"
    partial.mkdir()
    (partial / "config.json").write_text("{half")
    os.remove(o.run.path / "DONE")
    assert RunStore(tmp_path).get(toy.name, digest) is None and RunStore(tmp_path).finished() == []
    again = run_experiment(toy.name, out=tmp_path)
    assert not again.cached and (again.run.path / "DONE").is_file() and not partial.exists()


def test_paper_seeds_follow_the_papers_own_count_of_repetitions():
    from ssldyn.contract.experiment import Experiment, register
    from ssldyn.lab.registry import get_experiment
    from ssldyn.lab.runner import DEFAULT_SEEDS, default_seeds

    fig4 = get_experiment("nonlinearity.fig4")
    assert fig4.paper_seeds == 3 and "repeated 3 times" in fig4.paper_seeds_reason
    assert default_seeds(fig4, "paper") == (0, 1, 2)  # Fig. 4/9 captions: "Each setting is repeated 3 times"
    assert default_seeds(fig4, "quick") == tuple(range(DEFAULT_SEEDS["quick"]))
    assert default_seeds(fig4, "paper", n=7) == tuple(range(7))  # --seeds still wins
    other = get_experiment("grassmann.fig3")
    assert other.paper_seeds is None and len(default_seeds(other, "paper")) == DEFAULT_SEEDS["paper"]

    class NoReason(Experiment):
        name = "variational.zz-no-reason"
        paper = "variational"
        paper_seeds = 3

    with pytest.raises(ValueError, match="paper_seeds_reason"):
        register(NoReason)


def test_record_seeds_reads_seeds_or_the_single_seed_of_older_records():
    from ssldyn.lab.store import record_seeds

    assert record_seeds({"seeds": [3, "4"], "seed": 9}) == [3, 4]  # the list wins, as ints
    assert record_seeds({"seed": 7}) == [7]  # an older record with one seed
    assert record_seeds({}) == [0]
