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
from ssldyn.lab.scores import (
    Outcomes,
    PaperScore,
    ResultRow,
    canonical_runs,
    outcome_counts,
    paper_scores,
    run_rank,
    run_scale,
)
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


# --- scores (ssldyn.lab.scores): verdict counts, result rows and the headline run, on hand-made claims -------------
def _c(kind, status, result="Fig. 2", id="x"):
    """A stored claim as the scores read it: kind, verdict, row."""
    return SimpleNamespace(id=id, kind=kind, status=status, passed=status == "pass", result=result, location=result)


def test_outcome_counts_count_each_verdict_of_the_scored_kinds():
    claims = [_c("paper", "pass"), _c("consequence", "pass"), _c("paper", "pass"), _c("consequence", "fail"),
              _c("paper", "inconclusive"), _c("paper", "vacuous"), _c("paper", "not-run"), _c("sanity", "pass"),
              _c("erratum", "fail")]  # fmt: skip
    o = outcome_counts(claims)
    assert (o.passed, o.failed, o.inconclusive, o.vacuous, o.not_run) == (3, 1, 1, 1, 1)
    assert o.ran == 6 and o.total == 7
    assert o.text("claims") == "3/6 claims pass · 1 fail · 1 inconclusive · 1 vacuous · 1 not run"
    every = outcome_counts(claims, None)  # all kinds: the sanity pass and the erratum's fail too
    assert (every.passed, every.failed, every.ran, every.total) == (4, 2, 8, 9)
    assert outcome_counts([_c("paper", "pass"), _c("paper", "pass")]).text() == "2/2 pass"  # zero counts left out
    weird = Outcomes()
    weird.add("exploded")  # a verdict this version does not know is never counted as a pass
    assert (weird.passed, weird.failed) == (0, 1)


@pytest.mark.parametrize(
    ("counts", "status"),
    [({}, "not run"), ({"not_run": 2}, "not run"), ({"passed": 2, "not_run": 1}, "incomplete"),
     ({"passed": 2}, "reproduced"), ({"passed": 1, "inconclusive": 1}, "partly"), ({"passed": 1, "failed": 1}, "partly"),
     ({"passed": 1, "vacuous": 1}, "partly"), ({"failed": 1, "inconclusive": 1}, "does not reproduce"),
     ({"failed": 2}, "does not reproduce"), ({"inconclusive": 1, "vacuous": 1}, "inconclusive"),
     ({"vacuous": 2}, "vacuous")],
)  # fmt: skip
def test_result_row_status_follows_the_documented_table(counts, status):
    assert ResultRow("p", "Fig. 1", outcomes=Outcomes(**counts)).status == status


def test_scale_text_of_a_paper_score():
    assert PaperScore("p", []).scale_text() == ""
    assert PaperScore("p", [], scales={"a": "paper", "b": "paper"}).scale_text() == "paper scale"
    assert PaperScore("p", [], scales={"a": "quick"}).scale_text() == "quick scale"
    assert PaperScore("p", [], scales={"a": "paper", "b": "quick", "c": "quick"}).scale_text() == (
        "mixed: 1 paper scale, 2 quick"
    )


def test_canonical_runs_pick_the_newest_canonical_run_at_the_largest_scale():
    def run(exp, canonical, preset, tag):
        return SimpleNamespace(experiment=exp, meta={"canonical": canonical, "preset": preset}, tag=tag)

    class Damaged:
        experiment = "a"

        @property
        def meta(self):
            raise OSError("meta.json unreadable")

    runs = [  # newest first, as the store lists them
        Damaged(), run("a", False, "paper", "a variant"), run("a", True, "quick", "a quick new"),
        run("a", True, "paper", "a paper"), run("a", True, "quick", "a quick old"),
        run("b", True, "quick", "b new"), run("b", True, "quick", "b old"), run("c", False, "paper", "c variant"),
    ]  # fmt: skip
    assert {k: r.tag for k, r in canonical_runs(runs).items()} == {"a": "a paper", "b": "b new"}


def test_paper_scores_rows_counts_sanity_and_errata():
    def claim_spec(id, location, kind="paper"):
        extra = {"derivation": "d"} if kind == "consequence" else {}
        return ClaimSpec(id, "s", location, kind, "r", gt(0.1), "relation: r", **extra)

    e1 = SimpleNamespace(name="p.e1", paper="p", claims=[claim_spec("a", "Fig. 2"), claim_spec("b", "Fig. 10"),
                                                          claim_spec("s", "our implementation", "sanity")])  # fmt: skip
    e2 = SimpleNamespace(name="p.e2", paper="p", claims=[claim_spec("t", "Theorem 1", "consequence")])
    stored = [_c("paper", "pass", "Fig. 2", "a"), _c("paper", "inconclusive", "Fig. 2", "a2"),
              _c("paper", "not-run", "Fig. 10", "b"), _c("paper", "pass", "Fig. 10", "b2"),
              _c("sanity", "pass", "our implementation", "s"), _c("sanity", "fail", "our implementation", "s2"),
              _c("sanity", "not-run", "our implementation", "s3"), _c("erratum", "pass", "eq. 11", "e")]  # fmt: skip
    run1 = SimpleNamespace(claims=stored, meta={"preset": "quick"})
    (sc,) = paper_scores([e1, e2], {"p.e1": run1}).values()  # p.e2 never ran: its row stays, "not run"
    assert [(r.result, r.status, r.experiments) for r in sc.rows] == [
        ("Fig. 2", "partly", ["p.e1"]),
        ("Fig. 10", "incomplete", ["p.e1"]),
        ("Thm. 1", "not run", ["p.e2"]),
    ]  # numeric order within a kind (Fig. 2 before Fig. 10), figures before theorems; no row for a sanity check
    o = sc.outcomes
    assert (o.passed, o.failed, o.inconclusive, o.vacuous, o.not_run) == (2, 0, 1, 0, 1) and sc.total == 3
    assert [c.id for _, c in sc.rows[0].failing] == ["a2"] and sc.rows[1].failing == []  # not run is not failing
    assert (sc.sanity_passed, sc.sanity_total, sc.sanity_not_run) == (1, 3, 1) and [c.id for _, c in sc.errata] == ["e"]
    assert sc.sanity_text() == "1/2 pass · 1 not run"  # a check not run is neither passed nor failed
    assert sc.scales == {"p.e1": "quick"} and sc.counts()["partly"] == 1 and sc.counts()["not run"] == 1
