"""Readings of the experiments (the numbers their claims are judged on), checked against independent references:
formulas written out, loops, numbers worked by hand, tiny synthetic inputs with a known answer. Each test targets
readings a mutation audit (2026-12-06, 146 hand mutants of the reading code) found unguarded; all are fast (no
experiment is run whole)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch

from ssldyn.contract import Result


# --------------------------------------------------------------------------------------
# grassmann._common
# --------------------------------------------------------------------------------------
def test_window_drift_hand_worked_window_and_non_finite_tail():
    """k = round(frac·len) finite points per window: 8 points, frac 0.2 → k = round(1.6) = 2 (a floor would give 1);
    last window (7, 8) mean 7.5, the one before (5, 6) mean 5.5 → |7.5 − 5.5| / 7.5. A diverged member's curve ends
    in NaN / inf: only its finite points count (the same value), never a NaN drift."""
    from ssldyn.experiments.grassmann._common import window_drift

    v = np.arange(1.0, 9.0)
    assert window_drift(v) == pytest.approx(2.0 / 7.5, rel=1e-15)
    assert window_drift(np.concatenate([v, [np.nan, np.inf, np.nan]])) == pytest.approx(2.0 / 7.5, rel=1e-15)
    # 7 points: k = round(1.4) = 1 → |7 − 6| / 7
    assert window_drift(np.arange(1.0, 8.0)) == pytest.approx(1.0 / 7.0, rel=1e-15)
    # too short for two windows: NaN
    assert math.isnan(window_drift(np.array([1.0])))


def test_moons_batch_contrast_matrix_is_eq7_over_n_written_out():
    """C = (C̃ + C̃ᵀ)/2 / n with C̃ = Σ_i x_i (Σ_j x⁻_ij − Σ_j x⁺_ij)ᵀ (eq. 7, the mean over anchors: the scaling every
    grassmann experiment but Fig. 2 uses), per seed, by loops; lam/V its ascending eigenpairs; the negatives are the
    anchors at neg_index."""
    from ssldyn.experiments.grassmann._common import moons_batch

    n = 12
    mb = moons_batch(n, 0.05, seeds=[0, 3])
    for s in range(2):
        x, xp, xn = (t[s].numpy() for t in (mb.x, mb.x_pos, mb.x_neg))
        Ct = np.zeros((x.shape[-1], x.shape[-1]))
        for i in range(n):
            Ct += np.outer(x[i], xn[i].sum(0) - xp[i].sum(0))
        C = (Ct + Ct.T) / 2 / n
        np.testing.assert_allclose(mb.C[s].numpy(), C, rtol=1e-12, atol=1e-14)
        w = np.linalg.eigvalsh(C)
        np.testing.assert_allclose(mb.lam[s].numpy(), w, rtol=1e-10, atol=1e-14)
        for i in range(n):
            for k in range(xn.shape[1]):
                np.testing.assert_array_equal(xn[i, k], x[int(mb.neg_index[s, i, k])])


# --------------------------------------------------------------------------------------
# nonlinearity.token_grid
# --------------------------------------------------------------------------------------
def test_cell_refuses_an_ambiguous_selection():
    """``cell`` reads exactly one row: a selection matching two (e.g. both losses of Fig. 10 when the loss is not
    given) is a KeyError, never the first row silently."""
    from ssldyn.experiments.nonlinearity.token_grid import cell

    t = pd.DataFrame({"loss": ["infonce", "quadratic"], "activation": ["relu", "relu"], "beta": [2, 2], "P": [3, 3],
                      "chi_plus_mean": [0.9, 0.4]})  # fmt: skip
    assert cell(t, activation="relu", beta=2, P=3, loss="quadratic") == 0.4
    with pytest.raises(KeyError, match="matched 2 rows"):
        cell(t, activation="relu", beta=2, P=3)


# --------------------------------------------------------------------------------------
# variational._flows_common
# --------------------------------------------------------------------------------------
def test_decay_times_hand_worked_peak_at_start_and_gap_at_the_last_record():
    """One member, records at t = 0..5. Silhouette 0.7, 0.2, 0.6, 0.55, 0.3, 0.1: its peak is the first record
    (t_peak 0, peak 0.7); ≥ 0.5 at t = 0, 2, 3 (t_form 0, t_last 3). Uniformity gap U − U_opt 1, 0.75, 0.5, 0.375,
    0.25, 0.125 (exact in binary): at ref_time 2 it is 0.5, half of it (0.25) is first reached at t = 4; at the end
    it is 0.125 (the last record, not the one before: converges-to-trivial reads it)."""
    from ssldyn.experiments.variational import _flows_common as fc

    t = np.arange(6.0)
    sil = np.array([0.7, 0.2, 0.6, 0.55, 0.3, 0.1])[:, None]
    u_opt = -2.0
    uni = (np.array([1.0, 0.75, 0.5, 0.375, 0.25, 0.125]) + u_opt)[:, None]
    p = fc.Probes(t, sil, uni, np.zeros((6, 1)))
    d = fc.decay_times(p, u_opt, ref_time=2.0, level=0.5)
    assert d["t_peak"][0] == 0.0 and d["peak"][0] == 0.7
    assert d["t_form"][0] == 0.0 and d["t_last"][0] == 3.0
    assert d["gap_ref"][0] == 0.5
    assert d["gap_end"][0] == 0.125
    assert d["t_half"][0] == 4.0
    # a gap that is already ≤ 0 at ref_time has no decay time
    p0 = fc.Probes(t, sil, np.full((6, 1), u_opt - 0.1), np.zeros((6, 1)))
    assert math.isnan(fc.decay_times(p0, u_opt, ref_time=2.0)["t_half"][0])


def test_max_loss_increase_is_the_largest_single_rise_over_the_total_decrease():
    """Loss 5, 4, 4.5, 3, 3.2, 1 (member 0) rises by 0.5 and 0.2: the largest rise 0.5 over L(0) − min L = 4 is
    0.125 (the sum of the rises would read 0.175); a monotone member (1) reads 0; member 2 ends above its minimum
    (5, 2, 3): 1 / (5 − 2)."""
    from ssldyn.experiments.variational._flows_common import max_loss_increase

    loss = np.array([[5.0, 3.0, 5.0], [4.0, 2.0, 2.0], [4.5, 1.0, 3.0], [3.0, 0.5, 3.0], [3.2, 0.4, 3.0],
                     [1.0, 0.3, 3.0]])  # fmt: skip
    np.testing.assert_allclose(max_loss_increase(loss), [0.5 / 4.0, 0.0, 1.0 / 3.0], rtol=1e-15)


# --------------------------------------------------------------------------------------
# variational.fig5 / fig6: measure() on hand-built summaries (each key a distinct number)
# --------------------------------------------------------------------------------------
FIG5_SUMMARY = {
    "network_coherence_centred": 0.91, "network_coherence_shuffled": 0.12, "network_coherence": 0.95,
    "vanilla_coherence": 0.33, "network_silhouette_at_probe": 0.61, "vanilla_silhouette_at_probe": 0.07,
    "network_silhouette_at_probe_shuffled": 0.013, "vanilla_silhouette_at_probe_shuffled": -0.004,
    "network_silhouette_horizon_shuffled": 0.021, "vanilla_silhouette_horizon_shuffled": 0.002,
    "vanilla_uniformity_horizon": -1.71, "network_uniformity_horizon": -1.23, "uniform_optimum": -1.78,
    "vanilla_uniformity_start": -0.2, "vanilla_silhouette_horizon": -0.03, "network_silhouette_horizon": 0.74,
    "network_silhouette_end": 0.52, "silhouette_start": 0.05, "network_loss_start": 3.0, "network_loss_end": 1.0,
    "network_loss_horizon": 1.5, "vanilla_move_after_horizon": 0.004, "vanilla_move_first_horizon": 1.3,
    "decay_t_form": 2.0, "decay_t_last": 150.0, "decay_peak": 0.8, "decay_t_peak": 20.0, "decay_t_half": 90.0,
    "vanilla_decay_t_form": 5.0, "vanilla_decay_t_last": 10.0, "decay_gap_end": 0.006, "decay_gap_ref": 0.4,
    "network_time_end": 300.0,
}  # fmt: skip


def _read(m: dict, claim: str) -> tuple:
    """``(value, control)`` of one claim's :class:`Measured` in a ``measure()`` output."""
    return m[claim].value, m[claim].control


def _fig5_result(tag: str = "") -> Result:
    table = pd.DataFrame({"lr": [1.0, 0.3, 0.1, 0.03], "silhouette": [0.2, 0.55, 0.66, 0.69],
                          "max_loss_increase": [0.9, 0.05, 0.0, 0.0]})  # fmt: skip
    return Result(summary={f"{k}{tag}": v for k, v in FIG5_SUMMARY.items()}, tables={f"step_table{tag}": table})


@pytest.mark.parametrize("tag", ["", "_2d"])
def test_fig5_comparison_measures_read_each_claim_as_declared(tag):
    """Every claim of Fig. 5 against its declared reading and control, on a hand-built summary (values worked out
    here from the ClaimSpec texts, not from the code)."""
    from ssldyn.experiments.variational.fig5 import Fig5, comparison_measures

    cfg = Fig5.default_config()  # lr_network 0.1
    m = comparison_measures(cfg, _fig5_result(tag), tag)
    s = FIG5_SUMMARY
    want = {  # claim: (value, control)
        "same-cluster-move-together": (0.91, 0.12),
        "clusters-by-iteration-15": (0.61, 0.07),
        "network-above-vanilla-15": (0.61 - 0.07, 0.013 + 0.004),
        "vanilla-uniform": (abs(-1.71 + 1.78), abs(-0.2 + 1.78)),
        "vanilla-no-clusters": (0.03, 0.74),
        "network-keeps-clusters": (0.74 + 0.03, 0.021 - 0.002),
        "network-stabilises": (abs(0.52 - 0.74), abs(0.74 - 0.05)),
        "vanilla-stabilises": (0.004, 1.3),
        "clusters-persist": (150.0 / 2.0, 10.0 / 5.0),
        "converges-to-trivial": (0.006, 0.4),
        # σ = lr_network 0.1 against the smallest σ 0.03 of the table; control: the smallest σ against t = 0
        "step-independent": (abs(0.66 - 0.69), abs(0.69 - s["silhouette_start"])),
    }
    assert set(want) <= set(m)
    for k, (v, c) in want.items():
        assert m[k].value == pytest.approx(v, abs=1e-12), k
        assert m[k].control == pytest.approx(c, abs=1e-12), k


def test_fig5_persistence_is_zero_when_the_level_is_never_reached():
    from ssldyn.experiments.variational.fig5 import Fig5, comparison_measures

    r = _fig5_result()
    r.summary["vanilla_decay_t_form"] = r.summary["vanilla_decay_t_last"] = float("nan")
    m = comparison_measures(Fig5.default_config(), r, "")
    assert m["clusters-persist"].control == 0.0 and m["clusters-persist"].value == 75.0


