"""Paper claims, declared by experiments and measured over seeds (docs/architecture.md, "The claims mechanism").

An experiment declares its claims as :class:`ClaimSpec` records — the statement in our words,
where the paper makes it, its provenance ``kind``, the ``reading`` (how the words became a
relation), the relation with the ``basis`` of its threshold, the summary statistic and the
pass rule — and measures one number per claim per seed in ``Experiment.measure``. The lab
evaluates every claim over the seeds of the run with :func:`evaluate`:

* per seed: does the measured value satisfy the relation?
* the statistic (mean, or median) of the per-seed values, with a 95 % interval
  (Student t for the mean, bootstrap percentile for the median, Wilson for a fraction); a yes/no
  relation (``is_true``, ``equals``) is read per seed: its statistic is the fraction of seeds where it holds;
* the rule (default :data:`MEAN_AND_80`: the relation holds for the statistic **and** for at
  least 80 % of the seeds; other rules must state a one-line reason).

``passed`` is always computed from measured numbers, never asserted.

Every claim must be able to fail (docs/architecture.md, "Claims"). A ``paper`` or
``consequence`` claim declares a **negative control** (``control``): a null condition measured in
the same run, per seed (at initialisation, after one step, with the linear activation, with the
other dynamics...), on which the statement must *not* hold; or, rarely, ``no_control`` with the
reason none is possible. The verdict (``Claim.status``) is one of

* ``pass`` — the rule holds and the 95 % interval lies on the relation's side of the threshold;
* ``fail`` — the rule fails and the interval does not reach the threshold;
* ``inconclusive`` — the 95 % interval of the statistic contains the threshold (for a yes/no
  claim: the fraction of seeds is below the rule but its Wilson upper bound reaches it), or a
  declared control was not measured;
* ``vacuous`` — the claim would pass, but its control's statistic satisfies the relation too:
  the measurement cannot tell the paper's condition from the null one;
* ``not-run`` — it could not be measured (e.g. no CIFAR directory).

Only ``pass`` counts as reproduced. A direction claim (``gt``/``lt``... ) carries its minimum
effect in the threshold, with the basis in ``effect``: a bare sign (threshold 0) is rejected for
paper and consequence claims. Intervals are intersected with the statistic's range (``bounds``).

Kinds (provenance):

* ``paper`` — a statement the paper makes, at ``location`` (section, equation, figure, theorem);
* ``consequence`` — a measurable consequence derived from a paper statement; ``derivation``
  holds the one-line derivation;
* ``sanity`` — a check of our implementation (e.g. closed form = autograd); never counted in a
  paper's score;
* ``erratum`` — where the printed text and the maths disagree (:class:`Erratum`): what is
  printed, what we use, and a measured demonstration.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal, get_args

#: a claim's provenance (module docstring, "Kinds")
ClaimKind = Literal["paper", "consequence", "sanity", "erratum"]
#: the summary statistic over seeds
Statistic = Literal["mean", "median"]
#: a measured claim's verdict (module docstring)
ClaimStatus = Literal["pass", "fail", "inconclusive", "vacuous", "not-run"]
KINDS: tuple[str, ...] = get_args(ClaimKind)
STATISTICS: tuple[str, ...] = get_args(Statistic)
STATUSES: tuple[str, ...] = get_args(ClaimStatus)
CONTROLLED_KINDS = ("paper", "consequence")
#: (CSS class, word) of each verdict, as the CLI and the report show it
VERDICT_WORDS = {
    "pass": ("pass", "PASS"), "fail": ("fail", "FAIL"), "inconclusive": ("inc", "INCONCLUSIVE"),
    "vacuous": ("vac", "VACUOUS"), "not-run": ("nr", "NOT RUN"),
}  # fmt: skip


def status_of(claim: Any) -> str:
    """A claim's verdict; a record stored before verdicts existed (no ``status``) reads as pass/fail."""
    return getattr(claim, "status", "") or ("pass" if claim.passed else "fail")


def verdict_words(status: str) -> tuple[str, str]:
    """(CSS class, word) of a verdict, as the CLI and the report show it (:data:`VERDICT_WORDS`)."""
    return VERDICT_WORDS.get(status, ("fail", status.upper()))


def verdict_of(claim: Any) -> tuple[str, str]:
    """(CSS class, word) of a claim's verdict (:func:`status_of`, :func:`verdict_words`): ``("pass", "PASS")``."""
    return verdict_words(status_of(claim))


