import pytest

from ssldyn.lab.cli import main


def run_cli(args, capsys):
    with pytest.raises(SystemExit) as e:
        main(args)
    out = capsys.readouterr()
    return e.value.code, out.out, out.err


def test_unknown_experiment_one_line_exit_2(capsys):
    code, out, err = run_cli(["run", "nope"], capsys)
    assert code == 2 and "Traceback" not in out + err
    lines = [ln for ln in err.strip().splitlines() if ln]
    assert len(lines) == 1 and "unknown experiment 'nope'" in lines[0]


def test_invalid_value_one_line_exit_2(capsys, tmp_path):
    for args in (
        ["run", "variational.fig3", "--set", "taus=[-1]"],
        ["run", "variational.fig3", "--set", "tau=-1"],
        ["run", "variational.fig3", "--set", "k_max=abc"],
        ["run", "variational.fig3", "--sett", "x"],
        ["run", "variational.fig3", "--seeds", "0"],
        ["run", "variational.fig3", "--executor", "spark"],
        ["report", str(tmp_path / "missing")],
        ["reproduce", "--paper", "physics"],
    ):
        code, out, err = run_cli(args + ["--out", str(tmp_path)] if args[0] == "run" else args, capsys)
        assert code == 2, args
        assert len([ln for ln in err.strip().splitlines() if ln]) == 1 and "Traceback" not in err, (args, err)
    assert not any(tmp_path.iterdir())  # nothing written


def test_list_show_run_cached(capsys, tmp_path, toy):
    from tests.lab.toy import CALLS

    code, out, _ = run_cli(["list"], capsys)
    assert code == 0 and "variational.fig3" in out and toy.name in out
    code, out, _ = run_cli(["show", "variational.fig3"], capsys)
    assert code == 0 and "threshold_taus" in out
    code, out, _ = run_cli(["run", toy.name, "--quick", "--out", str(tmp_path)], capsys)
    assert code == 0 and "claims passed: 1/1" in out and CALLS["run"] == 3  # the quick preset's 3 seeds
    assert "0.5905 (3/3" in out  # the decay ‖x_5‖/‖x_0‖ = (1 − 0.1)^5 = 0.59049 of every seed
    code, out, _ = run_cli(["run", toy.name, "--quick", "--out", str(tmp_path)], capsys)
    assert code == 0 and "cached" in out and CALLS["run"] == 3  # served from the store: not run again
    code, out, _ = run_cli(["run", toy.name, "--quick", "--seeds", "2", "--out", str(tmp_path)], capsys)
    assert code == 0 and "claims passed: 1/1" in out and "(2/2" in out  # one run, two seeds (2/2 seeds hold)
    assert CALLS["run"] == 5
    runs = sorted(p.parent.name for p in (tmp_path / toy.name).glob("*/DONE"))
    assert len(runs) == 2  # the default 3-seed quick run and the 2-seed run are different runs
    code, out, _ = run_cli(["report", str(tmp_path)], capsys)
    html = (tmp_path / "report" / "index.html").read_text()
    assert code == 0 and all(h in html for h in runs)  # both runs are in the report
