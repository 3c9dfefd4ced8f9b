"""Tests added by a mutation audit of the lab's execution and storage layer (cache, store, runner, sweep,
results, study, tasks, executors, manifest, report). Each test pins one behaviour that a plausible bug
(a mutant) changed without any other test noticing; the expected values are written out by hand or read
back from the stored files."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ssldyn.lab import cache as cache_mod
from ssldyn.lab.cache import RunCache


# ---------------------------------------------------------------------------------------------- cache
def test_code_version_covers_the_torch_and_numpy_versions(monkeypatch):
    """A torch or numpy upgrade can change computed values: it must change the code version (hence miss the cache)."""
    import torch

    version = cache_mod.code_version.__wrapped__
    v0 = version()
    monkeypatch.setattr(torch, "__version__", "0.0.0-other")
    v_torch = version()
    monkeypatch.undo()
    monkeypatch.setattr(np, "__version__", "0.0.0-other")
    v_numpy = version()
    assert v0 != v_torch and v0 != v_numpy and v_torch != v_numpy


def test_an_empty_cached_value_is_a_hit(tmp_path):
    """An entry with no arrays is still an entry: the second call reads it instead of recomputing."""
    cache = RunCache(tmp_path, version="v")
    calls = []

    def compute():
        calls.append(1)
        return {}

    assert cache.cached("ns", {"k": 1}, compute) == {}
    assert cache.cached("ns", {"k": 1}, compute) == {}
    assert len(calls) == 1


# ---------------------------------------------------------------------------------------------- store
def test_config_hash_changes_with_every_field_it_names(monkeypatch):
    """The run hash covers config, seeds, device, package and experiment version: a run on another device or of
    another experiment version is another run (never served from the store for this one)."""
    from ssldyn.lab import store as store_mod
    from ssldyn.lab.store import config_hash

    base = dict(
        experiment="variational.zz-toy", config={"n": 8, "optim": {"lr": 0.1}}, seeds=[0, 1], device="cpu", version="1"
    )
    h0 = config_hash(**base)
    assert config_hash(**{**base, "config": {"optim": {"lr": 0.1}, "n": 8}}) == h0  # key order does not matter
    assert config_hash(**{**base, "seeds": (0, 1)}) == h0
    variants = [
        {"config": {"n": 9, "optim": {"lr": 0.1}}},
        {"seeds": [0, 2]},
        {"seeds": [1, 0]},
        {"device": "cuda"},
        {"version": "2"},
        {"experiment": "variational.zz-sweep"},
    ]
    hashes = [config_hash(**{**base, **v}) for v in variants]
    monkeypatch.setattr(store_mod, "__version__", "0.0.0-other")
    hashes.append(config_hash(**base))
    assert len(set(hashes)) == len(hashes) and h0 not in hashes


def _commit_two_seeds(out, digest="aaaaaaaaaaaa", exp="variational.zz-hand"):
    """A two-seed run (seeds 7 and 3, in that order) with hand-made per-seed tables, arrays, summaries and notes,
    written and committed through the store API (what ``commit_run`` does)."""
    import pandas as pd

    from ssldyn.contract.result import Result
    from ssldyn.lab.store import RunStore

    store = RunStore(out)
    results = [
        Result(tables={"t": pd.DataFrame({"step": [0, 1], "v": [70.0, 71.0]})}, arrays={"a": np.array([7.0, 7.5])},
               summary={"s": 7.0, "nested": {"x": 70}}, notes=["note of seed 7", "shared note"], seed=7),
        Result(tables={"t": pd.DataFrame({"step": [0, 1, 2], "v": [30.0, 31.0, 32.0]})},
               arrays={"a": np.array([3.0])}, summary={"s": 3.0, "nested": {"x": 30}},
               notes=["shared note", "note of seed 3"], seed=3),
    ]  # fmt: skip
    with store.lock(exp, digest):
        partial = store.new_partial(exp, digest)
        store.write_result(
            partial, {"experiment": exp, "hash": digest, "seeds": [7, 3]}, {"label": "hand"}, results, []
        )
        return store, store.commit(partial, exp, digest)


def test_stored_run_gives_back_each_seeds_own_tables_arrays_summary_and_notes(tmp_path):
    import pandas as pd

    store, run = _commit_two_seeds(tmp_path)
    assert run.seeds == [7, 3]
    # the stacked table on disk: a leading seed column, every seed's rows
    stacked = pd.read_parquet(run.path / "tables" / "t.parquet")
    assert list(stacked.columns) == ["seed", "step", "v"]
    assert stacked["seed"].tolist() == [7, 7, 3, 3, 3] and stacked["v"].tolist() == [70.0, 71.0, 30.0, 31.0, 32.0]
    with np.load(run.path / "arrays.npz") as npz:
        assert sorted(npz.files) == ["seed=3/a", "seed=7/a"]
    assert json.loads((run.path / "summary.json").read_text())["seeds"] == [7, 3]
    r7, r3 = run.result(7), run.result(3)
    assert r7.tables["t"]["v"].tolist() == [70.0, 71.0] and r3.tables["t"]["v"].tolist() == [30.0, 31.0, 32.0]
    assert "seed" not in r3.tables["t"].columns
    np.testing.assert_array_equal(r7.arrays["a"], [7.0, 7.5])
    np.testing.assert_array_equal(r3.arrays["a"], [3.0])
    assert r7.summary == {"s": 7.0, "nested": {"x": 70}} and r3.summary == {"s": 3.0, "nested": {"x": 30}}
    assert run.summary == {"s": 7.0, "nested": {"x": 70}}  # the first seed's, in the run's own order
    assert run.summaries == {7: {"s": 7.0, "nested": {"x": 70}}, 3: {"s": 3.0, "nested": {"x": 30}}}
    assert run.notes == ["note of seed 7", "shared note", "note of seed 3"]
    assert [r.seed for r in run.results()] == [7, 3]
    assert store.get("variational.zz-hand", "aaaaaaaaaaaa").path == run.path


def test_a_run_directory_copied_under_another_hash_is_damaged(tmp_path):
    """config.json names the run's hash: the same files under another hash's name are not that run."""
    import shutil

    store, run = _commit_two_seeds(tmp_path)
    other = run.path.with_name("bbbbbbbbbbbb")
    shutil.copytree(run.path, other)
    assert store.get("variational.zz-hand", "bbbbbbbbbbbb") is None
    assert store.damage("variational.zz-hand", "bbbbbbbbbbbb") == "config.json names another run"
    assert [p.name for p in store.damaged()[0][:1]] == ["bbbbbbbbbbbb"]
    assert [r.path.name for r in store.finished()] == ["aaaaaaaaaaaa"]


# ---------------------------------------------------------------------------------------------- sweep
def test_split_top_level_keeps_brackets_braces_and_quotes_whole():
    from ssldyn.lab.sweep import split_top_level

    assert split_top_level('{"a": 1, "b": 2},[1, 2],3') == ['{"a": 1, "b": 2}', "[1, 2]", "3"]
    assert split_top_level("'a,b',c") == ["'a,b'", "c"]
    assert split_top_level('"x, y", [3, {"k": [4, 5]}]') == ['"x, y"', '[3, {"k": [4, 5]}]']


def test_grid_size_limit_is_the_product_of_the_axes():
    from ssldyn.errors import UserError
    from ssldyn.lab.sweep import MAX_GRID, expand_grid

    assert MAX_GRID == 200
    a = ",".join(str(i) for i in range(10))
    b = ",".join(str(i) for i in range(20))
    grid = expand_grid([f"a={a}", f"b={b}"])  # exactly 200 points: allowed
    assert (
        len(grid) == 200
        and grid[0] == {"a": 0, "b": 0}
        and grid[-1] == {"a": 9, "b": 19}
        and grid[1] == {"a": 0, "b": 1}
    )
    c = ",".join(str(i) for i in range(15))
    with pytest.raises(UserError, match="225 points"):
        expand_grid([f"a={c}", f"b={c}"])  # 15 × 15 = 225 > 200 (30 values in all)
    assert len(expand_grid([f"a={c}", f"b={c}"], limit=None)) == 225


# ---------------------------------------------------------------------------------------------- runner
def test_flat_overrides_keeps_the_full_dotted_path_at_any_depth():
    from ssldyn.lab.runner import flat_overrides

    base = {"a": {"b": {"c": 1, "d": 2}, "e": 3}, "f": 0.5, "g": [1, 2]}
    cfg = {"a": {"b": {"c": 10, "d": 2}, "e": 3}, "f": 0.5 * 1.0, "g": [1, 3]}
    assert flat_overrides(cfg, base) == {"a.b.c": 10, "g": [1, 3]}
    assert flat_overrides(base, base) == {}


def test_canonical_needs_the_default_seeds_and_labels_name_them(toy):
    from ssldyn.lab.runner import plan_run

    default = plan_run(toy.name, quick=True)
    assert default.seeds == (0, 1, 2) and default.canonical and default.describe() == "seeds=0..2"
    for kw in ({"seeds": [5, 6, 7]}, {"seeds": 2}, {"seed": 1}, {"seeds": [2, 1, 0]}):
        spec = plan_run(toy.name, quick=True, **kw)
        assert not spec.canonical and not spec.overrides, kw
    assert plan_run(toy.name, quick=True, seeds=[4, 2]).seeds == (4, 2)
    assert plan_run(toy.name, quick=True, seeds=[4, 2]).describe() == "seeds=4,2"
    assert plan_run(toy.name, quick=True, seed=3, seeds=4).describe() == "seeds=3..6"
    assert plan_run(toy.name, seeds=[9]).describe() == "seed=9"
    v = plan_run(toy.name, quick=True, sets=["optim.lr=0.2", "n=5"])
    assert v.overrides == {"optim.lr": 0.2, "n": 5} and not v.canonical
    assert v.describe() == "n=5, optim.lr=0.2, seeds=0..2"


def test_seed_bounds_are_exact(toy):
    from ssldyn.errors import UserError
    from ssldyn.lab.runner import MAX_SEEDS, plan_run

    assert plan_run(toy.name, quick=True, seed=2**63 - 3, seeds=3).seeds[-1] == 2**63 - 1
    with pytest.raises(UserError, match="passes 2\\^63"):
        plan_run(toy.name, quick=True, seed=2**63 - 2, seeds=3)
    assert len(plan_run(toy.name, quick=True, seeds=MAX_SEEDS).seeds) == MAX_SEEDS == 1000
    with pytest.raises(UserError):
        plan_run(toy.name, quick=True, seeds=MAX_SEEDS + 1)


# ---------------------------------------------------------------------------------------------- results / study
def _claims():
    """Six claims evaluated here from made-up values over seeds 0..4 (statuses written out below)."""
    from ssldyn.contract.claims import ClaimSpec, Measured, evaluate, gt, pooled

    seeds = [0, 1, 2, 3, 4]

    def spec(id, kind="paper", **kw):
        return ClaimSpec(id, "s", "Fig. 3", kind, "r", gt(0.5), "relation: r", **kw)

    claims = [
        evaluate(spec("four-of-five"), None, seeds, [0.8, 0.85, 0.9, 0.95, 0.45]),
        evaluate(spec("inc1"), None, seeds, [0.3, 0.7, 0.55, 0.45, 0.6]),
        evaluate(spec("nr"), None, seeds, [Measured(None, not_run="no data")] * 5),
        evaluate(spec("ok", kind="sanity"), None, seeds, [1.0] * 5),
        evaluate(spec("pool", rule=pooled("one pooled fit"), control="at init"), None, seeds, [0.9]),
        evaluate(spec("pool-fail", rule=pooled("one pooled fit")), None, seeds, [0.1]),
    ]
    assert [c.status for c in claims] == ["pass", "inconclusive", "not-run", "pass", "inconclusive", "fail"]
    return claims


def _record(tmp_path, digest, overrides, seeds=(0, 1), *, exp="variational.zz-x", config=None, claims=(),
            preset="quick", canonical=False, label=None):  # fmt: skip
    from ssldyn.lab.results import RunRecord

    cfg = {"lr": 0.2, "n": 8, "label": "cfg-label", **(config or {}), **overrides}
    return RunRecord(tmp_path / exp / digest, exp, {"experiment": exp, "hash": digest, "seeds": list(seeds), "config": cfg},
                     {"label": label or digest, "preset": preset, "canonical": canonical, "overrides": dict(overrides)},
                     list(claims), {}, [], [])  # fmt: skip


def test_claims_frame_keeps_a_pooled_claims_own_relation_verdict(tmp_path):
    """A pooled claim is one row (seed missing); seed_passed is whether its relation held on the pooled value, which
    is not the claim's verdict when a declared control was not measured (inconclusive)."""
    from ssldyn.lab.results import Results

    res = Results(tmp_path, [_record(tmp_path, "h1", {}, seeds=range(5), claims=_claims())])
    frame = res.claims.set_index("claim")
    assert frame.loc["pool", "seed"] is pd_na() and frame.loc["pool", "value"] == 0.9
    assert bool(frame.loc["pool", "seed_passed"]) is True and bool(frame.loc["pool", "passed"]) is False
    assert bool(frame.loc["pool-fail", "seed_passed"]) is False
    four = res.claims[res.claims["claim"] == "four-of-five"]
    assert four["value"].tolist() == [0.8, 0.85, 0.9, 0.95, 0.45] and four["seed"].tolist() == [0, 1, 2, 3, 4]
    c = _claims()[0]
    row = four.iloc[0]
    assert (row["lo"], row["hi"]) == c.interval and row["lo"] < row["estimate"] < row["hi"]


