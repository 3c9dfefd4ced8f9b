"""Sweeps as studies: the CLI summary (swept values as columns, claims per grid point), the stored
study, the ``runs.csv`` index, variant grids found among runs, and TensorBoard scalars.

Reference numbers come from the toy's closed form ‖x_t‖ = (1 − lr)^t ‖x_0‖ with x_0 re-drawn here.
"""

from __future__ import annotations

import io
import json
import re

import numpy as np
import pandas as pd
import pytest
from rich.console import Console
from scipy import stats

from ssldyn.lab import run_experiment
from ssldyn.lab.cli import main
from ssldyn.lab.executors import execute
from ssldyn.lab.runner import plan_run
from ssldyn.lab.study import infer_studies, read_studies, record_study, write_index
from ssldyn.lab.summary import estimate_text, sweep_tables
from ssldyn.results import load
from tests.lab.test_results import x0_norm

N, STEPS = 8, 10  # the toy's quick preset


def run_cli(args, capsys):
    with pytest.raises(SystemExit) as e:
        main(args)
    out = capsys.readouterr()
    return e.value.code, out.out, out.err


def rms_text(lr: float, seeds: list[int]) -> str:
    """The claim cell of rms-small written out: mean ± Student-t half width over seeds (closed form)."""
    v = [(1 - lr) ** STEPS * x0_norm(s, N) / np.sqrt(N) for s in seeds]
    half = stats.t.ppf(0.975, len(v) - 1) * stats.sem(v)
    return f"{np.mean(v):.4g} ± {half:.2g}"


def rms_verdict(lr: float, seeds: list[int]) -> str:
    """rms-small's verdict from the closed form: INCONCLUSIVE when the 95 % t interval of the mean straddles 0.5,
    else PASS when the mean and every seed (≥ 80 % of 2) are below 0.5, else FAIL."""
    v = [(1 - lr) ** STEPS * x0_norm(s, N) / np.sqrt(N) for s in seeds]
    m, half = float(np.mean(v)), stats.t.ppf(0.975, len(v) - 1) * stats.sem(v)
    if m - half < 0.5 <= m + half:
        return "INCONCLUSIVE"
    return "PASS" if m < 0.5 and all(x < 0.5 for x in v) else "FAIL"


def words_whole(output: str, cells: list[str]) -> list[str]:
    """Tokens of ``output`` that are not whole words of the cells (a word broken across lines shows up here)."""
    allowed = {w for c in cells for w in str(c).split()}
    tokens = [t for line in output.splitlines() for t in line.split() if not set(t) <= set("─━│┃╇╈┡┩+-|")]
    return [t for t in tokens if t not in allowed]


def test_sweep_prints_swept_values_as_columns_and_claims_per_point(toy_sweep, tmp_path, capsys):
    code, out, err = run_cli(["run", toy_sweep.name, "--quick", "--sweep", "lr=0.2,0.05,0.01", "--seeds", "2",
                              "--out", str(tmp_path)], capsys)  # fmt: skip
    assert code == 0, err
    lines = out.splitlines()
    assert all(len(ln) <= 80 for ln in lines)
    head = next(ln for ln in lines if "status" in ln)
    assert head.split()[:2] == ["lr", "status"]  # the swept key is a column
    # the claims table: each grid point's mean ± 95% interval over seeds 0, 1, against the closed form
    for lr in (0.2, 0.05, 0.01):
        row = next(ln for ln in lines if re.search(rf"^\s*(rms-small)?\s+{lr}\s+(< 0.5\s+)?\d", ln) and "±" in ln)
        assert rms_text(lr, [0, 1]) in row, (lr, row)
        v = [(1 - lr) ** STEPS * x0_norm(s, N) / np.sqrt(N) for s in (0, 1)]
        assert row.split()[-1] == rms_verdict(lr, [0, 1]) and f"{sum(x < 0.5 for x in v)}/2" in row.split()
    res = load(tmp_path)
    study = res.studies[0]
    title = f"{toy_sweep.name}: {study.title} · 3 runs"
    cells = [title, "claims per grid point (mean ± 95% interval over seeds):", "lr", "status", "time", "claims", "run",
             "claim", "threshold", *res.claims["expected"], "measured", "seeds", "PASS", "FAIL", "INCONCLUSIVE", "done", f"study {study.id}: 3/3 runs finished · "
             f"`ssldyn report {tmp_path}` shows its page", *(f"{x:.1f} s" for x in np.arange(0, 100, 0.1)),
             *res.runs["hash"], *res.claims["claim"], "0.2", "0.05", "0.01", "1/2", "2/2", "0/2"]  # fmt: skip
    cells += [estimate_text(e, lo, hi) for e, lo, hi in res.claims[["estimate", "lo", "hi"]].itertuples(index=False)]
    cells += [f"{int(p)}/{int(t)}" for p, t in res.runs[["claims_passed", "claims_total"]].itertuples(index=False)]
    assert words_whole(out, cells) == []
    # the report command names the store the sweep wrote (a plain `ssldyn report` would read ./ssldyn-runs)
    assert f"`ssldyn report {tmp_path}` shows its page" in " ".join(out.split())


