"""``ssldyn.results.load``: finished runs as DataFrames, checked against the stored files and closed forms.

The toy sweep experiment runs gradient descent on 0.5‖x‖² from x_0 ~ N(0, I_n) drawn with a
CPU generator seeded by the run seed, so every number has an independent reference:
‖x_t‖ = (1 − lr)^t ‖x_0‖ with x_0 re-drawn here.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from ssldyn.errors import UserError
from ssldyn.lab import run_experiment
from ssldyn.results import load

ROOT = Path(__file__).resolve().parents[2]


def x0_norm(seed: int, n: int) -> float:
    """‖x_0‖ of the toy's start, drawn again (the toy draws it from ``ctx.generator()``: stream 0 of the seed, seeded
    with the first 64-bit word of NumPy's ``SeedSequence(seed, spawn_key=(0,))`` halved)."""
    g = torch.Generator().manual_seed(
        int(np.random.SeedSequence(seed, spawn_key=(0,)).generate_state(1, np.uint64)[0]) // 2
    )
    return float(torch.randn(n, generator=g, dtype=torch.float64).norm())


@pytest.fixture
def store(toy_sweep, tmp_path):
    """A canonical quick run (seeds 0..2) and a variant lr = 0.01 with seeds 3, 4."""
    run_experiment(toy_sweep.name, quick=True, out=tmp_path)
    run_experiment(toy_sweep.name, quick=True, out=tmp_path, sets={"lr": 0.01}, seeds=[3, 4])
    return tmp_path


def test_runs_frame_matches_meta_and_config_files(store, toy_sweep):
    res = load(store)
    runs = res.runs
    assert len(runs) == 2 and res.damaged.empty
    for _, row in runs.iterrows():
        d = store / row["experiment"] / row["hash"]
        meta = json.loads((d / "meta.json").read_text())
        cfg = json.loads((d / "config.json").read_text())
        assert row["label"] == meta["label"] and row["preset"] == meta["preset"] == "quick"
        assert row["canonical"] == meta["canonical"] and row["overrides"] == meta["overrides"]
        assert list(row["seeds"]) == cfg["seeds"] and row["lr"] == cfg["config"]["lr"]  # the overridden key's value
        claims = json.loads((d / "claims.json").read_text())
        assert row["claims_passed"] == sum(c["passed"] for c in claims) and row["claims_total"] == len(claims)
    variant = runs[runs["canonical"] == False].iloc[0]  # noqa: E712
    assert variant["label"] == "lr=0.01, seeds=3..4" and variant["lr"] == 0.01
    assert runs[runs["canonical"]].iloc[0]["lr"] == 0.2  # the preset value where not overridden


def test_claims_one_row_per_claim_per_seed_with_closed_form_values(store, toy_sweep):
    claims = load(store).claims
    assert len(claims) == 2 * 3 + 2 * 2  # two claims × (3 + 2) seeds
    n, steps = 8, 10
    for lr, seeds in ((0.2, [0, 1, 2]), (0.01, [3, 4])):
        rows = claims[(claims["lr"] == lr) & (claims["claim"] == "rms-small")].sort_values("seed")
        assert rows["seed"].tolist() == seeds
        expected = [(1 - lr) ** steps * x0_norm(s, n) / np.sqrt(n) for s in seeds]
        np.testing.assert_allclose(rows["value"], expected, rtol=1e-5)  # stored to 6 significant digits
        assert rows["seed_passed"].tolist() == [e < 0.5 for e in expected]
        # the claim's statistic is the mean of the per-seed values, its interval the Student-t one
        from scipy import stats

        m, se = np.mean(expected), stats.sem(expected)
        half = stats.t.ppf(0.975, len(seeds) - 1) * se
        np.testing.assert_allclose(rows["estimate"].unique(), [m], rtol=1e-5)
        np.testing.assert_allclose([rows["lo"].iloc[0], rows["hi"].iloc[0]], [m - half, m + half], rtol=1e-4)
    fail = claims[(claims["lr"] == 0.01) & (claims["claim"] == "rms-small")]
    # two seeds: fail when the closed form's interval lies above 0.5, inconclusive when it contains 0.5
    v = [0.99**steps * x0_norm(s, n) / np.sqrt(n) for s in (3, 4)]
    from scipy import stats

    lo, hi = stats.t.interval(0.95, 1, loc=np.mean(v), scale=stats.sem(v))
    assert not fail["passed"].any() and set(fail["status"]) == {"inconclusive" if lo < 0.5 < hi else "fail"}
    ok = claims[claims["claim"] == "ratio-exact"]
    assert ok["passed"].all() and ok["kind"].eq("sanity").all()


