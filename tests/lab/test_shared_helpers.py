"""The lab's helpers written once and shared by the CLI, the report, the study pages and the store
(issue 29, item 2): each checked against values written out by hand."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from ssldyn.contract.claims import ClaimSpec, gt, result_row, verdict_of
from ssldyn.errors import UserError
from ssldyn.lab.robustness import claims_at
from ssldyn.lab.scores import run_rank, run_scale
from ssldyn.lab.study import point_text, selects, value_key, value_text
from ssldyn.lab.tasks import check_count

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("value", "text"),
    [("relu", "relu"), (1.0, "1.0"), (3, "3"), (True, "true"), (None, "null"), ([1, 2], "[1, 2]"),
     ({"b": 1, "a": 2}, '{"b": 1, "a": 2}'), ("a b", "a b")],
)  # fmt: skip
def test_value_text_writes_values_as_the_user_types_them(value, text):
    assert value_text(value) == text


def test_point_text_keeps_the_order_given():
    assert point_text({"tau": 0.2, "act": "relu", "widths": [10, 100]}) == "tau=0.2, act=relu, widths=[10, 100]"
    assert point_text({}) == ""


def test_value_key_matches_equal_values_whatever_their_key_order():
    assert value_key({"a": 1, "b": 2}) == value_key({"b": 2, "a": 1}) == '{"a": 1, "b": 2}'
    assert value_key(1.0) == "1.0" and value_key("x") == '"x"'
    assert value_key([1, 2]) != value_key([2, 1])


def test_selects_names_and_papers():
    assert selects(None, "variational.fig5")
    assert selects(["variational.fig5"], "variational.fig5")
    assert selects(["variational"], "variational.fig5")
    assert not selects(["variational.fig"], "variational.fig5")
    assert not selects(["grassmann", "nonlinearity.fig4"], "variational.fig5")
    assert not selects([], "variational.fig5")


def test_result_row_is_the_declared_result_else_the_first_reference():
    assert result_row("Table 1", "Fig. 3") == "Table 1"
    assert result_row("", "Figure 3 (left), Remark 3.1") == "Fig. 3"
    assert result_row("", "the abstract") == "the abstract"
    spec = ClaimSpec("x", "s", "Theorem 4.2 and Fig. 1", "paper", "r", gt(0.1), "relation: r")
    assert spec.row == result_row("", spec.location) == "Thm. 4.2"


@pytest.mark.parametrize(
    ("status", "passed", "words"),
    [("pass", True, ("pass", "PASS")), ("fail", False, ("fail", "FAIL")), ("inconclusive", False, ("inc", "INCONCLUSIVE")),
     ("vacuous", False, ("vac", "VACUOUS")), ("not-run", False, ("nr", "NOT RUN")), ("", True, ("pass", "PASS")),
     ("", False, ("fail", "FAIL"))],
)  # fmt: skip
def test_verdict_of_a_claim_and_of_a_record_without_status(status, passed, words):
    assert verdict_of(SimpleNamespace(status=status, passed=passed)) == words


def test_run_scale_and_the_headline_rank_agree():
    assert [run_scale(p) for p in ("paper", "default", "quick", "", None)] == [
        "paper",
        "paper",
        "quick",
        "quick",
        "quick",
    ]
    assert run_rank({"canonical": True, "preset": "paper"}) == (0, 0)
    assert run_rank({"canonical": True, "preset": "quick"}) == (0, 1)
    assert run_rank({"preset": "default"}) == (1, 0)


def test_claims_at_keeps_the_order_asked_and_the_first_claim_of_an_id():
    a, b, b2 = (SimpleNamespace(id=i, n=n) for i, n in (("a", 1), ("b", 2), ("b", 3)))
    run = SimpleNamespace(claims=[b, a, b2])
    assert claims_at(run, ["a", "b", "c"]) == [("a", a), ("b", b), ("c", None)]
    assert claims_at(None, ["a", "b"]) == [("a", None), ("b", None)]


def test_check_count_accepts_positive_integers_only():
    assert check_count("--jobs", 3) == 3
    for bad, shown in ((0, "0"), (-2, "-2"), (True, "True"), (1.5, "1.5"), ("2", "'2'")):
        with pytest.raises(UserError, match=rf"^--jobs {shown}: must be an integer >= 1$"):
            check_count("--jobs", bad)


def test_the_cli_and_the_executor_check_the_same_way(tmp_path):
    from ssldyn.lab import cli
    from ssldyn.lab.executors import check_executor, execute

    for check in (check_executor, cli._check_executor):
        with pytest.raises(UserError, match=r"^--executor 'slurm': allowed values are local, ray$"):
            check("slurm", 0)
        with pytest.raises(UserError, match=r"^--max-retries -1: must be >= 0$"):
            check("local", -1)
    with pytest.raises(UserError, match=r"^--executor 'slurm'"):
        execute([], tmp_path, executor="slurm")
    with pytest.raises(UserError, match=r"^--jobs 0: must be an integer >= 1$"):
        cli._jobs(0, "cpu")
    with pytest.raises(UserError, match=r"^--jobs 0: must be an integer >= 1$"):
        execute([], tmp_path, jobs=0)
    assert cli._jobs(None, "cuda") == 1 and cli._jobs(None, "cpu") == len(os.sched_getaffinity(0))
    for out in ("", "  "):
        with pytest.raises(UserError, match=r"^--out '': give a directory \(default: ssldyn-runs\)$"):
            cli._check_out(out)


def test_report_links_and_anchors():
    from ssldyn.lab.report_study import relative_url, slug

    assert slug("variational.fig5") == "variational.fig5"
    assert slug("sweep: tau=0.2 / w") == "sweep_tau_0.2_w" and slug("///") == "x"
    assert relative_url(Path("/o/a b/fig 1.png"), Path("/o/report")) == "../a%20b/fig%201.png"
    assert relative_url(Path("/o/report/studies/x.html"), Path("/o/report")) == "studies/x.html"


def test_the_threads_module_is_light_so_the_cli_checks_the_environment_first():
    probe = "import json, sys; import ssldyn.contract.threads as t; print(json.dumps(['torch' in sys.modules, t.threads_from_env(7)]))"
    env = {k: v for k, v in os.environ.items() if k != "SSLDYN_THREADS"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    done = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [False, 7]
