"""Bad requests are refused with one error line before anything runs, and never damage earlier results (review items
2-10: a report or ``--out`` inside a run directory, overlapping overrides, ``--paper`` with ``--only``,
``--tensorboard`` without TensorBoard, a missing data directory, a dry run of a sweep with invalid points,
``Results.select`` filters that match nothing by mistake, Ray options with the local executor, the dry-run
estimate's seeds)."""

from __future__ import annotations

import sys

import pytest

from ssldyn.errors import UserError
from ssldyn.lab.store import RunStore, verify_run
from tests.lab.test_cli import run_cli


def _one_error_line(err: str) -> str:
    lines = [ln for ln in err.strip().splitlines() if ln]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    return lines[0]


def _snapshot(root):
    """Every file under ``root`` with its bytes (what a refused command must leave as it was)."""
    return {p.relative_to(root): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def stored(tmp_path, toy, capsys):
    """A store with one finished toy run: ``(store, run directory)``."""
    out = tmp_path / "store"
    assert run_cli(["run", toy.name, "--quick", "--seeds", "1", "--out", str(out)], capsys)[0] == 0
    (run_dir,) = [p.parent for p in (out / toy.name).glob("*/DONE")]
    return out, run_dir


# -- item 2: a report or --out inside a run directory -------------------------------------------------------------


@pytest.mark.parametrize("where", ["run", "inside-run", "experiment"])
def test_report_inside_a_run_directory_is_refused_and_the_run_stays_intact(stored, toy, capsys, where):
    out, run_dir = stored
    target = {"run": run_dir, "inside-run": run_dir / "figures", "experiment": run_dir.parent}[where]
    target.mkdir(exist_ok=True)
    before = _snapshot(out)
    code, _, err = run_cli(["report", str(target)], capsys)
    line = _one_error_line(err)
    assert code == 2 and f"of the run store {str(out)!r}; give the store ({out})" in line, line
    assert (str(run_dir) if where != "experiment" else str(run_dir.parent)) in line
    assert _snapshot(out) == before and verify_run(run_dir) is None
    assert not RunStore(out).damaged()
    assert run_cli(["report", str(out)], capsys)[0] == 0  # the store itself: fine


@pytest.mark.parametrize("dry", [True, False])
def test_out_inside_a_run_directory_is_refused_and_the_run_stays_intact(stored, toy, capsys, dry):
    out, run_dir = stored
    before = _snapshot(out)
    args = ["run", toy.name, "--quick", "--seeds", "2", "--out", str(run_dir)] + (["--dry-run"] if dry else [])
    code, _, err = run_cli(args, capsys)
    line = _one_error_line(err)
    assert code == 2 and line == (f"error: --out {str(run_dir)!r} is the run directory {str(run_dir)!r} of the run "
                                  f"store {str(out)!r}; give the store ({out})")  # fmt: skip
    code, _, err = run_cli(["run", toy.name, "--quick", "--out", str(run_dir.parent / "sub")], capsys)
    assert code == 2 and "is inside the experiment folder" in _one_error_line(err)
    assert _snapshot(out) == before and verify_run(run_dir) is None and not RunStore(out).damaged()
    code, out_text, _ = run_cli(["run", toy.name, "--quick", "--seeds", "1", "--out", str(out)], capsys)
    assert code == 0 and "cached" in out_text  # not damaged, so not recomputed


def test_report_refuses_a_directory_that_is_not_a_run_store(tmp_path, capsys):
    other = tmp_path / "notes"
    (other / "drafts").mkdir(parents=True)
    (other / "drafts" / "a.txt").write_text("mine")
    (other / "report" / "studies").mkdir(parents=True)  # a report/studies folder that is not ours to delete
    (other / "report" / "studies" / "keep.txt").write_text("mine too")
    before = _snapshot(other)
    code, _, err = run_cli(["report", str(other)], capsys)
    assert code == 2 and "is not a run store" in _one_error_line(err)
    assert _snapshot(other) == before
    empty = tmp_path / "new"
    empty.mkdir()
    assert run_cli(["report", str(empty)], capsys)[0] == 0  # an empty directory is a new, empty store


# -- item 3: a key given twice ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args, expected",
    [
        (["--set", "tau=0.5", "--set", "tau=0.3"],
         "error: --set 'tau=0.3': 'tau' is given twice (also --set 'tau=0.5'); give each key once"),
        (["--set", "optim.lr=0.5", "--set", 'optim={"lr": 0.3}'], "overlaps 'optim.lr'"),
        (["--set", "tau=0.5", "--sweep", "tau=0.1,0.2"], "error: --sweep tau: also given with --set; drop one"),
        (["--set", 'optim={"lr": 0.3}', "--sweep", "optim.lr=0.1,0.2"],
         "error: --sweep optim.lr: also given with --set (as 'optim'); drop one"),
    ],
)  # fmt: skip
def test_a_key_given_twice_is_one_error_line(tmp_path, toy, capsys, args, expected):
    for dry in ([], ["--dry-run"]):
        code, _, err = run_cli(["run", toy.name, "--quick", *args, *dry, "--out", str(tmp_path / "o")], capsys)
        assert code == 2 and expected in _one_error_line(err)
    assert not (tmp_path / "o").exists()