def test_fig6_measure_reads_flow_row_neighbours_and_the_worst_dimension():
    """Fig. 6 per claim over the 2-D and 3-D runs (step tables σ = 0.01 … 1.0, flow_lr 0.01, lr_network 1.0): the
    cluster claims take the smaller over the dimensions (BOTH), the others the larger; the neighbour of the flow
    step is the next larger σ (0.03). Numbers worked out by hand below."""
    from ssldyn.experiments.variational.fig6 import Fig6

    cfg = Fig6.default_config()
    assert (cfg.flow_lr, cfg.lr_network, list(cfg.dims)) == (0.01, 1.0, [2, 3])
    lrs = [0.3, 0.01, 1.0, 0.1, 0.03]  # unsorted on purpose: the reading sorts by σ
    sil = {2: {0.01: 0.70, 0.03: 0.66, 0.1: 0.60, 0.3: 0.50, 1.0: 0.30},
           3: {0.01: 0.62, 0.03: 0.61, 0.1: 0.58, 0.3: 0.45, 1.0: 0.20}}  # fmt: skip
    rise = {2: {0.01: 0.0, 0.03: 0.001, 0.1: 0.01, 0.3: 0.2, 1.0: 0.8},
            3: {0.01: 0.002, 0.03: 0.003, 0.1: 0.02, 0.3: 0.3, 1.0: 0.7}}  # fmt: skip
    summ = {2: {"vanilla_silhouette_horizon": 0.05, "silhouette_start": 0.12, "network_silhouette_horizon": 0.55,
                "vanilla_uniformity_horizon": -1.0, "uniform_optimum": -1.1, "vanilla_uniformity_start": -0.3},
            3: {"vanilla_silhouette_horizon": -0.08, "silhouette_start": 0.02, "network_silhouette_horizon": 0.4,
                "vanilla_uniformity_horizon": -0.5, "uniform_optimum": -0.52, "vanilla_uniformity_start": 0.1}}  # fmt: skip
    res = Result()
    for d in (2, 3):
        res.summary.update({f"{k}_{d}d": v for k, v in summ[d].items()})
        res.tables[f"step_table_{d}d"] = pd.DataFrame({
            "lr": lrs, "steps": [round(20 / lr) for lr in lrs], "time": [20.0] * 5,
            "silhouette": [sil[d][lr] for lr in lrs], "max_loss_increase": [rise[d][lr] for lr in lrs]})  # fmt: skip
    m = Fig6().measure(cfg, res)
    want = {
        "network-clusters-flow": (min(0.70 - 0.05, 0.62 + 0.08), min(0.12 - 0.05, 0.02 + 0.08)),
        "network-clusters-large-step": (min(0.55 - 0.05, 0.4 + 0.08), min(0.07, 0.10)),
        "flow-monotone": (max(0.0, 0.002), max(0.8, 0.7)),
        "flow-agreement": (max(0.70 - 0.66, 0.62 - 0.61), max(0.70 - 0.30, 0.62 - 0.20)),
        "step-independent": (max(0.40, 0.42), max(0.70 - 0.12, 0.62 - 0.02)),
        "vanilla-uniform": (max(0.1, 0.02), max(0.8, 0.62)),
        "vanilla-no-clusters": (max(0.05, 0.08), max(0.55, 0.4)),
    }
    for k, (v, c) in want.items():
        assert m[k].value == pytest.approx(v, abs=1e-12), k
        assert m[k].control == pytest.approx(c, abs=1e-12), k


# --------------------------------------------------------------------------------------
# grassmann.thm3: the fractions read back from the stored paths
# --------------------------------------------------------------------------------------
def test_thm3_fractions_are_the_stored_final_distances_below_tol():
    """A short horizon (t_final 4) leaves the trials' distances spread around tol = 0.05, so the fractions depend on
    the threshold. With ≤ 50 trials every path is stored: ‖q(T)‖ (``*/norm``) and |q₁(T)| (``*/align``) give the
    distance to 0 and to ±v₁ = ±e₁, √(‖q‖² − 2|q₁| + 1); the four fractions and the largest distances are recomputed
    per seed from them, and the claims read them (value and control as declared)."""
    from ssldyn.contract.config import build_config
    from ssldyn.experiments.grassmann.thm3 import Thm3
    from ssldyn.lab import Context

    tol = 0.05
    cfg = build_config(Thm3.Config, {"trials": 30, "reference_trials": 0, "t_final": 4.0, "gd_trials": 2,
                                     "gd_lr": 0.5, "tol": tol})  # fmt: skip
    results = Thm3().run(cfg, Context(seed=0, seeds=(0, 1)))
    assert len(results) == 2
    spread = []
    for r in results:
        s, a = r.summary, r.arrays
        to_zero = {c: a[f"{c}/norm"][-1] for c in ("positive", "negative")}  # (trials,)
        to_v1 = {c: np.sqrt(np.maximum(a[f"{c}/norm"][-1] ** 2 - 2 * a[f"{c}/align"][-1] + 1, 0)) for c in to_zero}
        assert s["positive_fraction"] == pytest.approx(np.mean(to_zero["positive"] < tol), abs=1e-12)
        assert s["negative_fraction"] == pytest.approx(np.mean(to_v1["negative"] < tol), abs=1e-12)
        assert s["positive_v1_fraction"] == pytest.approx(np.mean(to_v1["positive"] < tol), abs=1e-12)
        assert s["negative_zero_fraction"] == pytest.approx(np.mean(to_zero["negative"] < tol), abs=1e-12)
        assert s["positive_max_dist"] == pytest.approx(to_zero["positive"].max(), rel=1e-9)
        assert s["negative_max_dist"] == pytest.approx(to_v1["negative"].max(), rel=1e-6, abs=1e-9)
        spread.append(0 < s["positive_fraction"] < 1 and 0 < s["negative_fraction"] < 1)
        m = Thm3().measure(cfg, r)
        assert _read(m, "positive-to-zero") == (s["positive_fraction"], s["negative_zero_fraction"])
        assert _read(m, "negative-to-v1") == (s["negative_fraction"], s["positive_v1_fraction"])
        assert _read(m, "needs-h-above-d") == (s["gd_min_norm_h_eq_d"], s["gd_min_norm_h"])
        assert s["gd_min_norm_h_eq_d"] <= s["gd_max_norm_h_eq_d"] and s["gd_min_norm_h"] <= s["gd_max_norm_h"]
    assert all(spread)  # the threshold matters here: a wrong tol or comparison would change the fractions


def test_thm3_solver_agrees_reads_the_worse_of_the_two_cases():
    """solver-agrees: the larger scipy-vs-solver error over the positive and the negative case (hand-built summary)."""
    from ssldyn.experiments.grassmann.thm3 import Thm3

    cfg = Thm3.default_config()
    s = {"positive_fraction": 0.9, "negative_zero_fraction": 0.01, "positive_max_dist": 1e-4, "negative_fraction": 0.8,
         "positive_v1_fraction": 0.02, "negative_max_dist": 2e-4, "gd_min_norm_h_eq_d": 0.999, "gd_min_norm_h": 1e-5,
         "gd_max_norm_h_eq_d": 1.0, "gd_max_norm_h": 2e-5}  # fmt: skip
    for pos, neg in ((1e-9, 3e-7), (4e-7, 2e-10)):
        m = Thm3().measure(cfg, Result(summary=s | {"positive_ref_err": pos, "negative_ref_err": neg}))
        assert m["solver-agrees"].value == max(pos, neg)
        # value and control of each claim (distinct numbers: the stored run above has both controls at 0)
        assert _read(m, "positive-to-zero") == (0.9, 0.01)
        assert _read(m, "negative-to-v1") == (0.8, 0.02)
        assert _read(m, "needs-h-above-d") == (0.999, 1e-5)


# --------------------------------------------------------------------------------------
# grassmann.fig1: one seed's summary from hand-made curves
# --------------------------------------------------------------------------------------
def test_fig1_summary_reads_each_statistic_on_the_seeds_members():
    """``_summary`` on synthetic curves of two seeds × three members (this seed: columns 3–5) and a metrics table
    of σ_min/σ_max ratios: medians at the collapse epoch, the minimum at the last epoch, the last finite loss per
    member, the largest relative change over the last 20 %, the largest window drift over members, the diverged
    fraction and the drop factors, each recomputed here by the formula its name states."""
    from ssldyn.contract.config import build_config
    from ssldyn.experiments.grassmann.fig1 import REGIMES, Fig1, _summary

    E, ce, T = 40, 10, 41
    cfg = build_config(Fig1.Config, {"epochs": E, "collapse_epoch": ce, "record_every": 10})
    t = np.arange(T, dtype=float)
    curves = {}
    unc = np.stack([-(1.0 + j) * np.exp(0.1 * t) for j in range(6)], 1)  # (T, 6)
    unc[26:, 4] = np.nan  # this seed's member 1 diverged at epoch 26
    curves["unconstrained"] = unc
    curves["scaled"] = np.stack([-(2.0 + 0.1 * j) - 0.5 * (1 - np.exp(-t / (3.0 + j))) for j in range(6)], 1)
    curves["orthogonal"] = np.stack([-(1.5 + 0.2 * j) - 0.01 * (t % 3) * (j + 1) for j in range(6)], 1)
    diverged = {"unconstrained": np.array([np.nan, np.nan, 7.0, np.nan, 26.0, np.nan])}
    sv = {  # per regime: step -> ratios of this seed's members 0, 1, 2
        "unconstrained": {0: [0.9, 0.8, 0.7], 10: [0.1, 0.3, 0.05], 20: [0.01, 0.02, 0.03], 30: [0.0, 0.0, 0.0],
                          40: [0.001, np.nan, 0.002]},
        "scaled": {0: [0.9, 0.8, 0.7], 10: [0.6, 0.5, 0.55], 20: [0.5, 0.5, 0.5], 30: [0.5, 0.5, 0.5],
                   40: [0.45, 0.62, 0.51]},
        "orthogonal": {0: [0.9, 0.8, 0.7], 10: [0.7, 0.75, 0.72], 20: [0.7, 0.7, 0.7], 30: [0.7, 0.7, 0.7],
                       40: [0.66, 0.61, 0.69]},
    }  # fmt: skip
    rows = [{"probe": f"{r}/sv_ratio", "step": st, "member": m, "value": v}
            for r in REGIMES for st, vals in sv[r].items() for m, v in enumerate(vals)]  # fmt: skip
    res = Result(tables={"metrics": pd.DataFrame(rows)})
    s = _summary(cfg, res, curves, diverged, slice(3, 6), torch.tensor([-1.0, 2.0]))

    def drift(v):  # window means of 20 % of the finite points, written out
        v = v[np.isfinite(v)]
        k = max(1, round(0.2 * len(v)))
        a, b = v[-k:].mean(), v[-2 * k : -k].mean()
        return abs(a - b) / abs(a)

    assert s["sv_ratio_at_init"] == pytest.approx(0.8)
    for r in REGIMES:
        c = curves[r][:, 3:]
        assert s[f"{r}_sv_ratio_at_collapse_epoch"] == pytest.approx(np.median(sv[r][10])), r
        assert s[f"{r}_sv_ratio_final_min"] == pytest.approx(np.nanmin(sv[r][40])), r
        last = [c[np.isfinite(c[:, m]), m][-1] for m in range(3)]
        assert s[f"{r}_loss_final_median"] == pytest.approx(np.median(last), rel=1e-12), r
        assert s[f"{r}_loss_at_collapse_epoch_median"] == pytest.approx(np.median(c[ce]), rel=1e-12), r
        k80 = int(0.8 * E)
        rel = [abs(c[-1, m] - c[k80, m]) / abs(c[-1, m]) for m in range(3) if np.isfinite(c[-1, m])]
        assert s[f"{r}_rel_change_last20pct"] == pytest.approx(max(rel), rel=1e-12), r
        assert s[f"{r}_window_drift"] == pytest.approx(max(drift(c[:, m]) for m in range(3)), rel=1e-12), r
    assert s["unconstrained_diverged_fraction"] == pytest.approx(1 / 3)
    assert s["unconstrained_diverged_epoch_median"] == 26.0
    unc_s = curves["unconstrained"][:, 3:]
    assert s["unconstrained_loss_drop_factor"] == pytest.approx(
        abs(s["unconstrained_loss_final_median"]) / abs(np.median(unc_s[ce])), rel=1e-12
    )
    assert s["scaled_loss_drop_factor"] == pytest.approx(
        abs(s["scaled_loss_final_median"]) / abs(s["scaled_loss_at_collapse_epoch_median"]), rel=1e-12
    )
    assert s["scaled_loss_drop_factor"] > 1  # the scaled loss keeps falling after the collapse epoch
    # the claims read these keys
    m = Fig1().measure(cfg, Result(summary=s))
    assert m["unconstrained-collapses"].value == s["unconstrained_sv_ratio_at_collapse_epoch"]
    assert m["unconstrained-collapses"].control == s["scaled_sv_ratio_at_collapse_epoch"]
    assert m["unconstrained-diverges"].value == pytest.approx(math.log10(s["unconstrained_loss_drop_factor"]))
    assert m["unconstrained-diverges"].control == pytest.approx(math.log10(s["scaled_loss_drop_factor"]))
    assert _read(m, "orth-converges") == (s["scaled_window_drift"], s["unconstrained_window_drift"])
    assert _read(m, "stiefel-converges") == (s["orthogonal_window_drift"], s["unconstrained_window_drift"])
    assert m["orth-stays-2d"].value == s["scaled_sv_ratio_final_min"]
    assert m["stiefel-stays-2d"].value == s["orthogonal_sv_ratio_final_min"]
    assert m["orth-stays-2d"].control == m["stiefel-stays-2d"].control == s["unconstrained_sv_ratio_at_collapse_epoch"]