def pd_na():
    import pandas as pd

    return pd.NA


def test_a_config_key_named_like_a_run_column_gets_its_own_column(tmp_path):
    """Overriding a config key called ``label`` must not overwrite the run's label column."""
    from ssldyn.lab.results import Results

    res = Results(tmp_path, [_record(tmp_path, "h1", {"label": "mine"}, label="label=mine, seeds=0..1")])
    row = res.runs.iloc[0]
    assert row["label"] == "label=mine, seeds=0..1" and row["config.label"] == "mine"
    assert res.summaries.columns.tolist()[:6] == ["experiment", "hash", "label", "preset", "canonical", "config.label"]


def test_selects_matches_whole_names_or_papers_not_prefixes():
    from ssldyn.lab.study import selects

    assert selects(None, "variational.fig5")
    assert selects(["variational.fig5"], "variational.fig5") and selects(["variational"], "variational.fig5")
    assert not selects(["variational.fig5"], "variational.fig50")
    assert not selects(["var"], "variational.fig5") and not selects(["variational.fig"], "variational.fig5")


def test_load_and_select_keep_only_the_chosen_experiments_failures_and_damage(toy, toy_sweep, tmp_path):
    from ssldyn.lab import run_experiment
    from ssldyn.lab.store import RunStore
    from ssldyn.results import load

    a = run_experiment(toy.name, quick=True, out=tmp_path, seeds=1).run
    run_experiment(toy_sweep.name, quick=True, out=tmp_path, seeds=1)
    (a.path / "summary.json").write_text("{}")  # the toy's run is now damaged
    store = RunStore(tmp_path)
    store.record_failure(toy.name, "f" * 12, "RuntimeError: toy")
    store.record_failure(toy_sweep.name, "e" * 12, "RuntimeError: sweep")
    every = load(tmp_path)
    assert sorted(every.failures["hash"]) == ["e" * 12, "f" * 12] and len(every.damaged) == 1
    sweep_only = load(tmp_path, toy_sweep.name)
    assert sweep_only.failures["hash"].tolist() == ["e" * 12] and sweep_only.damaged.empty
    assert every.select(toy_sweep.name).failures["error"].tolist() == ["RuntimeError: sweep"]
    assert load(tmp_path, toy.name).damaged["path"].tolist() == [str(a.path)]


