"""Per-paper scores: which of a paper's results reproduce, from the paper-default runs.

The headline of ``ssldyn reproduce`` and of the report come from the *canonical* run of each
experiment — its paper-default configuration with the default seeds, at paper scale when
such a run exists, else at quick scale — never from whichever run finished last. Only
``paper`` and ``consequence`` claims count; ``sanity`` checks are reported separately and
errata are listed on their own.

A paper's results table has one row per result of the paper (a figure, table, theorem...:
each claim's ``result``), with a status:

* ``reproduced`` — every paper/consequence claim of the row ran and passed (its controls failed);
* ``incomplete`` — at least one of the row's claims did not run (e.g. Fig. 1 without CIFAR):
  never "reproduced", whatever the others show;
* ``partly`` — some pass, others fail, are inconclusive or vacuous;
* ``inconclusive`` — none fails and none passes: their intervals contain the threshold;
* ``vacuous`` — none fails or passes and a control satisfies the statement too;
* ``does not reproduce`` — none passes and at least one fails (the failing claims carry numbers and
  an explanation);
* ``not run`` — no canonical run holds a claim of the row (or none of its claims could be measured).

Every count of verdicts — CLI, :mod:`ssldyn.results`, report — comes from :func:`outcome_counts`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ssldyn.contract.claims import Claim, result_row, status_of

__all__ = [
    "SCORED_KINDS", "STATUS_ORDER", "Outcomes", "outcome_counts", "ResultRow", "PaperScore", "run_scale", "run_rank",
    "canonical_runs", "paper_scores",
]  # fmt: skip

SCORED_KINDS = ("paper", "consequence")
STATUS_ORDER = ("reproduced", "partly", "inconclusive", "vacuous", "does not reproduce", "incomplete", "not run")


@dataclass
class Outcomes:
    """Counts of claim verdicts (see :data:`ssldyn.contract.claims.STATUSES`)."""

    passed: int = 0
    failed: int = 0
    inconclusive: int = 0
    vacuous: int = 0
    not_run: int = 0

    def add(self, status: str) -> None:
        attr = {"pass": "passed", "fail": "failed", "inconclusive": "inconclusive", "vacuous": "vacuous",
                "not-run": "not_run"}.get(status, "failed")  # fmt: skip
        setattr(self, attr, getattr(self, attr) + 1)

    @property
    def ran(self) -> int:
        """Claims that were measured (every verdict except not-run)."""
        return self.passed + self.failed + self.inconclusive + self.vacuous

    @property
    def total(self) -> int:
        return self.ran + self.not_run

    def text(self, noun: str = "") -> str:
        """``12/15 pass · 1 fail · 1 inconclusive · 1 vacuous · 2 not run`` (zero counts left out);
        ``noun`` goes before "pass" (``12/15 claims pass ...``)."""
        parts = [f"{self.passed}/{self.ran} {noun + ' ' if noun else ''}pass"]
        for n, word in ((self.failed, "fail"), (self.inconclusive, "inconclusive"), (self.vacuous, "vacuous"),
                        (self.not_run, "not run")):  # fmt: skip
            if n:
                parts.append(f"{n} {word}")
        return " · ".join(parts)


def outcome_counts(claims: Iterable[Any], kinds: tuple[str, ...] | None = SCORED_KINDS) -> Outcomes:
    """Verdict counts of ``claims`` (:class:`Claim` records) of the given kinds (``None``: all kinds)."""
    out = Outcomes()
    for c in claims:
        if kinds is None or c.kind in kinds:
            out.add(status_of(c))
    return out


@dataclass
class ResultRow:
    """One row of a paper's results table."""

    paper: str
    result: str
    experiments: list[str] = field(default_factory=list)
    outcomes: Outcomes = field(default_factory=Outcomes)
    failing: list[tuple[str, Claim]] = field(default_factory=list)  # (experiment, claim) not passing

    @property
    def status(self) -> str:
        o = self.outcomes
        if o.ran == 0:
            return "not run"
        if o.not_run:
            return "incomplete"
        if o.passed == o.ran:
            return "reproduced"
        if o.passed:
            return "partly"
        if o.failed:
            return "does not reproduce"
        return "inconclusive" if o.inconclusive else "vacuous"


