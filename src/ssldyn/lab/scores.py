"""Per-paper scores: which of a paper's results reproduce, from the paper-default runs.

The headline of ``ssldyn reproduce`` and of the report come from the *canonical* run of each
experiment — its paper-default configuration with the default seeds, at paper scale when
such a run exists, else at quick scale — never from whichever run finished last. Only
``paper`` and ``consequence`` claims count; ``sanity`` checks are reported separately and
errata are listed on their own.

A paper's results table has one row per result of the paper (a figure, table, theorem...:
each claim's ``result``), with a status:

* ``reproduced`` — every paper/consequence claim of the row passes;
* ``partly`` — some pass;
* ``does not reproduce`` — none passes (the failing claims carry numbers and an explanation);
* ``not run`` — no canonical run holds a claim of the row (or its claims could not be measured).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ssldyn.lab.claims import Claim, references

__all__ = ["SCORED_KINDS", "STATUS_ORDER", "ResultRow", "PaperScore", "run_rank", "canonical_runs", "paper_scores"]

SCORED_KINDS = ("paper", "consequence")
STATUS_ORDER = ("reproduced", "partly", "does not reproduce", "not run")


@dataclass
class ResultRow:
    """One row of a paper's results table."""

    paper: str
    result: str
    experiments: list[str] = field(default_factory=list)
    passed: int = 0
    failed: int = 0
    not_run: int = 0
    failing: list[tuple[str, Claim]] = field(default_factory=list)  # (experiment, claim)

    @property
    def total(self) -> int:
        return self.passed + self.failed

    @property
    def status(self) -> str:
        if self.total == 0:
            return "not run"
        if self.failed == 0:
            return "reproduced"
        return "partly" if self.passed else "does not reproduce"


@dataclass
class PaperScore:
    """Headline numbers and the results table of one paper."""

    paper: str
    rows: list[ResultRow]
    passed: int = 0
    total: int = 0
    sanity_passed: int = 0
    sanity_total: int = 0
    errata: list[tuple[str, Claim]] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = dict.fromkeys(STATUS_ORDER, 0)
        for r in self.rows:
            out[r.status] += 1
        return out


def run_rank(meta: dict[str, Any]) -> tuple[int, int]:
    """Sort key of a run as a headline candidate: canonical first, paper scale before quick."""
    canonical = bool(meta.get("canonical"))
    preset = str(meta.get("preset", ""))
    return (0 if canonical else 1, 0 if preset in ("paper", "default") else 1)


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


def _row_of(claim: Claim) -> str:
    if claim.result:
        return claim.result
    refs = references(claim.location)
    return refs[0] if refs else claim.location


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
        except (OSError, ValueError, KeyError):
            continue
        for c in claims:
            if c.kind == "erratum":
                sc.errata.append((exp.name, c))
                continue
            if c.kind == "sanity":
                sc.sanity_total += 1
                sc.sanity_passed += bool(c.passed)
                continue
            key = _row_of(c)
            row = rows[exp.paper].setdefault(key, ResultRow(exp.paper, key))
            if exp.name not in row.experiments:
                row.experiments.append(exp.name)
            if c.status == "not-run":
                row.not_run += 1
                continue
            sc.total += 1
            sc.passed += bool(c.passed)
            if c.passed:
                row.passed += 1
            else:
                row.failed += 1
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
