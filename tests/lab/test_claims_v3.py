"""claims-v3: verdicts from synthetic per-seed values, controls, intervals inside the range, rounding.

Each verdict (pass, fail, inconclusive, vacuous, not-run) is computed from made-up per-seed
numbers whose answer is known by hand; the intervals are compared with scipy.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from ssldyn.contract.claims import (
    ClaimSpec,
    Erratum,
    Measured,
    Robustness,
    Rule,
    between,
    clip_interval,
    declaration_problems,
    evaluate,
    format_estimate,
    ge,
    gt,
    is_true,
    le,
    lt,
    t_interval,
    wilson_interval,
)

SEEDS = [0, 1, 2, 3, 4]


def spec(relation, **kw):
    kw.setdefault("kind", "paper")
    return ClaimSpec("c", "statement", "Fig. 3", reading="r", relation=relation, basis="relation: r", **kw)


def test_pass_fail_inconclusive_from_per_seed_values():
    # all seeds far above 0.5: the whole interval above the threshold -> pass
    assert evaluate(spec(gt(0.5)), None, SEEDS, [0.9, 0.92, 0.88, 0.91, 0.9]).status == "pass"
    # all far below -> fail (interval entirely below)
    c = evaluate(spec(gt(0.5)), None, SEEDS, [0.1, 0.12, 0.08, 0.11, 0.1])
    assert c.status == "fail" and not c.passed
    # the t-interval straddles 0.5 -> inconclusive, never counted as pass or fail
    c = evaluate(spec(gt(0.5)), None, SEEDS, [0.3, 0.7, 0.55, 0.45, 0.6])
    lo, hi = t_interval([0.3, 0.7, 0.55, 0.45, 0.6])
    assert lo < 0.5 < hi and c.status == "inconclusive" and not c.passed


def test_a_sign_decided_by_seven_e_minus_five_is_inconclusive():
    # grassmann Fig. 2 ReLU at 5 seeds: an interval [-0.0956, +0.00007] on "decreases" (lt 0)
    vals = [-0.09, -0.02, -0.05, 0.01, -0.08]
    c = evaluate(spec(lt(0.0)), None, SEEDS, vals)
    lo, hi = t_interval(vals)
    assert lo < 0 < hi and c.status == "inconclusive"


def test_vacuous_when_the_control_satisfies_the_relation():
    ms = [Measured(v, control=cv) for v, cv in zip([0.9, 0.92, 0.88, 0.91, 0.9], [0.7, 0.8, 0.75, 0.9, 0.6])]
    c = evaluate(spec(gt(0.5), control="one training step"), None, SEEDS, ms)
    assert c.status == "vacuous" and not c.passed and c.control_held is True
    assert c.control_value == pytest.approx(0.75) and c.control_values == (0.7, 0.8, 0.75, 0.9, 0.6)
    assert "vacuous" in c.note and "one training step" in c.note
    assert (
        c.control_state == "held" and c.control_text() == "control: one training step — 0.75: relation held (vacuous)"
    )
    from ssldyn.lab.report import _control_cell  # the report's cell says the same, in bold

    assert _control_cell(c) == "one training step<div class='meta'><b>0.75: relation held (vacuous)</b></div>"


def test_a_failing_control_leaves_the_pass_standing():
    ms = [Measured(v, control=cv) for v, cv in zip([0.9, 0.92, 0.88, 0.91, 0.9], [0.1, 0.2, 0.15, 0.1, 0.3])]
    c = evaluate(spec(gt(0.5), control="linear activation"), None, SEEDS, ms)
    assert c.status == "pass" and c.passed and c.control_held is False
    assert (
        c.control_state == "not held" and c.control_text() == "control: linear activation — 0.17: relation did not hold"
    )


def test_a_declared_control_that_was_not_measured_makes_a_pass_inconclusive():
    c = evaluate(spec(gt(0.5), control="at init"), None, SEEDS, [0.9, 0.92, 0.88, 0.91, 0.9])
    assert c.status == "inconclusive" and "control was not measured" in c.note
    assert c.control_state == "not measured" and c.control_text() == "control: at init — not measured"


def test_not_run_claim():
    c = evaluate(spec(gt(0.5), control="x"), None, SEEDS, [Measured(None, not_run="needs cifar_dir")] * 5)
    assert c.status == "not-run" and not c.passed and "cifar_dir" in c.note


def test_yes_no_claims_wilson_verdicts():
    # 3/3 -> pass; 2/3 -> Wilson upper bound 0.94 >= 0.8 -> inconclusive; 0/3 -> fail
    s3 = [0, 1, 2]
    assert evaluate(spec(is_true()), None, s3, [True, True, True]).status == "pass"
    c = evaluate(spec(is_true()), None, s3, [True, True, False])
    # by hand, z = 1.96, p = 2/3, n = 3: (p + z²/6 ± z·sqrt(p(1 − p)/3 + z²/36)) / (1 + z²/3) = 0.5731 ± 0.3654
    assert c.status == "inconclusive" and c.interval == pytest.approx((0.2077, 0.9385), abs=1e-4)
    assert evaluate(spec(is_true()), None, s3, [False, False, False]).status == "fail"
    # the control of a yes/no claim: the fraction of seeds where it holds
    ms = [Measured(True, control=True)] * 3
    assert evaluate(spec(is_true(), control="c"), None, s3, ms).status == "vacuous"


def test_between_relation_interval_over_both_bounds_is_inconclusive():
    c = evaluate(spec(between(0.4, 0.6)), None, SEEDS, [0.1, 0.9, 0.5, 0.2, 0.8])
    assert c.interval[0] < 0.4 and c.interval[1] > 0.6 and c.status == "inconclusive"


def test_wilson_interval_matches_the_closed_form():
    # Wilson score interval written out (z = 1.95996...) for k = 7 of n = 9
    k, n = 7, 9
    z = stats.norm.ppf(0.975)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    assert wilson_interval(k, n) == pytest.approx((centre - half, centre + half), abs=1e-12)


def test_t_interval_matches_scipy():
    x = [0.3, 0.7, 0.55, 0.45, 0.6]
    ref = stats.t.interval(0.95, len(x) - 1, loc=np.mean(x), scale=stats.sem(x))
    assert t_interval(x) == pytest.approx(ref, abs=1e-12)


def test_intervals_stay_inside_the_statistic_range():
    # a silhouette near 1 on three seeds: the raw t-interval leaves [-1, 1]
    vals = [0.99, 0.5, 0.95]
    raw = t_interval(vals)
    assert raw[1] > 1.0
    c = evaluate(spec(gt(0.3), bounds=(-1.0, 1.0)), None, [0, 1, 2], vals)
    assert -1.0 <= c.interval[0] <= c.value <= c.interval[1] <= 1.0 and c.interval[1] == 1.0
    # a positive ratio with a huge spread: the lower end stops at 0
    assert clip_interval((-161.8, 235.9), (0.0, math.inf)) == (0.0, 235.9)


def test_format_estimate_keeps_the_estimate_inside_its_interval():
    assert format_estimate(0.9997, 0.9995, 1.0) == "0.9997 [0.9995, 1]"
    # four significant figures would print 1 [1, 1]: more figures are used
    s = format_estimate(0.99997, 0.99995, 0.999991)
    v, lo, hi = (float(t) for t in s.replace("[", "").replace("]", "").replace(",", "").split())
    assert lo <= v <= hi and lo < hi
    for _ in range(200):
        rng = np.random.default_rng(_)
        a, b = sorted(rng.normal(size=2) * 10.0 ** rng.integers(-6, 6))
        m = a + (b - a) * rng.uniform()
        v, lo, hi = (
            float(t) for t in format_estimate(m, a, b).replace("[", "").replace("]", "").replace(",", "").split()
        )
        assert lo <= v <= hi


def test_declaration_problems_flag_missing_controls_and_bare_signs():
    assert declaration_problems(spec(gt(0.0))) == [
        "c: no control and no no_control reason",
        "c: a bare sign (> 0): put the minimum effect into the threshold",
    ]
    assert declaration_problems(spec(gt(0.05), control="at init", effect="paper: Fig. 2")) == []
    assert declaration_problems(spec(gt(0.0), kind="sanity")) == []
    # a relation depending on the config is resolved on the configs given
    assert declaration_problems(spec(lambda cfg: lt(cfg), no_control="closed form"), cfgs=[0.0, 1.0])[0].endswith(
        "threshold"
    )
    with pytest.raises(ValueError, match="not both"):
        spec(gt(1.0), control="a", no_control="b")
    with pytest.raises(ValueError, match="bounds"):
        spec(gt(1.0), bounds=(1.0, 0.0))


def test_robustness_grid_and_validation():
    rb = Robustness(claims=("c",), knobs={"a": [1, 2], "b": ["x", "y", "z"]}, paper="Sec. 3 leaves a and b open")
    assert rb.n_points == 6 and rb.grid()[0] == {"a": 1, "b": "x"} and rb.grid()[-1] == {"a": 2, "b": "z"}
    with pytest.raises(ValueError, match="at least two"):
        Robustness(claims=("c",), knobs={"a": [1]}, paper="p")
    with pytest.raises(ValueError, match="paper"):
        Robustness(claims=("c",), knobs={"a": [1, 2]}, paper=" ")


def test_claim_round_trips_through_json_with_its_control():
    ms = [Measured(v, control=cv) for v, cv in zip([0.9, 0.92, 0.88], [0.1, 0.2, 0.15])]
    c = evaluate(spec(gt(0.5), control="linear", bounds=(0.0, 1.0)), None, [0, 1, 2], ms)
    from ssldyn.contract.claims import Claim

    d = c.to_dict()
    back = Claim.from_dict(d)
    assert back == c


def test_control_state_of_a_claim_without_a_control():
    """The report and the CLI read one control state: a no_control reason, or nothing declared."""
    c = evaluate(spec(gt(0.5), no_control="a closed form: no null condition"), None, SEEDS, [0.9] * 5)
    assert c.control_state == "no control" and c.control_text() == "no control: a closed form: no null condition"
    bare = evaluate(spec(gt(0.5), kind="sanity"), None, SEEDS, [0.9] * 5)
    assert bare.control_state == "" and bare.control_text() == ""
    from ssldyn.lab.report import _control_cell

    assert _control_cell(c) == "<span class='meta'>none: a closed form: no null condition</span>"
    assert _control_cell(bare) == ""


def test_a_control_without_a_finite_value_is_not_measured():
    """A control measured as NaN on every seed counted as "did not hold", so the claim passed; it has shown nothing."""
    ms = [Measured(v, control=math.nan) for v in [0.9, 0.92, 0.88, 0.91, 0.9]]
    c = evaluate(spec(gt(0.5), control="at init"), None, SEEDS, ms)
    assert c.status == "inconclusive" and "gave no finite value" in c.note
    assert c.control_held is None and c.control_state == "not measured"
    one = [Measured(v, control=cv) for v, cv in zip([0.9, 0.92, 0.88, 0.91, 0.9], [math.nan, 0.1, 0.2, 0.1, 0.1])]
    assert evaluate(spec(gt(0.5), control="at init"), None, SEEDS, one).status == "pass"  # finite seeds decide


def test_yes_no_relation_never_holds_for_nan_or_a_string():
    """bool(nan) and bool("False") are True: a yes/no claim fed NaN passed on every seed."""
    rel = is_true()
    assert rel.holds(True) and rel.holds(1) and rel.holds(np.True_)
    assert not any(rel.holds(v) for v in (False, 0, 0.0, math.nan, None, "False", "yes"))
    assert evaluate(spec(is_true()), None, [0, 1, 2], [math.nan] * 3).status == "fail"


def test_the_relation_reads_the_measured_value_not_its_rounding():
    """Values are stored rounded to 6 significant figures; the verdict was decided on the rounded value, so
    1.0000001 failed gt(1) and 1.0000004e-12 passed le(1e-12)."""
    from ssldyn.contract.claims import le

    assert evaluate(spec(gt(1.0)), None, [0], [1.0000001]).status == "pass"
    c = evaluate(spec(le(1e-12)), None, [0], [1.0000004e-12])
    assert c.status == "fail" and c.values == (1e-12,)  # stored rounded, judged exact


# --- controls, declarations and display at their edges (mutation audit: each fails for a one-line change) ---------
def test_the_control_of_a_yes_no_claim_is_held_at_the_rules_fraction():
    """A yes/no claim's control holds when it holds on at least the rule's fraction of seeds (80 %): 4/5 makes the
    claim vacuous, 3/5 leaves the pass standing."""
    ctrl = [True, True, True, True, False]
    c = evaluate(spec(is_true(), control="c"), None, SEEDS, [Measured(True, control=x) for x in ctrl])
    assert c.control_value == pytest.approx(0.8) and c.control_held is True and c.status == "vacuous"
    ctrl = [True, True, True, False, False]
    c = evaluate(spec(is_true(), control="c"), None, SEEDS, [Measured(True, control=x) for x in ctrl])
    assert c.control_value == pytest.approx(0.6) and c.control_held is False and c.status == "pass"


def test_the_control_is_summarised_by_the_claims_statistic():
    """A median claim's control is the median of the control values (0.3, not the mean 1.3)."""
    ctrl = [0.1, 0.2, 0.3, 0.9, 5.0]
    c = evaluate(spec(gt(0.5), statistic="median", control="at init"), None, SEEDS,
                 [Measured(0.9, control=x) for x in ctrl])  # fmt: skip
    assert c.control_value == 0.3 and c.control_held is False and c.status == "pass"