# --------------------------------------------------------------------------------------
# nonlinearity token claims: measure() on hand-built final tables
# --------------------------------------------------------------------------------------
def _final(rows: list[dict]) -> pd.DataFrame:
    base = {"loss": "infonce", "activation": "relu", "zeta": 10.0, "bn": "mean_only"}
    return pd.DataFrame([base | r for r in rows])


# The sign-flip null on a 2 × 2 grid, worked by hand: the only patterns summing to 0 along every β and every P are the
# checkerboard + − − + over (β₁, P₁), (β₁, P₂), (β₂, P₁), (β₂, P₂) and its negative, so the relabelled readings are
# ±x with x the checkerboard's mean, and the quartile on the claim's side is +|x| (a claim of a large difference) or
# −|x| (a small one).


def test_table1_measure_groups_the_variants_and_takes_the_sign_flip_quantile():
    """Cells β ∈ {2, 5} × P ∈ {3, 5}; χ̄₊ = cell base + variant effect (none +0.10, μ-only +0.20, σ-only −0.05,
    vanilla 0) + two interactions (none +0.06 at (2, 5), μ-only +0.08 at (5, 5)). no-var-backprop-better: mean over
    cells of mean(none, μ-only) − mean(σ-only, vanilla); its control the same per-cell difference signed by the
    checkerboard + − − + over (2, 3), (2, 5), (5, 3), (5, 5), made positive; mean-only-beats-vanilla: μ-only − vanilla likewise;
    paper-lr-learns-less: μ-only at lr 0.02 − μ-only at 2e-3 (the latter = base + 0.05)."""
    from ssldyn.contract.config import build_config
    from ssldyn.experiments.nonlinearity.table1 import Table1, side_by_side

    cfg = build_config(Table1.Config, {"betas": [2, 5], "Ps": [3, 5], "paper_lr": 2e-3})
    base = {(2, 3): 0.5, (2, 5): 0.6, (5, 3): 0.7, (5, 5): 0.8}
    eff = {"none": 0.10, "mean_only": 0.20, "var_only": -0.05, "standard": 0.0}
    extra = {("none", 2, 5): 0.06, ("mean_only", 5, 5): 0.08}
    chi = {(bn, b, P): base[b, P] + e + extra.get((bn, b, P), 0.0) for bn, e in eff.items() for b, P in base}
    final = _final([{"bn": bn, "beta": b, "P": P, "chi_plus_mean": v} for (bn, b, P), v in chi.items()])
    lr_final = _final([{"beta": b, "P": P, "chi_plus_mean": v + 0.05} for (b, P), v in base.items()])
    res = Result(tables={"final": final, "side_by_side": side_by_side(final, lr_final)})
    m = Table1().measure(cfg, res)
    d = {c: (chi[("none", *c)] + chi[("mean_only", *c)]) / 2 - (chi[("var_only", *c)] + chi[("standard", *c)]) / 2
         for c in base}  # fmt: skip
    assert m["no-var-backprop-better"].value == pytest.approx(np.mean(list(d.values())), abs=1e-12)
    assert m["no-var-backprop-better"].value == pytest.approx((0.175 + 0.205 + 0.175 + 0.215) / 4, abs=1e-12)
    # d = 0.175, 0.205, 0.175, 0.215 at (2, 3), (2, 5), (5, 3), (5, 5): checkerboard (0.175 − 0.205 − 0.175 + 0.215)/4
    assert m["no-var-backprop-better"].control == pytest.approx(0.0025, abs=1e-12)
    assert m["mean-only-beats-vanilla"].value == pytest.approx(0.22, abs=1e-12)
    # μ-only − vanilla = 0.2 in every cell but (5, 5), 0.28: checkerboard (0.2 − 0.2 − 0.2 + 0.28)/4
    assert m["mean-only-beats-vanilla"].control == pytest.approx(0.02, abs=1e-12)
    assert m["paper-lr-learns-less"].value == pytest.approx((0.15 * 3 + 0.23) / 4, abs=1e-12)


def _grid(values: dict, loss: str = "infonce", **cols) -> pd.DataFrame:
    """A final table from ``{(activation, β, P): χ̄₊}`` (other χ columns from ``cols``: name -> dict)."""
    rows = []
    for (a, b, P), v in values.items():
        r = {"loss": loss, "activation": a, "beta": b, "P": P, "chi_plus_mean": v}
        r |= {c: d[a, b, P] for c, d in cols.items()}
        rows.append(r)
    return _final(rows).assign(zeta=1.0)


FIG4_FINAL = {("linear", 1, 1): 0.9, ("linear", 3, 1): 0.95, ("linear", 1, 2): 0.5, ("linear", 3, 2): 0.52,
              ("relu", 1, 1): 0.4, ("relu", 3, 1): 0.8, ("relu", 1, 2): 0.6, ("relu", 3, 2): 0.9}  # fmt: skip
FIG4_INIT = {("linear", 1, 1): 0.3, ("linear", 3, 1): 0.35, ("linear", 1, 2): 0.25, ("linear", 3, 2): 0.3,
             ("relu", 1, 1): 0.1, ("relu", 3, 1): 0.2, ("relu", 1, 2): 0.12, ("relu", 3, 2): 0.22}  # fmt: skip
FIG4_SIGNED = {("linear", 1, 1): 0.3, ("linear", 3, 1): 0.32, ("linear", 1, 2): 0.28, ("linear", 3, 2): 0.26,
               ("relu", 1, 1): 0.05, ("relu", 3, 1): 0.04, ("relu", 1, 2): 0.06, ("relu", 3, 2): 0.02}  # fmt: skip
FIG4_OWN = {k: (0.4 if k[0] == "linear" else 0.05) for k in FIG4_SIGNED}  # each activation's own metric
# χ̄₊ with the signed cosine (eq. 16 as printed): ReLU's own metric already; linear's sign-arbitrary filters score ≈ 0
FIG4_PLUS_SIGNED = FIG4_FINAL | {("linear", 1, 1): 0.02, ("linear", 3, 1): -0.01}
FIG4_PLUS_SIGNED_INIT = FIG4_INIT | {("linear", 1, 1): 0.05, ("linear", 3, 1): 0.01}


def test_fig4_measure_hand_worked_on_a_two_by_two_grid():
    """Fig. 4 on β ∈ {1, 3} × P ∈ {1, 2}, linear and ReLU (numbers in FIG4_*; every expected value worked out by hand
    from the claim's reading)."""
    from ssldyn.contract.config import build_config
    from ssldyn.experiments.nonlinearity.fig4 import Fig4

    cfg = build_config(Fig4.Config, {"betas": [1, 3], "Ps": [1, 2], "activations": ["linear", "relu"],
                                     "losses": ["infonce"]})  # fmt: skip
    cols = {"chi_minus_signed_mean": FIG4_SIGNED, "chi_minus_mean": FIG4_OWN}
    res = Result(tables={"final": _grid(FIG4_FINAL, **cols, chi_plus_signed_mean=FIG4_PLUS_SIGNED),
                         "init": _grid(FIG4_INIT, **cols, chi_plus_signed_mean=FIG4_PLUS_SIGNED_INIT)})  # fmt: skip
    m = Fig4().measure(cfg, res)
    want = {
        "p1-linear-good": (0.9, 0.3),  # min over β of linear at P = 1; at t = 0
        "p1-linear-beats-relu": ((0.5 + 0.15) / 2, (0.2 + 0.15) / 2),  # mean over β of linear − ReLU at P = 1
        "relu-p1-needs-beta": (0.8 - 0.4, 0.2 - 0.1),  # ReLU β_max − β_min at P = 1
        "relu-rises-with-beta": (0.9 - 0.6, 0.22 - 0.12),  # smallest over P > 1 of the ReLU β-gain
        "relu-gain-beyond-init": (0.3 - 0.1, (0.52 - 0.5) - (0.3 - 0.25)),  # control: linear's gain beyond init
        "relu-beats-linear": (0.9 - 0.52, 0.8 - 0.95),  # cells β > 1, P > 1; control β > 1, P = 1
        "linear-flat-in-beta": (0.52 - 0.5, 0.9 - 0.6),  # β-range at P > 1: linear; control ReLU
        # signed χ̄₋: ReLU mean 0.0425 − linear mean 0.29; control: ReLU − linear = −0.25, −0.22, −0.28, −0.24 at
        # (1,1), (1,2), (3,1), (3,2), checkerboard (−0.25 + 0.22 + 0.28 − 0.24)/4 = 0.0025, made negative
        "relu-lowest-chi-minus": (0.0425 - 0.29, -0.0025),
    }
    for k, (v, c) in want.items():
        assert m[k].value == pytest.approx(v, abs=1e-12), k
        assert m[k].control == pytest.approx(c, abs=1e-12), k
    assert m["homogeneous-similar"].value is None  # no LeakyReLU or x² in the grid
    # eq. 16 as printed for linear too: smallest signed χ̄₊ over β at P = 1 (−0.01; t = 0: 0.01), and the mean over β
    # of signed-linear − ReLU: (0.02 − 0.4 − 0.01 − 0.8) / 2 = −0.595 (t = 0: (0.05 − 0.1 + 0.01 − 0.2) / 2 = −0.12)
    assert "linear scores -0.010 (smallest over β; at initialisation 0.010)" in m["p1-linear-good"].detail
    assert "(eq. 16 as printed) -0.595 (at initialisation -0.120)" in m["p1-linear-beats-relu"].detail


