"""Quick presets of the grassmann experiments through the lab, one seed: implementation checks.

The claims are evaluated over seeds in real runs (``ssldyn reproduce``); here one seed pins what the
implementation computes, including the claims that are *expected* not to reproduce.
"""

import math

import pytest

from ssldyn.lab import run_experiment


def _run(name, tmp_path, **sets):
    out = run_experiment(name, quick=True, seeds=1, out=tmp_path, sets=sets or None)
    return {c.id: c for c in out.claims}, out.run.summary


def _passed(claims, *ids):
    for cid in ids:
        assert claims[cid].passed, (cid, claims[cid].values, claims[cid].note)


def test_fig1_collapse_without_constraints(tmp_path):
    claims, s = _run("grassmann.fig1", tmp_path)
    _passed(claims, *claims)
    # seed 0: the unconstrained loss collapses (ratio ~1e-7) below the collapse tolerance 1e-3; the scaled loss at the
    # same epoch (the control, 0.040) and the untrained net (0.12) are elongated but far from a line
    collapse = claims["unconstrained-collapses"]
    assert collapse.status == "pass" and collapse.values[0] < 1e-5 and 0.02 < collapse.control_values[0] < 0.05
    assert s["unconstrained_sv_ratio_at_collapse_epoch"] < 1e-3 < 0.05 < s["sv_ratio_at_init"]
    assert s["unconstrained_sv_ratio_at_collapse_epoch"] < 0.1 < s["scaled_sv_ratio_final_min"]
    assert "at initialisation" in collapse.details[0]
    # the scaled loss's window mean has converged (how much single epochs chatter at the loss's kink varies with the
    # seed: 0.26% on seed 0, more on others)
    assert s["scaled_window_drift"] < 0.01 and s["scaled_rel_change_last20pct"] > 0


def test_collapse_claims(tmp_path):
    claims, s = _run("grassmann.collapse", tmp_path)
    _passed(claims, *(c for c in claims if c != "remark2-infonce-collapses"))
    assert s["linear_same_dynamics_dev"] < 1e-10
    # Lemma 1 for the 2-layer tanh net in the NTK parametrisation (mean of 4 draws): cross term and spread shrink
    # with h, at about the CLT rate h^(-1/2); with correlated output weights (the control) the cross term does not
    hs = (10, 100, 400)
    for key in ("cross", "spread"):
        vals = [s[f"tanh_h{h}_ntkparam_{key}"] for h in hs]
        assert vals[0] > vals[1] > vals[2], (key, vals)
        assert -0.8 < s[f"tanh_ntkparam_{key}_slope"] < -0.25, key
    assert abs(s["tanh_corr_ntkparam_cross_slope"]) < 0.2 and s["tanh_h400_corr_ntkparam_cross"] > 0.1
    assert claims["lemma1-wide-net"].control_values[0] > -0.25  # the control fails the claim's check
    # the standard parametrisation (W2 ~ N(0, 1/h), one draw): both shrink like h^(-3/2)
    for key in ("cross", "spread"):
        vals = [s[f"tanh_h{h}_ntk_{key}"] for h in hs]
        assert vals[0] > vals[1] > vals[2], (key, vals)
    assert s["tanh_h400_ntk_cross"] < 1e-3 and s["tanh_h400_ntk_spread"] < 1e-2
    # the control of the h^(-3/2) rate: the first layer's kernel alone decays only like h^(-1/2)
    assert -0.8 < s["tanh_ntk_w1_cross_slope"] < -0.2
    # Prop. 2 direction (a consequence): the row of the collapsed map is v_1
    assert claims["prop2-direction"].values[0] < 1e-2
    # the printed non-contrastive matrix gives loss (2) with the opposite sign, the used one gives it exactly
    assert s["loss2_printed_trace_over_loss"] == pytest.approx(-1.0, abs=1e-12)
    assert s["loss2_used_trace_over_loss"] == pytest.approx(1.0, abs=1e-12)
    # Remark 1: the linear regression decouples exactly, the 2-layer tanh control does not
    assert s["regression_same_dynamics_dev"] < 1e-10 < 0.05 < s["regression_tanh_net_dev"]
    # Remark 2 does not reproduce for InfoNCE itself: its embedding stays two-dimensional
    assert not claims["remark2-infonce-collapses"].passed and s["infonce_final_sv_ratio"] > 0.1