# --------------------------------------------------------------------------------------
# relations
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Relation:
    """The relation a measured value must satisfy: ``op`` in gt, ge, lt, le, between, true, equals."""

    op: str
    ref: Any = None

    def __post_init__(self) -> None:
        if self.op not in {"gt", "ge", "lt", "le", "between", "true", "equals"}:
            raise ValueError(f"Relation op {self.op!r}: allowed gt, ge, lt, le, between, true, equals")
        if self.op == "between":
            lo, hi = self.ref
            if not lo <= hi:
                raise ValueError(f"between({lo}, {hi}): lower bound above upper bound")

    @property
    def is_boolean(self) -> bool:
        return self.op == "true"

    @property
    def per_seed(self) -> bool:
        """A yes/no reading per seed (``true``, ``equals``): the claim's statistic is the fraction of seeds where it
        holds (Wilson interval), not a mean of the values — a mean of counts is not a count, and the float mean of
        equal values need not equal them."""
        return self.op in ("true", "equals")

    def holds(self, value: Any) -> bool:
        """Whether ``value`` satisfies the relation (a non-finite or missing value never does; a yes/no relation
        holds for ``True`` or a finite non-zero number, never for NaN or a string)."""
        if value is None:
            return False
        if self.op == "true":
            if isinstance(value, (str, bytes)):
                return False
            try:
                v = float(value)
            except (TypeError, ValueError):
                return False
            return math.isfinite(v) and v != 0.0
        if self.op == "equals":
            return value == self.ref
        v = float(value)
        if not math.isfinite(v):
            return False
        if self.op == "between":
            return self.ref[0] <= v <= self.ref[1]
        return {"gt": v > self.ref, "ge": v >= self.ref, "lt": v < self.ref, "le": v <= self.ref}[self.op]

    @property
    def thresholds(self) -> tuple[float, ...]:
        """The numbers that separate holding from not holding (empty for yes/no and ``equals``)."""
        if self.op in ("gt", "ge", "lt", "le"):
            return (float(self.ref),)
        if self.op == "between":
            return (float(self.ref[0]), float(self.ref[1]))
        return ()

    @property
    def is_bare_sign(self) -> bool:
        """A direction relation with threshold exactly 0 (``gt(0)``): a sign with no minimum effect."""
        return self.op in ("gt", "ge", "lt", "le") and float(self.ref) == 0.0

    def describe(self) -> str:
        if self.op == "true":
            return "holds"
        if self.op == "equals":
            return f"== {self.ref!r}"
        if self.op == "between":
            return f"in [{self.ref[0]:g}, {self.ref[1]:g}]"
        return {"gt": ">", "ge": ">=", "lt": "<", "le": "<="}[self.op] + f" {self.ref:g}"


def gt(x: float) -> Relation:
    return Relation("gt", float(x))


def ge(x: float) -> Relation:
    return Relation("ge", float(x))


def lt(x: float) -> Relation:
    return Relation("lt", float(x))


def le(x: float) -> Relation:
    return Relation("le", float(x))


def between(lo: float, hi: float) -> Relation:
    return Relation("between", (float(lo), float(hi)))


def is_true() -> Relation:
    """A yes/no measurement: the statistic is the fraction of seeds where it holds."""
    return Relation("true")


def equals(x: Any) -> Relation:
    return Relation("equals", x)


# --------------------------------------------------------------------------------------
# rules
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Rule:
    """How per-seed verdicts become the claim's verdict.

    ``name``:
      * ``mean+80%`` (default) — the relation holds for the statistic and for ≥ ``min_fraction`` of seeds;
      * ``every-seed`` — it holds for every seed (exact identities, sanity checks);
      * ``interval`` — it holds for both ends of the 95 % interval of the statistic (a trend that
        must be significant over seeds, not only on average);
      * ``pooled`` — one measurement from all seeds together (``Experiment.measure_pooled``).
    Any rule other than the default carries a one-line ``reason``.
    """

    name: str = "mean+80%"
    min_fraction: float = 0.8
    reason: str = ""

    def __post_init__(self) -> None:
        if self.name not in {"mean+80%", "every-seed", "interval", "pooled"}:
            raise ValueError(f"Rule {self.name!r}: allowed mean+80%, every-seed, interval, pooled")
        if not 0.0 < self.min_fraction <= 1.0:
            raise ValueError(f"Rule min_fraction {self.min_fraction}: must be in (0, 1]")
        if (self.name != "mean+80%" or self.min_fraction != 0.8) and not self.reason.strip():
            raise ValueError(f"Rule {self.name!r} differs from the default and needs a one-line reason")

    def describe(self, statistic: str = "mean") -> str:
        if self.name == "mean+80%":
            return f"holds for the {statistic} and for ≥ {self.min_fraction:.0%} of seeds"
        if self.name == "every-seed":
            return "holds for every seed"
        if self.name == "interval":
            return f"holds for the whole 95% interval of the {statistic}"
        return "one measurement pooled over all seeds"


MEAN_AND_80 = Rule()


def every_seed(reason: str) -> Rule:
    return Rule("every-seed", 1.0, reason)


def whole_interval(reason: str) -> Rule:
    return Rule("interval", 0.8, reason)


def pooled(reason: str) -> Rule:
    return Rule("pooled", 0.8, reason)