def test_fig10_quadratic_below_infonce_is_quadratic_minus_infonce_with_one_sign_pattern_for_all_activations():
    """Fig. 10: mean over activations and cells of χ̄₊(quadratic) − χ̄₊(InfoNCE); the control signs every activation's
    differences by the same pattern of the (β, P) cells (on 2 × 2 the checkerboard + − − + or its negative),
    averages, and takes the lower quartile over the patterns: −|checkerboard mean|."""
    from ssldyn.contract.config import build_config
    from ssldyn.experiments.nonlinearity.fig10 import Fig10

    cfg = build_config(Fig10.Config, {"betas": [1, 3], "Ps": [1, 2], "activations": ["linear", "relu"],
                                      "losses": ["infonce", "quadratic"]})  # fmt: skip
    gap = {("linear", 1, 1): -0.1, ("linear", 1, 2): -0.2, ("linear", 3, 1): 0.05, ("linear", 3, 2): -0.3,
           ("relu", 1, 1): -0.02, ("relu", 1, 2): 0.04, ("relu", 3, 1): -0.12, ("relu", 3, 2): -0.06}  # fmt: skip
    quad = {k: FIG4_FINAL[k] + gap[k] for k in FIG4_FINAL}
    cols = {"chi_minus_signed_mean": FIG4_SIGNED, "chi_minus_mean": FIG4_OWN}
    t = pd.concat([_grid(FIG4_FINAL, **cols), _grid(quad, loss="quadratic", **cols)], ignore_index=True)
    t0 = pd.concat([_grid(FIG4_INIT, **cols), _grid(FIG4_INIT, loss="quadratic", **cols)], ignore_index=True)
    m = Fig10().measure(cfg, Result(tables={"final": t, "init": t0}))
    assert m["quadratic-below-infonce"].value == pytest.approx(np.mean(list(gap.values())), abs=1e-12)
    # mean gap over the activations per cell: −0.06, −0.08, −0.035, −0.18 at (1,1), (1,2), (3,1), (3,2); checkerboard
    # (−0.06 + 0.08 + 0.035 − 0.18)/4 = −0.03125
    assert m["quadratic-below-infonce"].control == pytest.approx(-0.03125, abs=1e-12)
    assert m["relu-rises-with-beta-quadratic"].value == pytest.approx(quad["relu", 3, 2] - quad["relu", 1, 2])


def test_fig11_measure_reads_the_smallest_and_largest_zeta_of_three():
    """Fig. 11 with ζ ∈ {2, 5, 10} (the default has three): bn-helps-large-zeta is the mean BN − no-BN gain over the
    (β > 1, P > 1) cells at ζ = 10 (control: at ζ = 2); bn-gain-grows-with-zeta the mean of gain(10) − gain(2), its
    control that difference signed by the checkerboard + − − + over (2, 3), (2, 5), (5, 3), (5, 5), made positive (the
    upper quartile of ± it). ζ = 5 is a decoy
    with its own gains; β = 1 and P = 1 cells carry a large gain that must not count."""
    from ssldyn.contract.config import build_config
    from ssldyn.experiments.nonlinearity.fig11 import Fig11

    cfg = build_config(Fig11.Config, {"zetas": [5.0, 10.0, 2.0], "betas": [1, 2, 5], "Ps": [1, 3, 5]})
    gain = {2.0: {(2, 3): 0.01, (2, 5): -0.02, (5, 3): 0.03, (5, 5): 0.0},
            5.0: {(2, 3): 0.5, (2, 5): 0.5, (5, 3): 0.5, (5, 5): 0.5},
            10.0: {(2, 3): 0.2, (2, 5): 0.1, (5, 3): 0.15, (5, 5): 0.3}}  # fmt: skip
    rows = []
    for z in (2.0, 5.0, 10.0):
        for b in (1, 2, 5):
            for P in (1, 3, 5):
                off = 0.3 + 0.01 * b + 0.001 * P + 0.1 * z / 10
                g = gain[z].get((b, P), 0.9)  # β = 1 or P = 1: not an over-parameterised cell
                rows += [{"zeta": z, "bn": "off", "beta": b, "P": P, "chi_plus_mean": off},
                         {"zeta": z, "bn": "mean_only", "beta": b, "P": P, "chi_plus_mean": off + g}]  # fmt: skip
    m = Fig11().measure(cfg, Result(tables={"final": _final(rows)}))
    assert m["bn-helps-large-zeta"].value == pytest.approx(0.1875, abs=1e-12)  # (0.2 + 0.1 + 0.15 + 0.3) / 4
    assert m["bn-helps-large-zeta"].control == pytest.approx(0.005, abs=1e-12)  # (0.01 − 0.02 + 0.03 + 0) / 4
    assert m["bn-gain-grows-with-zeta"].value == pytest.approx(0.1825, abs=1e-12)
    # growth 0.19, 0.12, 0.12, 0.3 at (2, 3), (2, 5), (5, 3), (5, 5): checkerboard (0.19 − 0.12 − 0.12 + 0.3)/4
    assert m["bn-gain-grows-with-zeta"].control == pytest.approx(0.0625, abs=1e-12)


def test_nonlinearity_fig5_measure_reads_the_figure_panel_keys():
    """Fig. 5 (token filters) at figure_P = 3, n_tokens = 20: each claim's value and control from its declared key;
    eq181-normalisation scales ReLU's χ̄₋ at initialisation by (d − P)/P = 17/3; the documented run reads P = 5."""
    from ssldyn.experiments.nonlinearity.fig5 import Fig5 as TokenFig5

    cfg = TokenFig5.default_config()
    assert (cfg.figure_P, cfg.n_tokens, cfg.documented_P, cfg.documented()) == (3, 20, 5, True)
    s = {}
    for i, key in enumerate(("P3_relu", "P3_linear", "P5_relu", "P5_linear")):
        for j, q in enumerate(("chi_plus", "chi_plus_init", "chi_minus", "chi_minus_init", "captured",
                               "noise_match_max", "noise_match_max_init", "chi_minus_signed")):  # fmt: skip
            s[f"{q}/{key}"] = 0.01 * (10 * i + j + 1)  # distinct everywhere
    m = TokenFig5().measure(cfg, Result(summary=s))
    r, li = "P3_relu", "P3_linear"
    want = {
        "relu-beats-linear": (
            s[f"chi_plus/{r}"] - s[f"chi_plus/{li}"],
            s[f"chi_plus_init/{r}"] - s[f"chi_plus_init/{li}"],
        ),
        "relu-captures-candidates": (s[f"captured/{r}"], s[f"captured/{li}"]),
        "linear-cannot-capture": (s[f"captured/{li}"], s[f"captured/{r}"]),
        "relu-ignores-noise": (s[f"noise_match_max/{r}"], s[f"noise_match_max/{li}"]),
    }
    for k, (v, c) in want.items():
        assert m[k].value == pytest.approx(v, abs=1e-12), k
        assert m[k].control == pytest.approx(c, abs=1e-12), k
    assert m["eq181-normalisation"].value == pytest.approx(s[f"chi_minus_init/{r}"] * 17 / 3, rel=1e-12)
    assert m["documented-run-chi-plus"].value == s["chi_plus/P5_relu"]
    assert m["documented-run-chi-minus"].value == s["chi_minus/P5_relu"]