def test_fig2_width_dependence(tmp_path):
    claims, s = _run("grassmann.fig2", tmp_path)
    _passed(claims, "tanh-decreases-init", "tanh-thm1-constant", "tanh-decreases-training", "relu-decreases-init",
            "sigmoid-increases", "lemma2-max-entry")  # fmt: skip
    # Thm. 1's constant: flat or falling for tanh, growing for the sigmoid control over 10²–10⁴ (init only)
    assert s["tanh_K_hat_slope"] < -0.5 and s["sigmoid_K_hat_slope"] > 0.1
    # a "slower convergence" ratio is ≤ 0 for a curve that does not fall (the sigmoid control)
    assert claims["relu-slower"].control_values[0] < 0
    assert s["tanh_slope_init"] < -1.0  # heuristically h^(-3/2), steeper than the bound's h^(-1/2)
    assert -0.8 < s["relu_slope_init"] < -0.2  # ReLU at init: ~h^(-1/2)
    # sigmoid: increases with the summed loss (as printed), not with the mean loss
    assert s["sigmoid_slope_during"] > 0.2 and s["sigmoid_mean_slope_during"] < 0.0
    assert "reduction=mean" in claims["sigmoid-increases"].details[0]


def test_fig3_gd_matches_ode(tmp_path):
    claims, s = _run("grassmann.fig3", tmp_path)
    _passed(claims, *claims)
    assert 0.8 < s["grassmann_order"] < 1.2 and abs(s["polar_order"]) < 0.3 and 0.8 < s["polar_own_flow_order"] < 1.2
    # Fig. 3 is judged on Grassmann GD by default; the polar variant is a different flow, close to its own
    assert s["max_path_deviation"] < 0.02 < s["max_path_deviation_polar"]
    assert s["max_path_deviation_polar_vs_own_flow"] < 0.02
    # the control of outputs-stay-close: the ODE from −q_0 is −q_ODE (eq. 9 is odd), on the other sign of ±v_1, so
    # every member ends ≈ 2 away (q → ±e_1 in the eigenbasis) for both variants
    close = claims["outputs-stay-close"]
    assert close.control_values[0] == pytest.approx(s["min_path_deviation_mirror_ode"], rel=1e-5)
    assert s["min_path_deviation_mirror_ode"] > 1.9
    assert min(s["min_final_deviation_mirror_ode"], s["min_final_deviation_mirror_ode_polar"]) > 1.9
    # the printed eq. (11) run to the end drives q to 0 (the control of the final loss and outputs)
    assert s["max_final_loss_gap_ascent"] > 0.1 and s["max_final_deviation_ascent"] > 0.5


def test_fig3_gd_knob_reads_the_claims_on_the_polar_variant(tmp_path):
    """Both variants run in every run: gd=polar reads the paper claims on the numbers the default run reports as
    polar (and the other variant moves to the detail); the order claim and the controls do not change."""
    claims, s = _run("grassmann.fig3", tmp_path)
    pclaims, ps = _run("grassmann.fig3", tmp_path, gd="polar")
    for key in ("max_path_deviation_polar", "max_final_deviation_polar", "max_final_loss_gap_polar",
                "max_final_distance_to_v1_polar", "new_datapoint_error_polar", "min_path_deviation_mirror_ode_polar",
                "max_path_deviation", "grassmann_order", "polar_order"):  # fmt: skip
        assert ps[key] == pytest.approx(s[key], rel=1e-12, abs=1e-15), key
    read = {"same-final-loss": "max_final_loss_gap", "outputs-stay-close": "max_path_deviation",
            "same-final-outputs": "max_final_deviation", "converges-to-v1": "max_final_distance_to_v1",
            "new-datapoint": "new_datapoint_error"}  # fmt: skip
    for cid, key in read.items():
        assert pclaims[cid].values[0] == pytest.approx(s[f"{key}_polar"], rel=1e-5), cid
        assert claims[cid].values[0] == pytest.approx(s[key], rel=1e-5), cid
        assert "Grassmann GD" in pclaims[cid].details[0] and "polar GD" in claims[cid].details[0], cid
    control = pclaims["outputs-stay-close"].control_values[0]
    assert control == pytest.approx(ps["min_path_deviation_mirror_ode_polar"], rel=1e-5) and control > 1.9
    assert pclaims["thm2-grassmann-order"].values[0] == claims["thm2-grassmann-order"].values[0]
    # Sec. 4.2's protocol (projection after the step) does not stay within 0.02 of eq. (9) on seed 0 (0.058)
    close = pclaims["outputs-stay-close"]
    assert not close.passed and close.values[0] > 0.02
    _passed(pclaims, "same-final-loss", "same-final-outputs", "converges-to-v1", "new-datapoint")


