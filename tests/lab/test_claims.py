"""The claims machinery: relations, intervals, rules over seeds, declarations (issue: claims a referee would sign)."""

import math

import numpy as np
import pytest
from scipy import stats

from ssldyn.contract.claims import (
    Claim,
    ClaimSpec,
    Erratum,
    Measured,
    Rule,
    between,
    bootstrap_median_interval,
    equals,
    evaluate,
    every_seed,
    ge,
    gt,
    is_true,
    le,
    lt,
    pooled,
    reference_in_text,
    references,
    t_interval,
    whole_interval,
    wilson_interval,
)


def spec(relation, **kw):
    base = dict(kind="paper", reading="r", basis="relation: r")
    base.update(kw)
    return ClaimSpec("c", "statement", "Fig. 3", relation=relation, **base)


# --- relations ------------------------------------------------------------------------
@pytest.mark.parametrize(
    "rel, yes, no",
    [(gt(1), 1.5, 1.0), (ge(1), 1.0, 0.99), (lt(0), -1e-9, 0.0), (le(0), 0.0, 1e-9), (between(0, 1), 1.0, 1.01)],
)
def test_relations_hold_at_the_boundary_as_written(rel, yes, no):
    assert rel.holds(yes) and not rel.holds(no)
    assert not rel.holds(float("nan")) and not rel.holds(None)


def test_infinite_values_never_hold():
    assert not gt(0).holds(float("inf")) and not lt(0).holds(float("-inf"))


# --- intervals against independent references ------------------------------------------
def test_t_interval_equals_scipy():
    x = [0.62, 0.19, 0.55, 0.71, 0.40]
    lo, hi = t_interval(x)
    ref = stats.t.interval(0.95, len(x) - 1, loc=np.mean(x), scale=stats.sem(x))
    assert lo == pytest.approx(ref[0], abs=1e-12) and hi == pytest.approx(ref[1], abs=1e-12)


def test_wilson_interval_formula():
    # written out: (p + z²/2n ± z sqrt(p(1-p)/n + z²/4n²)) / (1 + z²/n), z = 1.959964
    k, n, z = 4, 5, 1.959963984540054
    p = k / n
    c = (p + z * z / (2 * n)) / (1 + z * z / n)
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    assert wilson_interval(k, n) == pytest.approx((c - h, c + h), abs=1e-12)