# --------------------------------------------------------------------------------------
# variational.fig3: the panel (a) readings recomputed from the curves by loops
# --------------------------------------------------------------------------------------
def test_variational_fig3_panel_a_readings_from_the_curves_by_loops():
    """A small Fig. 3 (τ ∈ {0.5, 1}, n ∈ {8, 12, ∞}, K = 1..8): every panel (a) claim recomputed from the stored
    curves by its reading: L(1), L(K_max/2) = L(4), L(K_max) = L(8) per (τ, finite n) curve; consecutive-K rises and
    falls; L(n = 8) − L(n = 12) at every K ≥ 2 (control K = 1); the n = ∞ curves non-increasing over K = 2..8."""
    from ssldyn.contract.config import build_config
    from ssldyn.experiments.variational.fig3 import N_INF, Fig3
    from ssldyn.lab import Context

    cfg = build_config(Fig3.Config, {"taus": [0.5, 1.0], "ns": [8, 12], "k_max": 8, "threshold_taus": [0.2, 0.3, 0.4],
                                     "threshold_k_max": 12, "k_inf": 100})  # fmt: skip
    r = Fig3().run(cfg, Context(seed=0, seeds=(0,)))
    r = r[0] if isinstance(r, list) else r
    m = Fig3().measure(cfg, r)
    c = r.tables["curves"]
    L = {(tau, n): dict(zip(g["K"], g["loss"])) for (tau, n), g in c.groupby(["tau", "n"])}  # K -> loss
    finite = [(tau, n) for tau in (0.5, 1.0) for n in (8, 12)]
    drop, drop2, level, first, bump, fall = [], [], [], [], [], []
    for key in finite:
        x = L[key]
        total = x[1] - x[8]
        drop.append(total / abs(x[1]))
        drop2.append((x[4] - x[8]) / abs(x[1]))
        level.append(abs(x[4] - x[8]) / total)
        first.append(abs(x[1] - x[4]) / total)
        steps = [x[k + 1] - x[k] for k in range(1, 8)]
        bump.append(max(0.0, max(steps)) / total)
        fall.append(max(0.0, -min(steps)) / total)
    assert _read(m, "a-decreases") == pytest.approx((min(drop), max(drop2)), abs=1e-12)
    assert m["a-levels-off"].value == pytest.approx(max(level), abs=1e-12)
    assert m["a-monotone"].value == pytest.approx(max(bump), abs=1e-12)
    # their controls: the same two readings on the random-locations null, median over the draws of each (τ, n)
    # curve, largest over the curves
    nul = r.tables["null_curves"]
    null_level, null_bump = [], []
    for tau in (0.5, 1.0):
        for n in (8, 12):
            lv, bp = [], []
            for _, d in nul[(nul.tau == tau) & (nul.n == n)].groupby("draw"):
                x = dict(zip(d["K"], d["loss"]))
                total = x[1] - x[8]
                lv.append(abs(x[4] - x[8]) / total)
                bp.append(max(0.0, max(x[k + 1] - x[k] for k in range(1, 8))) / total)
            null_level.append(float(np.median(lv)))
            null_bump.append(float(np.median(bp)))
    assert m["a-levels-off"].control == pytest.approx(max(null_level), abs=1e-12)
    assert m["a-monotone"].control == pytest.approx(max(null_bump), abs=1e-12)
    more = min(L[tau, 8][k] - L[tau, 12][k] for tau in (0.5, 1.0) for k in range(2, 9))
    more1 = min(L[tau, 8][1] - L[tau, 12][1] for tau in (0.5, 1.0))
    assert _read(m, "a-more-samples") == pytest.approx((more, more1), abs=1e-12)

    def non_increasing(n):
        return all(all(L[tau, n][k + 1] - L[tau, n][k] <= 1e-12 for k in range(2, 8)) and L[tau, n][2] > L[tau, n][8]
                   for tau in (0.5, 1.0))  # fmt: skip

    assert _read(m, "a-more-atoms") == (non_increasing(N_INF), non_increasing(8))
    assert m["a-tau"].value == pytest.approx(L[1.0, 12][8] - L[0.5, 12][8], abs=1e-12)
    # b-plateau's control: the largest g(4)/g(2) of the relative excess over the panels and τ
    ex = r.tables["excess"]
    g = {(p, t, k): v for p, t, k, v in zip(ex.panel, ex.tau, ex.K, ex.excess)}
    far = max(g[p, t, 4] / g[p, t, 2] for p, t in {(p, t) for p, t, _ in g})
    assert m["b-plateau"].control == pytest.approx(far, rel=1e-12)
    # b-decreases: at n = 12, over the K > 1 that divide 12 with d²(K) above the τ's threshold, sorted by d², the
    # loss never falls; control: the same on 4 clusters at angles w·(π/2)·j, j < 4, of a shrinking arc w (d² =
    # 2 − 2 cos(πw/2)), each loss recomputed here from the measure's formula written out (n = 12: 3 samples per point)
    thr = dict(zip(r.tables["thresholds_b"].tau, r.tables["thresholds_b"].threshold))

    def rises_never(pts):
        pts = sorted(pts)
        return all(b[1] - a[1] >= -1e-12 for a, b in zip(pts, pts[1:])) if len(pts) > 1 else True

    mono = all(
        rises_never([(2 - 2 * math.cos(2 * math.pi / k), L[tau, 12][k]) for k in range(2, 9)
                     if 12 % k == 0 and 2 - 2 * math.cos(2 * math.pi / k) > thr[tau]])
        for tau in (0.5, 1.0)
    )  # fmt: skip
    arc = r.tables["arc_curves"]

    def arc_loss(w, tau):  # Σ_i (1/n) log(1 + 2 Σ_{j ≠ i} (1/n) e^{(cos θ_ij − 1)/τ}) over the n = 12 samples
        th = [w * (math.pi / 2) * j for j in range(4) for _ in range(3)]
        return sum(math.log(1 + 2 * sum(math.exp((math.cos(a - b) - 1) / tau) for jj, b in enumerate(th) if jj != ii)
                            / 12) for ii, a in enumerate(th)) / 12  # fmt: skip

    for row in arc.itertuples():
        assert row.loss == pytest.approx(arc_loss(row.width, row.tau), rel=1e-10)
        assert row.min_sq_dist == pytest.approx(2 - 2 * math.cos(math.pi / 2 * row.width), abs=1e-14)
    crowd = all(rises_never([(d, v) for d, v in zip(g.min_sq_dist, g.loss) if d > thr[tau]])
                for tau, g in arc.groupby("tau"))  # fmt: skip
    assert _read(m, "b-decreases") == (mono, crowd) and crowd is False


# --------------------------------------------------------------------------------------
# variational.ill_posed: measure() on hand-built tables
# --------------------------------------------------------------------------------------
def test_ill_posed_measure_hand_worked():
    """same-pushforward-*: |L(μ₁) − L(μ₂)| of the invariant map (control: the non-invariant map g); the
    reformulation gaps |batch − reformulated| / |reformulated|, the largest for the invariant map and the smallest
    for g; uniform-beats-clusters: (L(K clusters) − L(uniform)) / L(uniform) on S¹ and S²."""
    from ssldyn.experiments.variational.ill_posed import IllPosed

    cfg = IllPosed.default_config()
    k = cfg.clusters
    val = {("invariant", "NT-Xent"): (2.0, 2.001), ("control", "NT-Xent"): (2.0, 2.5),
           ("invariant", "VICReg"): (5.0, 4.99), ("control", "VICReg"): (5.0, 3.0),
           ("invariant", "BYOL"): (0.1, 0.1003), ("control", "BYOL"): (0.1, 0.4)}  # fmt: skip
    losses = pd.DataFrame([{"map": mp, "loss": ls, "distribution": d, "value": v}
                           for (mp, ls), vs in val.items() for d, v in zip(("mu1", "mu2"), vs)])  # fmt: skip
    rf = []
    for mp, scale in (("invariant", 1.0), ("control", 10.0)):
        for d, e in (("mu1", 0.001), ("mu2", 0.002)):
            rf.append({"map": mp, "distribution": d, "batch": 4.0 * (1 + scale * e), "reformulated": 4.0,
                       "printed": 3.0, "batch_summed": 40.0, "vicreg_batch": 2.0 * (1 + 2 * scale * e),
                       "vicreg_reformulated": 2.0, "byol_batch": 1.0 * (1 + 3 * scale * e), "byol_reformulated": 1.0})  # fmt: skip
    sphere = pd.DataFrame([{"sphere": "S1", "measure": "uniform", "loss": 1.0},
                           {"sphere": "S1", "measure": f"{k} clusters", "loss": 1.3},
                           {"sphere": "S1", "measure": "control clusters", "loss": 1.01},
                           {"sphere": "S2", "measure": "uniform", "loss": 2.0},
                           {"sphere": "S2", "measure": "4 clusters", "loss": 2.5},
                           {"sphere": "S2", "measure": "control clusters", "loss": 2.02}])  # fmt: skip
    res = Result(tables={"losses": losses, "sphere": sphere, "reformulation": pd.DataFrame(rf)})
    m = IllPosed().measure(cfg, res)
    for name, key in (("NT-Xent", "ntxent"), ("VICReg", "vicreg"), ("BYOL", "byol")):
        a, b = val["invariant", name]
        ca, cb = val["control", name]
        assert m[f"same-pushforward-{key}"].value == pytest.approx(abs(a - b), abs=1e-12), name
        assert m[f"same-pushforward-{key}"].control == pytest.approx(abs(ca - cb), abs=1e-12), name
    # NT-Xent form: invariant gaps 0.001, 0.002 -> largest 0.002; control 0.01, 0.02 -> smallest 0.01
    assert m["prop21-reformulation"].value == pytest.approx(0.002, rel=1e-9)
    assert m["prop21-reformulation"].control == pytest.approx(0.01, rel=1e-9)
    # VICReg gaps 2e, BYOL 3e: the largest invariant one is BYOL's 0.006; the smallest control one VICReg's 0.02
    assert m["appa1-reformulation"].value == pytest.approx(0.006, rel=1e-9)
    assert m["appa1-reformulation"].control == pytest.approx(0.02, rel=1e-9)
    assert m["uniform-beats-clusters-s1"].value == pytest.approx(0.3, rel=1e-12)
    assert m["uniform-beats-clusters-s1"].control == pytest.approx(0.01, rel=1e-9)
    assert m["uniform-beats-clusters-s2"].value == pytest.approx(0.25, rel=1e-12)
    assert m["uniform-beats-clusters-s2"].control == pytest.approx(0.01, rel=1e-9)


# --------------------------------------------------------------------------------------
# measure() key maps: a summary with a distinct number per key, each claim read from the key its reading names
# --------------------------------------------------------------------------------------
def _distinct(keys) -> dict:
    return {k: round(0.0137 * (i + 1) + 0.001 * i * i, 10) for i, k in enumerate(keys)}


def test_kernel_measure_reads_the_declared_summary_keys():
    from ssldyn.experiments.variational.kernel import KernelCheck

    want = {  # claim: (value key, control key)
        "prop41-linear-error": ("prop41_slope", "prop41_slope_zero"),
        "prop41-small-step": ("prop41_err_min_eta", "prop41_err_zero_min_eta"),
        "prop43-closed-form": ("closed_form_max_abs_err", "closed_form_control_err"),
        "prop44-rate": ("prop44_slope", "prop44_slope_wrong_limit"),
        "thm45-block-diagonal": ("block_slope", "block_slope_random_labels"),
        "thm45-kernel-limit": ("kernel_dev_bound", "kernel_dev_bound_random_labels"),
        "thm45-flow": ("flow_err_min_delta", "flow_err_min_delta_random_labels"),
        "cor46-infinite-width-flow": ("cor46_flow_rel_err", "cor46_flow_rel_err_beta1"),
        "remark44-size-ratio": ("imbalance_slope", "imbalance_slope_vanilla"),
    }
    s = _distinct([k for pair in want.values() for k in pair] + ["kernel_dev_slope", "flow_err_slope",
                                                                  "cor46_width", "imbalance_gain_rel_err"])  # fmt: skip
    m = KernelCheck().measure(KernelCheck.default_config(), Result(summary=s))
    for claim, (v, c) in want.items():
        assert _read(m, claim) == (s[v], s[c]), claim


def test_invariance_measure_reads_the_declared_summary_keys():
    from ssldyn.experiments.variational.invariance import Invariance

    keys = ["vanilla_max_gap", "network_max_gap", "vanilla_loss_drop", "network_gap_start", "network_gap_end",
            "network_eq36_violation_t0", "projected_gap_end", "network_gap_early", "vanilla_gap_ratio",
            "projected_max_gap", "projected_max_eq36_violation", "clean_min_eq36_violation", "clean_max_gap",
            "clean_max_kernel_violation", "network_kernel_violation_t0"]  # fmt: skip
    s = _distinct(keys)
    cfg = Invariance.default_config()
    m = Invariance().measure(cfg, Result(summary=s))
    assert _read(m, "vanilla-stays-invariant") == (s["vanilla_max_gap"], s["network_max_gap"])
    assert _read(m, "network-loses-invariance") == (s["network_gap_end"], s["projected_gap_end"])
    assert m["network-gap-grows"].value == pytest.approx(s["network_gap_end"] / s["network_gap_early"])
    assert m["network-gap-grows"].control == s["vanilla_gap_ratio"]
    assert _read(m, "eq36-sufficient") == (s["projected_max_gap"], s["network_max_gap"])
    assert _read(m, "kernel-condition-kept") == (s["clean_max_kernel_violation"], s["network_kernel_violation_t0"])
    assert _read(m, "kernel-condition-broken") == (s["network_kernel_violation_t0"], s["clean_max_kernel_violation"])
    # eq36-only-if is read only where the clean-centers run kept invariance (gap ≤ 1e-12)
    assert math.isnan(m["eq36-only-if"].value)  # clean_max_gap is 0.0137·k here: not kept
    kept = Invariance().measure(cfg, Result(summary=s | {"clean_max_gap": 1e-13}))
    assert kept["eq36-only-if"].value == s["clean_min_eq36_violation"]