def test_summaries_and_trajectories_follow_the_closed_form(store, toy_sweep):
    res = load(store, toy_sweep.name)
    summ = res.summaries
    n = 8
    for seed in (3, 4):
        row = summ[(summ["lr"] == 0.01) & (summ["seed"] == seed)].set_index("name")
        assert row.loc["rms0", "value"] == pytest.approx(x0_norm(seed, n) / np.sqrt(n), rel=1e-12)
        assert row.loc["rms", "value"] == pytest.approx(0.99**10 * x0_norm(seed, n) / np.sqrt(n), rel=1e-12)
        assert np.isnan(row.loc["kind", "value"]) and row.loc["kind", "raw"] == "toy"  # text keeps its raw value
    traj = res.trajectories
    assert set(traj["probe"]) == {"norm"} and set(traj["table"]) == {"metrics"}
    for lr, seed in ((0.2, 1), (0.01, 4)):
        t = traj[(traj["lr"] == lr) & (traj["seed"] == seed)].sort_values("step")
        assert t["step"].tolist() == list(range(11))
        np.testing.assert_allclose(t["value"], [(1 - lr) ** k * x0_norm(seed, n) for k in range(11)], rtol=1e-12)


def test_select_by_experiment_preset_overrides_and_config(store, toy_sweep, toy):
    run_experiment(toy.name, out=store, sets=["optim.lr=0.3"])  # another experiment, a nested override
    res = load(store)
    assert len(res) == 3
    assert set(res.select(toy_sweep.name).runs["hash"]) == set(res.runs[res.runs["experiment"] == toy_sweep.name].hash)
    assert len(res.select("variational")) == 3  # a paper name selects all its experiments
    assert res.select(lr=0.01).runs["label"].tolist() == ["lr=0.01, seeds=3..4"]
    assert res.select(toy_sweep.name, lr=0.2).runs["canonical"].tolist() == [True]  # the preset value matches
    assert res.select(overrides={}).runs["experiment"].tolist() == [toy_sweep.name]
    assert len(res.select(optim__lr=0.3)) == 1 and len(res.select(config={"optim.lr": 0.3})) == 1
    assert len(res.select(canonical=False)) == 2 and len(res.select(preset="paper")) == 1
    assert "optim.lr" in res.runs.columns  # one column per overridden key
    with pytest.raises(UserError, match=r"^select: unknown experiment 'nothing'"):  # a typo is never "no runs"
        res.select("nothing")
    none = res.select(toy_sweep.name, preset="quick", lr=0.2, n=3)  # valid filters that match no run: empty
    assert none.runs.empty and list(none.claims.columns) == list(res.claims.columns)
    assert "lr" in res.select(toy_sweep.name, overrides={}).claims.columns  # a selection keeps the key columns


def test_a_damaged_run_is_listed_never_raised(store, toy_sweep):
    res = load(store)
    bad, good = res.runs["path"].tolist()
    (Path(bad) / "claims.json").write_text("{not json")
    res = load(store)
    assert res.runs["path"].tolist() == [good]
    assert res.damaged["path"].tolist() == [bad] and "claims.json" in res.damaged["error"][0]
    (Path(good) / "tables" / "metrics.parquet").write_bytes(b"PAR1 broken")  # caught by the run's checksums
    res = load(store)
    assert res.runs.empty and res.trajectories.empty
    assert sorted(res.damaged["path"].tolist()) == sorted([bad, good])
    assert load(store, experiment="variational.fig3").damaged.empty  # listed under its own experiment only


def test_empty_directory_loads_empty_and_a_missing_one_or_unknown_experiment_is_one_error(tmp_path):
    """An empty store is empty results; a folder that does not exist (a typo in the path) or an experiment name that
    is neither registered nor stored is one UserError naming it, never a silently empty result."""
    from ssldyn.errors import UserError

    (tmp_path / "empty").mkdir()
    res = load(tmp_path / "empty")
    assert len(res) == 0 and res.runs.empty and res.claims.empty and res.trajectories.empty and res.damaged.empty
    with pytest.raises(UserError, match=r"load: run store .*missing.* does not exist"):
        load(tmp_path / "missing")
    (tmp_path / "afile").write_text("x")
    with pytest.raises(UserError, match="is not a directory"):
        load(tmp_path / "afile")
    with pytest.raises(UserError, match=r"load: unknown experiment 'variational.fig55'; did you mean"):
        load(tmp_path / "empty", experiment="variational.fig55")
    assert len(load(tmp_path / "empty", experiment="variational")) == 0  # a paper: known, just no runs yet


def test_select_by_study_keeps_that_sweeps_runs_only(store, toy_sweep, capsys):
    """``select(study=...)`` (the Study or its id) keeps exactly the study's runs; an unknown id is one error."""
    from ssldyn.errors import UserError
    from tests.markdown_examples import run_cli

    code, out = run_cli(["run", toy_sweep.name, "--quick", "--sweep", "lr=0.05,0.1", "--out", str(store)], capsys)
    assert code in (0, None), out
    res = load(store)
    (s,) = [st for st in res.studies if st.keys == ["lr"] and len(st.hashes) == 2]
    by_obj, by_id = res.select(study=s), res.select(study=s.id)
    assert set(by_obj.runs.hash) == set(s.hashes) == set(by_id.runs.hash) and len(res.runs) == 4
    assert set(by_obj.claims.hash) == set(s.hashes) and sorted(by_obj.claims.lr.unique()) == [0.05, 0.1]
    with pytest.raises(UserError, match="study 'sweep-nope': not in this selection; have"):
        res.select(study="sweep-nope")