def test_infer_studies_groups_by_seeds_joins_the_default_run_and_keeps_the_newest_point(tmp_path):
    from ssldyn.lab.study import Study, infer_studies

    recs = [  # newest first
        _record(tmp_path, "h1", {"lr": 0.1}),
        _record(tmp_path, "h2", {"lr": 0.3}),
        _record(tmp_path, "h3", {"lr": 0.1}),  # an older run of the point lr = 0.1
        _record(tmp_path, "h4", {"lr": 0.2}, seeds=(0, 1, 2)),  # other seeds: another group (alone: no grid)
        _record(tmp_path, "h5", {}, canonical=True),  # the default run (lr = 0.2) with seeds 0, 1
    ]
    (st,) = infer_studies(recs)
    assert st.source == "variants" and st.keys == ["lr"] and st.seeds == [0, 1] and st.base == {}
    assert st.axes[0].values == (0.1, 0.2, 0.3)
    assert [(p["values"], p["hash"]) for p in st.points] == [
        ({"lr": 0.1}, "h1"),
        ({"lr": 0.2}, "h5"),
        ({"lr": 0.3}, "h2"),
    ]
    assert infer_studies(recs, [Study("s", st.experiment, st.axes, st.points)]) == []  # already a stored study


def test_a_sweep_with_other_seeds_is_another_study(toy_sweep, tmp_path):
    from ssldyn.lab.runner import plan_run
    from ssldyn.lab.study import read_studies, record_study

    def specs(seeds, extra=None):
        return [plan_run(toy_sweep.name, quick=True, sets={"lr": lr, "n": 5, **(extra or {}).get(lr, {})}, seeds=seeds)
                for lr in (0.1, 0.3)]  # fmt: skip

    s1 = record_study(tmp_path, specs([0, 1], {0.1: {"steps": 3}}), ["lr"])  # steps: one point only
    s2 = record_study(tmp_path, specs([2, 3]), ["lr"])
    assert s1.id != s2.id and s1.path != s2.path and s1.path.is_file() and s2.path.is_file()
    assert s1.base == {"n": 5} and [p["values"] for p in s1.points] == [{"lr": 0.1}, {"lr": 0.3}]
    assert s2.seeds == [2, 3] and s1.seeds == [0, 1]
    import os

    os.utime(s1.path, (1_000_000_000, 1_000_000_000))
    os.utime(s2.path, (2_000_000_000, 2_000_000_000))
    found, bad = read_studies(tmp_path)
    assert [s.id for s in found] == [s2.id, s1.id] and bad == []  # newest first