def test_lme_measure_reads_the_declared_summary_keys():
    from ssldyn.experiments.nonlinearity.lme import LME

    keys = ["max_z_categorical", "min_z_categorical_other_formula", "max_z_summation", "min_z_summation_other_formula",
            "relu_return_categorical", "linear_return", "relu_return_summation_lme", "relu_leave_summation_nonlme",
            "relu_leave_summation_lme", "linear_min_cos_phi1", "relu_min_cos_phi1"]  # fmt: skip
    s = _distinct(keys) | {"lme_agreement": 6, "n_patterns": 6, "lme_agreement_half": 3, "n_q_below": 2,
                           "n_q_above": 4, "linear_distinct_endpoints": 1}  # fmt: skip
    cfg = LME.default_config()
    m = LME().measure(cfg, Result(summary=_full_summary(LME, cfg, s)))
    want = {"eq8": ("max_z_categorical", "min_z_categorical_other_formula"),
            "eq9": ("max_z_summation", "min_z_summation_other_formula"),
            "relu-returns": ("relu_return_categorical", "linear_return"),
            "relu-returns-summation": ("relu_return_summation_lme", "linear_return"),
            "relu-leaves-non-lme": ("relu_leave_summation_nonlme", "relu_leave_summation_lme"),
            "linear-one-winner": ("linear_min_cos_phi1", "relu_min_cos_phi1")}  # fmt: skip
    for claim, (v, c) in want.items():
        assert _read(m, claim) == (s[v], s[c]), claim
    assert m["lme-threshold"].value is True and m["lme-threshold"].control is False
    # the threshold needs patterns on both sides of it: all agreeing but none below is not a pass
    one_sided = LME().measure(cfg, Result(summary=_full_summary(LME, cfg, s | {"n_q_below": 0})))
    assert one_sided["lme-threshold"].value is False


def _full_summary(exp, cfg, s: dict) -> dict:
    """``s`` plus any further key the measure's detail strings read (filled with 0.5), found by retrying."""
    s = dict(s)
    for _ in range(60):
        try:
            exp().measure(cfg, Result(summary=s))
            return s
        except KeyError as e:
            s[e.args[0]] = 0.5
    raise AssertionError("too many missing keys")


def test_lemma2_measure_reads_the_declared_summary_keys():
    """converges-*: the log-log slope against the right limit (control: against a wrong limit); eq4-structure: the
    worse of the explicit sum's relative error and the negative of its smallest eigenvalue (control the z-weighted
    sum); asymptotic-psd: the slope of the negative part (control the intra-variance difference's)."""
    from ssldyn.experiments.nonlinearity.lemma2 import Lemma2

    keys = [f"{p}{k}" for k in ("a_uniform", "b_augmented", "c_gaussian") for p in ("slope_", "slope_wrong_limit_")]
    keys += ["aug_variance_removed_ratio", "aug_variance_removed_ratio_smallest_n", "eq4_explicit_rel_err",
             "eq4_explicit_z_weighted_rel_err", "slope_neg_part", "slope_neg_part_control", "frac_not_psd_smallest_N",
             "eq4_explicit_tail_bound", "eq4_orders_rel_err", "min_eig_gaussian_limit"]  # fmt: skip
    cfg = Lemma2.default_config()
    for min_eig in (-0.5, -1e-9):  # the negative part dominates, then the relative error does
        s = _distinct(keys) | {"eq4_explicit_min_eig": min_eig, "eq4_explicit_features": 10, "eq4_explicit_order": 3,
                               "eq4_explicit_capped": False, "neg_part_by_N": [0.1, 0.01]}  # fmt: skip
        m = Lemma2().measure(cfg, Result(summary=s))
        for k in ("a_uniform", "b_augmented", "c_gaussian"):
            assert _read(m, f"converges-{k}") == (s[f"slope_{k}"], s[f"slope_wrong_limit_{k}"])
        assert _read(m, "aug-variance-removed") == (
            s["aug_variance_removed_ratio"],
            s["aug_variance_removed_ratio_smallest_n"],
        )
        assert m["eq4-structure"].value == max(s["eq4_explicit_rel_err"], -min_eig)
        assert m["eq4-structure"].control == s["eq4_explicit_z_weighted_rel_err"]
        assert _read(m, "asymptotic-psd") == (s["slope_neg_part"], s["slope_neg_part_control"])
        assert m["finite-n-not-psd"] == s["frac_not_psd_smallest_N"]


def test_fig8_measure_reads_the_declared_summary_keys():
    from ssldyn.experiments.nonlinearity.fig8 import Fig8

    cfg = Fig8.default_config()
    s = _distinct(["linear_max_dev_deg", "nonlinear_max_dev_deg", "phi1_deg", "frac_ortho_partner_nonlinear",
                   "frac_ortho_partner_pca", "ortho_tol_deg", "frac_corner_maxima", "frac_corner_maxima_linear",
                   "max_PI_drift_from_maxima_deg"]) | {"n_max_nonlinear": 9, "n_max_linear": 2,
                                                       "n_ortho_pairs_nonlinear": 1, "n_pca_dirs_on_grid": 4,
                                                       "corner_maxima": 7, "maxima_on_kinks": 8,
                                                       "maxima_that_are_PI_fixed_points": 1,
                                                       "linear_maxima_that_are_PI_fixed_points": 2}  # fmt: skip
    m = Fig8().measure(cfg, Result(summary=s))
    want = {"relu-many-maxima": (9, 2), "more-than-pca": (9, 2), "linear-two-maxima": (2, 9),
            "linear-at-phi1": (s["linear_max_dev_deg"], s["nonlinear_max_dev_deg"]),
            "relu-not-orthogonal": (s["frac_ortho_partner_nonlinear"], s["frac_ortho_partner_pca"]),
            "relu-maxima-are-corners": (s["frac_corner_maxima"], s["frac_corner_maxima_linear"])}  # fmt: skip
    for claim, (v, c) in want.items():
        assert _read(m, claim) == (v, c), claim


# --------------------------------------------------------------------------------------
# log-log slopes recomputed from the stored tables (np.polyfit on logs, written out)
# --------------------------------------------------------------------------------------
def _slope(x, y) -> float:
    x, y = np.asarray(x, float), np.asarray(y, float)
    return float(np.polyfit(np.log(x), np.log(y), 1)[0])


def test_lemma2_summary_slopes_and_fractions_from_the_error_table():
    """A small Lemma 2 run (N = 50, 100, 200; 6 batches each): per setting the slope of log(mean error over the
    batches) against log N (error on the y axis), the same for the wrong limit, the augmentation ratio at the
    largest and the smallest N, the not-PSD fraction at the smallest N and the mean negative part per N, all from
    the stored per-batch table."""
    from ssldyn.contract.config import build_config
    from ssldyn.experiments.nonlinearity.lemma2 import Lemma2
    from ssldyn.lab import Context

    cfg = build_config(Lemma2.Config, {"ns": [50, 100, 200], "repeats": 6, "k_max": 20, "eq4_max_features": 2000})
    r = Lemma2().run(cfg, Context(seed=0, seeds=(0,)))
    r = r[0] if isinstance(r, list) else r
    s, e = r.summary, r.tables["errors"]
    for setting in ("a_uniform", "b_augmented", "c_gaussian"):
        g = e[e.setting == setting]
        Ns = sorted(g.N.unique())
        err = [g[g.N == n].err.mean() for n in Ns]
        wrong = [g[g.N == n].err_wrong_limit.mean() for n in Ns]
        assert s[f"slope_{setting}"] == pytest.approx(_slope(Ns, err), rel=1e-9, abs=1e-12), setting
        assert s[f"slope_wrong_limit_{setting}"] == pytest.approx(_slope(Ns, wrong), rel=1e-9, abs=1e-12), setting
        assert s[f"err_first_{setting}"] == pytest.approx(err[0], rel=1e-12)
        assert s[f"err_last_{setting}"] == pytest.approx(err[-1], rel=1e-12)
    b = e[e.setting == "b_augmented"]
    assert s["aug_variance_removed_ratio"] == pytest.approx(
        b[b.N == 200].dist_to_total_var.mean() / b[b.N == 200].err.mean(), rel=1e-12
    )
    assert s["aug_variance_removed_ratio_smallest_n"] == pytest.approx(
        b[b.N == 50].dist_to_total_var.mean() / b[b.N == 50].err.mean(), rel=1e-12
    )
    c = e[e.setting == "c_gaussian"]
    assert s["frac_not_psd_smallest_N"] == pytest.approx(float((c[c.N == 50].lambda_min < 0).mean()), abs=1e-15)
    assert s["neg_part_by_N"] == pytest.approx([c[c.N == n].neg_part.mean() for n in (50, 100, 200)], rel=1e-12)
    # the negative part is max(0, −λ_min) in units of one fixed scale ‖C_∞‖: 0 exactly where λ_min ≥ 0
    np.testing.assert_array_equal(c.neg_part > 0, c.lambda_min < 0)
    neg = c[c.lambda_min < 0]
    assert len(neg) > 0
    np.testing.assert_allclose(neg.neg_part / -neg.lambda_min, (neg.neg_part / -neg.lambda_min).iloc[0], rtol=1e-9)


def test_kernel_summary_slopes_and_extremes_from_the_stored_tables():
    """KernelCheck (quick sizes): each slope is log-log with the error / speed on the y axis against η, M, δ or
    n_q/n; prop44 fits the mean over draws per width; the δ readings take the smallest δ's row and the largest
    kernel_dev/δ; prop41's control is the trivial prediction's error at the smallest η."""
    from ssldyn.contract.config import build_config
    from ssldyn.experiments.variational.kernel import KernelCheck
    from ssldyn.lab import Context

    # η listed smallest first, with a round-off-dominated smallest η: prop41-small-step must read that row's error
    # (it read the smallest error over all η when the grid was not listed largest first — a bug a mutation audit found)
    cfg = build_config(KernelCheck.Config, dict(KernelCheck.quick) | {"widths": [16, 64, 256], "width_seeds": 3,
                                                                      "etas": [1e-13, 0.001, 0.01]})  # fmt: skip
    r = KernelCheck().run(cfg, Context(seed=0, seeds=(0,)))
    r = r[0] if isinstance(r, list) else r
    s, t = r.summary, r.tables
    p41 = t["prop41"]
    assert s["prop41_slope"] == pytest.approx(_slope(p41.eta, p41.rel_err), rel=1e-9)
    assert s["prop41_slope_zero"] == pytest.approx(_slope(p41.eta, p41.rel_err_zero), rel=1e-9, abs=1e-12)
    lo = p41.loc[p41.eta.idxmin()]
    assert s["prop41_err_min_eta"] == lo.rel_err and s["prop41_err_zero_min_eta"] == lo.rel_err_zero
    p44 = t["prop44"]
    Ms = sorted(p44.M.unique())
    assert s["prop44_slope"] == pytest.approx(_slope(Ms, [p44[p44.M == M].rel_err.mean() for M in Ms]), rel=1e-9)
    d = t["thm45"].sort_values("delta")
    assert s["block_slope"] == pytest.approx(_slope(d.delta, d.off_ratio), rel=1e-9)
    assert s["block_slope_random_labels"] == pytest.approx(_slope(d.delta, d.off_ratio_random_labels), rel=1e-9)
    assert s["kernel_dev_bound"] == pytest.approx(max(d.kernel_dev / d.delta), rel=1e-12)
    assert s["kernel_dev_bound_random_labels"] == pytest.approx(max(d.kernel_dev_random_labels / d.delta), rel=1e-12)
    assert s["flow_err_min_delta"] == d.flow_rel_err.iloc[0]
    assert s["flow_err_min_delta_random_labels"] == d.flow_rel_err_random_labels.iloc[0]
    im = t["imbalance"]
    assert s["imbalance_slope"] == pytest.approx(_slope(im.ratio, im.gain), rel=1e-9)
    assert s["imbalance_slope_vanilla"] == pytest.approx(_slope(im.ratio, im.vanilla_speed), rel=1e-9, abs=1e-9)


