"""User mistakes are one line and exit 2, never an internal error, never costly (run-store issue, items 4, 8-10)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ssldyn.contract.config import build_config, load_config_file, parse_sets
from ssldyn.contract.experiment import Experiment, register
from ssldyn.lab import UserError, run_experiment
from ssldyn.lab.cli import main
from ssldyn.lab.registry import get_experiment
from ssldyn.lab.runner import plan_run
from ssldyn.lab.sweep import expand_grid

ROOT = Path(__file__).resolve().parents[2]


def _cli(args, capsys):
    with pytest.raises(SystemExit) as e:
        main(args)
    cap = capsys.readouterr()
    return e.value.code, cap.out, cap.err


def _one_line_exit_2(args, capsys, max_len=600):
    code, out, err = _cli(args, capsys)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2, (args, out, err)
    assert len(lines) == 1 and lines[0].startswith("error:"), err
    assert len(lines[0]) <= max_len, len(lines[0])  # the bad value is not echoed whole
    return lines[0]


def test_huge_values_and_keys_are_not_echoed_whole(capsys, tmp_path):
    big = "9" * 100_000
    _one_line_exit_2(["run", "variational.fig3", "--set", f"k_max=[{big}]", "--out", str(tmp_path)], capsys)
    _one_line_exit_2(["run", "variational.fig3", "--set", f"ns={big}", "--out", str(tmp_path)], capsys)
    _one_line_exit_2(["run", "variational.fig3", "--set", f"{'k' * 100_000}=1", "--out", str(tmp_path)], capsys)


def test_yaml_alias_bomb_binary_deep_and_duplicate_keys(capsys, tmp_path):
    bomb = tmp_path / "bomb.yaml"
    lines = ['a: &a ["x","x","x","x","x","x","x","x","x","x"]']
    for i in range(1, 8):
        lines.append(f"{chr(97 + i)}: &{chr(97 + i)} [{','.join(['*' + chr(96 + i)] * 10)}]")
    lines.append("k_max: *h")
    bomb.write_text("\n".join(lines))
    line = _one_line_exit_2(["run", "variational.fig3", "--config", str(bomb), "--out", str(tmp_path)], capsys)
    assert len(line) < 600
    binary = tmp_path / "bin.yaml"
    binary.write_bytes(bytes(range(256)) * 4)
    _one_line_exit_2(["run", "variational.fig3", "--config", str(binary), "--out", str(tmp_path)], capsys)
    deep = tmp_path / "deep.yaml"
    deep.write_text("k_max: " + "[" * 50_000 + "]" * 50_000)
    _one_line_exit_2(["run", "variational.fig3", "--config", str(deep), "--out", str(tmp_path)], capsys)
    dup = tmp_path / "dup.yaml"
    dup.write_text("k_max: 8\nk_max: 16\n")
    with pytest.raises(UserError, match="duplicate key"):
        load_config_file(dup)


def test_booleans_are_not_numbers():
    exp = get_experiment("variational.fig3")
    for pair in ("k_max=true", "ns=[true,64]", "tol=false"):
        with pytest.raises(UserError, match="must be a number"):
            build_config(exp.Config, parse_sets([pair]))
    # the message says what is allowed, as for an out-of-range number (the field's bounds)
    with pytest.raises(UserError, match=r"'tol' must be a number > 0 and < 0\.5, got True"):
        build_config(exp.Config, parse_sets(["tol=true"]))
    with pytest.raises(UserError, match=r"'k_max' must be a number >= 4, got False"):
        build_config(exp.Config, parse_sets(["k_max=false"]))


def test_seeds_and_seed_limits(capsys, tmp_path):
    for args in (["--seed", str(2**63)], ["--seeds", "1000000000"], ["--seeds", "0"], ["--seeds", "1e9"]):
        _one_line_exit_2(["run", "variational.fig3", *args, "--out", str(tmp_path)], capsys)
    with pytest.raises(UserError, match="2\\^63"):
        plan_run("variational.ill-posed", seed=2**63 - 2, seeds=5)


def test_a_seed_list_is_checked_on_every_seed(tmp_path):
    """An explicit seed list is checked on its largest seed, wherever it is (``[2^63, 1]`` was accepted and
    ``[2^64, 0]`` overflowed in torch), with a message about the list, not ``--seed``."""
    for seeds in ([2**63, 1], [1, 2**63], [2**64, 0]):
        with pytest.raises(UserError, match=r"^seeds \[.*\]: expected distinct integers in \[0, 2\^63\)$"):
            plan_run("grassmann.thm3", quick=True, seeds=seeds)
    with pytest.raises(UserError, match=r"^seeds \[18446744073709551616, 0\]"):
        run_experiment("grassmann.thm3", quick=True, seeds=[2**64, 0], out=tmp_path)
    assert not any(tmp_path.iterdir())  # refused before anything is written


def test_empty_out_and_read_only_store(capsys, tmp_path):
    _one_line_exit_2(["run", "variational.fig3", "--quick", "--out", ""], capsys)
    blocked = tmp_path / "blocked"  # the store cannot be written: a file sits where a directory must go
    blocked.mkdir()
    (blocked / ".locks").write_text("not a directory")
    _one_line_exit_2(["run", "variational.fig3", "--quick", "--out", str(blocked)], capsys)
    (blocked / ".locks").unlink()
    (blocked / "variational.fig3").write_text("not a directory")
    _one_line_exit_2(["run", "variational.fig3", "--quick", "--out", str(blocked)], capsys)


def test_bad_thread_count_is_one_line(tmp_path):
    env = {**os.environ, "SSLDYN_THREADS": "abc", "PYTHONPATH": str(ROOT / "src")}
    p = subprocess.run([sys.executable, "-m", "ssldyn.lab.cli", "list"], env=env, capture_output=True, text=True,
                       timeout=120)  # fmt: skip
    assert p.returncode == 2 and p.stderr.strip().startswith("error: SSLDYN_THREADS") and "Traceback" not in p.stderr


def test_grid_is_deduplicated_and_limited():
    assert expand_grid(["a=1,1,2", "b=[1],[1]"]) == [{"a": 1, "b": [1]}, {"a": 2, "b": [1]}]
    with pytest.raises(UserError, match="1000000 points"):
        expand_grid(["a=" + ",".join(map(str, range(1000))), "b=" + ",".join(map(str, range(1000)))])
    assert len(expand_grid(["a=" + ",".join(map(str, range(300)))], limit=None)) == 300


def test_one_invalid_sweep_point_does_not_stop_the_others(capsys, tmp_path, toy):
    code, out, err = _cli(["run", toy.name, "--quick", "--seeds", "1", "--sweep", "n=2,-1,3", "--out",
                           str(tmp_path)], capsys)  # fmt: skip
    assert code == 1 and "invalid point n=-1" in err
    assert len(list((tmp_path / toy.name).glob("*/DONE"))) == 2


def test_experiment_names_are_path_safe():
    class Bad(Experiment):
        name = "variational.a/b"
        paper = "variational"

    with pytest.raises(ValueError, match="lowercase"):
        register(Bad)


def test_out_that_cannot_be_created_is_refused_up_front_and_the_check_leaves_no_trace(tmp_path, monkeypatch):
    """``--out`` is tried for real (created, then removed): a folder the OS refuses (e.g. under /proc, where
    os.access says yes for root) is one UserError before anything runs; a creatable one is left as it was."""
    from pathlib import Path

    from ssldyn.lab.store import check_out_dir

    fresh = tmp_path / "a" / "b"
    check_out_dir(fresh)
    assert not (tmp_path / "a").exists()  # the check created and removed it

    def refuse(self, *a, **k):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(Path, "mkdir", refuse)
    with pytest.raises(UserError, match=r"^--out '.*/a/b': cannot be created \(Permission denied\)$"):
        check_out_dir(fresh)


def test_report_of_a_store_without_runs_warns(tmp_path, capsys):
    """``ssldyn report`` on an empty folder still writes its (empty) report, but says on stderr that it holds no
    finished runs: a wrong --out is seen, not a report of nothing."""
    code, _, err = _cli(["report", str(tmp_path)], capsys)
    assert code in (0, None)
    assert "warning: no finished runs in" in err and (tmp_path / "report" / "index.html").is_file()


def test_progress_prints_a_plain_line_per_finished_run_when_not_a_terminal(capsys):
    """With output redirected (no terminal: rich shows no live bar), each finished or failed run prints one line on
    stderr (stdout keeps the result tables), so a long reproduce's log grows as it goes; on a terminal the live bar
    alone."""
    import io

    from rich.console import Console

    from ssldyn.contract.context import progress_display
    from ssldyn.lab.executors import _Bar

    for terminal, want in ((False, 3), (True, 0)):
        buf = io.StringIO()
        with progress_display(Console(file=buf, force_terminal=terminal, width=100)) as p:
            bar = _Bar(p, 3, "runs")
            bar.update(running=1, label="x")  # started: no line
            bar.update(done=1, running=0)
            bar.update(failed=1, running=0)
            bar.update(done=1, running=0)
        err = capsys.readouterr().err
        lines = [ln for ln in err.splitlines() if ln.startswith("runs: ") and ln.endswith("/3)")]
        assert len(lines) == want, err
        assert "/3)" not in buf.getvalue()
        if want:
            assert lines[0] == "runs: 1 done · 0 running · 0 failed (1/3)"
            assert lines[-1] == "runs: 2 done · 0 running · 1 failed (3/3)"