def test_runs_index_counts_claims_and_keeps_errors_seeds_and_damage(tmp_path):
    import pandas as pd

    from ssldyn.lab.results import Results
    from ssldyn.lab.study import write_index

    exp = "variational.zz-x"
    (tmp_path / exp / "studies").mkdir(parents=True)
    rec = _record(tmp_path, "h1", {}, seeds=(0, 1, 2, 3, 4), claims=_claims())
    res = Results(tmp_path, [rec],
                  damaged_list=[(str(tmp_path / exp / "studies" / "s.json"), "ValueError: bad study"),
                                (str(tmp_path / exp / "dddddddddddd"), "damaged: missing summary.json")],
                  failure_list=[{"experiment": exp, "hash": "ffffffffffff", "error": "RuntimeError: boom at x.py:3"}])  # fmt: skip
    (path,) = write_index(tmp_path, res)
    rows = pd.read_csv(path, dtype=str, keep_default_na=False)
    assert rows["hash"].tolist() == ["h1", "ffffffffffff", "dddddddddddd"]
    assert rows["status"].tolist() == ["done", "failed", "damaged"]
    done = rows.iloc[0]
    assert done["seeds"] == "0 1 2 3 4" and done["claims_passed"] == "2/6"  # four-of-five and ok pass, of 6
    assert rows.iloc[1]["error"] == "RuntimeError: boom at x.py:3"
    assert rows.iloc[2]["error"] == "damaged: missing summary.json"


