"""Parts of the grassmann experiments checked against independent references (formulas, numpy, scipy)."""

import math

import numpy as np
import pytest
import torch
from pydantic import ValidationError

from ssldyn.experiments.grassmann._common import (
    map_trace_loss,
    mean_contrastive_loss,
    moons_batch,
    per_member_values,
    repeat_per_seed,
    window_drift,
)
from ssldyn.experiments.grassmann.fig2 import C_TANH, Fig2Config, thm1_constant
from ssldyn.experiments.grassmann.fig3 import Fig3Config
from ssldyn.experiments.grassmann.fig4 import (
    Fig4Config,
    gd_update_flops,
    ode_step_flops,
    svd_flops,
)
from ssldyn.experiments.grassmann.fig5 import Fig5Config, eigvec_projection_norms, projector_k, shortfall
from ssldyn.experiments.grassmann.fig6 import procrustes_align
from ssldyn.experiments.grassmann.prop3 import clip_singular_values
from ssldyn.lab import all_experiments
from ssldyn.models.two_layer import TwoLayerNet
from ssldyn.objectives import simple_contrastive, trace_loss

D = torch.float64


def test_every_grassmann_experiment_declares_its_claims_and_batches_seeds():
    exps = all_experiments("grassmann")
    assert {e.name for e in exps} >= {f"grassmann.{n}" for n in ("collapse", "fig1", "fig2", "fig3", "fig4", "fig5",
                                                                  "fig6", "thm3", "prop3")}  # fmt: skip
    for e in exps:
        assert e.claims and e.batch_seeds and e.threads == 1, e.name
        assert "seeds" not in e.Config.model_fields, f"{e.name}: initialisations must be called inits"
    ids = {s.id for e in exps for s in e.claims}
    assert "tanh-slope-near-half" not in ids  # not a claim of the paper (issue 17 item 1)
    kinds = {s.id: s.kind for e in exps for s in e.claims}
    assert {"eq11-sign", "eq12-time-scale", "prop3-loss-is-a-trace", "sec41-expectation"} <= {
        i for i, k in kinds.items() if k == "erratum"
    }


def test_gd_and_ode_operation_counts_match_the_formulas():
    """Matmul FLOPs of one projected-GD update, written out: forward W2ᵀW1 (2zhd) and (W2ᵀW1)C (2zd²);
    backward g Cᵀ (2zd²), W2-grad and W1-grad (2·2zhd); polar factors U Vᵀ (2hd² + 2hz²); plus the SVDs."""
    for d, h, z in ((7, 40, 3), (12, 90, 5)):
        matmul = 6 * h * z * d + 4 * z * d * d + 2 * h * d * d + 2 * h * z * z
        assert gd_update_flops(d, h, z) == matmul + svd_flops(h, d) + svd_flops(h, z)
        assert ode_step_flops(d, z) == 8 * d * z * z  # qᵀq, qᵀΛq, Λq(qᵀq), q(qᵀΛq)
    assert svd_flops(100, 5) == svd_flops(5, 100) == 6 * 100 * 25 + 20 * 125


def test_window_drift_ignores_a_bounded_sawtooth_but_sees_a_trend():
    t = np.arange(500)
    saw = -1.0 + 0.05 * ((t % 6) / 5.0)  # period-6 sawtooth of 5% around a constant
    assert window_drift(saw) < 2e-3 < abs(saw[-1] - saw[400]) / abs(saw[-1])
    trend = -1.0 - 1e-4 * t  # still decreasing: mean moves by 1e-4·100 between the windows
    ref = abs(trend[-100:].mean() - trend[-200:-100].mean()) / abs(trend[-100:].mean())
    assert window_drift(trend) == pytest.approx(ref) and window_drift(trend) > 5e-3


