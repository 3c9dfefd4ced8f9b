"""Paper claims, declared by experiments and measured over seeds (DESIGN.md, "Experiments").

An experiment declares its claims as :class:`ClaimSpec` records — the statement in our words,
where the paper makes it, its provenance ``kind``, the ``reading`` (how the words became a
relation), the relation with the ``basis`` of its threshold, the summary statistic and the
pass rule — and measures one number per claim per seed in ``Experiment.measure``. The lab
evaluates every claim over the seeds of the run with :func:`evaluate`:

* per seed: does the measured value satisfy the relation?
* the statistic (mean, or median) of the per-seed values, with a 95 % interval
  (Student t for the mean, bootstrap percentile for the median, Wilson for a fraction);
* the rule (default :data:`MEAN_AND_80`: the relation holds for the statistic **and** for at
  least 80 % of the seeds; other rules must state a one-line reason).

``passed`` is always computed from measured numbers, never asserted.

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
from typing import Any

KINDS = ("paper", "consequence", "sanity", "erratum")
STATISTICS = ("mean", "median")


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

    def holds(self, value: Any) -> bool:
        """Whether ``value`` satisfies the relation (a non-finite or missing value never does)."""
        if value is None:
            return False
        if self.op == "true":
            return bool(value)
        if self.op == "equals":
            return value == self.ref
        v = float(value)
        if not math.isfinite(v):
            return False
        if self.op == "between":
            return self.ref[0] <= v <= self.ref[1]
        return {"gt": v > self.ref, "ge": v >= self.ref, "lt": v < self.ref, "le": v <= self.ref}[self.op]

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
        if_fails: our best explanation, shown when the claim does not reproduce.
    """

    id: str
    statement: str
    location: str
    kind: str
    reading: str
    relation: Relation | Callable[[Any], Relation]
    basis: str
    result: str = ""
    derivation: str = ""
    statistic: str = "mean"
    rule: Rule = MEAN_AND_80
    if_fails: str = ""
    printed: str = ""
    used: str = ""

    def __post_init__(self) -> None:
        where = f"claim {self.id!r}"
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
        """The paper-results row (``result`` or the first reference of ``location``)."""
        if self.result:
            return self.result
        refs = references(self.location)
        return refs[0] if refs else self.location