def test_a_manifest_edited_to_match_an_edited_file_is_caught_by_done(tmp_path):
    """DONE holds the SHA-256 of MANIFEST.json: editing a file and its manifest entry together is still damage."""
    import hashlib

    store, run = _commit_two_seeds(tmp_path)
    summary = run.path / "summary.json"
    summary.write_text(summary.read_text().replace("7.0", "8.0"))
    man = json.loads((run.path / "MANIFEST.json").read_text())
    man["summary.json"] = hashlib.sha256(summary.read_bytes()).hexdigest()
    (run.path / "MANIFEST.json").write_text(json.dumps(man, indent=2, sort_keys=True))
    assert store.damage("variational.zz-hand", "aaaaaaaaaaaa") == "MANIFEST.json does not match DONE"
    assert store.get("variational.zz-hand", "aaaaaaaaaaaa") is None and store.finished() == []


# ---------------------------------------------------------------------------------------------- report
@pytest.fixture
def toy_fail():
    """The toy sweep with lr = 0.01 by default: its paper-default run fails rms-small (0.99^10 rms(x_0) ≈ 0.9)."""
    from pydantic import Field, PositiveFloat

    from ssldyn.contract import experiment as contract
    from ssldyn.lab import registry
    from tests.lab.toy import SweepConfig, ToySweep

    class FailConfig(SweepConfig):
        lr: PositiveFloat = Field(0.01, description="step size")

    class ToySweepFail(ToySweep):
        name = "variational.zz-sweepfail"
        Config = FailConfig

    registry.load_all()
    contract.register(ToySweepFail)
    yield ToySweepFail
    contract._REGISTRY.pop(ToySweepFail.name, None)


def _article(html, name):
    import re

    return re.search(rf"<article id='{re.escape(name)}'>(.*?)</article>", html, flags=re.S).group(1)


def test_report_headline_side_by_side_and_per_seed_marks(toy_sweep, toy_fail, tmp_path):
    import re
    from html import escape

    from ssldyn.lab import run_experiment
    from ssldyn.lab.report import build_report

    paper = run_experiment(toy_sweep.name, out=tmp_path).run  # canonical, paper scale, seeds 0..4: passes
    quick = run_experiment(toy_sweep.name, out=tmp_path, quick=True).run  # canonical, quick scale, seeds 0..2
    failing = run_experiment(toy_fail.name, out=tmp_path).run  # canonical, paper scale: fails
    by_id = {r.path: {c.id: c for c in r.claims} for r in (paper, quick, failing)}
    assert by_id[paper.path]["rms-small"].status == "pass" and by_id[failing.path]["rms-small"].status == "fail"
    html = build_report(tmp_path).read_text()
    headline = re.search(r"<p id='headline'>(.*?) · built", html).group(1)
    assert headline.startswith(
        "1/2 paper and consequence claims pass · 1 fail (paper-default configurations at paper scale;"
    )
    assert " · variational 1/2 · 2 experiments · " in headline
    # the paper-scale run is the headline of its article, named as such, with every seed
    art = _article(html, toy_sweep.name)
    assert "Headline and badge: the paper-default run at paper scale" in art
    assert "seeds 0, 1, 2, 3, 4 · device cpu" in art and "seeds 0, 1, 2 · device cpu" in art
    # side by side: the paper-scale measurement in the first column, the quick one in the second
    row = re.search(r"<tr><td><code>rms-small</code>.*?</tr>", art.split("side by side")[1], flags=re.S).group(0)
    cells = re.findall(r"<td>(.*?)</td>", row)
    assert escape(by_id[paper.path]["rms-small"].measured_text()) in cells[1]
    assert escape(by_id[quick.path]["rms-small"].measured_text()) in cells[2]
    # per seed: every seed of the failing run is marked, none of the passing one's
    c = by_id[failing.path]["rms-small"]
    marks = ", ".join(f"{s}: {escape(str(v))} ✗" for s, v in zip(c.seeds, c.values))
    assert f"<b>per seed:</b> {marks}" in _article(html, toy_fail.name)
    c = by_id[paper.path]["rms-small"]
    plain = ", ".join(f"{s}: {escape(str(v))}" for s, v in zip(c.seeds, c.values))
    assert f"<b>per seed:</b> {plain}<" in art


def test_report_without_a_default_run_shows_the_newest_intact_run_and_lists_the_damaged_one(toy, tmp_path):
    from ssldyn.lab import run_experiment
    from ssldyn.lab.report import build_report

    runs = [run_experiment(toy.name, out=tmp_path, sets={"n": n}, seeds=1).run for n in (5, 6, 7)]
    (runs[2].path / "claims.json").write_text("[]")  # the newest run is damaged
    html = build_report(tmp_path).read_text()
    art = _article(html, toy.name)
    assert "the newest run is shown: n=6, seed=0 (paper)" in art
    assert f"run directory {runs[1].path.name}" in art.split("Other runs")[0]
    assert "n=5, seed=0 (paper)" in art.split("Other runs")[1] and "n=7" not in art
    damaged = html.split("<h2>Damaged runs</h2>")[1]
    assert f"<code>{runs[2].path}</code></td><td>damaged: claims.json does not match its checksum" in damaged