def test_procrustes_recovers_a_rotation():
    g = torch.Generator().manual_seed(0)
    u = torch.randn(50, 3, generator=g, dtype=D).numpy()
    Q, _ = np.linalg.qr(np.random.default_rng(1).normal(size=(3, 3)))
    ua, r = procrustes_align(u @ Q, u)
    np.testing.assert_allclose(ua, u, atol=1e-12)
    assert r < 1e-12
    # a noisy target: the minimiser of ‖uR − ref‖_F over orthogonal R is R = UVᵀ with uᵀref = UΣVᵀ (closed form);
    # the residual is relative to ‖ref‖_F
    ref = u @ Q + 0.3 * np.random.default_rng(2).normal(size=(50, 3))
    U, _, Vt = np.linalg.svd(u.T @ ref)
    ua, r = procrustes_align(u, ref)
    np.testing.assert_allclose(ua, u @ U @ Vt, atol=1e-12)
    assert r == pytest.approx(np.linalg.norm(u @ U @ Vt - ref) / np.linalg.norm(ref), rel=1e-12) and r > 0.05
    R = np.linalg.qr(np.random.default_rng(3).normal(size=(3, 3)))[0]  # any other rotation does worse
    assert np.linalg.norm(u @ R - ref) > np.linalg.norm(ua - ref)


def test_fig5_shortfall_of_a_plane_tilted_out_of_span_v1_v2():
    """span(q) = span(e_1, cos θ e_2 + sin θ e_3) (zero-padded to z = 3): ‖P e_i‖ = 1, cos θ, sin θ, 0, so the
    shortfall from span(v_1, v_2) is max(1 − cos θ, sin θ) = sin θ; Π_k is diag(1, …, 1, 0, …)."""
    for theta in (0.0, 0.1, 0.7):
        basis = torch.tensor([[1.0, 0, 0, 0], [0, math.cos(theta), math.sin(theta), 0]], dtype=D).T  # (4, 2)
        mix = torch.tensor([[2.0, 1.0], [-0.5, 3.0]], dtype=D)  # any basis of the same plane
        q = torch.nn.functional.pad(basis @ mix, (0, 1))[None]  # (1, 4, 3): one zero column
        norms = eigvec_projection_norms(q)[0].tolist()
        np.testing.assert_allclose(norms, [1.0, math.cos(theta), math.sin(theta), 0.0], atol=1e-12)
        assert shortfall(norms, 2, 3) == pytest.approx(math.sin(theta), abs=1e-12)
    torch.testing.assert_close(projector_k(2, 4), torch.diag(torch.tensor([1.0, 1.0, 0.0, 0.0], dtype=D)))


def test_thm1_constant_is_the_bound_ratio_at_the_worst_point():
    """K̂ = max_x gap(x)/(c‖x‖²d√(log⁴h/h)): a gap equal to K times the bound at one point and half of it
    elsewhere gives K."""
    h, d, K = 300, 2, 0.37
    x_norm2 = torch.tensor([[0.5, 2.0, 1.3]], dtype=D)  # (1, n)
    bound = C_TANH * x_norm2 * d * math.log(h) ** 2 / math.sqrt(h)  # c‖x‖² d √(log⁴h/h)
    gap = K * bound * torch.tensor([[0.5, 1.0, 0.5]], dtype=D)
    torch.testing.assert_close(thm1_constant(gap, x_norm2, h, d, C_TANH), torch.tensor([K], dtype=D))


def test_map_trace_loss_is_the_trace_loss_of_the_end_to_end_map():
    g = torch.Generator().manual_seed(4)
    W1, W2 = torch.randn(3, 7, 4, generator=g, dtype=D), torch.randn(3, 7, 2, generator=g, dtype=D)
    B = torch.randn(4, 4, generator=g, dtype=D)
    C = B + B.T
    A = W2.mT @ W1  # (3, 2, 4)
    ref = [np.trace(a @ C.numpy() @ a.T) for a in A.numpy()]
    np.testing.assert_allclose(map_trace_loss(A, C).numpy(), ref, rtol=1e-12)
    torch.testing.assert_close(map_trace_loss(A, C), trace_loss(W1, W2, C))


def test_clip_singular_values_is_the_spectral_ball_projection():
    g = torch.Generator().manual_seed(2)
    W = torch.randn(3, 8, 4, generator=g, dtype=D) * 2
    P = clip_singular_values(W)
    for e in range(3):
        U, s, Vt = np.linalg.svd(W[e].numpy(), full_matrices=False)
        np.testing.assert_allclose(P[e].numpy(), U @ np.diag(np.minimum(s, 1.0)) @ Vt, atol=1e-12)
    assert torch.linalg.matrix_norm(P, ord=2).max() <= 1 + 1e-12