def test_the_control_holds_on_its_statistic_not_seed_by_seed():
    """The rule's seed fraction is not asked of the control: its mean 0.76 > 0.5 makes the claim vacuous, although
    one seed's control (0.2) does not satisfy the relation."""
    ctrl = [0.9, 0.9, 0.9, 0.9, 0.2]
    c = evaluate(spec(gt(0.5), control="at init"), None, SEEDS, [Measured(0.9, control=x) for x in ctrl])
    assert c.control_value == pytest.approx(0.76) and c.status == "vacuous"


def test_a_control_changes_only_a_pass():
    """vacuous is a pass whose control holds too: a fail or an inconclusive claim keeps its verdict when its control
    holds, and a fail stays a fail when its declared control was not measured."""
    fail = [0.1, 0.12, 0.08, 0.11, 0.1]
    c = evaluate(spec(gt(0.5), control="at init"), None, SEEDS, [Measured(v, control=0.9) for v in fail])
    assert c.control_held is True and c.status == "fail"
    inc = [0.3, 0.7, 0.55, 0.45, 0.6]  # its t-interval contains 0.5 (test_pass_fail_inconclusive_from_per_seed_values)
    c = evaluate(spec(gt(0.5), control="at init"), None, SEEDS, [Measured(v, control=0.9) for v in inc])
    assert c.control_held is True and c.status == "inconclusive"
    assert evaluate(spec(gt(0.5), control="at init"), None, SEEDS, fail).status == "fail"


