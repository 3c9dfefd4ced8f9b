"""Robustness maps end to end: `ssldyn robustness EXP` runs the declared grid as a study, prints each
headline claim's verdict per grid point, and the report shows the map beside the claim.

Every verdict is checked against the toy's closed form: rms(x_T) = (1 − lr)^T ‖x_0‖/√n with x_0
re-drawn here, its Student-t interval from scipy, and the control rms(x_0) ≈ 1 (never below 0.5).
"""

from __future__ import annotations

import numpy as np
from scipy import stats

from tests.lab.test_cli import run_cli
from tests.lab.test_results import x0_norm


def _expected_status(lr: float, steps: int, seeds: list[int], n: int = 64) -> str:
    vals = [(1 - lr) ** steps * x0_norm(s, n) / np.sqrt(n) for s in seeds]
    m = float(np.mean(vals))
    half = stats.t.ppf(0.975, len(vals) - 1) * stats.sem(vals)
    lo, hi = max(m - half, 0.0), m + half
    if lo < 0.5 < hi:
        return "inconclusive"
    return "pass" if hi < 0.5 and all(v < 0.5 for v in vals) else "fail"


def test_robustness_command_runs_the_grid_and_the_report_shows_the_map(toy_map, tmp_path, capsys):
    out = tmp_path / "runs"
    code, text, _ = run_cli(["robustness", toy_map.name, "--out", str(out), "--seeds", "3"], capsys)
    assert code == 0, text
    seeds = [0, 1, 2]
    expected = {(lr, st): _expected_status(lr, st, seeds) for lr in (0.2, 0.01) for st in (10, 30)}
    assert set(expected.values()) >= {"pass"} and set(expected.values()) - {"pass"}  # the map is not flat
    from ssldyn.lab.robustness import map_rows, plan_maps
    from ssldyn.results import load

    (m,) = plan_maps(toy_map.name, seeds=3)
    rows = map_rows(m, load(out))
    got = {(r["point"]["lr"], r["point"]["steps"]): r["claims"]["rms-small"]["status"] for r in rows}
    assert got == expected
    n_pass = sum(v == "pass" for v in expected.values())
    assert f"rms-small: holds at {n_pass}/4 points" in text and "robustness map: lr × steps" in text
    # stored as a study of source "robustness"; the report shows the map with its verdicts
    assert list((out / toy_map.name / "studies").glob("robustness-*.json"))
    assert run_cli(["report", str(out)], capsys)[0] == 0
    html = (out / "report" / "index.html").read_text()
    assert "Robustness map: lr × steps" in html and f"holds at {n_pass}/4 points" in html
    assert "the toy&#x27;s &#x27;paper&#x27; leaves lr and steps open" in html


def test_robustness_of_an_experiment_without_a_map_is_one_clear_error(toy_sweep, tmp_path, capsys):
    code, out, err = run_cli(["robustness", toy_sweep.name, "--out", str(tmp_path)], capsys)
    assert code == 2 and "declares no robustness map" in out + err and "Traceback" not in out + err


def test_control_values_reach_the_stored_claims(toy_map, tmp_path, capsys):
    from ssldyn.lab import run_experiment
    from ssldyn.results import load

    run_experiment(toy_map.name, quick=True, out=tmp_path, sets={"n": 64})
    claims = load(tmp_path).claims
    rows = claims[claims["claim"] == "rms-small"].sort_values("seed")
    ref = [x0_norm(s, 64) / 8 for s in (0, 1, 2)]
    np.testing.assert_allclose(rows["control_value"], ref, rtol=1e-5)
    assert rows["control_held"].eq(False).all() and rows["control"].iloc[0] == "the same statistic at t = 0"


def test_a_point_whose_run_fails_is_named_with_its_error(toy_map, tmp_path, capsys, monkeypatch):
    """A failing grid point is shown as FAILED with its error (not as 'not run yet'), the other points keep
    their verdicts, and the command exits 1."""
    real = toy_map.run

    def run(self, cfg, ctx):
        if cfg.lr == 0.01 and cfg.steps == 30:
            raise RuntimeError("stack expects each tensor to be equal size")
        return real(self, cfg, ctx)

    monkeypatch.setattr(toy_map, "run", run)
    out = tmp_path / "runs"
    code, text, err = run_cli(["robustness", toy_map.name, "--out", str(out), "--seeds", "3", "--jobs", "1"], capsys)
    assert code == 1
    assert "failed: variational.zz-map" in err and "stack expects each tensor to be equal size" in err
    assert "FAILED" in text and "not run yet" not in text
    flat = " ".join(text.split())  # the terminal layout wraps lines
    assert "rms-small: holds at 2/3 points" in flat and "1 point(s) failed" in flat