def test_batched_contrastive_loss_equals_per_seed_loss():
    mb = moons_batch(30, 0.05, [0, 4])
    net = TwoLayerNet(2, 9, 2, "tanh", ensemble=4, seeds=[1, 2, 3, 4], dtype=D)
    x, xp, xn = (repeat_per_seed(t, 2) for t in (mb.x, mb.x_pos, mb.x_neg))
    got = mean_contrastive_loss(net, x, xp, xn)
    for e in range(4):
        s = e // 2
        u = net(mb.x[s])[e]
        ref = simple_contrastive(u, net(mb.x_pos[s, :, 0])[e], net(mb.x_neg[s, :, 0])[e]) / 30
        torch.testing.assert_close(got[e], ref)


@pytest.mark.parametrize(
    "config, bad",
    [
        (Fig2Config, {"widths": [1, 10]}),
        (Fig3Config, {"z": 50}),
        (Fig3Config, {"t_order": 0.015}),
        (Fig4Config, {"pca_dim": 0}),  # d = 784 pixels: every width must be >= 784
        (Fig4Config, {"pca_dim": 400}),  # > n − 1 = 399 centered images
        (Fig4Config, {"z": 60}),
        (Fig4Config, {"timing_widths": [500, 1000]}),  # one marginal cost cannot show linear growth
        (Fig5Config, {"fewer_negative": [3]}),
    ],
)
def test_config_rules_fail_before_any_compute(config, bad):
    with pytest.raises(ValidationError):
        config(**bad)


def test_pca_dim_zero_is_valid_with_wide_enough_nets():
    cfg = Fig4Config(pca_dim=0, h_train=800, timing_widths=[800, 1600, 3200], fit_from=800)
    assert cfg.d == 784 and math.isfinite(cfg.lr)


def test_marginal_cost_ratio_separates_linear_from_other_growth():
    from ssldyn.experiments.grassmann.fig4 import _marginal_ratio

    h = np.array([100.0, 300.0, 1000.0, 3000.0])
    assert _marginal_ratio(h, 7.0 * h + 5e5) == pytest.approx(1.0)
    # quadratic: the marginal costs (h_{i+1}² − h_i²)/(h_{i+1} − h_i) = h_i + h_{i+1} are 400, 1300, 4000
    assert _marginal_ratio(h, h**2) == pytest.approx(400 / 4000, rel=1e-12)
    perm = np.array([2, 0, 3, 1])  # the widths are sorted first
    assert _marginal_ratio(h[perm], (h**2)[perm]) == pytest.approx(400 / 4000, rel=1e-12)
    assert _marginal_ratio(h, np.sqrt(h)) == pytest.approx((math.sqrt(3000) - math.sqrt(1000)) / 2000
                                                            / ((math.sqrt(300) - 10) / 200), rel=1e-12)  # fmt: skip
    assert _marginal_ratio(h, np.full(4, 3.0)) == 0.0  # constant cost: no growth
    assert _marginal_ratio(h, np.array([1.0, 3.0, 2.0, 5.0])) == 0.0  # a falling cost somewhere: 0


def test_per_member_values_fails_clearly_on_a_float():
    t = torch.tensor([0.5, 0.25])
    assert per_member_values(t, "probe") is t
    with pytest.raises(ValueError, match="probe: expected one value per member"):
        per_member_values(0.5, "probe")


def test_slope_interval_of_timings_contains_the_power_law_and_collapses_without_noise():
    from ssldyn.experiments.grassmann.fig4 import _slope_interval

    hs = np.array([1000.0, 2000.0, 5000.0])
    exact = np.broadcast_to((1e-6 * hs)[:, None], (3, 6)).copy()  # (W, repeats): t = 1e-6·h in every block
    lo, hi = _slope_interval(hs, exact, np.random.default_rng(0))
    assert lo == pytest.approx(1.0, abs=1e-12) and hi == pytest.approx(1.0, abs=1e-12)
    rng = np.random.default_rng(1)
    noisy = exact * (1.0 + rng.uniform(0.0, 0.5, size=exact.shape))  # load only ever slows a block down
    lo, hi = _slope_interval(hs, noisy, np.random.default_rng(2))
    # every bootstrap slope fits log t_i = log(1e-6 h_i) + e_i with e_i between the log of the width's fastest and
    # slowest block (relative to 1e-6 h): the least-squares slope 1 + Σ c_i e_i / Σ c_i², c_i = log h_i − mean,
    # is bounded by the extreme choices of e_i — the interval lies inside, and is not a point
    c = np.log(hs) - np.log(hs).mean()
    e_lo, e_hi = np.log(noisy.min(1) / (1e-6 * hs)), np.log(noisy.max(1) / (1e-6 * hs))
    s_min = 1 + np.sum(c * np.where(c > 0, e_lo, e_hi)) / np.sum(c * c)
    s_max = 1 + np.sum(c * np.where(c > 0, e_hi, e_lo)) / np.sum(c * c)
    assert s_min - 1e-12 <= lo < hi <= s_max + 1e-12
    # one block per width: every resample is that block, the interval is its log-log least-squares slope
    one = noisy[:, :1]
    ref = np.polyfit(np.log(hs), np.log(one[:, 0]), 1)[0]
    assert _slope_interval(hs, one, np.random.default_rng(3)) == pytest.approx((ref, ref), rel=1e-12)