# ---------------------------------------------------------------------------------------------- executors
def test_a_failed_run_keeps_its_error_line_and_a_repeated_spec_is_computed_once(toy, tmp_path):
    from ssldyn.lab.executors import execute
    from ssldyn.lab.runner import plan_run
    from tests.lab.toy import CALLS

    bad = plan_run(toy.name, quick=True, sets={"fail": True})
    good = plan_run(toy.name, quick=True)
    items = execute([bad, good, good], tmp_path)
    assert [it.status for it in items] == ["failed", "done", "cached"]
    assert items[2].run.path == items[1].run.path and CALLS["run"] == 1 + 3  # the failing seed, then 3 seeds once
    assert items[0].error.startswith("RuntimeError: toy failure at toy.py:")
    (mark,) = (tmp_path / toy.name).glob("*.failed.json")
    rec = json.loads(mark.read_text())
    assert mark.name == f"{bad.digest}.failed.json" and rec["error"] == items[0].error and rec["config"]["fail"] is True


def test_force_recomputes_and_replaces_the_stored_run(toy, tmp_path):
    from ssldyn.lab.executors import execute
    from ssldyn.lab.runner import plan_run
    from tests.lab.toy import CALLS

    spec = plan_run(toy.name, quick=True)
    (first,) = execute([spec], tmp_path)
    stamp = (
        json.loads((first.run.path / "meta.json").read_text())["started"],
        (first.run.path / "DONE").stat().st_mtime_ns,
    )
    (again,) = execute([spec], tmp_path)
    assert again.status == "cached" and CALLS["run"] == 3
    (forced,) = execute([spec], tmp_path, force=True)
    assert forced.status == "done" and CALLS["run"] == 6
    assert (forced.run.path / "DONE").stat().st_mtime_ns != stamp[1]
    assert not [p for p in (tmp_path / toy.name).iterdir() if p.name.startswith(".")]


# ---------------------------------------------------------------------------------------------- manifest
def test_live_registrations_take_precedence_over_the_committed_manifest(monkeypatch):
    """A shipped experiment edited in this process (its class is registered live) is shown as it is now, not as
    the committed manifest (possibly stale) has it."""
    from ssldyn.lab import manifest, registry

    registry.load_all()
    name = "variational.fig5"
    committed = manifest._committed()
    assert committed is not None and any(e["name"] == name for e in committed["experiments"])
    stale = json.loads(json.dumps(committed))
    for e in stale["experiments"]:
        if e["name"] == name:
            e["description"] = "a stale description"
    monkeypatch.setattr(manifest, "_committed", lambda: stale)
    live = registry.get_experiment(name)
    assert manifest.find(name)["description"] == live.description != "a stale description"


# ---------------------------------------------------------------------------------------------- source bug
def test_an_explicit_seed_list_of_non_integers_is_refused(toy):
    from ssldyn.errors import UserError
    from ssldyn.lab.runner import plan_run

    for seeds in ([1.5, 2.7], [True, 2], [0, 2.0000001]):
        with pytest.raises(UserError, match="expected"):
            plan_run(toy.name, quick=True, seeds=seeds)
    assert plan_run(toy.name, quick=True, seeds=[np.int64(4), 2]).seeds == (4, 2)  # numpy integers are integers


def test_a_replacement_that_dies_before_its_second_rename_keeps_the_old_run(tmp_path, monkeypatch):
    """--force moves the old run aside (a rename), then the new one in: dying in between must not lose the old run
    (the next access puts it back)."""
    import os
    from pathlib import Path

    from ssldyn.lab.store import RunStore

    store, run = _commit_two_seeds(tmp_path)
    before = run.summaries
    real = os.replace

    def dying(src, dst, *a, **kw):
        if ".partial-" in Path(src).name:
            raise KeyboardInterrupt  # the process is stopped between the two renames
        return real(src, dst, *a, **kw)

    monkeypatch.setattr(os, "replace", dying)
    with pytest.raises(KeyboardInterrupt):
        _commit_two_seeds(tmp_path)  # the same run again, as --force does
    monkeypatch.undo()
    again = RunStore(tmp_path).get("variational.zz-hand", "aaaaaaaaaaaa")
    assert again is not None and again.summaries == before == {
        7: {"s": 7.0, "nested": {"x": 70}},
        3: {"s": 3.0, "nested": {"x": 30}},
    }


def test_force_with_parallel_jobs_recomputes_and_commits_new_runs(tmp_path):
    """--jobs 2 --force: every run is computed again and its new directory replaces the stored one (neither the
    claim step nor the commit may keep the old run)."""
    from ssldyn.lab.executors import execute
    from ssldyn.lab.runner import plan_run

    specs = [plan_run(name, quick=True, seeds=1) for name in ("variational.ill-posed", "grassmann.fig5")]
    first = execute(specs, tmp_path, jobs=2)
    assert [it.status for it in first] == ["done", "done"]
    stamps = [(it.run.path / "DONE").stat().st_mtime_ns for it in first]
    started = [json.loads((it.run.path / "meta.json").read_text())["started"] for it in first]
    assert [it.status for it in execute(specs, tmp_path, jobs=2)] == ["cached", "cached"]
    forced = execute(specs, tmp_path, jobs=2, force=True)
    assert [it.status for it in forced] == ["done", "done"]
    assert [it.run.path for it in forced] == [it.run.path for it in first]
    assert all((it.run.path / "DONE").stat().st_mtime_ns != s for it, s in zip(forced, stamps)), started