def test_a_swept_key_in_the_config_file_is_one_error_line(tmp_path, toy, capsys):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("tau: 0.2\noptim:\n  lr: 0.3\n")
    base = ["run", toy.name, "--quick", "--config", str(cfg), "--dry-run", "--out", str(tmp_path / "o")]
    code, _, err = run_cli([*base, "--sweep", "optim.lr=0.1,0.2"], capsys)
    assert (
        code == 2
        and _one_error_line(err) == f"error: --sweep optim.lr: also given with --config {str(cfg)!r}; drop one"
    )
    assert run_cli([*base, "--sweep", "n=2,3"], capsys)[0] == 0  # another key: fine
    assert run_cli([*base, "--set", "tau=0.4"], capsys)[0] == 0  # --set over --config: documented, kept


def test_parse_sets_refuses_a_key_given_twice():
    from ssldyn.contract.config import parse_sets

    with pytest.raises(UserError, match=r"^--set 'n=3': 'n' is given twice \(also --set 'n=2'\); give each key once$"):
        parse_sets(["n=2", "n=3"])
    with pytest.raises(UserError, match="overlaps"):
        parse_sets(["optim.lr=0.1", 'optim={"lr": 1}'])
    assert parse_sets(["optim.lr=0.1", "optim.momentum=0.9"]) == {"optim": {"lr": 0.1, "momentum": 0.9}}


# -- item 4: reproduce --paper with --only ------------------------------------------------------------------------


def test_reproduce_validates_the_paper_with_only(tmp_path, capsys):
    out = ["--quick", "--dry-run", "--out", str(tmp_path)]
    code, _, err = run_cli(["reproduce", "--paper", "nosuch", "--only", "variational.fig3", *out], capsys)
    assert code == 2 and "unknown paper 'nosuch'" in _one_error_line(err)
    code, _, err = run_cli(["reproduce", "--paper", "grassmann", "--only", "variational.fig3", *out], capsys)
    assert code == 2 and _one_error_line(err).startswith(
        "error: --only variational.fig3 is not a grassmann experiment (--paper grassmann)"
    )
    code, text, _ = run_cli(["reproduce", "--paper", "grassmann", "--only", "grassmann.fig3", *out], capsys)
    assert code == 0 and "grassmann.fig3" in text
    assert not any(tmp_path.iterdir())


# -- item 5: --tensorboard without TensorBoard ------------------------------------------------------------------


@pytest.mark.parametrize("dry", [True, False])
def test_tensorboard_missing_fails_before_any_run(tmp_path, toy, capsys, monkeypatch, dry):
    from tests.lab.toy import CALLS

    monkeypatch.setitem(sys.modules, "tensorboard", None)  # not installed: find_spec gives None, import fails
    for args in (["run", toy.name, "--quick"], ["reproduce", "--quick", "--only", toy.name]):
        code, _, err = run_cli([*args, "--tensorboard", "--out", str(tmp_path / "o")] + (["--dry-run"] if dry else []),
                               capsys)  # fmt: skip
        assert code == 2, err
        assert _one_error_line(err) == "error: --tensorboard needs TensorBoard: pip install 'ssldyn[tensorboard]'"
    assert CALLS["run"] == 0 and not (tmp_path / "o").exists()  # nothing computed, nothing written


# -- item 6: a data directory that does not exist ----------------------------------------------------------------


