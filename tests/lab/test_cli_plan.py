"""``--dry-run`` validates a command through the real code path and writes nothing; bare ``ssldyn`` is help."""

import pytest

from ssldyn.lab.cli import main


def _cli(args, capsys):
    with pytest.raises(SystemExit) as e:
        main(args)
    cap = capsys.readouterr()
    return e.value.code, cap.out, cap.err


def test_dry_run_lists_the_grid_and_writes_nothing(capsys, tmp_path):
    out = tmp_path / "runs"
    args = ["run", "grassmann.fig3", "--quick", "--sweep", "lr=0.01,0.001", "--sweep", "widths=[10],[100]"]
    code, text, err = _cli(args + ["--seeds", "2", "--out", str(out), "--dry-run"], capsys)
    assert code == 0, err
    assert "dry run: 4 runs, 4 to run" in text and text.count("grassmann.fig3") >= 4  # 2 × 2 points, 2 seeds each
    assert text.count("seeds=0..1") >= 4
    assert not out.exists()


def test_dry_run_rejects_what_a_run_would_reject(capsys, tmp_path):
    code, _, err = _cli(["run", "grassmann.fig3", "--sweep", "h=[10,100]", "--dry-run"], capsys)
    assert code == 2 and err.startswith("error: unknown config key 'h'")
    code, _, err = _cli(["reproduce", "--quick", "--executor", "spark", "--dry-run"], capsys)
    assert code == 2 and "--executor 'spark'" in err
    code, _, err = _cli(["run", "grassmann.fig3", "--bogus", "--dry-run"], capsys)
    assert code == 2 and "No such option" in err


def test_reproduce_dry_run_plans_every_experiment(capsys, tmp_path):
    from ssldyn.lab import manifest

    code, text, err = _cli(["reproduce", "--quick", "--out", str(tmp_path / "r"), "--dry-run"], capsys)
    from ssldyn.lab.runner import plan_run

    exps = manifest.experiments()
    n = len(exps)
    assert code == 0, err
    assert f"dry run: {n} runs, {n} to run" in text and not (tmp_path / "r").exists()
    rows = {ln.split()[0]: ln.split() for ln in text.splitlines() if ln.split() and ln.split()[0] in
            {e["name"] for e in exps}}  # fmt: skip
    assert sorted(rows) == sorted(e["name"] for e in exps)  # one row per experiment of the manifest
    for e in exps:  # each with the hash its quick run gets (the run directory a later reproduce fills)
        assert plan_run(e["name"], quick=True).digest in rows[e["name"]], e["name"]


def test_bare_command_prints_help_not_an_error(capsys):
    code, out, err = _cli([], capsys)
    assert code == 0 and "Usage: ssldyn" in out and "error" not in err


def test_dry_run_estimate_counts_the_reused_results_that_may_be_missing(capsys, tmp_path):
    """nonlinearity.fig10 reuses Fig. 4's cached grid: its est_seconds assume the grid is in place, so alone it
    also prints the time with Fig. 4's computed (it said ~10 s and took 16 min); planned with Fig. 4, it does not."""
    from ssldyn.lab import manifest

    fig4, fig10 = (manifest.find(f"nonlinearity.{n}")["est_seconds"][1] for n in ("fig4", "fig10"))
    out = str(tmp_path / "r")
    code, text, err = _cli(["run", "nonlinearity.fig10", "--out", out, "--dry-run"], capsys)
    line = " ".join(text.split())
    assert code == 0, err
    assert f"estimated ~{fig10:.0f} s on a 2-core CPU, ~{(fig4 + fig10) / 60:.0f} min if the cached results of " \
        "nonlinearity.fig4 are not in the store" in line, line  # fmt: skip
    code, text, err = _cli(["reproduce", "--only", "nonlinearity.fig4", "--only", "nonlinearity.fig10", "--out", out,
                            "--dry-run"], capsys)  # fmt: skip
    assert code == 0, err
    assert "if the cached results" not in text