def test_half_time_ratio_of_a_curve_run_at_half_speed_is_two():
    from ssldyn.experiments.grassmann.fig3 import _half_time_ratio

    ks = np.arange(0, 2001, 10)
    t = torch.as_tensor(ks, dtype=D)
    ref = -(1 - torch.exp(-t / 100.0))[:, None]  # (T, 1): a loss falling to −1 with time scale 100 steps
    late = -(1 - torch.exp(-t / 200.0))[:, None]  # the same curve at half the speed (eq. 12's dt = η/2)
    r = _half_time_ratio(late, ref, ks)
    # first recorded steps at half the final value: ⌈100·ln 2⌉₁₀ = 70 and ⌈200·ln 2⌉₁₀ = 140
    assert float(r[0]) == pytest.approx(140 / 70)


def test_sv_ratio_of_centered_embeddings_and_of_a_map():
    """``σ_min/σ_max`` of the centred points (mean over the n points removed): ±(3, 0), ±(0, 1) shifted by (5, 5) give
    singular values √18 and √2, ratio 1/3, whatever the shift; a map (``center=False``) is not centred."""
    from ssldyn.experiments.grassmann.collapse import _sv_ratio

    pts = torch.tensor([[3.0, 0.0], [-3.0, 0.0], [0.0, 1.0], [0.0, -1.0]], dtype=D) + 5.0
    u = torch.stack([pts, 2 * pts - 7.0, pts * torch.tensor([1.0, 0.0], dtype=D)])  # (3, n, z)
    np.testing.assert_allclose(_sv_ratio(u).numpy(), [1 / 3, 1 / 3, 0.0], atol=1e-14)
    rng = np.random.default_rng(5)
    M = rng.normal(size=(4, 3, 6)) + 2.0  # (S, z, d) maps, with a common offset that centring would remove
    s = np.linalg.svd(M, compute_uv=False)
    np.testing.assert_allclose(_sv_ratio(torch.tensor(M), center=False).numpy(), s[:, -1] / s[:, 0], rtol=1e-12)
    E = rng.normal(size=(4, 10, 3)) * [3.0, 1.0, 0.5] + [2.0, -1.0, 4.0]  # (S, n, z) embeddings, off-centre
    sc = np.linalg.svd(E - E.mean(1, keepdims=True), compute_uv=False)  # centred over the n (= second-last) axis
    np.testing.assert_allclose(_sv_ratio(torch.tensor(E)).numpy(), sc[:, -1] / sc[:, 0], rtol=1e-12)
    su = np.linalg.svd(E, compute_uv=False)
    assert not np.allclose(su[:, -1] / su[:, 0], sc[:, -1] / sc[:, 0], rtol=1e-2)  # centring matters here


