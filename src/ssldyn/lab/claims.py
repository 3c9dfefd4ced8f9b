"""Paper claims checked against measured results.

A :class:`Claim` records one statement from a paper, where it comes from, the number that
was measured in a real run, the relation it was compared against, and whether it held.
``passed`` must always be *computed* from ``measured`` (use :func:`check`), never asserted.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Claim:
    """One checked paper claim.

    Attributes:
        id: short identifier unique within the experiment (``"loss-decreases-with-K"``).
        statement: the claim, quoted or paraphrased from the paper.
        location: where in the paper (``"Fig. 3(a), Remark 3.1"``).
        passed: whether the measured value satisfied ``expected``.
        measured: the measured number (or a short text when the measurement is not a number).
        expected: the threshold or relation that was checked (``"slope < 0"``, ``">= 0.95"``).
        note: optional remark (e.g. why a paper setting was changed).
    """

    id: str
    statement: str
    location: str
    passed: bool
    measured: float | int | str | None
    expected: str
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        m = d["measured"]
        if isinstance(m, float) and not math.isfinite(m):
            d["measured"] = str(m)
        d["passed"] = bool(d["passed"])
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Claim:
        return cls(
            **{k: d[k] for k in ("id", "statement", "location", "passed", "measured", "expected")},
            note=d.get("note", ""),
        )


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


def check(
    id: str,
    statement: str,
    location: str,
    measured: Any,
    *,
    gt: float | None = None,
    ge: float | None = None,
    lt: float | None = None,
    le: float | None = None,
    between: tuple[float, float] | None = None,
    equals: Any = None,
    holds: bool | None = None,
    expected: str | None = None,
    note: str = "",
) -> Claim:
    """Build a :class:`Claim` by comparing ``measured`` with one relation.

    Exactly one of ``gt``, ``ge``, ``lt``, ``le``, ``between``, ``equals`` or ``holds`` must be
    given. ``holds`` is for compound conditions computed by the caller from measured data;
    then ``expected`` must describe the condition. A non-finite measurement never passes.
    """
    measured = _as_number(measured)
    given = [
        (k, v)
        for k, v in dict(gt=gt, ge=ge, lt=lt, le=le, between=between, equals=equals, holds=holds).items()
        if v is not None
    ]
    if len(given) != 1:
        raise ValueError(f"check({id!r}) needs exactly one relation, got {[k for k, _ in given]}")
    kind, ref = given[0]
    finite = not (isinstance(measured, float) and not math.isfinite(measured))
    if kind == "holds":
        if expected is None:
            raise ValueError(f"check({id!r}, holds=...) needs an 'expected' description")
        ok = bool(ref)
    elif kind == "equals":
        ok = measured == ref
        expected = expected or f"== {ref}"
    elif kind == "between":
        lo, hi = ref
        ok = finite and lo <= measured <= hi
        expected = expected or f"in [{lo:g}, {hi:g}]"
    else:
        op = {
            "gt": (lambda a, b: a > b, ">"),
            "ge": (lambda a, b: a >= b, ">="),
            "lt": (lambda a, b: a < b, "<"),
            "le": (lambda a, b: a <= b, "<="),
        }[kind]
        ok = finite and bool(op[0](measured, ref))
        expected = expected or f"{op[1]} {ref:g}"
    if isinstance(measured, float):
        measured = float(f"{measured:.6g}") if math.isfinite(measured) else measured
    return Claim(
        id=id,
        statement=statement,
        location=location,
        passed=bool(ok and finite),
        measured=measured,
        expected=expected,
        note=note,
    )