# --------------------------------------------------------------------------------------
# declarations
# --------------------------------------------------------------------------------------
_REF_RE = re.compile(
    r"\b(?P<kind>Fig(?:ure)?s?\.?|Tables?|Thm\.|Theorems?|Lemmas?|Prop(?:osition)?s?\.?|Cor(?:ollary)?\.?|"
    r"Remarks?|Def(?:inition)?\.?|Conj(?:ecture)?\.?|Examples?|Assumptions?|Sec(?:tion)?s?\.?|"
    r"App(?:endix)?\.?|[Ee]qs?\.|[Ee]quations?|Alg(?:orithm)?\.?)\s*\(?(?P<num>[A-G]?\d+(?:\.\d+)*|[A-G](?:\.\d+)*)\)?"
)


@dataclass(frozen=True)
class ClaimSpec:
    """One claim an experiment checks, declared at class level.

    Attributes:
        id: short identifier unique within the experiment (``"a-decreases"``).
        statement: the claim in our words (quoted or paraphrased from the paper).
        location: where the paper makes it (``"Fig. 3 (left), Remark 3.1"``); for ``paper``
            claims every reference in it must occur in the paper's text (tested).
        kind: ``paper``, ``consequence``, ``sanity`` or ``erratum`` (see the module docstring).
        reading: how the paper's words were turned into the relation that is checked.
        relation: the relation, or a function ``cfg -> Relation`` when the threshold depends on
            the config.
        basis: where the threshold comes from — ``"paper: ..."`` (a number in the paper),
            ``"method: ..."`` (an error bound of the method: O(η), Monte Carlo error, round-off),
            ``"tolerance: ..."`` (a stated tolerance and why) or ``"relation: ..."`` (the threshold
            is the statement's own, e.g. "decreases" → slope < 0).
        result: the row of the paper's results table this claim belongs to (``"Fig. 3"``);
            defaults to the first reference in ``location``.
        derivation: for ``consequence`` claims, the one-line derivation from the paper's statement.
        statistic: ``mean`` or ``median`` of the per-seed values.
        rule: the pass rule (:data:`MEAN_AND_80` unless declared otherwise, with a reason).
        if_fails: our best explanation, shown when the claim does not reproduce (fail, inconclusive or vacuous).
        control: one line: the negative control — the null condition, measured in the same run
            per seed (``Measured(value, control=...)``), on which the relation must not hold.
        no_control: one sentence: why no control is possible (never together with ``control``).
        bounds: the range of the per-seed statistic (``(-1, 1)`` for a silhouette, ``(0, inf)``
            for a ratio); the 95 % interval is intersected with it.
        effect: the basis of a direction claim's minimum effect (the threshold), e.g.
            ``"paper: Fig. 2 shows a drop of >= 20 %"``.
    """

    id: str
    statement: str
    location: str
    kind: ClaimKind
    reading: str
    relation: Relation | Callable[[Any], Relation]
    basis: str
    result: str = ""
    derivation: str = ""
    statistic: Statistic = "mean"
    rule: Rule = MEAN_AND_80
    if_fails: str = ""
    printed: str = ""
    used: str = ""
    control: str = ""
    no_control: str = ""
    bounds: tuple[float, float] | None = None
    effect: str = ""

    def __post_init__(self) -> None:
        where = f"claim {self.id!r}"
        if self.control.strip() and self.no_control.strip():
            raise ValueError(f"{where}: declare either a control or no_control (its reason), not both")
        if self.bounds is not None:
            lo, hi = self.bounds
            if not float(lo) < float(hi):
                raise ValueError(f"{where}: bounds {self.bounds!r} must be (lower, upper) with lower < upper")
        if not re.fullmatch(r"[a-z0-9][a-z0-9._:-]*", self.id):
            raise ValueError(f"{where}: id must be lowercase letters, digits, '-', '.', ':'")
        if self.kind not in KINDS:
            raise ValueError(f"{where}: kind {self.kind!r}; allowed {', '.join(KINDS)}")
        for name in ("statement", "location", "reading", "basis"):
            if not str(getattr(self, name)).strip():
                raise ValueError(f"{where}: {name} must not be empty")
        if not re.match(r"(paper|method|tolerance|relation)\s*:", self.basis):
            raise ValueError(f"{where}: basis must start with 'paper:', 'method:', 'tolerance:' or 'relation:'")
        if self.kind == "consequence" and not self.derivation.strip():
            raise ValueError(f"{where}: a consequence claim needs its one-line derivation")
        if self.statistic not in STATISTICS:
            raise ValueError(f"{where}: statistic {self.statistic!r}; allowed {', '.join(STATISTICS)}")
        if not isinstance(self.relation, Relation) and not callable(self.relation):
            raise ValueError(f"{where}: relation must be a Relation or a function cfg -> Relation")
        if self.kind == "erratum" and not (self.printed.strip() and self.used.strip()):
            raise ValueError(f"{where}: an erratum needs what is 'printed' and what is 'used'")
        if self.kind in ("paper", "erratum") and not references(self.location):
            raise ValueError(f"{where}: a paper claim's location must name a section, figure, equation or result")

    def relation_for(self, cfg: Any) -> Relation:
        rel = self.relation if isinstance(self.relation, Relation) else self.relation(cfg)
        if not isinstance(rel, Relation):
            raise TypeError(f"claim {self.id!r}: relation(cfg) must return a Relation, got {type(rel).__name__}")
        return rel

    @property
    def row(self) -> str:
        """The paper-results row (``result`` or the first reference of ``location``: :func:`result_row`)."""
        return result_row(self.result, self.location)