def test_thm3_all_trials(tmp_path):
    claims, s = _run("grassmann.thm3", tmp_path)
    _passed(claims, *claims)
    assert s["positive_fraction"] == 1.0 and s["negative_fraction"] == 1.0
    # h = d: the network keeps ‖q‖ = 1 (Thm. 3 needs h > d); at h > d GD drives q to 0
    assert s["gd_min_norm_h_eq_d"] > 1 - 1e-9 and s["gd_max_norm_h_eq_d"] < 1 + 1e-9 and s["gd_max_norm_h"] < 1e-3


def test_fig5_span_converges(tmp_path):
    claims, s = _run("grassmann.fig5", tmp_path)
    _passed(claims, *claims)
    assert s["ode_z1_final_norms"][1] < 1e-3  # v_2 is not in span(q) when z = 1
    sv = s["ode_z3_k1_singular_values"]  # one negative eigenvalue, z = 3: q collapses to rank 1
    assert abs(sv[0] - 1) < 1e-3 and max(sv[1:]) < 1e-3


def test_fig4_costs_and_svm(tmp_path):
    claims, s = _run("grassmann.fig4", tmp_path)
    # wall-clock claims depend on the machine's load: pinned here are the deterministic ones and sane timings
    _passed(claims, "gd-ops-linear-in-h", "ode-ops-independent-of-h", "svm-comparable")
    assert s["min_speedup"] > 1 and s["gd_time_slope_interval"][0] <= s["gd_time_slope"] + 1e-12
    assert "CPU" in claims["gd-time-linear-in-h"].details[0] or "cuda" in str(claims["gd-time-linear-in-h"].details)
    assert s["acc_raw_pixels"] > 0.9 and s["acc_pca50_input"] > 0.9
    assert s["acc_gd"] > s["acc_init"] - 0.05 and math.isfinite(s["gd_time_slope"])
    assert s["ode_ops_ratio_max_min"] == 1.0


def test_fig6_deep_linear(tmp_path):
    claims, s = _run("grassmann.fig6", tmp_path)
    _passed(claims, *claims)
    assert max(s["procrustes_residual_to_depth1"].values()) < 1e-2
    # the same embedding at full rank z: the row spaces agree and every singular value is 1 (orthonormal rows)
    assert s["max_principal_angle"] < 1e-2 and s["max_gram_distance_at_init"] > 0.1
    for vals in s["singular_values"].values():
        assert vals == pytest.approx([1.0, 1.0], abs=1e-3)


def test_prop3_equivalence_and_errata(tmp_path):
    claims, s = _run("grassmann.prop3", tmp_path)
    _passed(claims, *claims)
    assert s["printed_norm_form_at_optimum"] >= 0 > s["loss1_at_optimum"]
    assert abs(s["loss1_at_optimum"] - s["trace_form_at_optimum"]) < 1e-12
    # the Frobenius ball's rank-one map (Prop. 2) does not extract span(v_1, v_2) at the fixed rank z = 2
    assert s["frobenius_angle"] == pytest.approx(math.pi / 2)
    # (3) ⇔ (4) needs h ≥ d + z − k: at h = d = z = 2 orthogonality is pinned at Tr C, at h = 3 it reaches λ_1
    assert s["counter_gap_h2"] == pytest.approx(1.0, abs=1e-3) and abs(s["counter_gap_h3"]) < 1e-3