@dataclass
class PaperScore:
    """Headline numbers and the results table of one paper."""

    paper: str
    rows: list[ResultRow]
    outcomes: Outcomes = field(default_factory=Outcomes)
    sanity_passed: int = 0
    sanity_total: int = 0
    sanity_not_run: int = 0  # of sanity_total: not run (e.g. a run at another scale than the check's)
    errata: list[tuple[str, Claim]] = field(default_factory=list)
    scales: dict[str, str] = field(default_factory=dict)  # experiment -> "paper" | "quick"

    @property
    def passed(self) -> int:
        return self.outcomes.passed

    def sanity_text(self) -> str:
        """``18/18 pass · 3 not run`` (the checks run, and those not run apart)."""
        run = self.sanity_total - self.sanity_not_run
        return f"{self.sanity_passed}/{run} pass" + (f" · {self.sanity_not_run} not run" if self.sanity_not_run else "")

    @property
    def total(self) -> int:
        """Paper/consequence claims that ran (pass, fail, inconclusive or vacuous)."""
        return self.outcomes.ran

    def scale_text(self) -> str:
        """``paper scale`` / ``quick scale`` / ``mixed: 3 paper scale, 5 quick``."""
        vals = list(self.scales.values())
        if not vals:
            return ""
        if all(v == "paper" for v in vals):
            return "paper scale"
        if all(v == "quick" for v in vals):
            return "quick scale"
        return f"mixed: {vals.count('paper')} paper scale, {vals.count('quick')} quick"

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = dict.fromkeys(STATUS_ORDER, 0)
        for r in self.rows:
            out[r.status] += 1
        return out


def run_scale(preset: Any) -> str:
    """The scale of a run of preset ``preset``: ``"paper"`` (``paper``, or ``default`` in older stores) or ``"quick"``."""
    return "paper" if preset in ("paper", "default") else "quick"


def run_rank(meta: dict[str, Any]) -> tuple[int, int]:
    """Sort key of a run as a headline candidate: canonical first, paper scale before quick."""
    canonical = bool(meta.get("canonical"))
    preset = str(meta.get("preset", ""))
    return (0 if canonical else 1, 0 if run_scale(preset) == "paper" else 1)


def canonical_runs(runs: Iterable[Any]) -> dict[str, Any]:
    """``{experiment: run}`` — each experiment's canonical run (paper scale if present, else quick).

    ``runs`` are :class:`~ssldyn.lab.store.StoredRun` objects, newest first; a run that is not
    canonical (overrides, other seeds) never becomes the headline.
    """
    best: dict[str, tuple[tuple[int, int], Any]] = {}
    for r in runs:
        try:
            meta = r.meta
            name = r.experiment
        except (OSError, ValueError, KeyError):
            continue
        rank = run_rank(meta)
        if rank[0] != 0:
            continue
        if name not in best or rank < best[name][0]:
            best[name] = (rank, r)
    return {k: v[1] for k, v in best.items()}


def paper_scores(experiments: Iterable[Any], runs_by_exp: dict[str, Any]) -> dict[str, PaperScore]:
    """Scores per paper from registered ``experiments`` (classes) and their canonical runs."""
    rows: dict[str, dict[str, ResultRow]] = defaultdict(dict)
    scores: dict[str, PaperScore] = {}
    exps = list(experiments)
    for exp in exps:  # rows declared statically, so results of experiments not run show as "not run"
        for spec in exp.claims:
            if spec.kind in ("paper", "consequence"):
                row = rows[exp.paper].setdefault(spec.row, ResultRow(exp.paper, spec.row))
                if exp.name not in row.experiments:
                    row.experiments.append(exp.name)
    for exp in exps:
        sc = scores.setdefault(exp.paper, PaperScore(exp.paper, []))
        run = runs_by_exp.get(exp.name)
        if run is None:
            continue
        try:
            claims = run.claims
            preset = str(run.meta.get("preset", ""))
        except (OSError, ValueError, KeyError):
            continue
        sc.scales[exp.name] = run_scale(preset)
        for c in claims:
            if c.kind == "erratum":
                sc.errata.append((exp.name, c))
                continue
            if c.kind == "sanity":
                sc.sanity_total += 1
                sc.sanity_passed += bool(c.passed)
                sc.sanity_not_run += status_of(c) == "not-run"
                continue
            key = result_row(c.result, c.location)
            row = rows[exp.paper].setdefault(key, ResultRow(exp.paper, key))
            if exp.name not in row.experiments:
                row.experiments.append(exp.name)
            status = status_of(c)
            row.outcomes.add(status)
            sc.outcomes.add(status)
            if status not in ("pass", "not-run"):
                row.failing.append((exp.name, c))
    for paper, sc in scores.items():
        sc.rows = sorted(rows[paper].values(), key=lambda r: _row_sort_key(r.result))
    return scores


def _row_sort_key(result: str) -> tuple[int, list[Any]]:
    order = ["Fig.", "Table", "Sec.", "Thm.", "Lemma", "Prop.", "Cor.", "Remark", "Conj.", "Example", "Def.", "eq.",
             "App."]  # fmt: skip
    kind, _, num = result.partition(" ")
    parts: list[Any] = []
    for p in num.split("."):
        parts.append((0, int(p), "") if p.isdigit() else (1, 0, p))
    return (order.index(kind) if kind in order else len(order), parts)
