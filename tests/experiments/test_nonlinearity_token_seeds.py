"""``nonlinearity._token_seeds``: the run's seeds as the token grid's seed axis (Sec. 5, App. E.2), checked on
small hand-built long tables whose means, stds and differences are worked out by hand / in numpy."""

import itertools

import numpy as np
import pandas as pd
import pytest

from ssldyn.contract import Result
from ssldyn.experiments.nonlinearity._token_seeds import (
    cell_diffs,
    finals,
    mean_diff,
    over_parameterised_cells,
    per_seed_result,
    pooled_final,
    seed_rows,
    split_by_seed,
    stack_seeds,
)

KEYS = ["loss", "activation", "zeta", "bn", "beta", "P"]


def _chi(seed: int, act: str, beta: int, P: int, step: int) -> tuple[float, float, float, float]:
    """A value per (seed, setting, step) that is distinct everywhere, so a wrong row or axis shows."""
    a = {"relu": 0.0, "linear": 0.5}[act]
    base = 0.01 * seed + a + 0.1 * beta + 0.001 * P + 0.0001 * step
    return base, base / 2, base / 5, base / 3


def _long(seeds=(0, 1, 2), steps=(0, 5, 10), col="seed") -> pd.DataFrame:
    rows = []
    for s, act, beta, P, step in itertools.product(seeds, ("relu", "linear"), (1, 2), (1, 3), steps):
        cp, cm, cps, cms = _chi(s, act, beta, P, step)
        rows.append(
            {"loss": "infonce", "activation": act, "zeta": 1.0, "bn": "mean_only", "beta": beta, "P": P,
             "step": step, col: s, "chi_plus": cp, "chi_minus": cm, "chi_plus_signed": cps, "chi_minus_signed": cms}
        )  # fmt: skip
    return pd.DataFrame(rows)


@pytest.mark.parametrize("col", ["seed", "init"])
def test_seed_rows_selects_one_seed_and_drops_its_column(col):
    df = _long(col=col)
    part = seed_rows(df, 1)
    assert col not in part.columns
    assert len(part) == 2 * 2 * 2 * 3  # activations × β × P × steps of one seed
    assert list(part.index) == list(range(len(part)))
    want = [_chi(1, r.activation, r.beta, r.P, r.step)[0] for r in part.itertuples()]
    np.testing.assert_allclose(part["chi_plus"], want, rtol=0, atol=0)
    with pytest.raises(ValueError, match="seed 7"):
        seed_rows(df, 7)


def test_split_by_seed_hands_each_seed_its_rows_in_the_order_asked():
    df = _long()
    got = split_by_seed(df, [2, 0], lambda t: Result(summary={"first": float(t["chi_plus"].min())}))
    # the smallest chi_plus of seed s: relu, β = 1, P = 1, step 0 → 0.01·s + 0.1 + 0.001
    assert [r.summary["first"] for r in got] == pytest.approx([0.02 + 0.101, 0.101], abs=1e-15)


def test_per_seed_result_final_is_the_last_step_and_init_step_zero():
    chi = seed_rows(_long(), 2)
    res = per_seed_result(chi, "the note")
    assert res.notes == ["the note"]
    assert res.tables["chi"] is chi
    fin, ini = res.tables["final"], res.tables["init"]
    assert len(fin) == len(ini) == 8  # one row per (activation, β, P)
    for t, step in ((fin, 10), (ini, 0)):
        for r in t.itertuples():
            want = _chi(2, r.activation, r.beta, r.P, step)
            got = (r.chi_plus_mean, r.chi_minus_mean, r.chi_plus_signed_mean, r.chi_minus_signed_mean)
            assert got == pytest.approx(want)
            assert r.chi_plus_count == 1


def _seed_results(seeds=(0, 1, 2)):
    df = _long(seeds)
    return split_by_seed(df, list(seeds), lambda t: per_seed_result(t, ""))