def test_sweep_is_stored_as_a_study_and_indexed(toy_sweep, tmp_path, capsys):
    args = ["run", toy_sweep.name, "--quick", "--sweep", "lr=1e-2,0.2", "--sweep", "steps=5,10", "--seeds", "2",
            "--out", str(tmp_path)]  # fmt: skip
    assert run_cli(args, capsys)[0] == 0
    assert run_cli(args, capsys)[0] == 0  # the same sweep again: the same study, from the store
    files = list((tmp_path / toy_sweep.name / "studies").glob("*.json"))
    assert len(files) == 1
    d = json.loads(files[0].read_text())
    assert d["axes"] == [{"key": "lr", "values": [0.01, 0.2]}, {"key": "steps", "values": [5, 10]}]
    assert d["seeds"] == [0, 1] and d["preset"] == "quick" and d["experiment"] == toy_sweep.name
    assert len(d["points"]) == 4
    for p in d["points"]:  # each point's hash is the run with those config values
        cfg = json.loads((tmp_path / toy_sweep.name / p["hash"] / "config.json").read_text())
        assert {k: cfg["config"][k] for k in ("lr", "steps")} == p["values"]
    index = pd.read_csv(tmp_path / toy_sweep.name / "runs.csv")
    assert sorted(index["hash"]) == sorted(p["hash"] for p in d["points"])
    for _, row in index.iterrows():
        claims = json.loads((tmp_path / toy_sweep.name / row["hash"] / "claims.json").read_text())
        meta = json.loads((tmp_path / toy_sweep.name / row["hash"] / "meta.json").read_text())
        assert row["claims_passed"] == f"{sum(c['passed'] for c in claims)}/{len(claims)}"
        assert row["label"] == meta["label"] and row["status"] == "done" and row["studies"] == d["id"]
        assert json.loads(row["overrides"]) == meta["overrides"] and row["seeds"] == "0 1"


def test_failed_points_are_in_the_study_summary_and_index(toy, tmp_path, capsys):
    code, out, _ = run_cli(["run", toy.name, "--sweep", "fail=false,true", "--seeds", "1", "--out", str(tmp_path)],
                           capsys)  # fmt: skip
    assert code == 1  # a failed run: exit code 1, the sweep still summarised
    assert "failed (fail=true): RuntimeError: toy failure" in out
    (study,) = load(tmp_path).studies
    index = pd.read_csv(tmp_path / toy.name / "runs.csv")
    assert sorted(index["status"]) == ["done", "failed"]
    assert set(index["studies"]) == {study.id}