def test_control_values_without_a_finite_one_make_a_pass_inconclusive_even_if_undeclared():
    c = evaluate(spec(gt(0.5)), None, SEEDS, [Measured(0.9, control=math.nan)] * 5)
    assert c.status == "inconclusive" and "gave no finite value" in c.note


def test_a_bare_sign_is_a_threshold_of_exactly_zero_for_each_direction():
    for rel in (gt(0.0), ge(0.0), lt(0.0), le(0.0)):
        assert declaration_problems(spec(rel, control="at init")) == [
            f"c: a bare sign ({rel.describe()}): put the minimum effect into the threshold"
        ]
    for rel in (gt(-0.05), lt(-0.05), ge(1e-3), le(-1e-3)):
        assert declaration_problems(spec(rel, control="at init")) == []
    # an erratum, like a sanity check, carries no control and may be a bare sign ("the printed step ascends": Δ > 0)
    e = Erratum("eq11-sign", "eq. (11) as printed ascends", "eq. (11)", printed="+", used="-", reading="Δ loss",
                relation=gt(0), basis="relation: ascent")  # fmt: skip
    assert declaration_problems(e) == []


def test_rule_and_robustness_validation_and_grid_order():
    with pytest.raises(ValueError, match="must be in"):
        Rule("mean+80%", 0.0, "no seed needed")
    with pytest.raises(ValueError, match="reason"):
        Rule("mean+80%", 0.6)  # another fraction needs a reason, like another rule
    assert Rule("mean+80%", 0.6, "the paper shows 3 of 5").min_fraction == 0.6
    with pytest.raises(ValueError, match="non-empty tuple"):
        Robustness(claims="c", knobs={"a": [1, 2]}, paper="p")  # a string is not a tuple of ids
    rb = Robustness(claims=("c",), knobs={"a": [1, 2], "b": ["x", "y", "z"]}, paper="p")
    # the knob order as declared: the first knob varies slowest
    assert rb.grid() == [{"a": a, "b": b} for a in (1, 2) for b in ("x", "y", "z")]