def Erratum(  # noqa: N802 - reads as a declaration, like ClaimSpec
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
    """

    value: float | int | bool | None
    detail: str = ""
    not_run: str = ""


def as_measured(x: Any) -> Measured:
    if isinstance(x, Measured):
        return x
    return Measured(_as_number(x))


@dataclass(frozen=True)
class Claim:
    """One evaluated claim of a finished run (what ``claims.json`` holds, one per claim).

    ``value`` is the statistic over seeds, ``interval`` its 95 % interval, ``values`` and
    ``seed_passed`` the per-seed measurements and verdicts; ``status`` is ``pass``, ``fail`` or
    ``not-run``.
    """

    id: str
    statement: str
    location: str
    passed: bool
    expected: str
    kind: str = "paper"
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
    status: str = ""
    note: str = ""
    details: tuple[str, ...] = ()
    printed: str = ""
    used: str = ""

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
        v = _fmt(self.value)
        if self.interval is not None and self.interval[0] != self.interval[1]:
            v += f" [{_fmt(self.interval[0])}, {_fmt(self.interval[1])}]"
        n = len(self.seed_passed)
        return f"{v} ({self.n_seeds_passed}/{n} seeds)" if n > 1 else v

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["passed"] = bool(d["passed"])
        d["value"] = _json_number(d["value"])
        d["values"] = [_json_number(v) for v in d["values"]]
        d["interval"] = None if d["interval"] is None else [_json_number(v) for v in d["interval"]]
        for k in ("seeds", "seed_passed", "details"):
            d[k] = list(d[k])
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Claim:
        names = {f for f in cls.__dataclass_fields__}
        kw = {k: v for k, v in d.items() if k in names}
        for k in ("seeds", "values", "seed_passed", "details"):
            if k in kw and kw[k] is not None:
                kw[k] = tuple(kw[k])
        if kw.get("interval") is not None:
            kw["interval"] = tuple(kw["interval"])
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


def evaluate(spec: ClaimSpec, cfg: Any, seeds: Sequence[int], measured: Sequence[Any], note: str = "") -> Claim:
    """Evaluate one declared claim over per-seed measurements (one entry per seed, in order).

    For a ``pooled`` rule pass one measurement (``seeds`` are then all seeds of the run).
    """
    rel = spec.relation_for(cfg)
    ms = [as_measured(m) for m in measured]
    if spec.rule.name != "pooled" and len(ms) != len(seeds):
        raise ValueError(f"claim {spec.id!r}: {len(ms)} measurements for {len(seeds)} seeds")
    if spec.rule.name == "pooled" and len(ms) != 1:
        raise ValueError(f"claim {spec.id!r}: a pooled claim has exactly one measurement")
    values = tuple(_round(_as_number(m.value)) for m in ms)
    details = tuple(m.detail for m in ms)
    common = {
        "id": spec.id, "statement": spec.statement, "location": spec.location, "kind": spec.kind,
        "reading": spec.reading, "basis": spec.basis, "derivation": spec.derivation, "result": spec.row,
        "rule": spec.rule.describe(spec.statistic) + (f" ({spec.rule.reason})" if spec.rule.reason else ""),
        "expected": rel.describe(), "seeds": tuple(int(s) for s in seeds), "values": values, "details": details,
        "printed": spec.printed, "used": spec.used,
    }  # fmt: skip
    not_run = [m.not_run for m in ms if m.not_run]
    if not_run and len(not_run) == len(ms):
        return Claim(**common, passed=False, status="not-run", seed_passed=tuple(False for _ in ms),
                     statistic=spec.statistic, note="; ".join(dict.fromkeys(not_run)))  # fmt: skip
    seed_ok = tuple(not m.not_run and rel.holds(v) for m, v in zip(ms, values))
    finite = [float(v) for m, v in zip(ms, values) if not m.not_run and _is_finite_number(v)]
    n = len(ms)
    if rel.is_boolean:
        k = sum(seed_ok)
        stat: Any = k / n
        interval, method, statistic = wilson_interval(k, n), "Wilson", "fraction of seeds"
        stat_ok = stat >= spec.rule.min_fraction
        ends_ok = interval[0] >= spec.rule.min_fraction
    else:
        statistic = spec.statistic
        if not finite:
            stat, interval, method = float("nan"), None, ""
            stat_ok = ends_ok = False
        else:
            if spec.statistic == "median":
                import statistics

                stat = statistics.median(finite)
                interval, method = bootstrap_median_interval(finite), "bootstrap percentile"
            else:
                stat = sum(finite) / len(finite)
                interval, method = t_interval(finite), "Student t"
            stat_ok = rel.holds(stat)
            ends_ok = rel.holds(interval[0]) and rel.holds(interval[1])
    frac = sum(seed_ok) / n
    name = spec.rule.name
    if name == "every-seed":
        passed = all(seed_ok) and stat_ok
    elif name == "interval":
        passed = ends_ok and stat_ok
    elif name == "pooled":
        passed = seed_ok[0]
    else:
        passed = stat_ok and frac >= spec.rule.min_fraction - 1e-12
    if n < 2:  # one evaluation: no interval
        interval, method = None, "one seed: no interval"
    notes = [note] if note else []
    if not passed and spec.if_fails:
        notes.append(spec.if_fails)
    interval_r = None if interval is None else (_round(float(interval[0])), _round(float(interval[1])))
    return Claim(**common, passed=bool(passed), status="pass" if passed else "fail", seed_passed=seed_ok,
                 statistic=statistic, value=_round(stat), interval=interval_r, interval_method=method,
                 note=" ".join(notes))  # fmt: skip


def _is_finite_number(v: Any) -> bool:
    if isinstance(v, bool):
        return True
    try:
        return math.isfinite(float(v))
    except (TypeError, ValueError):
        return False


__all__ = [
    "KINDS", "Relation", "gt", "ge", "lt", "le", "between", "is_true", "equals", "Rule", "MEAN_AND_80",
    "every_seed", "whole_interval", "pooled", "ClaimSpec", "Erratum", "references", "reference_in_text",
    "Measured", "Claim", "evaluate", "t_interval",
    "bootstrap_median_interval", "wilson_interval",
]  # fmt: skip