def test_summary_joins_the_axes_when_they_do_not_fit(toy_sweep, tmp_path):
    specs = [plan_run(toy_sweep.name, quick=True, sets={"lr": lr, "n": n, "steps": t}, seeds=2)
             for lr in (0.2, 0.05) for n in (4, 16) for t in (5, 10)]  # fmt: skip
    items = execute(specs, tmp_path)
    study = record_study(tmp_path, specs, ["lr", "n", "steps"])
    res = load(tmp_path)
    for width, joined in ((80, False), (55, True)):
        buf = io.StringIO()
        console = Console(file=buf, width=width, color_system=None)
        for title, table in sweep_tables(study, items, res, width=width):
            console.print(title)
            console.print(table)
        out = buf.getvalue()
        assert any(ln.split()[:2] == (["grid", "point"] if joined else ["lr", "n"]) for ln in out.splitlines())
        assert all(len(ln) <= width for ln in out.splitlines())
        cells = [
            "lr",
            "n",
            "steps",
            "grid point",
            "status",
            "time",
            "claims",
            "run",
            "claim",
            "measured",
            "seeds",
            "threshold",
            *res.claims["expected"],
            "PASS",
            "FAIL",
            "INCONCLUSIVE",
            "done",
            *(f"{x:.1f} s" for x in np.arange(0, 100, 0.1)),
            *res.runs["hash"],
            *res.claims["claim"],
            "0.2",
            "0.05",
            "4",
            "16",
            "5",
            "10",
            "1/2",
            "2/2",
            "0/2",
            f"{toy_sweep.name}: {study.title} · 8 runs",
            "claims per grid point (mean ± 95% interval over seeds):",
            "(mean ± 95% interval over seeds); thresholds: rms-small < 0.5; ratio-exact: 8 thresholds, one per grid point",
        ]
        cells += [
            estimate_text(e, lo, hi) for e, lo, hi in res.claims[["estimate", "lo", "hi"]].itertuples(index=False)
        ]
        cells += [f"lr={lr}, n={n}, steps={t}" for lr in (0.2, 0.05) for n in (4, 16) for t in (5, 10)]
        cells += [f"{p}/{t}" for p, t in res.runs[["claims_passed", "claims_total"]].itertuples(index=False)]
        assert words_whole(out, cells) == [], out  # fmt: skip


def test_estimate_text():
    assert estimate_text(0.61234, 0.56, 0.66468) == "0.6123 ± 0.052"
    assert estimate_text(0.5, 0.2, 0.9) == "0.5 [0.2, 0.9]"
    assert estimate_text(0.5, float("nan"), float("nan")) == "0.5" and estimate_text(float("nan"), 0, 1) == "n/a"


def test_variants_run_one_by_one_form_a_study(toy_sweep, tmp_path):
    run_experiment(toy_sweep.name, quick=True, out=tmp_path)  # the default lr = 0.2
    for lr in (0.05, 0.01):
        run_experiment(toy_sweep.name, quick=True, out=tmp_path, sets={"lr": lr})
    run_experiment(toy_sweep.name, quick=True, out=tmp_path, sets={"lr": 0.05}, seeds=2)  # other seeds: not a point
    res = load(tmp_path)
    (study,) = res.studies
    assert study.source == "variants" and study.keys == ["lr"] and study.axes[0].values == (0.01, 0.05, 0.2)
    assert [res.record(h).value("lr") for h in study.hashes] == [0.01, 0.05, 0.2]
    assert all(res.record(h).seeds == [0, 1, 2] for h in study.hashes)
    # a stored sweep over the same runs replaces the inferred study
    specs = [plan_run(toy_sweep.name, quick=True, sets={"lr": lr}) for lr in (0.2, 0.05, 0.01)]
    stored = record_study(tmp_path, specs, ["lr"])
    assert [s.id for s in load(tmp_path).studies] == [stored.id]
    assert infer_studies(res.records, [stored]) == []


def test_damaged_study_file_is_listed(toy_sweep, tmp_path):
    specs = [plan_run(toy_sweep.name, quick=True, sets={"lr": lr}, seeds=1) for lr in (0.2, 0.01)]
    execute(specs, tmp_path)
    st = record_study(tmp_path, specs, ["lr"])
    st.path.write_text('{"id": "x", "axes": []}')
    studies, bad = read_studies(tmp_path)
    assert studies == [] and bad[0][0] == str(st.path)
    res = load(tmp_path)
    assert str(st.path) in res.damaged["path"].tolist() and len(res) == 2
    assert write_index(tmp_path, res) == [tmp_path / toy_sweep.name / "runs.csv"]  # a damaged study is not a run


def test_tensorboard_scalars_equal_the_trajectories(toy_sweep, tmp_path, capsys):
    pytest.importorskip("tensorboard", reason="tensorboard is not installed (pip install -e '.[tensorboard]')")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    args = ["run", toy_sweep.name, "--quick", "--sweep", "lr=0.2,0.01", "--seeds", "2", "--out", str(tmp_path),
            "--tensorboard"]  # fmt: skip
    code, out, _ = run_cli(args, capsys)
    assert code == 0 and f"tensorboard --logdir {tmp_path / 'tensorboard'}" in out
    code, out, _ = run_cli(args, capsys)  # written again (cached runs): replaced, not duplicated
    res = load(tmp_path)
    dirs = sorted((tmp_path / "tensorboard" / toy_sweep.name).glob("*/seed=*"))
    assert len(dirs) == 4
    for d in dirs:
        rec = res.record(d.parent.name.split("-")[0])
        seed = int(d.name.split("=")[1])
        acc = EventAccumulator(str(d))
        acc.Reload()
        assert acc.Tags()["scalars"] == ["metrics/norm"]
        ev = acc.Scalars("metrics/norm")
        assert [e.step for e in ev] == list(range(STEPS + 1))
        lr = rec.value("lr")
        np.testing.assert_allclose([e.value for e in ev], [(1 - lr) ** t * x0_norm(seed, N) for t in range(11)],
                                   rtol=1e-6)  # float32 in the event file  # fmt: skip


