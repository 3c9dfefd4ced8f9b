"""``nonlinearity.fig4``'s readings of the χ̄₊ grid (Fig. 4, Sec. 5.1): the β-gain, the β-range and the five
trend measurements with their controls, on hand-built final / init tables (random values per cell), against
the readings of the claim declarations written out with plain dict look-ups and numpy."""

import itertools

import numpy as np
import pandas as pd
import pytest

from ssldyn.experiments.nonlinearity.fig4 import (
    ActivationGridConfig,
    beta_gain,
    beta_range,
    smallest_beta_step,
    trend_measures,
)

BETAS = [2, 1, 5]  # deliberately unsorted: the readings must use β_min = 1 and β_max = 5
PS = [3, 1, 10]
ACTS = ["linear", "relu", "leaky_relu", "quadratic"]


def _values(seed: int) -> dict:
    """χ̄₊ per (loss, activation, β, P): random, so that every cell is distinct."""
    rng = np.random.default_rng(seed)
    return {
        (loss, a, b, P): float(rng.uniform(-1, 1))
        for loss, a, b, P in itertools.product(("infonce", "quadratic"), ACTS, BETAS, PS)
    }


def _table(vals: dict) -> pd.DataFrame:
    rows = [
        {"loss": loss, "activation": a, "zeta": 1.0, "bn": "mean_only", "beta": b, "P": P, "chi_plus_mean": v,
         "chi_minus_mean": -v}
        for (loss, a, b, P), v in vals.items()
    ]  # fmt: skip
    return pd.DataFrame(rows).sample(frac=1.0, random_state=0).reset_index(drop=True)  # row order must not matter


def test_beta_gain_hand_worked():
    t = pd.DataFrame(
        {"activation": ["relu"] * 3 + ["linear"] * 3, "beta": [1, 2, 5] * 2, "P": [3] * 6,
         "chi_plus_mean": [0.2, 0.5, 0.7, 0.6, 0.6, 0.55], "chi_minus_mean": [0.9, 0.1, 0.3, 0.0, 0.0, 0.0]}
    )  # fmt: skip
    assert beta_gain(t, "relu", [1, 2, 5], 3) == pytest.approx(0.5, abs=1e-15)  # 0.7 − 0.2: last minus first
    assert beta_gain(t, "linear", [1, 2, 5], 3) == pytest.approx(-0.05, abs=1e-15)  # a fall is negative
    assert beta_gain(t, "relu", [1, 2, 5], 3, col="chi_minus_mean") == pytest.approx(-0.6, abs=1e-15)
    assert beta_range(t, "relu", [1, 2, 5], [3]) == pytest.approx(0.5, abs=1e-15)  # max − min, not last − first
    assert beta_range(t, "linear", [1, 2, 5], [3]) == pytest.approx(0.05, abs=1e-15)


def test_beta_range_is_the_largest_range_over_p():
    vals = _values(1)
    t = _table(vals)
    for a in ACTS:
        want = max(
            max(vals["infonce", a, b, P] for b in BETAS) - min(vals["infonce", a, b, P] for b in BETAS) for P in (3, 10)
        )
        assert beta_range(t[t["loss"] == "infonce"], a, BETAS, [3, 10]) == pytest.approx(want, abs=1e-15)