def test_the_papers_own_seed_count_applies_at_paper_scale_only():
    from types import SimpleNamespace

    from ssldyn.lab.runner import default_seeds

    exp = SimpleNamespace(seeded=True, paper_seeds=10)
    assert default_seeds(exp, "paper") == tuple(range(10))
    assert default_seeds(exp, "quick") == (0, 1, 2)
    assert default_seeds(exp, "quick", seed=4, n=2) == (4, 5) and default_seeds(exp, "paper", n=2) == (0, 1)
    assert default_seeds(SimpleNamespace(seeded=True, paper_seeds=None), "paper", seed=1) == (1, 2, 3, 4, 5)
    assert default_seeds(SimpleNamespace(seeded=False, paper_seeds=10), "paper", seed=6) == (6,)


def test_a_one_seed_run_of_the_earlier_layout_keeps_its_seed_summary_and_notes(tmp_path):
    from ssldyn.lab.store import StoredRun

    d = tmp_path / "variational.zz-old" / "cccccccccccc"
    d.mkdir(parents=True)
    (d / "config.json").write_text(json.dumps({"experiment": "variational.zz-old", "hash": d.name, "seed": 4}))
    (d / "summary.json").write_text(json.dumps({"final": 0.5, "__notes__": ["an old note"]}))
    run = StoredRun(d)
    assert run.seeds == [4] and run.summaries == {4: {"final": 0.5}} and run.summary == {"final": 0.5}
    assert run.notes == ["an old note"]


def test_a_sweep_key_given_twice_is_refused():
    from ssldyn.errors import UserError
    from ssldyn.lab.sweep import expand_grid

    with pytest.raises(UserError, match="given twice"):
        expand_grid(["lr=0.1", "lr=0.2"])
    assert expand_grid(["lr=0.1,0.1,0.2"]) == [{"lr": 0.1}, {"lr": 0.2}]  # a repeated value is one point


def test_set_overrides_the_config_file_which_overrides_the_quick_preset(toy, tmp_path):
    from ssldyn.lab.runner import resolve_config

    f = tmp_path / "c.yaml"
    f.write_text("n: 5\ntau: 0.25\n")
    cfg = resolve_config(toy, quick=True, config_file=f, sets=["n=6"])
    assert (cfg.n, cfg.tau, cfg.optim.lr) == (6, 0.25, 0.1)
    assert resolve_config(toy, quick=True, config_file=f).n == 5 and resolve_config(toy, quick=True).n == 4


def test_a_successful_run_removes_the_failure_mark_of_the_same_run(toy, tmp_path):
    from ssldyn.lab.executors import execute
    from ssldyn.lab.runner import plan_run
    from ssldyn.lab.store import RunStore

    spec = plan_run(toy.name, quick=True)
    store = RunStore(tmp_path)
    assert store.record_failure(toy.name, spec.digest, "RuntimeError: an earlier failure")
    assert [f["hash"] for f in store.failures()] == [spec.digest]
    (item,) = execute([spec], tmp_path)
    assert item.status == "done" and store.failures() == []
    assert not store.failure_path(toy.name, spec.digest).exists()


def test_select_by_hashes_and_by_empty_overrides_keeps_exactly_those_runs_and_their_studies(tmp_path):
    from ssldyn.lab.results import Results
    from ssldyn.lab.study import Axis, Study

    recs = [_record(tmp_path, "h1", {"lr": 0.1}), _record(tmp_path, "h2", {"lr": 0.3}),
            _record(tmp_path, "h3", {}, canonical=True)]  # fmt: skip
    st = Study(
        "s1",
        "variational.zz-x",
        [Axis("lr", (0.1, 0.3))],
        [{"values": {"lr": 0.1}, "hash": "h1", "label": ""}, {"values": {"lr": 0.3}, "hash": "h2", "label": ""}],
    )
    res = Results(tmp_path, recs, studies=[st])
    two = res.select(hashes=["h2", "h3"])
    assert [r.hash for r in two.records] == ["h2", "h3"] and [s.id for s in two.studies] == ["s1"]
    assert [r.hash for r in res.select(hashes=["h3"]).records] == ["h3"] and res.select(hashes=["h3"]).studies == []
    assert [r.hash for r in res.select(overrides={}).records] == ["h3"]
    assert [r.hash for r in res.select(lr=0.3, n=8).records] == ["h2"] and len(res.select(lr=0.3, n=9)) == 0
    assert two.runs.columns.tolist()[5] == "lr"  # a selection keeps the override columns of what it came from


def test_key_columns_does_not_depend_on_the_hash_seed():
    """Two numeric columns that name the same curves equally well (lr and width, two values each): which one is
    the key must not change from one process to the next (TensorBoard tags are built from it)."""
    import os
    import subprocess
    import sys

    code = ("import pandas as pd; from ssldyn.lab.results import key_columns; "
            "f = pd.DataFrame({'probe': 'loss', 'lr': [0.5, 0.5, 0.1, 0.1], 'width': [10, 10, 100, 100], "
            "'step': [0, 1, 0, 1], 'value': [1.0, 0.5, 1.0, 0.9]}); print(key_columns(f, within=('probe',)))")  # fmt: skip
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    outs = {subprocess.run([sys.executable, "-c", code], env={**env, "PYTHONHASHSEED": str(s)}, capture_output=True,
                           text=True, check=True).stdout.strip() for s in (0, 2)}  # fmt: skip
    assert outs == {"['lr']"}, outs  # the earlier of the two tied columns is the key