def test_one_variant_and_the_default_run_form_a_two_point_grid(toy_sweep, tmp_path):
    run_experiment(toy_sweep.name, quick=True, out=tmp_path)
    variant = run_experiment(toy_sweep.name, quick=True, out=tmp_path, sets={"lr": 0.01, "steps": 4})
    run_experiment(toy_sweep.name, quick=True, out=tmp_path, sets={"n": 4}, seeds=2)  # no default with seeds 0, 1
    (study,) = load(tmp_path).studies
    assert study.keys == ["lr", "steps"] and study.base == {}
    assert [p["values"] for p in study.points] == [{"lr": 0.01, "steps": 4}, {"lr": 0.2, "steps": 10}]
    assert study.points[0]["hash"] == variant.run.path.name


class _Claims:
    """Stands in for a :class:`~ssldyn.results.Results`: ``select(hashes=...).claims`` is the given frame."""

    def __init__(self, claims: pd.DataFrame) -> None:
        self.claims = claims

    def select(self, hashes):
        return _Claims(self.claims[self.claims["hash"].isin(hashes)])


def test_sweep_claims_show_each_verdict_not_pass_or_fail():
    """The claims table shows each claim's verdict as `ssldyn run` does for one run (INCONCLUSIVE, VACUOUS: not
    FAIL because `passed` is False), and its title names the claims' statistics (not always the mean)."""
    from types import SimpleNamespace

    from ssldyn.lab.study import Axis, Study

    study = Study("s", "variational.zz-x", [Axis("tau", (0.5, 0.6))],
                  [{"values": {"tau": 0.5}, "hash": "h1"}, {"values": {"tau": 0.6}, "hash": "h2"}])  # fmt: skip
    verdicts = {("later", "h1"): "inconclusive", ("later", "h2"): "pass", ("less", "h1"): "vacuous",
                ("less", "h2"): "fail"}  # fmt: skip
    rows = [{"hash": h, "claim": c, "status": st, "passed": st == "pass", "seed_passed": True, "estimate": 0.5,
             "lo": 0.4, "hi": 0.6, "statistic": "mean" if c == "later" else "median", "expected": "> 0.3"}
            for (c, h), st in verdicts.items() for _ in range(3)]  # fmt: skip
    items = [SimpleNamespace(spec=SimpleNamespace(digest=h), status="done", seconds=1.0) for h in ("h1", "h2")]
    (_, _), (title, table) = sweep_tables(study, items, _Claims(pd.DataFrame(rows)), width=100)
    buf = io.StringIO()
    Console(file=buf, width=100, color_system=None).print(table)
    shown = re.findall(r"\b(PASS|FAIL|INCONCLUSIVE|VACUOUS)\b", buf.getvalue())
    assert shown == ["INCONCLUSIVE", "PASS", "VACUOUS", "FAIL"], buf.getvalue()
    assert title == "claims per grid point (mean or median ± 95% interval over seeds):"
    # too narrow for the claim column beside INCONCLUSIVE: one table per claim, no word broken
    tables = sweep_tables(study, items, _Claims(pd.DataFrame(rows)), width=45)
    assert [t for t, _ in tables[1:]] == [f"claim {c} > 0.3 per grid point (mean or median ± 95% interval over "
                                          "seeds):" for c in ("later", "less")]  # fmt: skip
    for _, table in tables[1:]:
        buf = io.StringIO()
        Console(file=buf, width=45, color_system=None).print(table)
        assert all(len(ln) <= 45 for ln in buf.getvalue().splitlines())
        assert words_whole(buf.getvalue(), ["tau", "measured", "seeds", "0.5", "0.6", "0.5 ± 0.1", "3/3", "PASS",
                                            "FAIL", "INCONCLUSIVE", "VACUOUS"]) == [], buf.getvalue()  # fmt: skip