@pytest.mark.parametrize("loss", ["infonce", "quadratic"])
def test_trend_measures_are_the_declared_readings(loss):
    fv, iv = _values(2), _values(3)
    cfg = ActivationGridConfig(activations=ACTS, betas=BETAS, Ps=PS, losses=["infonce", "quadratic"])
    got = trend_measures(cfg, _table(fv), _table(iv), loss)

    def f(a, b, P):
        return fv[loss, a, b, P]

    def i(a, b, P):
        return iv[loss, a, b, P]

    multi = [3, 10]  # P > 1
    cells = [(b, P) for b in (2, 5) for P in multi]  # β > 1, P > 1
    p1 = [(2, 1), (5, 1)]
    rise = {P: f("relu", 5, P) - f("relu", 1, P) for P in multi}
    rise0 = {P: i("relu", 5, P) - i("relu", 1, P) for P in multi}
    lin_rise = {P: f("linear", 5, P) - f("linear", 1, P) for P in multi}
    lin_rise0 = {P: i("linear", 5, P) - i("linear", 1, P) for P in multi}

    m = got["relu-rises-with-beta"]
    assert m.value == pytest.approx(min(rise.values()), abs=1e-14)
    assert m.control == pytest.approx(min(rise0.values()), abs=1e-14)

    m = got["relu-gain-beyond-init"]
    assert m.value == pytest.approx(min(rise[P] - rise0[P] for P in multi), abs=1e-14)
    assert m.control == pytest.approx(min(lin_rise[P] - lin_rise0[P] for P in multi), abs=1e-14)

    m = got["relu-beats-linear"]
    assert m.value == pytest.approx(np.mean([f("relu", b, P) - f("linear", b, P) for b, P in cells]), abs=1e-14)
    # the control is the trained table at P = 1 (Sec. 5.1: linear works better there), not the init table
    assert m.control == pytest.approx(np.mean([f("relu", b, P) - f("linear", b, P) for b, P in p1]), abs=1e-14)

    def rng_over_beta(g, a):
        return max(max(g(a, b, P) for b in (1, 2, 5)) - min(g(a, b, P) for b in (1, 2, 5)) for P in multi)

    m = got["linear-flat-in-beta"]
    assert m.value == pytest.approx(rng_over_beta(f, "linear"), abs=1e-14)
    assert m.control == pytest.approx(rng_over_beta(f, "relu"), abs=1e-14)

    m = got["homogeneous-similar"]
    per = [np.mean([f(a, b, P) - f("linear", b, P) for b, P in cells]) for a in ("leaky_relu", "quadratic")]
    ctrl = [np.mean([f(a, b, P) - f("linear", b, P) for b, P in p1]) for a in ("leaky_relu", "quadratic")]
    assert m.value == pytest.approx(min(per), abs=1e-14)
    assert m.control == pytest.approx(min(ctrl), abs=1e-14)

    m = got["homogeneous-gain-beyond-init"]  # min over {LeakyReLU, x²} and P > 1; control: the linear network's
    beyond = [f(a, 5, P) - f(a, 1, P) - (i(a, 5, P) - i(a, 1, P)) for a in ("leaky_relu", "quadratic") for P in multi]
    assert m.value == pytest.approx(min(beyond), abs=1e-14)
    assert m.control == pytest.approx(min(lin_rise[P] - lin_rise0[P] for P in multi), abs=1e-14)
    assert set(got) == {
        "relu-rises-with-beta", "relu-gain-beyond-init", "relu-beats-linear", "linear-flat-in-beta",
        "homogeneous-similar", "homogeneous-gain-beyond-init",
    }  # fmt: skip


def test_smallest_beta_step_reads_every_consecutive_step():
    # χ̄₊ over β = 1, 2, 5 at P = 3: 0.2 → 0.9 → 0.7 rises end to end (+0.5) but falls by 0.2 on the way
    t = pd.DataFrame(
        [{"activation": "relu", "beta": b, "P": 3, "chi_plus_mean": v} for b, v in ((1, 0.2), (2, 0.9), (5, 0.7))]
    )
    assert smallest_beta_step(t, "relu", [1, 2, 5], 3) == pytest.approx(-0.2, abs=1e-15)
    assert beta_gain(t, "relu", [1, 2, 5], 3) == pytest.approx(0.5, abs=1e-15)


def test_trend_measures_without_homogeneous_activations_is_not_run():
    vals = {k: v for k, v in _values(4).items() if k[1] in ("linear", "relu")}
    cfg = ActivationGridConfig(activations=["linear", "relu"], betas=BETAS, Ps=PS)
    got = trend_measures(cfg, _table(vals), _table(vals), "infonce")
    for claim in ("homogeneous-similar", "homogeneous-gain-beyond-init"):
        assert got[claim].value is None and got[claim].not_run
    # final = init: training added nothing, so the gain beyond init is exactly 0 (and its control too)
    assert got["relu-gain-beyond-init"].value == pytest.approx(0.0, abs=1e-15)
    assert got["relu-gain-beyond-init"].control == pytest.approx(0.0, abs=1e-15)
    assert got["relu-rises-with-beta"].value == pytest.approx(got["relu-rises-with-beta"].control, abs=0)