def result_row(result: str, location: str) -> str:
    """The row of the paper's results table a claim belongs to: its declared ``result``, else the first
    reference in its ``location`` (``"Fig. 3 (left), Remark 3.1"`` -> ``"Fig. 3"``), else the location."""
    if result:
        return result
    refs = references(location)
    return refs[0] if refs else location


def declaration_problems(spec: ClaimSpec, cfgs: Sequence[Any] = ()) -> list[str]:
    """What a paper/consequence claim's declaration still lacks under claims-v3 (empty: complete).

    * a negative control (``control``) or the reason there is none (``no_control``);
    * a minimum effect: a direction relation with threshold exactly 0 (a bare sign) is not allowed;
      the threshold is the minimum effect and ``effect`` (or ``basis``) states where it comes from.

    ``cfgs`` are configs to resolve a relation that depends on the config (quick and default).
    Checked for every registered experiment by the test suite.
    """
    if spec.kind not in CONTROLLED_KINDS:
        return []
    out = []
    if not (spec.control.strip() or spec.no_control.strip()):
        out.append(f"{spec.id}: no control and no no_control reason")
    rels = [spec.relation] if isinstance(spec.relation, Relation) else [spec.relation_for(c) for c in cfgs]
    if any(rel.is_bare_sign for rel in rels):
        out.append(f"{spec.id}: a bare sign ({rels[0].describe()}): put the minimum effect into the threshold")
    return out


def Erratum(  # reads as a declaration, like ClaimSpec
    id: str, statement: str, location: str, *, printed: str, used: str, reading: str,
    relation: Relation | Callable[[Any], Relation], basis: str, **kw: Any,
) -> ClaimSpec:  # fmt: skip
    """A place where the printed paper and the maths disagree, with a measured demonstration.

    ``printed`` is what the paper prints, ``used`` what we use instead; the relation checks the
    measured demonstration (e.g. "the printed update increases the loss": Δ > 0).
    """
    return ClaimSpec(id, statement, location, "erratum", reading, relation, basis, printed=printed, used=used, **kw)


def references(location: str) -> list[str]:
    """The paper references in a location string, normalised (``"Fig. 3"``, ``"Thm. 4.2"``, ``"eq. 11"``)."""
    out = []
    for m in _REF_RE.finditer(location):
        kind = m.group("kind").lower().rstrip(".s")
        norm = {
            "fig": "Fig.", "figure": "Fig.", "table": "Table", "thm": "Thm.", "theorem": "Thm.",
            "lemma": "Lemma", "prop": "Prop.", "proposition": "Prop.", "cor": "Cor.", "corollary": "Cor.",
            "remark": "Remark", "def": "Def.", "definition": "Def.", "conj": "Conj.", "conjecture": "Conj.",
            "example": "Example", "assumption": "Assumption", "sec": "Sec.", "section": "Sec.",
            "app": "App.", "appendix": "App.", "eq": "eq.", "equation": "eq.", "alg": "Alg.",
            "algorithm": "Alg.",
        }.get(kind, kind)  # fmt: skip
        out.append(f"{norm} {m.group('num')}")
    return out


_TEXT_PATTERNS = {
    "Fig.": r"(?:Fig\.|Figure|fig\.|figure)\s*{n}\b",
    "Table": r"Table\s*{n}\b",
    "Thm.": r"(?:Theorem|Thm\.)\s*{n}\b",
    "Lemma": r"Lemma\s*{n}\b",
    "Prop.": r"(?:Proposition|Prop\.)\s*{n}\b",
    "Cor.": r"(?:Corollary|Cor\.)\s*{n}\b",
    "Remark": r"Remark\s*{n}\b",
    "Def.": r"(?:Definition|Def\.)\s*{n}\b",
    "Conj.": r"(?:Conjecture|Conj\.)\s*{n}\b",
    "Example": r"Example\s*{n}\b",
    "Assumption": r"Assumption\s*{n}\b",
    "Sec.": r"(?:(?:Section|Sec\.|section)\s*{n}\b|(?m:^{n}\s+[A-Z]))",
    "App.": r"(?:(?:Appendix|App\.)\s*{n}\b|(?m:^{n}\s+[A-Z]))",
    "eq.": r"(?:\({n}\)|(?:eq\.|Eq\.|eqs\.|Eqs\.|equation)\s*\(?{n}\b)",
    "Alg.": r"(?:Algorithm|Alg\.)\s*{n}\b",
}