def test_a_rule_checked_inside_run_fails_its_grid_point_whatever_is_cached(toy_rule, tmp_path, capsys):
    """A UserError raised inside run() (x = 2) fails its grid point and the sweep goes on, also when the other points
    are already in the store (it aborted the sweep then: exit 2, no failure mark, no study); a one-run request
    raises it, like a mistake found while planning."""
    from ssldyn.errors import UserError

    args = ["run", toy_rule.name, "--sweep", "x=1,2", "--out", str(tmp_path), "--jobs", "1"]
    for _ in range(2):  # a fresh store, then x = 1 in the store
        code, out, err = run_cli(args, capsys)
        assert code == 1, err
        assert "failed (x=2): error: x=2 is not allowed for this run" in out and "study sweep-" in out
    assert (tmp_path / toy_rule.name / "studies").is_dir()
    specs = [plan_run(toy_rule.name, sets={"x": x}) for x in (1, 2)]
    assert [it.status for it in execute(specs, tmp_path)] == ["cached", "failed"]
    with pytest.raises(UserError, match="x=2 is not allowed"):
        execute(specs[1:], tmp_path)


def test_estimate_text_uses_plus_minus_only_for_a_symmetric_interval():
    # down 0.051, up 0.05: asymmetric by 2 % of the half width (tolerance 0.1 %): both ends shown
    assert estimate_text(0.5, 0.449, 0.55) == "0.5 [0.449, 0.55]"
    assert estimate_text(0.5, 0.45, 0.55) == "0.5 ± 0.05"
    assert estimate_text(0.5, 0.5, 0.5) == "0.5"  # one seed, or equal values: no interval


def test_sweep_tables_count_passed_claims_and_show_thresholds_fractions_and_not_run():
    """Runs table: claims passed per point (green only when all pass); claims table: the threshold where it changes,
    a yes/no claim's fraction "of seeds", "not run" for a claim that could not be measured, seeds that hold."""
    from types import SimpleNamespace

    from ssldyn.lab.study import Axis, Study

    study = Study("s", "variational.zz-x", [Axis("tau", (0.5, 0.6, 0.7))],
                  [{"values": {"tau": t}, "hash": h} for t, h in ((0.5, "h1"), (0.6, "h2"), (0.7, "h3"))])  # fmt: skip
    nan = float("nan")
    a = {"h1": ("pass", "> 0.3", 0.5, 0.4, 0.6, [True, True, False]), "h2": ("not-run", "> 0.4", nan, nan, nan,
         [False] * 3), "h3": ("pass", "> 0.4", 0.5, 0.4, 0.6, [True] * 3)}  # fmt: skip
    b = {h: (st, "holds", 2 / 3, 0.2077, 0.9385, [True, True, False]) for h, st in
         (("h1", "fail"), ("h2", "pass"), ("h3", "pass"))}  # fmt: skip
    rows = [{"hash": h, "claim": cid, "status": st, "passed": st == "pass", "seed_passed": ok, "estimate": e,
             "lo": lo, "hi": hi, "statistic": "mean" if cid == "a" else "fraction of seeds", "expected": exp}
            for cid, d in (("a", a), ("b", b)) for h, (st, exp, e, lo, hi, oks) in d.items() for ok in oks]  # fmt: skip
    items = [SimpleNamespace(spec=SimpleNamespace(digest=h), status="done", seconds=1.0) for h in ("h1", "h2", "h3")]
    (_, runs), (_, claims) = sweep_tables(study, items, _Claims(pd.DataFrame(rows)), width=120)
    col = {c.header: list(c.cells) for c in runs.columns}
    assert [(t.plain, t.style) for t in col["claims"]] == [("1/2", "red"), ("1/2", "red"), ("2/2", "green")]
    col = {c.header: [t.plain for t in c.cells] for c in claims.columns}
    assert col["claim"] == ["a", "", "", "b", "", ""]
    assert col["threshold"] == ["> 0.3", "> 0.4", "", "holds", "", ""]  # repeated only where it changes
    assert col["measured"] == ["0.5 ± 0.1", "not run", "0.5 ± 0.1"] + ["0.6667 [0.2077, 0.9385] of seeds"] * 3
    assert col["seeds"] == ["2/3", "0/3", "3/3", "2/3", "2/3", "2/3"]
    assert col[""] == ["PASS", "NOT RUN", "PASS", "FAIL", "PASS", "PASS"]