def test_max_row_deviation_is_relative_to_b_and_maximised_over_time_and_rows():
    from ssldyn.experiments.grassmann.collapse import _max_row_deviation

    rng = np.random.default_rng(6)
    T, S, z, m = 4, 3, 2, 5
    b = rng.normal(size=(T, S, z, m))
    a = b + 0.1 * rng.normal(size=(T, S, z, m)) * rng.uniform(0.1, 3, size=(T, S, z, 1))
    ref = [max(np.linalg.norm(a[t, s, l] - b[t, s, l]) / np.linalg.norm(b[t, s, l]) for t in range(T) for l in range(z))
           for s in range(S)]  # fmt: skip
    np.testing.assert_allclose(_max_row_deviation(torch.tensor(a), torch.tensor(b)).numpy(), ref, rtol=1e-12)
    # hand-worked: row (3, 4) against (0, 5): ‖(3, −1)‖/5 = √10/5; relative to b, not to a (‖a‖ = 5 too, but the
    # other row, a = (0, 2) vs b = (0, 1), gives 1 relative to b and ½ relative to a)
    a1 = torch.tensor([[[[3.0, 4.0], [0.0, 2.0]]]], dtype=D)  # (T=1, S=1, z=2, m=2)
    b1 = torch.tensor([[[[0.0, 5.0], [0.0, 1.0]]]], dtype=D)
    assert float(_max_row_deviation(a1, b1)[0]) == pytest.approx(1.0)
    assert float(_max_row_deviation(a1[:, :, :1], b1[:, :, :1])[0]) == pytest.approx(math.sqrt(10) / 5)


def test_fig1_ratios_nan_for_a_member_no_longer_finite():
    from ssldyn.experiments.grassmann.fig1 import _ratios

    pts = torch.tensor([[3.0, 0.0], [-3.0, 0.0], [0.0, 1.0], [0.0, -1.0]], dtype=D)
    big = pts * 1e149  # finite and below 1e150: kept (ratio 1/3)
    u = torch.stack([pts, pts.clone(), pts.clone(), pts * 1e151, big])
    u[1, 0, 0] = float("inf")
    u[2, 2, 1] = float("nan")
    got = _ratios(u)
    assert got[0] == pytest.approx(1 / 3) and got[4] == pytest.approx(1 / 3)
    assert np.isnan(got[1:4]).all()


def test_gap_by_width_selects_activation_reduction_epoch_and_averages_over_inits():
    import pandas as pd

    from ssldyn.experiments.grassmann.fig2 import _gap_by_width

    rows = [
        ("tanh", "mean", 0, 10, 1.0), ("tanh", "mean", 0, 10, 3.0), ("tanh", "mean", 0, 50, 0.5),
        ("tanh", "mean", 5, 10, 7.0), ("tanh", "mean", 9, 10, 9.0), ("tanh", "mean", 9, 50, 2.0),
        ("relu", "mean", 0, 10, 100.0), ("tanh", "sum", 0, 10, 200.0),
    ]  # fmt: skip
    df = pd.DataFrame(rows, columns=["activation", "reduction", "epoch", "h", "gap"])
    at0 = _gap_by_width(df, "tanh", "mean", 0)
    assert at0.to_dict() == {10: 2.0, 50: 0.5}
    assert _gap_by_width(df, "tanh", "mean", 9).to_dict() == {10: 9.0, 50: 2.0}
    # None: every epoch > 0 (the init, epoch 0, left out)
    assert _gap_by_width(df, "tanh", "mean", None).to_dict() == {10: 8.0, 50: 2.0}
    assert _gap_by_width(df, "relu", "mean", 0).to_dict() == {10: 100.0}


def test_fig3_max_dev_over_the_last_two_axes():
    from ssldyn.experiments.grassmann.fig3 import _max_dev

    a = torch.zeros(2, 3, 4, 2, dtype=D)
    b = torch.zeros(2, 3, 4, 2, dtype=D)
    a[0, 1, 3, 0] = -0.7  # |−0.7| in the block (0, 1)
    a[1, 2, 0, 1] = 0.2
    b[1, 2, 2, 0] = 0.5
    ref = np.zeros((2, 3))
    ref[0, 1], ref[1, 2] = 0.7, 0.5
    np.testing.assert_allclose(_max_dev(a, b).numpy(), ref, atol=1e-15)