@pytest.mark.parametrize("sets", [["cifar_dir=/nonexistent/cifar"], ["dataset=mnist", "data_dir=/nonexistent/mnist"]])
def test_fig1_missing_data_directory_fails_at_validation(tmp_path, capsys, sets):
    args = ["run", "variational.fig1", "--quick", "--dry-run", "--out", str(tmp_path)]
    for s in sets:
        args += ["--set", s]
    code, _, err = run_cli(args, capsys)
    key = sets[-1].split("=")[0]
    line = _one_error_line(err)
    assert code == 2 and f"invalid value for {key!r}" in line and "does not exist or is not a directory" in line
    assert not any(tmp_path.iterdir())
    code, text, _ = run_cli(["run", "variational.fig1", "--quick", "--dry-run", "--set", f"cifar_dir={tmp_path}",
                             "--out", str(tmp_path)], capsys)  # fmt: skip
    assert code == 0 and "dry run: 1 runs" in " ".join(text.split())  # an existing directory passes validation


@pytest.mark.parametrize("exp", ["grassmann.fig4", "nonlinearity.fig12"])
def test_other_data_dir_keys_fail_at_validation_too(tmp_path, capsys, exp):
    code, _, err = run_cli(["run", exp, "--quick", "--dry-run", "--set", "data_dir=/nonexistent/mnist",
                            "--out", str(tmp_path)], capsys)  # fmt: skip
    line = _one_error_line(err)
    assert code == 2 and "invalid value for 'data_dir'" in line and "/nonexistent/mnist" in line
    assert not any(tmp_path.iterdir())


# -- item 7: dry run of a sweep with invalid points ---------------------------------------------------------------


def test_dry_run_of_a_sweep_with_invalid_points_exits_1_like_the_run(tmp_path, toy, capsys):
    code, _, err = run_cli(["run", toy.name, "--quick", "--sweep", "n=2,-1", "--dry-run", "--out", str(tmp_path)],
                           capsys)  # fmt: skip
    assert code == 1 and "invalid point n=-1" in err
    assert not any(tmp_path.iterdir())
    assert run_cli(["run", toy.name, "--quick", "--sweep", "n=2,3", "--dry-run", "--out", str(tmp_path)],
                   capsys)[0] == 0  # fmt: skip


# -- item 8: Results.select ---------------------------------------------------------------------------------------


def test_select_refuses_a_misspelled_filter_and_matches_tuples(tmp_path, toy, capsys):
    from ssldyn.results import load

    out = tmp_path / "s"
    assert run_cli(["run", toy.name, "--quick", "--seeds", "1", "--set", "optim.lr=0.3", "--out", str(out)],
                   capsys)[0] == 0  # fmt: skip
    res = load(out)
    assert len(res.select(toy.name, optim__lr=0.3)) == 1 and len(res.select("variational", n=4)) == 1
    with pytest.raises(UserError, match=r"^select: config key 'optim.lrr' is in none of the selected runs' configs; "
                                        r"did you mean optim.lr\?$"):  # fmt: skip
        res.select(toy.name, optim__lrr=0.3)
    with pytest.raises(UserError, match=r"^select: unknown experiment 'variational.zz-toyy'; did you mean "):
        res.select("variational.zz-toyy")
    with pytest.raises(UserError, match=r"^select: unknown experiment 'physics'"):
        res.select("physics")
    with pytest.raises(UserError, match=r"^select: preset 'ful': allowed values are quick, paper$"):
        res.select(toy.name, preset="ful")
    assert len(res.select(toy.name, preset="paper")) == 0  # a valid filter that matches nothing: empty, no error
    assert len(res.select("grassmann.fig3")) == 0  # a registered experiment with no runs here: empty


def test_select_compares_tuples_with_stored_lists(tmp_path, capsys):
    from ssldyn.results import load

    out = tmp_path / "s"
    assert run_cli(["run", "variational.fig3", "--quick", "--set", "taus=[0.5,1.0]", "--out", str(out)],
                   capsys)[0] == 0  # fmt: skip
    res = load(out)
    assert len(res.select("variational.fig3", taus=[0.5, 1.0])) == 1
    assert len(res.select("variational.fig3", taus=(0.5, 1.0))) == 1
    assert len(res.select(config={"taus": (0.5, 1.0)})) == 1
    assert len(res.select(overrides={"taus": (0.5, 1.0)})) == 1
    # a list-valued key is a tuple in the frames (as `seeds`), so it can be grouped by, as the guide does with tau
    assert res.runs["taus"].tolist() == [(0.5, 1.0)]
    by = res.claims.groupby(["taus", "claim"]).size()
    assert set(by.index.get_level_values("taus")) == {(0.5, 1.0)} and len(by) == res.claims["claim"].nunique()