# --------------------------------------------------------------------------------------
# variational.stationarity: the table-based readings on hand-built tables
# --------------------------------------------------------------------------------------
def test_stationarity_measure_table_readings_hand_worked():
    """lemma-a2-positive: the smallest δ²L/scale over the admissible directions of every K and centre set (control:
    over all directions); remark32-uniform-local-min: the smallest λ_min/λ_max at n evenly spaced atoms over n and
    τ (control: the clustered atoms' smallest); the other claims read their summary keys."""
    from ssldyn.experiments.variational.stationarity import Stationarity

    cfg = Stationarity.default_config()
    lem = pd.DataFrame([
        {"K": 3, "centres": "even", "admissible": 10, "directions": 40, "min_admissible": 0.9, "min_all": 0.2,
         "negative_all": 0},
        {"K": 3, "centres": "random", "admissible": 0, "directions": 40, "min_admissible": np.nan, "min_all": -0.5,
         "negative_all": 3},
        {"K": 4, "centres": "random", "admissible": 5, "directions": 40, "min_admissible": 0.35, "min_all": 0.1,
         "negative_all": 0},
    ])  # fmt: skip
    r32 = pd.DataFrame([{"n": 8, "tau": 0.5, "uniform_min": -1e-13, "uniform_second": 0.15, "clusters_min": -0.3},
                        {"n": 16, "tau": 0.5, "uniform_min": -4e-12, "uniform_second": 2e-5, "clusters_min": -0.1},
                        {"n": 16, "tau": 1.0, "uniform_min": 2e-14, "uniform_second": 3e-5, "clusters_min": -0.2}])  # fmt: skip
    scal = pd.DataFrame({"residual": [0.4, 0.1, 0.02]})
    keys = ["eq7_max_rel_err", "eq7_control_rel_err", "eq6_printed_rel_err", "eq6_corrected_rel_err",
            "symmetric_max_residual", "control_min_residual", "symmetric_max_multiplier_spread",
            "control_min_multiplier_spread", "eq8_min_gap", "second_var_max_rel_err", "second_var_control_rel_err",
            "constant_max_grad", "remark32_hessian_max_rel_err", "eq26_bad", "eq26_bad_fixed", "self_mass_gap",
            "self_mass_limit", "scaled_ratio", "scaled_ratio_k2", "scaled_d_min"]  # fmt: skip
    s = _distinct(keys) | {"eq1_loss": 1.5, "eq4_loss": 1.2, "scaled_monotone": True}
    s |= {f"prop21_{w}_tau{t:g}": v for w, vs in (("printed", (3.0, 2.0, 1.5)), ("with", (0.3, 0.2, 0.1)))
          for t, v in zip((0.1, 0.5, 1.0), vs)}  # fmt: skip
    s2 = pd.DataFrame(
        [{"polytope": "cube", "tau": t, "min": v, "fourth": 1e-16} for t, v in ((0.1, -0.05), (0.5, -0.07))]
    )
    res = Result(summary=s, tables={"lemma_a2": lem, "remark32": r32, "scaled_limit": scal, "remark32_s2": s2})
    m = Stationarity().measure(cfg, res)
    assert "cube -0.07 (1e-16)" in m["remark32-uniform-local-min"].detail  # the smallest over τ
    assert m["lemma-a2-positive"].value == 0.35 and m["lemma-a2-positive"].control == -0.5
    assert m["remark32-uniform-local-min"].value == -4e-12 and m["remark32-uniform-local-min"].control == -0.3
    assert m["prop21-positive-term"].value == pytest.approx(3.0 - 1.5)
    assert m["eq1-eq4-negatives"].value == pytest.approx((1.5 - 1.2) / 1.2)  # relative to eq. (4)'s loss
    assert (
        m["propa1-scaled-limit"].value == s["scaled_ratio"] and m["propa1-scaled-limit"].control == s["scaled_ratio_k2"]
    )
    assert math.isnan(Stationarity().measure(cfg, Result(summary=s | {"scaled_monotone": False}, tables=res.tables))[
        "propa1-scaled-limit"].value)  # fmt: skip
    for claim, (v, c) in {"eq7-gradient": ("eq7_max_rel_err", "eq7_control_rel_err"),
                          "thm32-stationary": ("symmetric_max_residual", "control_min_residual"),
                          "thm32-one-multiplier": ("symmetric_max_multiplier_spread", "control_min_multiplier_spread"),
                          "second-variation-formula": ("second_var_max_rel_err", "second_var_control_rel_err")}.items():  # fmt: skip
        assert _read(m, claim) == (s[v], s[c]), claim
    # no admissible direction anywhere: not run, never a pass
    none = Stationarity().measure(cfg, Result(summary=s, tables=res.tables | {"lemma_a2": lem.assign(
        admissible=0, min_admissible=np.nan)}))  # fmt: skip
    assert none["lemma-a2-positive"].value is None and none["lemma-a2-positive"].not_run


def test_fig5_run_summary_recomputed_from_the_stored_embeddings_and_probes():
    """A tiny Fig. 5 run (4 clusters of 6 points, 40 iterations, horizons 20, vanilla recorded at 0, 20, 40): the
    summary's readings recomputed from what the run stores: vanilla's mean distance moved after / before its
    horizon (mean over the points of ‖z_i(a) − z_i(b)‖), the silhouettes at the horizons, at 0 and at the end of
    the network run, the uniformity gap at the end and at the horizon, and the cosine silhouette at iteration 20
    against scikit-learn."""
    from sklearn.metrics import silhouette_score

    from ssldyn.contract.config import build_config
    from ssldyn.experiments.variational.fig5 import Fig5
    from ssldyn.lab import Context

    cfg = build_config(Fig5.Config, {"n_per_cluster": 6, "width": 8, "uniform_time": 1.0, "steps_network": 40,
                                     "horizon_network": 20, "steps_vanilla": 40, "horizon_vanilla": 20,
                                     "probe_step": 5, "coherence_steps": 5, "table_lrs": [0.25, 0.05],
                                     "table_time": 0.5, "snapshots_network": [0, 10], "snapshots_long": [40],
                                     "snapshots_vanilla": [0, 20, 40], "gif_frames": 2})  # fmt: skip
    r = Fig5().run(cfg, Context(seed=3, seeds=(3,)))[0]
    s, a = r.summary, r.arrays
    vz = dict(zip(a["vanilla/steps"].tolist(), a["vanilla/z"]))  # step -> (n, d)
    assert s["vanilla_move_after_horizon"] == pytest.approx(np.linalg.norm(vz[40] - vz[20], axis=-1).mean(), rel=1e-9)
    assert s["vanilla_move_first_horizon"] == pytest.approx(np.linalg.norm(vz[20] - vz[0], axis=-1).mean(), rel=1e-9)
    pn = {q: a[f"probe/network/{q}"] for q in ("times", "silhouette", "uniformity")}
    pv = {q: a[f"probe/vanilla/{q}"] for q in ("times", "silhouette", "uniformity")}
    i20n = int(np.flatnonzero(np.isclose(pn["times"], 20 * cfg.lr_network))[0])
    i20v = int(np.flatnonzero(np.isclose(pv["times"], 20 * cfg.lr_vanilla))[0])
    i5n = int(np.flatnonzero(np.isclose(pn["times"], 5 * cfg.lr_network))[0])
    assert s["network_silhouette_horizon"] == pytest.approx(pn["silhouette"][i20n], abs=1e-12)
    assert s["vanilla_silhouette_horizon"] == pytest.approx(pv["silhouette"][i20v], abs=1e-12)
    assert s["network_silhouette_at_probe"] == pytest.approx(pn["silhouette"][i5n], abs=1e-12)
    assert s["silhouette_start"] == pytest.approx(pn["silhouette"][0], abs=1e-12)
    assert s["network_silhouette_end"] == pytest.approx(pn["silhouette"][-1], abs=1e-12)
    assert pn["times"][-1] == pytest.approx(40 * cfg.lr_network)
    assert s["network_silhouette_end"] != pytest.approx(pn["silhouette"][-2], abs=1e-9)  # the end is not a neighbour
    assert s["decay_gap_end"] == pytest.approx(pn["uniformity"][-1] - s["uniform_optimum"], abs=1e-12)
    assert s["decay_gap_ref"] == pytest.approx(pn["uniformity"][i20n] - s["uniform_optimum"], abs=1e-12)
    assert s["vanilla_uniformity_horizon"] == pytest.approx(pv["uniformity"][i20v], abs=1e-12)
    nz = dict(zip(a["network/steps"].tolist(), a["network/z"]))
    sk = silhouette_score(nz[20], a["labels"], metric="cosine")
    assert s["network_silhouette_horizon"] == pytest.approx(sk, abs=1e-9)
    # the uniform start's largest silhouette over its run
    assert s["uniform_network_silhouette_max"] == pytest.approx(a["uniform/network/silhouette"].max(), abs=1e-12)