def reference_in_text(ref: str, text: str) -> bool:
    """Whether a normalised reference (from :func:`references`) occurs in a paper's text."""
    kind, _, num = ref.partition(" ")
    pattern = _TEXT_PATTERNS.get(kind)
    if pattern is None:
        return False
    return re.search(pattern.format(n=re.escape(num)), text) is not None


# --------------------------------------------------------------------------------------
# measurements and evaluated claims
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Measured:
    """What ``Experiment.measure`` returns for one claim and one seed.

    ``value`` is the number (or yes/no) compared with the relation; ``detail`` a short text
    shown with it (e.g. the fitted line); ``not_run`` says why the measurement could not be
    made (e.g. no CIFAR directory given) — such a claim is reported "not run", never passed.
    ``control`` is the same measurement under the claim's negative control (same seed, same run).
    """

    value: float | int | bool | None
    detail: str = ""
    not_run: str = ""
    control: float | int | bool | None = None


def as_measured(x: Any) -> Measured:
    if isinstance(x, Measured):
        return x
    return Measured(_as_number(x))


@dataclass(frozen=True)
class Claim:
    """One evaluated claim of a finished run (what ``claims.json`` holds, one per claim).

    ``value`` is the statistic over seeds, ``interval`` its 95 % interval, ``values`` and
    ``seed_passed`` the per-seed measurements and verdicts; ``status`` is one of :data:`STATUSES`
    (``passed`` is ``status == "pass"``); ``control_values`` the control's per-seed values,
    ``control_value`` their statistic and ``control_held`` whether the relation held on it.
    """

    id: str
    statement: str
    location: str
    passed: bool
    expected: str
    kind: ClaimKind = "paper"
    reading: str = ""
    basis: str = ""
    derivation: str = ""
    result: str = ""
    rule: str = ""
    statistic: str = "mean"
    value: float | int | str | None = None
    interval: tuple[float, float] | None = None
    interval_method: str = ""
    seeds: tuple[int, ...] = ()
    values: tuple[Any, ...] = ()
    seed_passed: tuple[bool, ...] = ()
    status: ClaimStatus | Literal[""] = ""
    note: str = ""
    details: tuple[str, ...] = ()
    printed: str = ""
    used: str = ""
    control: str = ""
    no_control: str = ""
    control_values: tuple[Any, ...] = ()
    control_value: float | int | str | None = None
    control_held: bool | None = None
    effect: str = ""
    bounds: tuple[float, float] | None = None

    @property
    def measured(self) -> Any:
        """The statistic over seeds (``value``)."""
        return self.value

    @property
    def n_seeds_passed(self) -> int:
        return sum(bool(p) for p in self.seed_passed)

    def measured_text(self) -> str:
        """``0.62 [0.41, 0.83] (3/3 seeds)`` — the statistic, its interval and the seeds that hold."""
        if self.status == "not-run":
            return "not run"
        if self.interval is not None and self.interval[0] != self.interval[1] and _is_real(self.value):
            v = format_estimate(float(self.value), float(self.interval[0]), float(self.interval[1]))  # type: ignore[arg-type]
        else:
            v = _fmt(self.value)
        n = len(self.seed_passed)
        return f"{v} ({self.n_seeds_passed}/{n} seeds)" if n > 1 else v

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["passed"] = bool(d["passed"])
        d["value"] = _json_number(d["value"])
        d["values"] = [_json_number(v) for v in d["values"]]
        d["interval"] = None if d["interval"] is None else [_json_number(v) for v in d["interval"]]
        d["control_value"] = _json_number(d["control_value"])
        d["control_values"] = [_json_number(v) for v in d["control_values"]]
        d["bounds"] = None if d["bounds"] is None else [_json_number(float(v)) for v in d["bounds"]]
        for k in ("seeds", "seed_passed", "details"):
            d[k] = list(d[k])
        return d

    @property
    def control_state(self) -> str:
        """What the negative control showed: ``"held"`` (the relation holds there too: vacuous), ``"not held"``,
        ``"not measured"`` (declared, no values or no finite one), ``"no control"`` (a ``no_control`` reason) or
        ``""`` (none)."""
        if self.control:
            if not self.control_values or self.control_held is None:
                return "not measured"
            return "held" if self.control_held else "not held"
        return "no control" if self.no_control else ""

    def control_outcome(self) -> str:
        """What the control showed, in words: ``"0.75: relation held (vacuous)"``, ``"0.17: relation did not
        hold"``, ``"not measured"``, the ``no_control`` reason, or ``""`` when no control is declared."""
        state = self.control_state
        if state in ("held", "not held"):
            return f"{_fmt(self.control_value)}: relation {'held (vacuous)' if state == 'held' else 'did not hold'}"
        return {"not measured": "not measured", "no control": self.no_control}.get(state, "")

    def control_text(self) -> str:
        """``control: at init — 0.06: relation held (vacuous)`` or ``no control: <reason>`` (one line)."""
        state = self.control_state
        if not state:
            return ""
        return (
            f"no control: {self.no_control}"
            if state == "no control"
            else f"control: {self.control} — {self.control_outcome()}"
        )

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Claim:
        names = {f for f in cls.__dataclass_fields__}
        kw = {k: v for k, v in d.items() if k in names}
        for k in ("seeds", "values", "seed_passed", "details", "control_values"):
            if k in kw and kw[k] is not None:
                kw[k] = tuple(kw[k])
        for k in ("interval", "bounds"):
            if kw.get(k) is not None:
                kw[k] = tuple(float(x) for x in kw[k])
        if "value" not in kw and "measured" in d:  # claims.json of a single legacy check
            kw["value"] = d["measured"]
        return cls(**kw)