def test_readme_results_block_runs(tmp_path, monkeypatch):
    text = (ROOT / "README.md").read_text()
    section = text.split("## Results in pandas", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    assert blocks, "README 'Results in pandas' has no python block"
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ssldyn-runs").mkdir()  # an empty store (load refuses a folder that does not exist)
    for b in blocks:
        exec(compile(b, "README.md", "exec"), {})  # the README's own example


def test_every_frame_names_its_run_as_the_stored_files_do(store, toy_sweep):
    """Each row of every frame carries its run's experiment, hash, label and preset, read here from the run's
    own ``config.json``/``meta.json``; each frame holds exactly the rows the files imply (3 + 2 seeds)."""
    res = load(store)
    truth = {}
    for d in (store / toy_sweep.name).iterdir():
        if (d / "DONE").is_file():
            meta, cfg = (json.loads((d / f).read_text()) for f in ("meta.json", "config.json"))
            truth[d.name] = (toy_sweep.name, meta["label"], meta["preset"], len(cfg["seeds"]))
    assert len(truth) == 2
    n_rows = {"runs": {h: 1 for h in truth}, "claims": {h: 2 * t[3] for h, t in truth.items()},
              "summaries": {h: 3 * t[3] for h, t in truth.items()},  # rms0, rms, kind per seed
              "trajectories": {h: (10 + 1) * t[3] for h, t in truth.items()}}  # fmt: skip
    for name, want in n_rows.items():
        frame = getattr(res, name)
        assert isinstance(frame, pd.DataFrame)
        assert frame.groupby("hash").size().to_dict() == want, name
        for _, row in frame.iterrows():
            assert (row["experiment"], row["label"], row["preset"]) == truth[row["hash"]][:3], name


def test_frames_count_each_verdict_and_keep_per_seed_values_of_hand_made_claims(tmp_path):
    """Results built from one run's claims (evaluated here from made-up values): the runs frame counts verdicts as
    outcome_counts defines them (paper totals without not-run), the claims frame keeps each seed's own verdict and
    control value, and a control that was declared but not measured has no control_held."""
    from ssldyn.contract.claims import ClaimSpec, Measured, evaluate, gt
    from ssldyn.lab.results import Results, RunRecord

    seeds = [0, 1, 2, 3, 4]

    def spec(id, kind="paper", **kw):
        return ClaimSpec(id, "s", "Fig. 3", kind, "r", gt(0.5), "relation: r", **kw)

    claims = [
        evaluate(spec("four-of-five"), None, seeds, [0.8, 0.85, 0.9, 0.95, 0.45]),  # pass, 4/5 seeds
        evaluate(spec("inc1"), None, seeds, [0.3, 0.7, 0.55, 0.45, 0.6]),  # interval contains 0.5
        evaluate(spec("inc2", control="at init"), None, seeds, [0.9] * 5),  # control declared, not measured
        evaluate(
            spec("vac", control="at init"), None, seeds, [Measured(0.9, control=c) for c in (0.6, 0.7, 0.8, 0.9, 1.0)]
        ),  # fmt: skip
        evaluate(spec("nr"), None, seeds, [Measured(None, not_run="no data")] * 5),
        evaluate(spec("ok", kind="sanity"), None, seeds, [1.0] * 5),
    ]
    assert [c.status for c in claims] == ["pass", "inconclusive", "inconclusive", "vacuous", "not-run", "pass"]
    rec = RunRecord(tmp_path / "h1", "variational.zz-x", {"hash": "h1", "seeds": seeds, "config": {}},
                    {"label": "default", "preset": "quick", "canonical": True, "overrides": {}}, claims, {}, [], [])  # fmt: skip
    res = Results(tmp_path, [rec])
    run = res.runs.iloc[0]
    assert (run["claims_passed"], run["claims_total"]) == (2, 6)
    assert (run["paper_claims_passed"], run["paper_claims_total"], run["paper_claims_inconclusive"],
            run["paper_claims_vacuous"], run["paper_claims_not_run"]) == (1, 4, 2, 1, 1)  # fmt: skip
    frame = res.claims
    four = frame[frame["claim"] == "four-of-five"].sort_values("seed")
    assert four["seed_passed"].tolist() == [True, True, True, True, False] and four["passed"].all()
    vac = frame[frame["claim"] == "vac"].sort_values("seed")
    assert vac["control_value"].tolist() == [0.6, 0.7, 0.8, 0.9, 1.0] and vac["control_held"].eq(True).all()
    assert frame.loc[frame["claim"] == "inc2", "control_held"].isna().all()
