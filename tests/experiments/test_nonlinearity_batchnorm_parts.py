"""``nonlinearity.batchnorm.app_d_statistics`` (App. D, Cor. 3, eq. 15 / 178): every number it returns against a
numpy reimplementation from the model's definition — ReLU with one filter per RF on the exact conditional
populations of ``P`` orthonormal patterns scaled by ``ζ`` (k even) or ``1/ζ`` (k odd) — and the App. D statement
that BatchNorm removes the input scale (``x̃^bn = σ_k^{-1} x̃_k``), so every BN quantity is the same at ζ and at 1.
"""

import numpy as np
import pytest
import torch
from tests.objectives.test_alpha_cl_objective import ref_covariance

from ssldyn.dynamics.two_layer_bn import bn_two_layer_energy, lemma6_dynamics
from ssldyn.experiments.nonlinearity.batchnorm import BatchNormConfig, _cv, app_d_statistics

CPU = torch.device("cpu")
P0 = P1 = 0.5


def _draws(cfg: BatchNormConfig, n: int, seed: int) -> torch.Tensor:
    W = torch.randn(n, cfg.K, cfg.P, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return W[(W.amax(-1) > 0).all(-1)]  # every hidden node alive, as the experiment does


def _top_layer(d, b, lam):
    """(s, δ) of eq. 139 / 143 (s up to sign; NaN where every b_k = 0, a draw the statistics leave out)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return _top_layer_raw(d, b, lam)


def _top_layer_raw(d, b, lam):
    gap = lam - d
    raw = b / gap
    Z2 = (raw**2).sum()
    tot = (b**2 / gap).sum()
    return raw / np.sqrt(Z2), P0 * P1 / (Z2 * gap) * (tot - b**2 / gap)


def _reference(cfg: BatchNormConfig, W: np.ndarray, zeta: float) -> dict:
    """Per draw: d, b, λ (no BN), d^bn, λ^bn, and the tangential speeds of eq. 15 and eq. 178, in numpy."""
    K, P = cfg.K, cfg.P
    rest = (1 - cfg.p_disc - cfg.p_other) / (P - 2)
    pz = {
        1: np.array([cfg.p_disc, cfg.p_other] + [rest] * (P - 2)),
        0: np.array([cfg.p_other, cfg.p_disc] + [rest] * (P - 2)),
    }
    scales = np.array([zeta if k % 2 == 0 else 1 / zeta for k in range(K)])
    out = {key: [] for key in ("d", "b", "lam", "dbn", "bbn", "lambn", "speed_plain", "speed_bn")}
    for w_all in W:
        A, L, Dl = [], [], []
        for k in range(K):
            w, c = w_all[k], scales[k]
            gate = (w > 0).astype(float)  # ReLU': x̃_k = 1[w·x > 0] x for x = c e_j (c > 0)
            m = {z: c * pz[z] * gate for z in (0, 1)}  # E[x̃ | z]
            cov = {z: np.diag(c * c * pz[z] * gate) - np.outer(m[z], m[z]) for z in (0, 1)}
            L.append(P0 * cov[0] + P1 * cov[1])
            Dl.append(m[1] - m[0])
            A.append(L[-1] + P0 * P1 * np.outer(Dl[-1], Dl[-1]))
        d = np.array([W_k @ L_k @ W_k for W_k, L_k in zip(w_all, L)])
        b = np.array([W_k @ D_k for W_k, D_k in zip(w_all, Dl)])
        lam = np.linalg.eigvalsh(np.diag(d) + P0 * P1 * np.outer(b, b))[-1]
        var = d + P0 * P1 * b**2  # V[f_k]
        dbn, bbn = d / var, b / np.sqrt(var)
        lambn = np.linalg.eigvalsh(np.diag(dbn) + P0 * P1 * np.outer(bbn, bbn))[-1]
        s, _ = _top_layer(d, b, lam)
        sb, _ = _top_layer(dbn, bbn, lambn)
        _, deltab = _top_layer(dbn, bbn, lambn)
        sp, sbn = [], []
        for k in range(K):
            w = w_all[k]
            proj = np.eye(P) - np.outer(w, w) / (w @ w)
            plain = s[k] ** 2 * A[k] @ w + P0 * P1 * s[k] * ((s * b).sum() - s[k] * b[k]) * Dl[k]  # eq. 15
            Db = Dl[k] / np.sqrt(var[k])
            bn = sb[k] ** 2 * (A[k] / var[k]) @ w + deltab[k] * (Db @ w) * Db  # eq. 178
            sp.append(np.linalg.norm(proj @ plain) / np.linalg.norm(w))
            sbn.append(np.linalg.norm(proj @ bn) / np.linalg.norm(w))
        for key, v in zip(out, (d, b, lam, dbn, bbn, lambn, sp, sbn)):
            out[key].append(np.asarray(v))
    return {k: np.array(v) for k, v in out.items()}


def _cv_np(v):
    return v.std(-1, ddof=1) / np.abs(v.mean(-1))


def test_cv_is_sample_std_over_mean_hand_worked():
    v = torch.tensor([[1.0, 2.0, 3.0], [-2.0, -4.0, -6.0]], dtype=torch.float64)
    np.testing.assert_allclose(_cv(v).numpy(), [0.5, 0.5], rtol=1e-15)  # std (ddof 1) 1 / mean 2; |mean|


@pytest.mark.parametrize("zeta", [3.0, 1.0])
def test_app_d_statistics_against_the_numpy_reference(zeta):
    cfg = BatchNormConfig(K=4, P=4, zeta=3.0, draws=16)
    W = _draws(cfg, 16, 0)
    stats, draws, speeds = app_d_statistics(cfg, W, zeta, CPU)
    ref = _reference(cfg, W.numpy(), zeta)
    d, dbn, lam, lambn = ref["d"], ref["dbn"], ref["lam"], ref["lambn"]
    np.testing.assert_allclose(draws["cv_d"], _cv_np(d), rtol=1e-10)
    np.testing.assert_allclose(draws["cv_dbn"], _cv_np(dbn), rtol=1e-10)
    np.testing.assert_allclose(draws["cv_gap"], _cv_np(lam[:, None] - d), rtol=1e-10)
    np.testing.assert_allclose(draws["cv_gapbn"], _cv_np(lambn[:, None] - dbn), rtol=1e-10)
    ok = (np.abs(ref["b"]) > 1e-9).all(-1) & (np.abs(ref["bbn"]) > 1e-9).all(-1)
    np.testing.assert_array_equal(draws["all_rf_signal"], ok)
    assert stats["draws_with_signal"] == ok.sum() > 0
    assert stats["min_lam_minus_max_dbn"] == pytest.approx((lambn - dbn.max(-1)).min(), abs=1e-12)
    assert stats["min_lam_minus_max_dbn"] >= -1e-12  # Cor. 3 (1)
    # the remark after Cor. 3: d^bn = 1/(1 + p0 p1 (b/√d)²)
    np.testing.assert_allclose(dbn, 1 / (1 + P0 * P1 * ref["b"] ** 2 / d), rtol=1e-12)
    assert stats["dbn_formula_err"] < 1e-12
    assert stats["median_cv_ratio_d"] == pytest.approx(np.median(_cv_np(dbn) / _cv_np(d)), rel=1e-10)
    assert stats["median_cv_ratio_gap"] == pytest.approx(
        np.median(_cv_np(lambn[:, None] - dbn) / _cv_np(lam[:, None] - d)), rel=1e-10
    )
    # speeds: one row per RF of every draw with signal, in draw order
    K = cfg.K
    np.testing.assert_array_equal(speeds["rf"], np.tile(np.arange(K), ok.sum()))
    np.testing.assert_allclose(speeds["scale"], np.tile([zeta, 1 / zeta] * (K // 2), ok.sum()), rtol=1e-15)
    np.testing.assert_allclose(speeds["speed_plain"], ref["speed_plain"][ok].ravel(), rtol=1e-9, atol=1e-15)
    np.testing.assert_allclose(speeds["speed_bn"], ref["speed_bn"][ok].ravel(), rtol=1e-9, atol=1e-15)
    # |log(mean speed of the small-scale RFs (odd k) / mean speed of the large (even k))|; at ζ = 1 the same split
    small = np.arange(K) % 2 == 1

    def log_ratio(v):
        return np.abs(np.log(v[:, small].mean(-1) / v[:, ~small].mean(-1)))

    lp, lb = log_ratio(ref["speed_plain"][ok]), log_ratio(ref["speed_bn"][ok])
    assert stats["median_log_speed_ratio_plain"] == pytest.approx(np.median(lp), rel=1e-10)
    assert stats["median_log_speed_ratio_bn"] == pytest.approx(np.median(lb), rel=1e-10)
    assert stats["scale_half_log_ratio_bn_over_plain"] == pytest.approx(np.median(lb / lp), rel=1e-10)
    # per draw, log(speed of the RF with the smallest d_k (no BN) / speed of the one with the largest)
    rows = np.arange(len(d))
    lo, hi = d.argmin(-1), d.argmax(-1)
    for key, v in (("plain", ref["speed_plain"]), ("bn", ref["speed_bn"])):
        sd = np.log(v[rows, lo][ok] / v[rows, hi][ok])  # draws without signal have zero speeds: left out first
        assert stats[f"median_small_d_log_speed_{key}"] == pytest.approx(np.median(sd), rel=1e-9)
        # speed-evened's two-sided reading: the median of |log ratio| (not |median|)
        assert stats[f"median_small_d_abs_log_speed_{key}"] == pytest.approx(np.median(np.abs(sd)), rel=1e-9)
        # the per-draw values batchnorm.png plots (NaN on the draws without signal)
        col = draws[f"small_d_log_speed_{key}"].to_numpy()
        assert np.isnan(col[~ok]).all()
        np.testing.assert_allclose(col[ok], sd, rtol=1e-9)
    assert stats["cor3_rel_err"] < 1e-10 < stats["cor3_plain_rel_err"]


def test_batchnorm_figure_data_is_the_speed_claims_reading(tmp_path):
    """batchnorm.png plots, per draw, the log speed ratio of the smallest- and largest-d_k RF (the reading of
    slow-without-bn and speed-evened), not only the input-scale split (which passes where speed-evened fails)."""
    from ssldyn.lab import run_experiment

    out = run_experiment("nonlinearity.batchnorm", quick=True, seeds=2, out=tmp_path)
    claims = {c.id: c for c in out.claims}
    for i, seed in enumerate(out.run.seeds):
        d = out.run.result(seed).tables["draws"]
        plain, bn = d["small_d_log_speed_plain"].dropna(), d["small_d_log_speed_bn"].dropna()
        assert len(bn) == len(plain) == d["all_rf_signal"].sum() > 0
        assert np.median(plain) == pytest.approx(claims["slow-without-bn"].values[i], abs=1e-5)
        assert np.median(np.abs(bn)) == pytest.approx(claims["speed-evened"].values[i], abs=1e-5)
    assert {p.name for p in out.run.figures} == {"batchnorm.png"}


def test_batchnorm_removes_the_input_scale():
    """x̃^bn = σ_k^{-1} x̃_k with ReLU (positively homogeneous): d^bn, λ^bn and the eq.-178 speeds do not depend on
    ζ at all, while the no-BN quantities do (the sanity claim ``bn-scale-free``; a reading of ``speed-evened`` as the
    BN log speed ratio at ζ minus at ζ = 1 would measure 0 for every filter draw and could not fail)."""
    cfg = BatchNormConfig(K=4, P=4, zeta=3.0, draws=16)
    W = _draws(cfg, 16, 1)
    s3, d3, sp3 = app_d_statistics(cfg, W, 3.0, CPU)
    s1, d1, sp1 = app_d_statistics(cfg, W, 1.0, CPU)
    np.testing.assert_allclose(d3[["cv_dbn", "cv_gapbn"]], d1[["cv_dbn", "cv_gapbn"]], rtol=1e-10)
    np.testing.assert_allclose(sp3["speed_bn"], sp1["speed_bn"], rtol=1e-9)
    assert s3["median_log_speed_ratio_bn"] - s1["median_log_speed_ratio_bn"] == pytest.approx(0.0, abs=1e-9)
    assert s3["min_lam_minus_max_dbn"] == pytest.approx(s1["min_lam_minus_max_dbn"], abs=1e-12)
    # without BN the scale shows: the weak RFs (1/ζ) learn far more slowly at ζ = 3
    assert s3["median_log_speed_ratio_plain"] - s1["median_log_speed_ratio_plain"] > 1.0
    assert not np.allclose(d3["cv_d"], d1["cv_d"], rtol=1e-3)


def test_lemma6_v_dot_is_v_times_eq3_of_the_bn_features_and_the_v_gradient():
    """lemma6's V̇ half (eq. 166): V̇ = V C_α[f^bn] with f^bn = (f − μ)/σ over both views (eq. 164-165) and eq. 3
    as a double loop in numpy; autograd's ∂E_α/∂V equals it for mean-backprop and for vanilla BN alike (σ does not
    depend on V), while their W-gradients differ."""
    g = torch.Generator().manual_seed(5)
    N, K, M, d = 12, 2, 2, 3
    x = torch.randn(N, K, d, generator=g, dtype=torch.float64)
    xp = x + 0.3 * torch.randn(N, K, d, generator=g, dtype=torch.float64)
    W = torch.randn(K, M, d, generator=g, dtype=torch.float64)
    V = torch.randn(3, K * M, generator=g, dtype=torch.float64)
    alpha = torch.rand(N, N, generator=g, dtype=torch.float64)
    f = np.maximum(np.einsum("nkd,kmd->nkm", x.numpy(), W.numpy()), 0).reshape(N, -1)
    fp = np.maximum(np.einsum("nkd,kmd->nkm", xp.numpy(), W.numpy()), 0).reshape(N, -1)
    both = np.concatenate([f, fp])
    mu, sig = both.mean(0), both.std(0)  # ddof 0 over the 2N samples (eq. 165)
    fb, fpb = (f - mu) / sig, (fp - mu) / sig  # (N, KM): the BN features of both views
    ref = V.numpy() @ ref_covariance(fb, fpb, fb, fpb, alpha.numpy())  # eq. 3 as a double loop
    V_dot, _ = lemma6_dynamics(W, V, x, xp, alpha=alpha)
    np.testing.assert_allclose(V_dot.numpy(), ref, rtol=1e-10, atol=1e-14)
    gW = {}
    for bn in ("mean_only", "standard"):
        Wr, Vr = W.clone().requires_grad_(True), V.clone().requires_grad_(True)
        gW[bn], gV = torch.autograd.grad(bn_two_layer_energy(Wr, Vr, x, xp, alpha=alpha, bn=bn), (Wr, Vr))
        np.testing.assert_allclose(gV.numpy(), ref, rtol=1e-10, atol=1e-14)
    assert float((gW["mean_only"] - gW["standard"]).norm() / gW["mean_only"].norm()) > 1e-3