def _fmt(v: Any) -> str:
    if isinstance(v, bool) or v is None:
        return str(v)
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def _json_number(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    return v


def _as_number(x: Any) -> Any:
    try:
        import numpy as np

        if isinstance(x, np.generic):
            return x.item()
    except ImportError:  # pragma: no cover
        pass
    if hasattr(x, "item") and callable(x.item):
        try:
            return x.item()
        except (ValueError, RuntimeError):
            return x
    return x


def _round(v: Any) -> Any:
    if isinstance(v, bool) or v is None:
        return v
    if isinstance(v, float):
        return float(f"{v:.6g}") if math.isfinite(v) else v
    return v


def t_interval(values: Sequence[float], level: float = 0.95) -> tuple[float, float]:
    """Student-t interval for the mean of ``values`` (degenerate for one value)."""
    n = len(values)
    m = sum(values) / n
    if n < 2:
        return (m, m)
    from scipy import stats

    sd = math.sqrt(sum((v - m) ** 2 for v in values) / (n - 1))
    half = float(stats.t.ppf(0.5 + level / 2, n - 1)) * sd / math.sqrt(n)
    return (m - half, m + half)


def bootstrap_median_interval(values: Sequence[float], level: float = 0.95, n_boot: int = 2000) -> tuple[float, float]:
    """Percentile bootstrap interval of the median (fixed resampling seed: reproducible)."""
    import numpy as np

    v = np.asarray(values, dtype=np.float64)
    if len(v) < 2:
        return (float(v[0]), float(v[0]))
    rng = np.random.default_rng(0)
    meds = np.median(v[rng.integers(0, len(v), size=(n_boot, len(v)))], axis=1)
    a = (1 - level) / 2
    return (float(np.quantile(meds, a)), float(np.quantile(meds, 1 - a)))


def wilson_interval(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for a fraction ``k / n``."""
    if n == 0:
        return (0.0, 1.0)
    from scipy import stats

    z = float(stats.norm.ppf(0.5 + level / 2))
    p = k / n
    den = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return (max(0.0, centre - half), min(1.0, centre + half))


def clip_interval(interval: tuple[float, float], bounds: tuple[float, float] | None) -> tuple[float, float]:
    """Intersect a confidence interval with the statistic's range.

    The true mean (median) of a statistic with values in ``[lo, hi]`` lies in ``[lo, hi]``, so the
    intersection keeps the interval's coverage and never leaves the range.
    """
    if bounds is None:
        return interval
    lo, hi = float(bounds[0]), float(bounds[1])
    a, b = max(interval[0], lo), min(interval[1], hi)
    return (min(a, hi), max(b, lo))


def _stat_and_interval(values: Sequence[float], statistic: str) -> tuple[float, tuple[float, float], str]:
    if statistic == "median":
        import statistics

        return statistics.median(values), bootstrap_median_interval(values), "bootstrap percentile"
    return sum(values) / len(values), t_interval(values), "Student t"


def _straddles(rel: Relation, interval: tuple[float, float] | None) -> bool:
    """Whether the interval holds points on both sides of the relation's threshold."""
    if interval is None or rel.per_seed:
        return False
    return rel.holds(interval[0]) != rel.holds(interval[1]) or (
        rel.op == "between" and not rel.holds(interval[0]) and interval[0] < rel.ref[0] and interval[1] > rel.ref[1]
    )


def _verdict(
    spec: ClaimSpec, rel: Relation, values: Sequence[Any], ok: Sequence[bool]
) -> tuple[ClaimStatus, Any, tuple[float, float] | None, str, str]:
    """(status pass/fail/inconclusive, statistic, interval, interval method, statistic name) of per-seed values."""
    n = len(values)
    rule = spec.rule
    status: ClaimStatus
    if rel.per_seed:
        k = sum(bool(o) for o in ok)
        frac = k / n
        interval = wilson_interval(k, n)
        if rule.name == "every-seed":
            passed = k == n
        elif rule.name == "pooled":
            passed = bool(ok[0])
        elif rule.name == "interval":
            passed = interval[0] >= rule.min_fraction
        else:
            passed = frac >= rule.min_fraction - 1e-12
        if passed:
            status = "pass"
        elif n >= 2 and rule.name in ("mean+80%", "interval") and interval[1] >= rule.min_fraction:
            status = "inconclusive"
        else:
            status = "fail"
        if n < 2:  # one evaluation (one seed, or a deterministic experiment): a yes/no, no interval
            return status, frac, None, "one seed: no interval", "fraction of seeds"
        return status, frac, interval, "Wilson", "fraction of seeds"
    finite = [float(v) for v in values if _is_finite_number(v)]
    if not finite:
        return "fail", float("nan"), None, "", spec.statistic
    stat, interval, method = _stat_and_interval(finite, spec.statistic)
    interval = clip_interval(interval, spec.bounds)
    stat_ok = rel.holds(stat)
    frac = sum(bool(o) for o in ok) / n
    if rule.name == "every-seed":
        # every seed holds, so the mean / median does too (every relation is an interval): checking the statistic
        # again would only add round-off, e.g. equals(0.1) on [0.1, 0.1, 0.1], whose float mean is 0.1 + 2e-17
        passed = all(ok)
    elif rule.name == "interval":
        passed = rel.holds(interval[0]) and rel.holds(interval[1]) and stat_ok
    elif rule.name == "pooled":
        passed = bool(ok[0])
    else:
        passed = stat_ok and frac >= rule.min_fraction - 1e-12
    if n < 2 or rule.name in ("pooled", "every-seed"):
        # one evaluation, or an exact statement checked on every seed: no interval decides it
        status = "pass" if passed else "fail"
        return (
            status,
            stat,
            (interval if n >= 2 else None),
            method if n >= 2 else "one seed: no interval",
            spec.statistic,
        )
    status = "inconclusive" if _straddles(rel, interval) else ("pass" if passed else "fail")
    return status, stat, interval, method, spec.statistic


def evaluate(spec: ClaimSpec, cfg: Any, seeds: Sequence[int], measured: Sequence[Any], note: str = "") -> Claim:
    """Evaluate one declared claim over per-seed measurements (one entry per seed, in order).

    For a ``pooled`` rule pass one measurement (``seeds`` are then all seeds of the run). The
    verdict is one of :data:`STATUSES` (see the module docstring). The relation and the statistic are evaluated on
    the measured values; the stored values are rounded to 6 significant figures for display only. The control's
    values (``Measured.control``) are summarised by the claim's statistic (a yes/no claim: the fraction of seeds
    where it holds), and the claim is ``vacuous`` when that statistic satisfies the relation — conservatively, the
    rule's seed fraction is not asked of the control. A control with no finite value on any seed counts as not
    measured (``inconclusive``).
    """
    rel = spec.relation_for(cfg)
    ms = [as_measured(m) for m in measured]
    if spec.rule.name != "pooled" and len(ms) != len(seeds):
        raise ValueError(f"claim {spec.id!r}: {len(ms)} measurements for {len(seeds)} seeds")
    if spec.rule.name == "pooled" and len(ms) != 1:
        raise ValueError(f"claim {spec.id!r}: a pooled claim has exactly one measurement")
    raw = tuple(_as_number(m.value) for m in ms)  # the relation and the statistic read these
    values = tuple(_round(v) for v in raw)  # stored and shown
    details = tuple(m.detail for m in ms)
    raw_controls = tuple(_as_number(m.control) for m in ms if m.control is not None)
    controls = tuple(_round(v) for v in raw_controls)
    common = {
        "id": spec.id, "statement": spec.statement, "location": spec.location, "kind": spec.kind,
        "reading": spec.reading, "basis": spec.basis, "derivation": spec.derivation, "result": spec.row,
        "rule": spec.rule.describe(spec.statistic) + (f" ({spec.rule.reason})" if spec.rule.reason else ""),
        "expected": rel.describe() + (" per seed" if rel.op == "equals" else ""), "seeds": tuple(int(s) for s in seeds), "values": values, "details": details,
        "printed": spec.printed, "used": spec.used, "control": spec.control, "no_control": spec.no_control,
        "effect": spec.effect, "bounds": None if spec.bounds is None else (float(spec.bounds[0]), float(spec.bounds[1])),
        "control_values": controls,
    }  # fmt: skip
    not_run = [m.not_run for m in ms if m.not_run]
    if not_run and len(not_run) == len(ms):
        return Claim(**common, passed=False, status="not-run", seed_passed=tuple(False for _ in ms),
                     statistic=spec.statistic, note="; ".join(dict.fromkeys(not_run)))  # fmt: skip
    seed_ok = tuple(not m.not_run and rel.holds(v) for m, v in zip(ms, raw))
    kept = [v for m, v in zip(ms, raw) if not m.not_run]
    kept_ok = [o for m, o in zip(ms, seed_ok) if not m.not_run]
    status, stat, interval, method, statistic = _verdict(spec, rel, kept, kept_ok)
    notes = [note] if note else []
    control_value: Any = None
    control_held: bool | None = None
    # a control was measured where it gave a finite number (or, for ``equals``, a value of the reference's kind)
    measured_c = [v for v in raw_controls if _is_finite_number(v) or (rel.op == "equals" and isinstance(v, str))]
    if measured_c:
        if rel.per_seed:
            c_ok = [rel.holds(v) for v in measured_c]
            control_value = sum(c_ok) / len(c_ok)
            control_held = control_value >= spec.rule.min_fraction - 1e-12
        else:
            control_value, _, _ = _stat_and_interval([float(v) for v in measured_c], spec.statistic)
            control_held = rel.holds(control_value)
        control_value = _round(control_value)
        if control_held and status == "pass":
            status = "vacuous"
            gives = (
                f"satisfies {rel.describe()} on {control_value:.0%} of its seeds"
                if rel.per_seed
                else f"gives {_fmt(control_value)}, which also satisfies {rel.describe()}"
            )
            notes.append(f"vacuous: the control ({spec.control or 'declared control'}) {gives}")
    elif (spec.control.strip() or controls) and status == "pass":
        status = "inconclusive"
        what = "gave no finite value on any seed" if controls else "was not measured"
        notes.append(f"inconclusive: the declared control {what}, so the claim has not shown it can fail")
    if status == "inconclusive" and interval is not None and not any("control" in x for x in notes):
        notes.append(
            f"inconclusive: the 95% interval [{_fmt(_round(interval[0]))}, {_fmt(_round(interval[1]))}] "
            f"contains the threshold ({rel.describe()})"
        )
    if status in ("fail", "inconclusive", "vacuous") and spec.if_fails:
        notes.append(spec.if_fails)
    interval_r = None if interval is None else (_round(float(interval[0])), _round(float(interval[1])))
    return Claim(**common, passed=status == "pass", status=status, seed_passed=seed_ok, statistic=statistic,
                 value=_round(stat), interval=interval_r, interval_method=method, note=" ".join(notes),
                 control_value=control_value, control_held=control_held)  # fmt: skip


def format_estimate(value: float, lo: float, hi: float, digits: int = 4) -> str:
    """``0.9997 [0.9995, 1]`` — a point estimate and its interval, rounded so that the printed
    estimate stays inside the printed interval and the printed ends stay distinct where they differ.

    Starts at ``digits`` significant figures and adds figures until the rounded numbers keep
    ``lo <= value <= hi`` (and ``lo < hi`` when they differ).
    """
    for d in range(digits, 17):
        sv, sl, sh = (f"{x:.{d}g}" for x in (value, lo, hi))
        fv, fl, fh = float(sv), float(sl), float(sh)
        if fl <= fv <= fh and (lo == hi or fl < fh):
            return f"{sv} [{sl}, {sh}]"
    return f"{value!r} [{lo!r}, {hi!r}]"


def _is_real(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(float(v))


# --------------------------------------------------------------------------------------
# robustness maps
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Robustness:
    """A headline claim's robustness map: the protocol knobs the paper leaves open.

    ``claims`` are claim ids of the experiment; ``knobs`` maps config keys to the values to try
    (the grid is their product); ``paper`` says what the paper states about these knobs; ``base``
    are overrides applied at every grid point (default: the quick preset). ``ssldyn robustness
    EXP`` runs the grid as a study and the report shows where each claim holds.
    """

    claims: tuple[str, ...]
    knobs: Mapping[str, Sequence[Any]]
    paper: str
    base: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        if isinstance(self.claims, str) or not self.claims:
            raise ValueError("Robustness.claims must be a non-empty tuple of claim ids")
        if not self.knobs or not all(isinstance(v, (list, tuple)) and len(v) >= 2 for v in self.knobs.values()):
            raise ValueError("Robustness.knobs must map config keys to lists of at least two values")
        if not self.paper.strip():
            raise ValueError("Robustness.paper must say what the paper states about these knobs")

    @property
    def n_points(self) -> int:
        return math.prod(len(v) for v in self.knobs.values())

    def grid(self) -> list[dict[str, Any]]:
        """Every grid point as a dict of overrides (knob order as declared)."""
        import itertools

        keys = list(self.knobs)
        return [dict(zip(keys, combo)) for combo in itertools.product(*(self.knobs[k] for k in keys))]


def _is_finite_number(v: Any) -> bool:
    if isinstance(v, bool):
        return True
    try:
        return math.isfinite(float(v))
    except (TypeError, ValueError):
        return False


__all__ = [
    "KINDS", "STATISTICS", "ClaimKind", "ClaimStatus", "Statistic", "Relation", "gt", "ge", "lt", "le", "between",
    "is_true", "equals", "Rule", "MEAN_AND_80",
    "every_seed", "whole_interval", "pooled", "ClaimSpec", "Erratum", "references", "reference_in_text",
    "Measured", "Claim", "evaluate", "t_interval", "STATUSES", "CONTROLLED_KINDS", "VERDICT_WORDS", "status_of",
    "verdict_words", "verdict_of", "result_row", "Robustness", "bootstrap_median_interval", "wilson_interval",
    "clip_interval", "format_estimate", "declaration_problems",
]  # fmt: skip