def test_imbalance_rank_correlations_from_the_stored_curves_per_seed():
    """Remark 4.4 check (quick, two seeds): ρ_capture = Spearman(size, capture time), ρ_early = Spearman(size,
    silhouette at the last record ≤ t_early), ρ_start at t = 0, each from that seed's stored table; the claims read
    them (small-clusters-less-early's control is ρ_start)."""
    from scipy.stats import spearmanr

    from ssldyn.contract.config import build_config
    from ssldyn.experiments.variational.imbalance import Imbalance
    from ssldyn.lab import Context

    cfg = build_config(Imbalance.Config, dict(Imbalance.quick))
    results = Imbalance().run(cfg, Context(seed=0, seeds=(0, 1)))
    assert len(results) == 2

    def rho(x, y):
        y = np.asarray(y, float)
        return 0.0 if np.all(y == y[0]) else float(spearmanr(x, y).statistic)

    early = []
    for r in results:
        c, t = r.tables["curves"], r.tables["per_size"]
        times = np.sort(c["time"].unique())
        te = times[times <= cfg.t_early + 1e-9][-1]
        at = {tt: c[c.time == tt].set_index("size").loc[list(cfg.sizes), "silhouette"].to_numpy() for tt in (te, 0.0)}
        s = r.summary
        assert s["rho_early"] == pytest.approx(rho(cfg.sizes, at[te]), abs=1e-12)
        assert s["rho_start"] == pytest.approx(rho(cfg.sizes, at[0.0]), abs=1e-12)
        assert s["rho_capture"] == pytest.approx(rho(t["size"], t["t_capture"]), abs=1e-12)
        np.testing.assert_allclose(t["silhouette_early"], at[te], rtol=0, atol=1e-15)
        m = Imbalance().measure(cfg, r)
        assert _read(m, "small-clusters-less-early") == (s["rho_early"], s["rho_start"])
        assert _read(m, "small-clusters-later") == (s["rho_capture"], s["rho_capture_vanilla"])
        early.append(tuple(at[te]))
    assert early[0] != early[1]  # each seed reads its own curves


def test_table1_pooled_correlation_and_welch_count_with_their_init_controls():
    """agrees-with-paper: Pearson r over the 64 cells between our mean over seeds and the printed mean (control: the
    same with our values at initialisation); cells-agree: the number of cells whose Welch test (our mean ± sample std
    over 3 seeds vs the printed mean ± std over 3 runs, printed std floored at 0.005) rejects at 5 % (control: at
    initialisation). Welch's t, its degrees of freedom and the two-sided p written out here."""
    from scipy.stats import t as student_t

    from ssldyn.experiments.nonlinearity.table1 import COLUMNS, Table1, paper_table1, side_by_side

    cfg = Table1.default_config()
    paper = paper_table1()
    rng = np.random.default_rng(7)
    results, ours, init = [], [], []
    for _ in range(3):
        fin = paper.assign(chi_plus_mean=paper.paper_mean + rng.normal(0, 0.03, len(paper)))[
            ["beta", "P", "bn", "chi_plus_mean"]
        ]
        ini = paper.assign(chi_plus_mean=rng.uniform(0.2, 0.4, len(paper)))[["beta", "P", "bn", "chi_plus_mean"]]
        ours.append(fin.chi_plus_mean.to_numpy())
        init.append(ini.chi_plus_mean.to_numpy())
        results.append(
            Result(tables={"side_by_side": side_by_side(fin, None), "side_by_side_init": side_by_side(ini, None)})
        )
    m = Table1().measure_pooled(cfg, results)
    assert set(paper.bn) == {b for b, _ in COLUMNS} and len(paper) == 64
    mean, mean0 = np.mean(ours, 0), np.mean(init, 0)
    assert m["agrees-with-paper"].value == pytest.approx(np.corrcoef(mean, paper.paper_mean)[0, 1], abs=1e-12)
    assert m["agrees-with-paper"].control == pytest.approx(np.corrcoef(mean0, paper.paper_mean)[0, 1], abs=1e-12)

    def rejections(vals):
        m1, s1 = np.mean(vals, 0), np.std(vals, 0, ddof=1)
        m2, s2 = paper.paper_mean.to_numpy(), np.maximum(paper.paper_std.to_numpy(), 0.005)
        v1, v2 = s1**2 / 3, s2**2 / 3
        tt = (m1 - m2) / np.sqrt(v1 + v2)
        df = (v1 + v2) ** 2 / (v1**2 / 2 + v2**2 / 2)
        p = 2 * student_t.sf(np.abs(tt), df)
        return int((p < 0.05).sum())

    assert m["cells-agree"].value == rejections(ours)
    assert m["cells-agree"].control == rejections(init)
    assert m["cells-agree"].value != m["cells-agree"].control


def test_grid_frame_rows_carry_each_runs_settings_and_seed():
    """``grid_frame`` on a hand-logged trajectory of three runs (seeds 0, 5, 5; β 1, 1, 3) at steps 0 and 10: each row
    carries its run's settings and seed (``init``), and the χ columns are the probes over the generators' tokens, or
    with ``chi_tokens="candidates"`` the ``*_candidates`` probes; loss_value is the logged loss."""
    from ssldyn.dynamics.trajectory import Trajectory
    from ssldyn.experiments.nonlinearity.token_grid import PROBES, grid_frame, make_runs

    runs = make_runs(betas=[1], seeds=[0, 5]) + make_runs(betas=[3], seeds=[5])
    traj = Trajectory()
    val = {(p, t, m): 100 * j + t + 0.1 * m for j, p in enumerate(PROBES) for t in (0, 10) for m in range(3)}
    for t in (0, 10):
        for p in PROBES:
            traj.log_members(t, p, [val[p, t, m] for m in range(3)])
    for tokens, sfx in (("generators", ""), ("candidates", "_candidates")):
        df = grid_frame(runs, traj, tokens)
        assert len(df) == 6
        for r in df.itertuples():
            m = [(0, 1), (5, 1), (5, 3)].index((r.init, r.beta))
            assert (r.loss, r.activation, r.P, r.bn) == (runs[m].loss, runs[m].activation, runs[m].spec.P, runs[m].bn)
            for c in ("chi_plus", "chi_minus", "chi_minus_signed"):
                assert getattr(r, c) == pytest.approx(val[c + sfx, r.step, m]), (tokens, c)
            assert r.loss_value == pytest.approx(val["loss", r.step, m])
        assert sorted(df.init) == [0, 0, 5, 5, 5, 5]


def test_invariance_summary_from_the_stored_gap_table():
    """Thm. 4.2 check (quick): every summary number read back from the stored per-step table of each dynamics: the
    network's gap at the start, at 10 % of the records and at the end, its largest; the clean-centers run's largest
    gap and kernel violation and smallest eq. (36) violation; vanilla's largest gap and its loss drop."""
    from ssldyn.contract.config import build_config
    from ssldyn.experiments.variational.invariance import Invariance
    from ssldyn.lab import Context

    cfg = build_config(Invariance.Config, dict(Invariance.quick))
    r = Invariance().run(cfg, Context(seed=0, seeds=(0,)))
    r = r[0] if isinstance(r, list) else r
    s, df = r.summary, r.tables["gap"]

    def col(kind, c):
        return df[df.dynamics == kind].sort_values("step")[c].to_numpy()

    gn = col("network", "gap")
    assert len(gn) >= 10
    assert s["network_gap_start"] == gn[0] and s["network_gap_end"] == gn[-1] and s["network_max_gap"] == gn.max()
    assert s["network_gap_early"] == gn[len(gn) // 10]
    assert s["clean_max_gap"] == col("network-clean-data", "gap").max()
    assert s["clean_max_kernel_violation"] == col("network-clean-data", "kernel_violation").max()
    assert s["clean_min_eq36_violation"] == col("network-clean-data", "eq36_violation").min()
    assert s["network_kernel_violation_t0"] == col("network", "kernel_violation")[0]
    assert s["vanilla_max_gap"] == col("vanilla", "gap").max()
    assert s["vanilla_loss_drop"] == pytest.approx(col("vanilla", "loss")[0] - col("vanilla", "loss")[-1])
    assert s["projected_gap_end"] == col("network-projected", "gap")[-1]


def test_fig4_relu_lowest_chi_minus_is_against_the_lowest_other_activation():
    """With three activations the reading is ReLU's mean signed χ̄₋ minus the *lowest* other mean (linear 0.29,
    x² 0.10, ReLU 0.0425 → −0.0575); the control the largest over the others of the checkerboard-signed
    difference; homogeneous-similar reads x² − linear over the (β > 1, P > 1) cell."""
    from ssldyn.contract.config import build_config
    from ssldyn.experiments.nonlinearity.fig4 import Fig4

    cfg = build_config(Fig4.Config, {"betas": [1, 3], "Ps": [1, 2], "activations": ["linear", "relu", "quadratic"],
                                     "losses": ["infonce"]})  # fmt: skip
    quad = {("quadratic", b, P): v for (a, b, P), v in FIG4_FINAL.items() if a == "relu"}
    signed_q = {
        ("quadratic", 1, 1): 0.12,
        ("quadratic", 3, 1): 0.08,
        ("quadratic", 1, 2): 0.11,
        ("quadratic", 3, 2): 0.09,
    }
    fin = FIG4_FINAL | quad
    signed = FIG4_SIGNED | signed_q
    own = FIG4_OWN | {k: 0.2 for k in signed_q}
    cols = {"chi_minus_signed_mean": signed, "chi_minus_mean": own, "chi_plus_signed_mean": fin}
    ini = FIG4_INIT | {("quadratic", b, P): v for (a, b, P), v in FIG4_INIT.items() if a == "relu"}
    m = Fig4().measure(cfg, Result(tables={"final": _grid(fin, **cols), "init": _grid(ini, **cols)}))
    assert m["relu-lowest-chi-minus"].value == pytest.approx(0.0425 - 0.10, abs=1e-12)
    sign = {(1, 1): 1, (1, 2): -1, (3, 1): -1, (3, 2): 1}
    null = max(
        np.mean([w * (signed[("relu", *c)] - signed[(a, *c)]) for c, w in sign.items()])
        for a in ("linear", "quadratic")
    )
    assert m["relu-lowest-chi-minus"].control == pytest.approx(null, abs=1e-12)
    assert m["homogeneous-similar"].value == pytest.approx(0.9 - 0.52, abs=1e-12)


def test_fig5_uniform_start_summary_reads_the_largest_silhouette_not_the_last():
    """A uniform start whose clusters form and merge again (silhouette 0.1 → 0.7 → 0.3): the max is 0.7, the end 0.3;
    each entry is read from member e = 1's column (member 0 holds other numbers)."""
    from ssldyn.experiments.variational import _flows_common as fc
    from ssldyn.experiments.variational.fig5 import uniform_start_summary

    sil = np.array([[0.0, 0.1], [0.9, 0.7], [0.5, 0.3]])  # (R, E)
    loss = np.array([[5.0, 4.0], [4.5, 3.5], [4.2, 3.2]])
    pn = fc.Probes(np.array([0.0, 1.0, 2.5]), sil, np.zeros((3, 2)), loss)
    pv = fc.Probes(np.array([0.0, 1.0]), np.array([[0.2, 0.05], [0.1, 0.4]]), np.zeros((2, 2)),
                   np.zeros((2, 2)))  # fmt: skip
    s = uniform_start_summary(pn, pv, 1)
    assert s == {
        "uniform_network_silhouette_start": 0.1,
        "uniform_network_silhouette_max": 0.7,
        "uniform_network_silhouette_end": 0.3,
        "uniform_network_loss_start": 4.0,
        "uniform_network_loss_end": 3.2,
        "uniform_vanilla_silhouette_max": 0.4,
        "uniform_network_time": 2.5,
    }