# -- item 9: Ray options with the local executor -----------------------------------------------------------------


@pytest.mark.parametrize(
    "args, expected",
    [
        (["--ray-address", "foo:1"], "error: --ray-address 'foo:1': applies only with --executor ray (not local)"),
        (["--address", "auto"], "error: --ray-address 'auto': applies only with --executor ray (not local)"),
        (["--max-retries", "5"], "error: --max-retries 5: applies only with --executor ray (not local)"),
    ],
)
def test_ray_options_with_the_local_executor_are_one_error_line(tmp_path, capsys, args, expected):
    for cmd in (["run", "variational.fig3", "--quick"], ["reproduce", "--quick", "--only", "variational.fig3"]):
        code, _, err = run_cli([*cmd, *args, "--dry-run", "--out", str(tmp_path)], capsys)
        assert code == 2 and _one_error_line(err).startswith(expected)
    code, _, _ = run_cli(["run", "variational.fig3", "--quick", "--max-retries", "2", "--dry-run", "--out",
                          str(tmp_path)], capsys)  # fmt: skip
    assert code == 0  # the default, given explicitly: harmless


@pytest.mark.parametrize(
    "args, expected",
    [
        (["--workers", "2"], "error: --workers 2: applies only with --executor local"),
        (["--jobs", "3"], "error: --jobs 3: applies only with --executor local"),
    ],
)
def test_local_process_options_with_ray_are_one_error_line(tmp_path, capsys, args, expected):
    """Under Ray, Ray schedules runs and tasks: ``--workers`` / ``--jobs N`` would be ignored silently."""
    for cmd in (["run", "variational.fig3", "--quick"], ["reproduce", "--quick", "--only", "variational.fig3"]):
        code, _, err = run_cli([*cmd, "--executor", "ray", *args, "--dry-run", "--out", str(tmp_path)], capsys)
        assert code == 2 and _one_error_line(err).startswith(expected)
    code, _, _ = run_cli(["run", "variational.fig3", "--quick", "--executor", "ray", "--jobs", "1", "--dry-run",
                          "--out", str(tmp_path)], capsys)  # fmt: skip
    assert code == 0  # one run at a time, given explicitly: harmless


def test_execute_refuses_local_process_options_with_ray(tmp_path):
    from ssldyn.errors import UserError
    from ssldyn.lab.executors import execute

    with pytest.raises(UserError, match="--workers 2: applies only with --executor local"):
        execute([], tmp_path / "out", executor="ray", workers=2)
    with pytest.raises(UserError, match="--jobs 4: applies only with --executor local"):
        execute([], tmp_path / "out", executor="ray", jobs=4)
    assert not (tmp_path / "out").exists()  # refused before anything is written


def test_the_cli_and_the_executor_share_the_default_retries():
    from ssldyn.lab import cli, executors

    assert cli.DEFAULT_MAX_RETRIES == executors.DEFAULT_MAX_RETRIES


# -- item 10: the dry-run estimate counts the seeds ---------------------------------------------------------------


def _estimate(text: str) -> str:
    import re

    m = re.search(r"estimated (~[\d.]+ (?:s|min|h))", " ".join(text.split()))
    assert m, text
    return m.group(1)


def test_dry_run_estimate_scales_with_the_seeds(tmp_path, capsys):
    from ssldyn.lab import manifest
    from ssldyn.lab.cli import _fmt_s

    quick_s = manifest.find("grassmann.fig3")["est_seconds"][0]  # for the preset's 3 seeds
    base = ["run", "grassmann.fig3", "--quick", "--dry-run", "--out", str(tmp_path)]
    assert _estimate(run_cli(base, capsys)[1]) == _fmt_s(quick_s)
    assert _estimate(run_cli([*base, "--seeds", "30"], capsys)[1]) == _fmt_s(quick_s * 10)
    assert _estimate(run_cli([*base, "--seeds", "300"], capsys)[1]) == _fmt_s(quick_s * 100)
    text = " ".join(run_cli([*base, "--set", "lr=0.02"], capsys)[1].split())
    assert "at the preset sizes" in text  # an override may change the size: said so