def test_rank_z_row_space_is_the_top_right_singular_subspace_or_none_when_collapsed():
    from ssldyn.experiments.grassmann.prop3 import RANK_TOL, rank_z_row_space

    rng = np.random.default_rng(7)
    Q = np.linalg.qr(rng.normal(size=(6, 6)))[0]  # orthonormal columns: the right singular vectors
    P = np.linalg.qr(rng.normal(size=(4, 4)))[0]
    M = P[:, :3] @ np.diag([5.0, 2.0, 0.01]) @ Q[:, :3].T  # (4, 6): row space span(Q[:, :3]), top-2 span(Q[:, :2])
    V = rank_z_row_space(torch.tensor(M), 2)
    assert V is not None and V.shape == (6, 2)
    np.testing.assert_allclose(V.numpy() @ V.numpy().T, Q[:, :2] @ Q[:, :2].T, atol=1e-12)  # same projector
    np.testing.assert_allclose(V.numpy().T @ V.numpy(), np.eye(2), atol=1e-12)
    # z = 3: σ₃/σ₁ = 0.002 > 1e-3 is kept; scaled by 1e-8 the relative test still keeps it
    assert RANK_TOL == 1e-3
    P3 = Q[:, :3] @ Q[:, :3].T  # (6, 6): the projector onto the row space
    for scale in (1.0, 1e-8):
        V3 = rank_z_row_space(torch.tensor(scale * M), 3)
        assert V3 is not None
        np.testing.assert_allclose(V3.numpy() @ V3.numpy().T, P3, atol=1e-10)
    # σ₃/σ₁ = 0.0008 ≤ 1e-3: collapsed below rank 3
    M2 = P[:, :3] @ np.diag([5.0, 2.0, 0.004]) @ Q[:, :3].T
    assert rank_z_row_space(torch.tensor(M2), 3) is None
    # a rank-one map (e₁e₁ᵀ) at z = 2, and fewer rows than z
    assert rank_z_row_space(torch.eye(3, dtype=D)[:, :1] @ torch.eye(3, dtype=D)[:1], 2) is None
    assert rank_z_row_space(torch.tensor(M[:1]), 2) is None


def test_clip_in_place_clips_every_matrix_singular_values_at_one():
    from ssldyn.experiments.grassmann.prop3 import _clip_

    rng = np.random.default_rng(8)
    U = np.linalg.qr(rng.normal(size=(3, 3)))[0]
    V = np.linalg.qr(rng.normal(size=(2, 2)))[0]
    W = torch.nn.Parameter(torch.tensor(U[:, :2] @ np.diag([3.0, 0.5]) @ V.T))  # (3, 2), σ = 3, 0.5
    B = torch.nn.Parameter(torch.tensor(rng.normal(size=(4, 2, 2)) * 2))  # batched (S, 2, 2)
    Bnp = B.detach().numpy().copy()
    ptr = W.data_ptr()
    _clip_([W, B])
    assert W.data_ptr() == ptr and W.requires_grad  # in place, still a parameter
    np.testing.assert_allclose(W.detach().numpy(), U[:, :2] @ np.diag([1.0, 0.5]) @ V.T, atol=1e-12)
    for s in range(4):
        u_, sv, vt = np.linalg.svd(Bnp[s])
        np.testing.assert_allclose(B[s].detach().numpy(), u_ @ np.diag(np.minimum(sv, 1.0)) @ vt, atol=1e-12)
        assert np.linalg.norm(B[s].detach().numpy(), 2) <= 1 + 1e-12


def test_peak_of_adds_the_terms_to_the_baseline_and_names_the_largest():
    from ssldyn.experiments.grassmann._common import peak_of
    from ssldyn.memory import PROCESS_BASELINE

    assert peak_of({"a": 1e6, "b": 3.5e6, "c": 2e6}) == (int(PROCESS_BASELINE + 6.5e6), "b")
    assert peak_of({"n": 10.0}) == (int(PROCESS_BASELINE + 10.0), "n")


def test_half_time_text_says_an_undefined_ratio_in_words():
    """Fig. 3's note and eq12-time-scale's detail printed "nan× as late as GD" when a curve never halves."""
    import math

    import numpy as np

    from ssldyn.experiments.grassmann.fig3 import _half_time_ratio, _half_time_text

    ks = np.array([0, 10, 20, 30])
    gd = torch.tensor([[-0.1], [-0.6], [-0.9], [-1.0]], dtype=D)  # (T, E): half of −1.0 first reached at step 10
    late = torch.tensor([[-0.1], [-0.3], [-0.7], [-1.0]], dtype=D)  # ... at step 20
    flat = torch.tensor([[-1.0], [-1.0], [-1.0], [-1.0]], dtype=D)  # below half its final loss from step 0
    assert float(_half_time_ratio(late, gd, ks)[0]) == 2.0
    assert _half_time_text(2.0) == "reaches half the final loss 2.00× as late as GD"
    ratio = float(_half_time_ratio(flat, gd, ks)[0])
    assert math.isnan(ratio) and "nan" not in _half_time_text(ratio).lower()
