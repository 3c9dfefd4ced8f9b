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


def test_a_list_key_given_numbers_says_how_to_write_a_list_and_which_values(capsys):
    hint = "(a list is JSON: --set 'widths=[1,2]'; a sweep over lists: --sweep 'widths=[1],[1,2]')"
    code, _, err = _cli(["run", "grassmann.fig3", "--quick", "--set", "widths=10", "--dry-run"], capsys)
    assert (
        code == 2
        and " ".join(err.split()) == f"error: invalid value for 'widths': 10: Input should be a valid list {hint}"
    )
    # every grid point has this mistake: said once, with the values it was made at
    code, _, err = _cli(["run", "grassmann.fig3", "--quick", "--sweep", "widths=10,100", "--dry-run"], capsys)
    assert code == 2 and " ".join(err.split()) == (
        f"error: invalid value for 'widths': Input should be a valid list {hint} (at widths=10; widths=100)"
    )


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


def test_dry_run_lists_a_damaged_run_as_to_recompute(toy, capsys, tmp_path):
    """A damaged run is not "in store": the run sets it aside and computes it again, so the dry run counts it."""
    from ssldyn.lab import run_experiment

    d = run_experiment(toy.name, quick=True, out=tmp_path).run.path
    args = ["run", toy.name, "--quick", "--out", str(tmp_path), "--dry-run"]
    code, text, err = _cli(args, capsys)
    assert code == 0, err
    assert "in store" in text and "dry run: 1 runs, 0 to run" in text
    (d / "claims.json").write_text("[]")
    code, text, err = _cli(args, capsys)
    assert code == 0, err
    assert "damaged: recompute" in text and "in store" not in text and "dry run: 1 runs, 1 to run" in text


def test_dry_run_rejects_the_options_a_run_rejects(capsys, tmp_path):
    """--workers, --jobs and --out are checked by --dry-run as by the run (they used to pass the dry run)."""
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    out = ["--out", str(tmp_path / "r")]
    for cmd, msg in (
        (["run", "grassmann.thm3", "--quick", "--workers", "0", *out], "--workers 0: must be an integer >= 1"),
        (["run", "grassmann.thm3", "--quick", "--jobs", "0", *out], "--jobs 0: must be an integer >= 1"),
        (["run", "grassmann.thm3", "--quick", "--out", str(a_file)], "exists and is not a directory"),
        (["reproduce", "--quick", "--only", "grassmann.thm3", "--workers", "0", *out], "--workers 0"),
        (["reproduce", "--quick", "--only", "grassmann.thm3", "--out", str(a_file)], "is not a directory"),
        (["robustness", "variational.fig5", "--jobs", "0", *out], "--jobs 0: must be an integer >= 1"),
    ):
        code, _, err = _cli([*cmd, "--dry-run"], capsys)
        assert code == 2 and err.startswith("error: ") and msg in err, (cmd, err)
    assert not (tmp_path / "r").exists()


def test_reproduce_robustness_dry_run_lists_the_map_runs(toy_map, capsys, tmp_path):
    """`reproduce --robustness --dry-run` plans the robustness maps too (it listed the main runs only)."""
    from ssldyn.lab.robustness import plan_maps
    from ssldyn.lab.runner import plan_run

    out = ["--out", str(tmp_path / "r")]
    code, text, err = _cli(["reproduce", "--quick", "--only", toy_map.name, "--robustness", *out, "--dry-run"], capsys)
    assert code == 0, err
    hashes = [plan_run(toy_map.name, quick=True).digest] + [s.digest for m in plan_maps(toy_map.name) for s in m.specs]
    assert len(set(hashes)) == 5 and all(h in text for h in hashes)
    assert "dry run: 5 runs, 5 to run" in text and not (tmp_path / "r").exists()


def test_dry_run_lists_a_run_asked_for_twice_once(toy_rule, capsys, tmp_path):
    """The main run of `reproduce` that is also a point of its robustness map (x = 1) is computed once: listed once."""
    code, text, err = _cli(["reproduce", "--quick", "--only", toy_rule.name, "--robustness", "--out",
                            str(tmp_path / "r"), "--dry-run"], capsys)  # fmt: skip
    assert code == 0, err
    assert "dry run: 2 runs, 2 to run" in text