def test_measured_text_and_format_estimate_by_hand():
    # four significant figures to start with
    assert format_estimate(0.61234, 0.5, 0.7) == "0.6123 [0.5, 0.7]"
    x = [0.8, 0.85, 0.9, 0.95, 0.45]
    c = evaluate(spec(gt(0.5)), None, SEEDS, x)
    lo, hi = stats.t.interval(0.95, 4, loc=np.mean(x), scale=stats.sem(x))  # (0.5440, 1.0360)
    assert c.measured_text() == f"0.79 [{lo:.4g}, {hi:.4g}] (4/5 seeds)" == "0.79 [0.544, 1.036] (4/5 seeds)"
    # one seed: no interval and no seed count; equal values: no interval of zero width
    assert evaluate(spec(gt(0.5)), None, [0], [0.3]).measured_text() == "0.3"
    assert evaluate(spec(gt(0.5)), None, SEEDS, [0.9] * 5).measured_text() == "0.9 (5/5 seeds)"


def test_clip_interval_never_leaves_the_range():
    """An interval wholly outside the range (values measured outside the declared bounds) collapses onto the
    nearer end instead of coming back upside down."""
    assert clip_interval((1.2, 1.3), (0.0, 1.0)) == (1.0, 1.0)
    assert clip_interval((-3.0, -2.0), (0.0, 1.0)) == (0.0, 0.0)
    assert clip_interval((0.2, 0.3), None) == (0.2, 0.3)