def test_local_runs_share_sub_results_through_the_store_cache(tmp_path):
    """A run computed by the local executor gets ``<out>/.cache`` as ``ctx.cache``: the second seed (and any later
    run) reads the entry the first seed wrote."""
    from ssldyn.contract import experiment as contract
    from ssldyn.lab import registry
    from ssldyn.lab.executors import execute
    from ssldyn.lab.runner import plan_run
    from tests.lab.toy import Toy

    computed = []

    class ToyCached(Toy):
        name = "variational.zz-cached"

        def run(self, cfg, ctx):
            def compute():
                computed.append(ctx.seed)
                return {"grid": np.arange(cfg.n)}

            np.testing.assert_array_equal(ctx.cached({"n": cfg.n}, compute)["grid"], np.arange(cfg.n))
            return super().run(cfg, ctx)

    registry.load_all()
    contract.register(ToyCached)
    try:
        (item,) = execute([plan_run(ToyCached.name, quick=True)], tmp_path)
    finally:
        contract._REGISTRY.pop(ToyCached.name, None)
    assert item.status == "done" and computed == [0]  # seeds 0, 1, 2: computed once
    assert len(list((tmp_path / ".cache").rglob("*.entry"))) == 1


def test_natural_order_puts_fig4_before_fig10():
    import re

    from ssldyn.lab import manifest

    names = [
        e["name"] for e in manifest.experiments("nonlinearity") if re.fullmatch(r"nonlinearity\.fig\d+", e["name"])
    ]
    assert names == [f"nonlinearity.fig{i}" for i in (1, 4, 5, 8, 10, 11, 12, 13)]
    assert {e["paper"] for e in manifest.experiments("nonlinearity")} == {"nonlinearity"}
    assert {e["paper"] for e in manifest.experiments()} == {"grassmann", "nonlinearity", "variational"}


def test_a_damaged_run_is_recomputed_and_the_outcome_says_where_the_old_copy_went(toy, tmp_path):
    from ssldyn.lab.executors import execute
    from ssldyn.lab.runner import plan_run

    spec = plan_run(toy.name, quick=True)
    (first,) = execute([spec], tmp_path)
    (first.run.path / "meta.json").write_text("{}")
    (again,) = execute([spec], tmp_path)
    (aside,) = (tmp_path / toy.name).glob(f".damaged-{spec.digest}-*")
    assert again.status == "done" and again.run.path == first.run.path
    assert again.note == (f"damaged run {first.run.path} (meta.json does not match its checksum); old copy kept at "
                          f"{aside.name}, recomputed")  # fmt: skip
    assert json.loads((aside / "meta.json").read_text()) == {}


def test_report_run_block_shows_the_run_time_of_the_computation(tmp_path):
    """The run block's time is meta.json's run_seconds (the seeds' computation), not total_seconds."""
    import pandas as pd

    from ssldyn.contract.result import Result
    from ssldyn.lab.report import build_report
    from ssldyn.lab.store import RunStore

    store, exp, digest = RunStore(tmp_path), "variational.zz-hand", "dddddddddddd"
    meta = {"preset": "quick", "canonical": False, "label": "hand", "run_seconds": 12.34, "total_seconds": 56.78,
            "started": "2026-01-01T00:00:00+00:00"}  # fmt: skip
    with store.lock(exp, digest):
        partial = store.new_partial(exp, digest)
        res = Result(tables={"t": pd.DataFrame({"v": [1.0]})}, summary={"s": 1.0}, seed=7)
        store.write_result(partial, {"experiment": exp, "hash": digest, "seeds": [7], "device": "cpu"}, meta, [res], [])
        store.commit(partial, exp, digest)
    html = build_report(tmp_path).read_text()
    assert "seeds 7 · device cpu · run time 12.3 s · started 2026-01-01T00:00:00+00:00" in html


def test_report_per_seed_line_says_not_run_for_a_seed_without_a_measurement():
    """A seed whose measurement could not be made has no value: "not run", not Python's None marked as failing."""
    from ssldyn.contract.claims import ClaimSpec, Measured, evaluate, gt
    from ssldyn.lab.report import _claim_row

    spec = ClaimSpec("c", "s", "Fig. 3", "paper", "r", gt(0.5), "relation: r")
    c = evaluate(spec, None, [0, 1, 2], [0.8, Measured(None, not_run="no data"), 0.3])
    assert list(c.values) == [0.8, None, 0.3]
    row = _claim_row(c)
    assert "<b>per seed:</b> 0: 0.8, 1: not run, 2: 0.3 ✗" in row and "None" not in row
    every = evaluate(spec, None, [0, 1], [Measured(None, not_run="no data")] * 2)
    assert every.status == "not-run" and "0: not run, 1: not run" in _claim_row(every)