def test_reproduce_writes_the_report_when_a_map_point_fails(toy_rule, tmp_path, capsys):
    """`reproduce --robustness` goes on when a robustness map point fails (x = 3 crashes): the report is written and
    the tables printed, then it exits 1 (it used to exit before writing the report)."""
    out = tmp_path / "runs"
    args = ["reproduce", "--quick", "--only", toy_rule.name, "--robustness", "--out", str(out), "--jobs", "1"]
    code, text, err = run_cli(args, capsys)
    assert code == 1
    flat = " ".join(text.split())  # the terminal layout wraps lines
    assert "grid point x=3 crashes" in " ".join(err.split()) and "1 point(s) failed" in flat
    assert (out / "report" / "index.html").is_file() and f"report: {out / 'report' / 'index.html'}" in flat
    code, _, _ = run_cli(["robustness", toy_rule.name, "--out", str(out), "--jobs", "1"], capsys)
    assert code == 1  # alone, the map's failed point is the command's exit code


def test_holds_text_counts_only_passing_points_and_names_the_others():
    from ssldyn.lab.robustness import holds_text

    def row(lr, status):
        return {"point": {"lr": lr, "steps": 10}, "claims": {"c": {"status": status}}}

    rows = [row(0.2, "pass"), row(0.01, "vacuous"), row(0.1, "inconclusive"), row(0.5, "fail"), row(1.0, "missing")]
    assert holds_text(rows, "c") == (
        "holds at 1/4 points; not at lr=0.01, steps=10 (vacuous); lr=0.1, steps=10 (inconclusive); "
        "lr=0.5, steps=10 (fail)"
    )
    assert holds_text([row(0.2, "failed"), row(0.1, "failed"), row(1.0, "missing")], "c") == "not run (2 failed)"
    assert holds_text([row(1.0, "missing")], "c") == "not run yet"
    assert holds_text([row(0.2, "pass"), row(0.1, "failed")], "c") == "holds at 1/1 points; 1 point(s) failed"


def test_map_rows_read_each_claims_verdict_at_each_point():
    """A point's cell is the stored claim's verdict (inconclusive and vacuous as such, not folded into pass/fail), its
    measured text and control statistic; a failed point carries its error, a point not in the results is missing."""
    from types import SimpleNamespace

    from ssldyn.contract.claims import ClaimSpec, Measured, evaluate, gt
    from ssldyn.lab.robustness import map_rows

    def spec(id):
        return ClaimSpec(id, "s", "Fig. 3", "paper", "r", gt(0.5), "relation: r", control="at init")

    inc = evaluate(spec("c"), None, [0, 1, 2, 3, 4], [Measured(v, control=0.1) for v in [0.3, 0.7, 0.55, 0.45, 0.6]])
    vac = evaluate(spec("d"), None, [0, 1, 2], [Measured(0.9, control=0.8)] * 3)
    assert (inc.status, vac.status) == ("inconclusive", "vacuous")
    planned = SimpleNamespace(points=[{"lr": 0.2}, {"lr": 0.01}, {"lr": 0.1}],
                              specs=[SimpleNamespace(digest=h) for h in ("h1", "h2", "h3")],
                              robustness=SimpleNamespace(claims=("c", "d")))  # fmt: skip
    results = SimpleNamespace(records=[SimpleNamespace(hash="h1", claims=[vac, inc])])
    rows = map_rows(planned, results, failed={"h2": "stack expects each tensor to be equal size"})
    assert [r["hash"] for r in rows] == ["h1", "h2", "h3"] and rows[0]["point"] == {"lr": 0.2}
    assert rows[0]["claims"] == {
        "c": {"status": "inconclusive", "text": inc.measured_text(), "control": 0.1},
        "d": {"status": "vacuous", "text": vac.measured_text(), "control": 0.8},
    }
    assert rows[1]["claims"]["c"] == {"status": "failed", "text": "stack expects each tensor to be equal size"}
    assert rows[2]["claims"]["d"] == {"status": "missing", "text": "not run yet"}


def test_a_grid_point_overrides_the_maps_base(toy_map, monkeypatch):
    """base holds at every grid point, the point's own knob values on top: a knob also set in base keeps the value
    the map's row is labelled with."""
    from ssldyn.contract.claims import Robustness
    from ssldyn.lab.robustness import plan_maps

    rb = Robustness(claims=("rms-small",), knobs={"lr": [0.2, 0.01]}, base={"n": 64, "lr": 0.5}, paper="p")
    monkeypatch.setattr(toy_map, "robustness", (rb,))
    (m,) = plan_maps(toy_map.name, seeds=1)
    assert [(p["lr"], s.config["lr"], s.config["n"]) for p, s in zip(m.points, m.specs)] == [
        (0.2, 0.2, 64),
        (0.01, 0.01, 64),
    ]
