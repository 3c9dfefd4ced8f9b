"""nonlinearity.table1's protocol test and its pooling over seeds, against the paper's setting (App. E.2 / Sec. 5:
5000 minibatches of 128, ζ = 10, K = 10, G = 40, d = 20 tokens, β ∈ {1, 2, 5, 10}, P ∈ {1, 3, 5, 10}) and against
means and sample standard deviations written out."""

import math

import numpy as np
import pandas as pd
import pytest

from ssldyn.contract import Result
from ssldyn.experiments.nonlinearity.table1 import Table1Config, _is_paper_protocol, pooled_side_by_side


def test_is_paper_protocol_default_and_each_departure():
    assert _is_paper_protocol(Table1Config())
    assert _is_paper_protocol(Table1Config(betas=[2, 10], Ps=[3]))  # a subset of the printed cells
    for change in ({"steps": 4999}, {"zeta": 5.0}, {"batch": 64}, {"n_tokens": 16}, {"K": 8}, {"G": 20},
                   {"betas": [1, 3]}, {"Ps": [1, 2]}):  # fmt: skip
        assert not _is_paper_protocol(Table1Config(**change)), change


def _seed(vals: dict) -> Result:
    rows = [{"beta": b, "P": p, "bn": bn, "ours": v, "paper_mean": pm, "paper_std": ps, "diff": v - pm}
            for (b, p, bn, pm, ps), v in vals.items()]  # fmt: skip
    return Result(tables={"side_by_side": pd.DataFrame(rows)})


def test_pooled_side_by_side_mean_sample_std_and_difference_hand_worked():
    """Three seeds of two cells: ours (0.2, 0.4, 0.9) → mean 0.5, sample std √(((−.3)² + (−.1)² + .4²)/2) = √0.13;
    (0.6, 0.6, 0.6) → std 0; the paper's mean and std carried through, diff = mean − paper mean."""
    a, b = (1, 3, "none", 0.65, 0.09), (5, 10, "standard", 0.30, 0.02)
    res = [_seed({a: 0.2, b: 0.6}), _seed({a: 0.4, b: 0.6}), _seed({a: 0.9, b: 0.6})]
    t = pooled_side_by_side(res).set_index(["beta", "P", "bn"])
    ra, rb = t.loc[(1, 3, "none")], t.loc[(5, 10, "standard")]
    assert ra["ours"] == pytest.approx(0.5, abs=1e-15) and ra["ours_std"] == pytest.approx(math.sqrt(0.13), rel=1e-13)
    assert ra["paper_mean"] == 0.65 and ra["paper_std"] == 0.09
    assert ra["diff"] == pytest.approx(0.5 - 0.65, abs=1e-15)
    assert rb["ours"] == pytest.approx(0.6) and rb["ours_std"] == pytest.approx(0.0, abs=1e-15)
    assert rb["diff"] == pytest.approx(0.3, abs=1e-15)
    # one seed: the sample std is undefined (NaN), not 0 (a population std would say 0)
    one = pooled_side_by_side([_seed({a: 0.2})])
    assert math.isnan(one["ours_std"].iloc[0])


def test_pooled_side_by_side_random_against_numpy_and_the_init_table():
    rng = np.random.default_rng(3)
    cells = [(b, p, bn, 0.1 * b, 0.01 * p) for b in (1, 2) for p in (1, 5) for bn in ("none", "mean_only")]
    vals = rng.normal(size=(4, len(cells)))
    res = []
    for s in range(4):
        r = _seed(dict(zip(cells, vals[s])))
        r.tables["side_by_side_init"] = r.tables["side_by_side"].assign(ours=lambda f: f["ours"] + 10.0)
        res.append(r)
    t = pooled_side_by_side(res).set_index(["beta", "P", "bn"])
    ti = pooled_side_by_side(res, "side_by_side_init").set_index(["beta", "P", "bn"])
    assert len(t) == len(cells)
    for j, c in enumerate(cells):
        row = t.loc[c[:3]]
        assert row["ours"] == pytest.approx(vals[:, j].mean(), rel=1e-12, abs=1e-15)
        assert row["ours_std"] == pytest.approx(vals[:, j].std(ddof=1), rel=1e-12)
        assert row["diff"] == pytest.approx(vals[:, j].mean() - c[3], rel=1e-12, abs=1e-15)
        assert ti.loc[c[:3], "ours"] == pytest.approx(vals[:, j].mean() + 10.0, rel=1e-12)