def _exact_bootstrap_median_interval(x, level=0.95, n_boot=2000):
    """The percentile interval of the median's bootstrap distribution, worked out exactly (odd n).

    A resample of n draws with replacement has median <= x_(k) (k-th order statistic) exactly when at
    least (n + 1)/2 of its draws are <= x_(k): P_k = P(Binomial(n, k/n) >= (n + 1)/2). The α-quantile of the
    bootstrap median is the first x_(k) with P_k >= α. Also returned: how many standard errors of an
    ``n_boot``-resample estimate of P_k separate the P_k < 1 from the levels (the resampling cannot tip them)."""
    xs, n = np.sort(x), len(x)
    p = np.array([stats.binom.sf((n + 1) // 2 - 1, n, k / n) for k in range(1, n + 1)])
    a = (1 - level) / 2
    lo, hi = int(np.argmax(p >= a)), int(np.argmax(p >= 1 - a))
    inner = p[p < 1]
    se = np.sqrt(inner * (1 - inner) / n_boot)
    margin = min((np.abs(inner - a) / se).min(), (np.abs(inner - (1 - a)) / se).min())
    return (float(xs[lo]), float(xs[hi])), margin


@pytest.mark.parametrize(
    "x, by_hand",
    [
        # n = 5: P_1 = P(Bin(5, 0.2) >= 3) = 0.05792 >= 0.025, P_4 = 0.94208 < 0.975: [x_(1), x_(5)]
        ([3.0, 1.0, 2.0, 10.0, 2.5], (1.0, 10.0)),
        ([1.0, 2.0, 3.0, 4.0, 0.9], (0.9, 4.0)),
        # n = 7: P_1 = P(Bin(7, 1/7) >= 4) = 0.01015 < 0.025 <= P_2 = 0.10827; P_6 = 0.98985: [x_(2), x_(6)]
        ([0.3, 1.1, 1.9, 2.2, 3.5, 4.0, 7.5], (1.1, 4.0)),
    ],
)
def test_bootstrap_median_interval_equals_the_exact_bootstrap_distribution(x, by_hand):
    ref, margin = _exact_bootstrap_median_interval(x)
    assert ref == by_hand and margin > 5  # 2000 resamples cannot move the ends to another order statistic
    assert bootstrap_median_interval(x) == by_hand
    assert bootstrap_median_interval(x[::-1]) == by_hand  # the order of the seeds does not matter


# --- rules on synthetic per-seed measurements -----------------------------------------------
SEEDS = [0, 1, 2, 3, 4]


def test_default_rule_passes_with_mean_and_four_of_five_seeds():
    x = [0.8, 0.85, 0.9, 0.95, 0.45]
    c = evaluate(spec(gt(0.5)), None, SEEDS, x)
    assert c.passed and c.status == "pass" and c.n_seeds_passed == 4
    ref = stats.t.interval(0.95, len(x) - 1, loc=np.mean(x), scale=stats.sem(x))  # (0.5440, 1.0360)
    assert c.value == pytest.approx(0.79) and c.interval == pytest.approx(ref, rel=1e-5) and ref[0] > 0.5
    assert c.interval_method == "Student t"


def test_three_of_five_seeds_with_the_interval_across_the_threshold_is_inconclusive():
    c = evaluate(spec(gt(0.5)), None, SEEDS, [0.62, 0.19, 0.9, 0.95, 0.45])  # mean 0.622 > 0.5
    assert not c.passed and c.status == "inconclusive" and c.n_seeds_passed == 3
    assert c.interval[0] < 0.5 < c.interval[1] and "contains the threshold" in c.note


def _scipy_t(x):
    return stats.t.interval(0.95, len(x) - 1, loc=np.mean(x), scale=stats.sem(x))


def test_three_of_five_seeds_over_the_threshold_is_inconclusive_when_the_interval_contains_it():
    c = evaluate(spec(gt(0.5)), None, SEEDS, [0.61, 0.58, 0.7, 0.7, 0.51])
    assert c.interval[0] > 0.5 and c.n_seeds_passed == 5 and c.status == "pass"
    x = [0.61, 0.58, 0.7, 0.7, 0.52]  # mean 0.622 > 0.6, but 3/5 seeds; scipy: [0.5249, 0.7191] contains 0.6
    c = evaluate(spec(gt(0.6)), None, SEEDS, x)
    lo, hi = _scipy_t(x)
    assert lo < 0.6 < hi and c.interval == pytest.approx((lo, hi), rel=1e-5)
    assert c.n_seeds_passed == 3 and c.status == "inconclusive" and not c.passed


def test_default_rule_fails_with_seven_of_ten_seeds_when_the_interval_clears_the_threshold():
    # the mean holds and its whole interval lies above 0.5 (scipy: [0.6328, 0.9332]), but 7/10 < 80 % of seeds
    x = [0.49, 0.48, 0.47, 0.9, 0.95, 0.92, 0.88, 0.91, 0.93, 0.9]
    lo, hi = _scipy_t(x)
    assert 0.5 < lo
    c = evaluate(spec(gt(0.5)), None, list(range(10)), x)
    assert (
        c.n_seeds_passed == 7
        and c.value == pytest.approx(np.mean(x))
        and c.interval == pytest.approx((lo, hi), rel=1e-5)
    )
    assert c.status == "fail" and not c.passed
    # the whole-interval rule asks the interval, not the seeds: it passes on the same values
    c = evaluate(spec(gt(0.5), rule=whole_interval("a trend over seeds")), None, list(range(10)), x)
    assert c.status == "pass" and c.passed


def test_default_rule_does_not_pass_when_the_mean_misses_although_most_seeds_hold():
    x = [0.51, 0.51, 0.51, 0.51, -10.0]  # mean -1.592; scipy: [-7.428, 4.244] contains 0.5: not a fail either
    c = evaluate(spec(gt(0.5)), None, SEEDS, x)
    assert c.n_seeds_passed == 4 and c.value == pytest.approx(-1.592) and not c.passed
    assert c.interval == pytest.approx(_scipy_t(x), rel=1e-5) and c.status == "inconclusive"
    # with a tight spread the interval lies below the threshold: fail (mean 0.45, scipy [0.4376, 0.4624])
    x = [0.44, 0.45, 0.46, 0.44, 0.46]
    c = evaluate(spec(gt(0.5)), None, SEEDS, x)
    assert _scipy_t(x)[1] < 0.5 and c.status == "fail"


def test_borderline_strict_vs_non_strict():
    assert not evaluate(spec(gt(1.0)), None, SEEDS, [1.0] * 5).passed
    assert evaluate(spec(ge(1.0)), None, SEEDS, [1.0] * 5).passed


def test_a_nan_seed_counts_as_failed_and_is_left_out_of_the_mean():
    c = evaluate(spec(lt(1.0)), None, SEEDS, [0.1, 0.2, float("nan"), 0.3, 0.4])
    assert c.seed_passed == (True, True, False, True, True) and c.value == pytest.approx(0.25) and c.passed


def test_every_seed_rule():
    r = every_seed("an exact identity must hold for every draw")
    assert evaluate(spec(le(1e-9), rule=r), None, SEEDS, [0, 0, 0, 0, 1e-12]).passed
    assert not evaluate(spec(le(1e-9), rule=r), None, SEEDS, [0, 0, 0, 0, 1e-6]).passed


def test_interval_rule_needs_the_whole_interval():
    r = whole_interval("a trend must be significant over seeds")
    flat = [0.73, 0.55, 0.69, 0.77, 0.59]  # noisy around zero slope after centring
    slopes = [v - 0.66 for v in flat]  # mean ~0, both signs
    assert not evaluate(spec(lt(0), rule=r), None, SEEDS, slopes).passed
    assert evaluate(spec(lt(0), rule=r), None, SEEDS, [-1.0, -1.1, -0.9, -1.05, -0.95]).passed


def test_pooled_rule_takes_one_measurement():
    r = pooled("the agreement with the printed table is one number over all seeds")
    c = evaluate(spec(ge(0.9), rule=r), None, SEEDS, [0.95])
    assert c.passed and c.seeds == tuple(SEEDS) and c.values == (0.95,)
    with pytest.raises(ValueError):
        evaluate(spec(ge(0.9), rule=r), None, SEEDS, [0.95, 0.9])


def wilson(k, n, z=1.959963984540054):
    """The Wilson score interval for k of n, written out."""
    p = k / n
    c = (p + z * z / (2 * n)) / (1 + z * z / n)
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (c - h, c + h)


def test_boolean_claims_use_the_fraction_of_seeds():
    c = evaluate(spec(is_true()), None, SEEDS, [True, True, True, True, False])
    assert c.passed and c.status == "pass" and c.value == pytest.approx(0.8) and c.interval_method == "Wilson"
    assert c.interval == pytest.approx(wilson(4, 5), rel=1e-5)  # (0.3755, 0.9638)
    c = evaluate(spec(is_true()), None, SEEDS, [True, True, True, False, False])
    # 3/5 = 0.6 < 0.8, but the Wilson interval (0.2307, 0.8824) reaches 0.8: inconclusive, not a fail
    assert c.value == pytest.approx(0.6) and c.interval == pytest.approx(wilson(3, 5), rel=1e-5)
    assert wilson(3, 5)[1] > 0.8 and c.status == "inconclusive" and not c.passed
    c = evaluate(spec(is_true()), None, SEEDS, [True, False, False, False, False])
    assert wilson(1, 5)[1] < 0.8 and c.status == "fail"  # (0.0362, 0.6245)


def test_median_statistic():
    c = evaluate(spec(gt(0.5), statistic="median"), None, SEEDS, [1.0, 2.0, 3.0, 4.0, 0.9])
    assert c.value == 2.0 and c.passed and c.interval_method == "bootstrap percentile"
    assert c.interval == (0.9, 4.0)  # the exact bootstrap percentile interval (see above): [x_(1), x_(5)]
    # a median below the threshold with an interval across it: inconclusive (mean 2.06 would have passed)
    c = evaluate(spec(gt(0.5), statistic="median"), None, SEEDS, [0.1, 0.2, 0.3, 4.0, 5.7])
    assert c.value == 0.3 and c.interval == (0.1, 5.7) and c.status == "inconclusive"


def test_relation_depending_on_the_config():
    class Cfg:
        tol = 0.25

    s = spec(lambda cfg: le(2 * cfg.tol))
    assert evaluate(s, Cfg(), [0], [0.5]).passed and not evaluate(s, Cfg(), [0], [0.51]).passed


def test_not_run_is_never_a_pass():
    m = Measured(None, not_run="no CIFAR directory given (--set cifar_dir=DIR)")
    c = evaluate(spec(gt(0.5)), None, SEEDS, [m] * 5)
    assert c.status == "not-run" and not c.passed and "CIFAR" in c.note


def test_failed_claim_carries_the_explanation():
    c = evaluate(spec(gt(0.5), if_fails="finite data make A(w) jump"), None, [0], [0.1])
    assert not c.passed and "A(w) jump" in c.note


def test_vacuous_claim_carries_the_explanation_and_a_pass_does_not():
    """A vacuous claim did not reproduce either (its control holds too): the report shows why, as for a failure."""
    why = spec(gt(0.5), control="at initialisation", if_fails="the untrained filters already score high")
    vac = evaluate(why, None, SEEDS, [Measured(0.9, control=0.8)] * 5)
    ok = evaluate(why, None, SEEDS, [Measured(0.9, control=0.1)] * 5)
    assert vac.status == "vacuous" and "already score high" in vac.note
    assert ok.status == "pass" and "already score high" not in ok.note


def test_measurement_count_must_match_the_seeds():
    with pytest.raises(ValueError):
        evaluate(spec(gt(0)), None, SEEDS, [1.0, 2.0])


# --- declarations --------------------------------------------------------------------------
def test_spec_validation():
    with pytest.raises(ValueError, match="derivation"):
        ClaimSpec("c", "s", "Fig. 1", "consequence", "r", gt(0), "relation: r")
    with pytest.raises(ValueError, match="reason"):
        Rule_ = every_seed
        spec(gt(0), rule=type(Rule_("x"))("every-seed", 1.0, ""))
    with pytest.raises(ValueError, match="basis"):
        spec(gt(0), basis="because")
    with pytest.raises(ValueError, match="kind"):
        spec(gt(0), kind="folklore")
    with pytest.raises(ValueError, match="location"):
        ClaimSpec("c", "s", "the introduction", "paper", "r", gt(0), "relation: r")
    ClaimSpec("c", "s", "our implementation", "sanity", "r", gt(0), "method: r")  # no paper reference needed


def test_erratum_declaration():
    e = Erratum(
        "eq11-sign", "eq. (11) is gradient ascent as printed", "eq. (11)", printed="W ← W + η∇L",
        used="W ← W − η∇L", reading="loss change after one printed step", relation=gt(0), basis="relation: ascent",
    )  # fmt: skip
    c = evaluate(e, None, [0], [0.3])
    assert c.kind == "erratum" and c.printed and c.used and c.passed


def test_claim_round_trips_through_json_with_non_finite_values():
    c = evaluate(spec(gt(0)), None, [0, 1], [float("nan"), 1.0])
    d = c.to_dict()
    assert d["values"][0] == "nan"
    back = Claim.from_dict(d)
    assert back.id == c.id and back.seed_passed == c.seed_passed and back.interval == c.interval


def test_references_and_paper_text():
    refs = references("Fig. 3 (left), Remark 3.1; Thm. 4.2, eq. (11), App. B.5, Sec. 4.2, Table 1")
    assert refs == ["Fig. 3", "Remark 3.1", "Thm. 4.2", "eq. 11", "App. B.5", "Sec. 4.2", "Table 1"]
    text = "Theorem 4.2 shows ... as in Figure 3 ... \nB.5 THE EFFECT OF AUGMENTATION\n x = y (11)\n4.2 SETUP"
    for r in ["Fig. 3", "Thm. 4.2", "eq. 11", "App. B.5", "Sec. 4.2"]:
        assert reference_in_text(r, text), r
    for r in ["Fig. 4", "Thm. 4.3", "eq. 12", "App. B.6", "Table 1", "Remark 3.1"]:
        assert not reference_in_text(r, text), r


# --- edges of the relations, rules and verdicts (mutation audit: each test fails for a one-line change of claims.py) ---
def test_relations_at_their_other_edges():
    # a yes/no measurement holds for any finite non-zero number, never for a string, even one that reads as a number
    assert is_true().holds(-1.0) and is_true().holds(2)
    assert not any(is_true().holds(v) for v in ("1", b"1", "nan"))
    # between includes its lower end too, and refuses a range given upside down
    assert between(0, 1).holds(0.0) and not between(0, 1).holds(-1e-12)
    with pytest.raises(ValueError, match="lower bound above upper bound"):
        between(1, 0)
    # equals: a count that must be exactly 2 (nonlinearity Fig. 8 "only two maxima")
    assert equals(2).holds(2) and equals(2).holds(2.0) and not equals(2).holds(3) and equals("relu").holds("relu")
    r = every_seed("an exact count")
    assert evaluate(spec(equals(2), rule=r), None, [0, 1, 2], [2, 2, 2]).status == "pass"
    assert evaluate(spec(equals(2), rule=r), None, [0, 1, 2], [2, 3, 2]).status == "fail"


def test_yes_no_claims_under_the_other_rules():
    # every seed: 4/5 fails, although the Wilson interval of 4/5 (0.3755, 0.9638) reaches 80 %
    r = every_seed("an exact identity must hold for every draw")
    c = evaluate(spec(is_true(), rule=r), None, SEEDS, [True, True, True, True, False])
    assert wilson(4, 5)[1] > 0.8 and c.status == "fail" and c.value == pytest.approx(0.8)
    r = Rule("every-seed", reason="declared directly: min_fraction keeps its default 0.8, which every-seed ignores")
    assert evaluate(spec(is_true(), rule=r), None, SEEDS, [True, True, True, True, False]).status == "fail"
    # the whole-interval rule asks the Wilson lower end: 5/5 gives (0.5655, 1): inconclusive, not a pass
    w = whole_interval("a rate that must be significant over seeds")
    c = evaluate(spec(is_true(), rule=w), None, SEEDS, [True] * 5)
    lo, hi = wilson(5, 5)
    assert lo < 0.8 <= hi and c.interval == pytest.approx((lo, hi), abs=1e-5) and c.status == "inconclusive"
    # 20/20: the lower end 1 / (1 + z²/20) = 0.8389 clears 80 %: pass
    c = evaluate(spec(is_true(), rule=w), None, list(range(20)), [True] * 20)
    lo = wilson(20, 20)[0]
    assert lo == pytest.approx(1 / (1 + 1.959963984540054**2 / 20)) and lo > 0.8 and c.status == "pass"
    # one seed: never inconclusive, even where the one-seed Wilson upper end (0.7935) reaches a lower fraction
    half = Rule("mean+80%", 0.5, "half of the seeds suffice")
    c = evaluate(spec(is_true(), rule=half), None, [0], [False])
    assert wilson(0, 1)[1] > 0.5 and c.status == "fail"


def test_every_seed_rule_is_a_pass_or_a_fail_never_inconclusive():
    r = every_seed("an exact identity must hold for every draw")
    x = [0, 0, 0, 0, 1e-6]
    lo, hi = _scipy_t(x)  # (-3.55e-7, 7.55e-7): contains the threshold 1e-9
    c = evaluate(spec(le(1e-9), rule=r), None, SEEDS, x)
    assert lo < 1e-9 < hi and c.status == "fail" and c.n_seeds_passed == 4


def test_two_seeds_can_be_inconclusive_and_one_seed_has_no_interval():
    x = [0.4, 0.9]  # mean 0.65; t(1) = 12.706: [-2.527, 3.827] contains 0.5
    c = evaluate(spec(gt(0.5)), None, [0, 1], x)
    assert c.interval == pytest.approx(_scipy_t(x), rel=1e-5) and c.status == "inconclusive"
    c = evaluate(spec(gt(0.5)), None, [0], [0.4])
    assert c.status == "fail" and c.interval is None and c.interval_method == "one seed: no interval"


def test_default_rule_fails_when_the_mean_misses_and_its_interval_clears_the_threshold():
    # 16/20 seeds (80 %) hold, but four outliers pull the mean to -0.592 and its whole interval below 0.5
    x = [0.51] * 16 + [-5.0] * 4
    lo, hi = _scipy_t(x)
    assert hi < 0.5
    c = evaluate(spec(gt(0.5)), None, list(range(20)), x)
    assert c.n_seeds_passed == 16 and c.value == pytest.approx(np.mean(x)) and c.status == "fail"


def test_nan_seeds_count_against_the_seed_fraction():
    # 3 of 5 seeds hold (two are NaN): the interval of the three finite values clears 0.5, but 3/5 < 80 %
    x = [0.9, 0.92, float("nan"), 0.88, float("nan")]
    c = evaluate(spec(gt(0.5)), None, SEEDS, x)
    assert c.interval == pytest.approx(_scipy_t([0.9, 0.92, 0.88]), rel=1e-5) and c.interval[0] > 0.5
    assert c.n_seeds_passed == 3 and c.status == "fail"


def test_no_finite_value_is_a_fail():
    c = evaluate(spec(gt(0.5)), None, SEEDS, [float("nan")] * 5)
    assert c.status == "fail" and c.interval is None and math.isnan(c.value)


def test_between_fails_when_the_whole_interval_lies_outside_the_range():
    assert evaluate(spec(between(0.4, 0.6)), None, SEEDS, [0.1, 0.12, 0.08, 0.11, 0.1]).status == "fail"
    assert evaluate(spec(between(0.4, 0.6)), None, SEEDS, [0.9, 0.92, 0.88, 0.91, 0.9]).status == "fail"


def test_median_of_an_even_number_of_seeds_is_the_mean_of_the_middle_two():
    c = evaluate(spec(gt(2.2), statistic="median"), None, [0, 1, 2, 3], [10.0, 1.0, 3.0, 2.0])
    assert c.value == 2.5 and c.seed_passed == (True, False, True, False)


def test_seeds_that_did_not_run_are_left_out_of_the_verdict():
    """The verdict comes from the seeds that ran (3/3 hold: pass); the claim is "not run" only when no seed ran."""
    nr = Measured(None, not_run="no CIFAR directory given")
    c = evaluate(spec(gt(0.5)), None, SEEDS, [0.9, 0.92, nr, 0.88, nr])
    assert c.status == "pass" and c.seed_passed == (True, True, False, True, False)
    assert c.interval == pytest.approx(_scipy_t([0.9, 0.92, 0.88]), rel=1e-5)


def test_wilson_interval_stays_in_the_unit_interval():
    """The written-out Wilson ends leave [0, 1] by round-off at 0/21 (-1.4e-17) and 16/16 (1 + 2e-16); the interval
    the claims store and print is clipped to [0, 1]."""
    assert wilson(0, 21)[0] < 0.0 and wilson(16, 16)[1] > 1.0
    assert wilson_interval(0, 21) == pytest.approx(wilson(0, 21), abs=1e-12) and wilson_interval(0, 21)[0] == 0.0
    assert wilson_interval(16, 16) == pytest.approx(wilson(16, 16), abs=1e-12) and wilson_interval(16, 16)[1] == 1.0
    c = evaluate(spec(is_true()), None, list(range(21)), [False] * 21)
    assert c.status == "fail" and c.interval[0] == 0.0


def test_equals_on_every_seed_passes_when_every_seed_equals():
    """Every seed equal to the value passes: the float mean of [0.1, 0.1, 0.1] is 0.10000000000000002, which a check
    of the statistic on top of every seed's (the code before this test) read as a fail."""
    c = evaluate(spec(equals(0.1), rule=every_seed("an exact value")), None, [0, 1, 2], [0.1, 0.1, 0.1])
    assert c.seed_passed == (True, True, True)
    assert c.status == "pass"


def test_equals_is_read_per_seed_under_the_default_rule():
    """``equals`` is a yes/no per seed (Relation.per_seed): the statistic is the fraction of seeds that equal the value,
    with its Wilson interval, never the mean of the values — [2, 2, 2, 2, 3] holds on 4/5 seeds (the rule's 80 %)
    although its mean 2.2 is not 2, and a control of counts [1, 3] equals 2 on no seed although its mean is 2."""
    c = evaluate(spec(equals(2)), None, SEEDS, [2, 2, 2, 2, 3])
    assert c.status == "pass" and c.value == pytest.approx(0.8) and c.statistic == "fraction of seeds"
    assert c.interval == pytest.approx(wilson(4, 5), abs=1e-5) and c.interval_method == "Wilson"
    # 3/5: below the rule, but the Wilson upper end (0.88) reaches 80 %: inconclusive, as a yes/no claim
    c = evaluate(spec(equals(2)), None, SEEDS, [2, 2, 2, 3, 3])
    assert wilson(3, 5)[1] >= 0.8 and c.status == "inconclusive"
    assert evaluate(spec(equals(2)), None, SEEDS, [3, 3, 3, 3, 2]).status == "fail"  # 1/5: Wilson upper end 0.62
    # the control is read per seed too: counts [1, 3] (mean 2) equal 2 on no seed, so the claim is not vacuous ...
    ctl = [Measured(2, control=v) for v in (1, 3, 1, 3, 1)]
    c = evaluate(spec(equals(2), control="the other curve's count"), None, SEEDS, ctl)
    assert c.status == "pass" and c.control_value == 0.0 and c.control_held is False
    # ... while a control equal on 4/5 seeds is (the rule's fraction), and a string control counts as measured
    ctl = [Measured(2, control=v) for v in (2, 2, 2, 2, 1)]
    c = evaluate(spec(equals(2), control="the other curve's count"), None, SEEDS, ctl)
    assert c.status == "vacuous" and c.control_value == pytest.approx(0.8)
    assert c.expected == "== 2 per seed" and "satisfies == 2 on 80% of its seeds" in c.note
    ctl = [Measured("relu", control="linear") for _ in SEEDS]
    c = evaluate(spec(equals("relu"), control="the linear net's choice"), None, SEEDS, ctl)
    assert c.status == "pass" and c.value == 1.0 and c.control_value == 0.0