def test_stack_seeds_and_finals_number_the_seeds_by_position():
    rs = _seed_results((3, 5))
    st = stack_seeds(rs)
    assert sorted(st["rep"].unique()) == [0, 1]
    for r in st.itertuples():
        seed = (3, 5)[r.rep]
        assert r.chi_plus_mean == pytest.approx(_chi(seed, r.activation, r.beta, r.P, 10)[0], abs=1e-15)
    init = stack_seeds(rs, "init")
    assert init["chi_plus_mean"].min() == pytest.approx(_chi(3, "relu", 1, 1, 0)[0], abs=1e-15)
    # finals: seed_results when present, else the one result (rep 0)
    parent = Result(seed_results=rs)
    pd.testing.assert_frame_equal(finals(parent), st)
    one = finals(rs[1])
    assert set(one["rep"]) == {0}
    np.testing.assert_allclose(one["chi_plus_mean"], rs[1].tables["final"]["chi_plus_mean"], rtol=0, atol=0)


def test_pooled_final_is_mean_and_sample_std_over_seeds():
    """Mean and std (ddof = 1, the paper's "std over 3 runs") per setting, written out in numpy."""
    seeds = (0, 1, 4)
    rs = _seed_results(seeds)
    t = pooled_final(Result(seed_results=rs))
    assert len(t) == 8
    for r in t.itertuples():
        for k, name in enumerate(("chi_plus", "chi_minus", "chi_plus_signed", "chi_minus_signed")):
            v = np.array([_chi(s, r.activation, r.beta, r.P, 10)[k] for s in seeds])
            assert getattr(r, f"{name}_mean") == pytest.approx(v.mean(), rel=1e-13)
            assert getattr(r, f"{name}_std") == pytest.approx(np.std(v, ddof=1), rel=1e-9)
            assert getattr(r, f"{name}_count") == 3
    # chi_plus differs over seeds by 0.01·seed: the sample std of (0, 0.01, 0.04) is √(26/3 · 1e-4 / 2) = 0.0208167
    # (ddof 0 would give 0.0169967)
    assert t["chi_plus_std"].to_numpy() == pytest.approx(np.full(8, 0.020816659994661), rel=1e-9)


def test_over_parameterised_cells_are_beta_and_p_above_one_sorted():
    assert over_parameterised_cells([5, 1, 2], [10, 1, 3]) == [(2, 3), (2, 10), (5, 3), (5, 10)]
    assert over_parameterised_cells([1], [1, 3]) == []
    assert over_parameterised_cells([1, 2], [1]) == []


def test_cell_diffs_and_mean_diff_are_a_minus_b_per_cell():
    t = per_seed_result(seed_rows(_long(), 1), "").tables["final"]
    cells = [(1, 3), (2, 1), (2, 3)]
    d = cell_diffs(t, {"activation": "relu"}, {"activation": "linear"}, cells)
    np.testing.assert_allclose(d, [-0.5, -0.5, -0.5], atol=1e-14)  # relu − linear = −0.5 everywhere
    d2 = cell_diffs(t, {"activation": "linear"}, {"activation": "relu"}, cells, col="chi_minus_mean")
    np.testing.assert_allclose(d2, [0.25, 0.25, 0.25], atol=1e-14)  # chi_minus = chi_plus / 2
    assert mean_diff(t, {"activation": "relu"}, {"activation": "linear"}, cells) == pytest.approx(-0.5, abs=1e-14)


def test_cell_diffs_follow_the_order_of_the_cells():
    """A final table with a different relu − linear gap in every cell: the differences come out in the order of
    ``cells`` (β first, P second), and the mean is their plain mean."""
    gap = {(1, 1): 0.3, (1, 3): -0.2, (2, 1): 0.05, (2, 3): 0.4}
    rows = []
    for (beta, P), g in gap.items():
        for act, v in (("relu", 0.5 + g), ("linear", 0.5)):
            rows.append({"loss": "infonce", "activation": act, "zeta": 1.0, "bn": "mean_only", "beta": beta, "P": P,
                         "chi_plus_mean": v})  # fmt: skip
    t = pd.DataFrame(rows)
    cells = [(2, 3), (1, 3), (2, 1)]
    d = cell_diffs(t, {"activation": "relu"}, {"activation": "linear"}, cells)
    np.testing.assert_allclose(d, [0.4, -0.2, 0.05], atol=1e-15)
    assert mean_diff(t, {"activation": "relu"}, {"activation": "linear"}, cells) == pytest.approx(0.25 / 3, abs=1e-15)
    with pytest.raises(KeyError):  # a cell the table lacks is an error, never a silent 0
        cell_diffs(t, {"activation": "relu"}, {"activation": "linear"}, [(5, 1)])
