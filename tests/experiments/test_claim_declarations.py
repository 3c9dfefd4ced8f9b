"""Every declared claim: its location occurs in the paper, and its pass/fail logic on synthetic per-seed data.

The measured numbers of real runs are tested by each experiment's own tests; here each claim's
relation and rule are exercised on synthetic measurements that pass, fail and sit on the border,
so a claim's check can fail in a test, not only in a run.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ssldyn.lab.claims import ClaimSpec, evaluate, reference_in_text, references
from ssldyn.lab.registry import all_experiments

ROOT = Path(__file__).resolve().parents[2]
SEEDS = [0, 1, 2, 3, 4]
PAPER_FILES = {
    "variational": "variational-simclr.txt",
    "nonlinearity": "nonlinearity-alpha-cl.txt",
    "grassmann": "grassmann-ssl-dynamics.txt",
}


def _papers_dir() -> Path | None:
    for cand in (os.environ.get("SSLDYN_PAPERS_DIR"), ROOT.parent / "shared" / "papers", Path("/work/shared/papers")):
        if cand and Path(cand).is_dir():
            return Path(cand)
    return None


def _declared() -> list[tuple[str, type, ClaimSpec]]:
    return [(e.name, e, s) for e in all_experiments() for s in e.claims]


DECLARED = _declared()
IDS = [f"{n}:{s.id}" for n, _, s in DECLARED]


def _values(rel):
    """(passing value, failing value) for a relation: both at a distance from its threshold."""
    if rel.op == "true":
        return True, False
    if rel.op == "equals":
        return rel.ref, (rel.ref + 1 if isinstance(rel.ref, (int, float)) else object())
    if rel.op == "between":
        lo, hi = rel.ref
        w = max(hi - lo, 1e-9)
        return (lo + hi) / 2, hi + w
    r = rel.ref
    d = max(abs(r), 1.0) * 0.1
    return (r + d, r - d) if rel.op in ("gt", "ge") else (r - d, r + d)


@pytest.mark.parametrize("name, exp, spec", DECLARED, ids=IDS)
def test_claim_logic_on_synthetic_seeds(name, exp, spec):
    for cfg in (exp.default_config(), exp.quick_config()):
        rel = spec.relation_for(cfg)
        ok, bad = _values(rel)
        assert rel.holds(ok) and not rel.holds(bad), (rel, ok, bad)
        if spec.rule.name == "pooled":
            assert evaluate(spec, cfg, SEEDS, [ok]).passed
            assert not evaluate(spec, cfg, SEEDS, [bad]).passed
            continue
        assert evaluate(spec, cfg, SEEDS, [ok] * 5).passed
        assert not evaluate(spec, cfg, SEEDS, [bad] * 5).passed
        one_bad = evaluate(spec, cfg, SEEDS, [ok] * 4 + [bad])
        two_bad = evaluate(spec, cfg, SEEDS, [ok] * 3 + [bad] * 2)
        if spec.rule.name == "mean+80%" and spec.rule.min_fraction == 0.8:
            assert one_bad.passed and not two_bad.passed  # the 80 % border: 4/5 hold, 3/5 do not
        elif spec.rule.name == "every-seed":
            assert not one_bad.passed
        assert not evaluate(spec, cfg, SEEDS, [float("nan")] * 5).passed or rel.op == "true"


@pytest.mark.parametrize("name, exp, spec", [d for d in DECLARED if d[2].kind in ("paper", "erratum")],
                         ids=[i for i, d in zip(IDS, DECLARED) if d[2].kind in ("paper", "erratum")])  # fmt: skip
def test_paper_claim_location_occurs_in_the_paper(name, exp, spec):
    papers = _papers_dir()
    if papers is None:
        pytest.skip("the papers' text (../shared/papers) is not available")
    text = (papers / PAPER_FILES[exp.paper]).read_text()
    refs = references(spec.location)
    assert refs, f"{name}:{spec.id}: no reference in {spec.location!r}"
    missing = [r for r in refs if not reference_in_text(r, text)]
    assert not missing, f"{name}:{spec.id}: {missing} do not occur in {PAPER_FILES[exp.paper]}"


def test_every_experiment_declares_its_claims():
    """Every shipped experiment declares ClaimSpecs and measures them (no inline checks: the legacy form is gone)."""
    for e in all_experiments():
        assert e.claims, f"{e.name} declares no claims"
        assert "measure" in e.__dict__ or any(
            "measure" in b.__dict__ for b in e.__mro__[1:] if b.__name__ != "Experiment"
        )
        assert not callable(e.__dict__.get("claims")), f"{e.name}: claims() as a method is the removed legacy form"
