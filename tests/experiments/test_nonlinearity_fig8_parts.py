"""nonlinearity.fig8 (App. E.1): the orthogonal-partner reading of "unlike PCA directions, these local optima are
not orthogonal to each other", checked on hand-worked angle sets and on landscapes where it must hold or fail."""

import math

import numpy as np
import pytest

from ssldyn.experiments.nonlinearity.fig8 import (
    ORTHO_TOL_STEPS,
    n_orthogonal_pairs,
    orthogonal_partner_fraction,
    orthogonal_partner_mask,
)
from ssldyn.lab import run_experiment
from ssldyn.probes.alpha_cl import circ_sep_deg


@pytest.fixture(autouse=True)
def _no_shared_cache(monkeypatch):
    monkeypatch.setenv("SSLDYN_CACHE_DIR", "off")


def rad(*deg):
    return np.deg2rad(np.array(deg, dtype=np.float64))


TOL = ORTHO_TOL_STEPS * 360.0 / 3600  # the quick preset's tolerance: 2 steps of 0.1° = 0.2°


def test_pca_directions_all_have_a_partner():
    # ±φ₁, ±φ₂ with φ₁ at 101.5°: 101.5 ⟂ 11.5, 101.5 ⟂ −168.5, −78.5 ⟂ 11.5, −78.5 ⟂ −168.5 (four pairs)
    t = rad(101.5, -78.5, 11.5, -168.5)
    assert orthogonal_partner_mask(t, TOL).tolist() == [True] * 4
    assert orthogonal_partner_fraction(t, TOL) == 1.0 and n_orthogonal_pairs(t, TOL) == 4


def test_eight_maxima_at_multiples_of_45_fail_where_the_old_gap_reading_passed():
    """The audit's counter-example: 8 maxima at k·45°, each 90° from two others (16 / 2 = 8 pairs)."""
    t = rad(*[k * 45.0 for k in range(8)])
    assert orthogonal_partner_fraction(t, TOL) == 1.0 and n_orthogonal_pairs(t, TOL) == 8
    assert circ_sep_deg(t).min() < 90.0 - TOL  # the v3 reading (smallest neighbouring gap < 89.8°) passed here


def test_the_quick_scale_relu_maxima_have_no_partner():
    """The 9 ReLU maxima of the quick run (kinks θ_i ± 90° of the App. E.1 data): their pairwise distances are
    36°, 72°, 108°, 144°, 180° and, for 60°, 6°, 42°, 66°, 78°, 102°, 114°, 138°, 150°: none is 90°."""
    t = rad(-162, -90, -54, -18, 18, 54, 60, 126, 162)
    assert not orthogonal_partner_mask(t, TOL).any()
    assert orthogonal_partner_fraction(t, TOL) == 0.0 and n_orthogonal_pairs(t, TOL) == 0
    # with a wide tolerance the distances nearest 90° (60° to −18°: 78°; 60° to 162°: 102°; 12° off) pair up
    assert not orthogonal_partner_mask(t, 11.9).any()
    assert orthogonal_partner_mask(t, 12.1).tolist() == [False, False, False, True, False, False, True, False, True]
    assert n_orthogonal_pairs(t, 12.1) == 2


def test_mixed_set_and_pair_count():
    # 0 ⟂ 90; 30 is 30° and 60° from them
    t = rad(0, 90, 30)
    assert orthogonal_partner_mask(t, TOL).tolist() == [True, True, False]
    assert orthogonal_partner_fraction(t, TOL) == pytest.approx(2 / 3) and n_orthogonal_pairs(t, TOL) == 1
    # 90 ⟂ 0 and 90 ⟂ 180, but the antipodes 0, 180 are not partners: 2 pairs, all three partnered
    t = rad(0, 90, 180)
    assert orthogonal_partner_mask(t, TOL).all() and n_orthogonal_pairs(t, TOL) == 2


def test_wrap_around_and_270_degrees():
    assert orthogonal_partner_mask(rad(-135, 135), TOL).all()  # 90° apart across ±180°
    assert orthogonal_partner_mask(rad(0, 270), TOL).all()  # 270° apart is 90° the other way round: wᵀw' = 0
    assert orthogonal_partner_mask(rad(-180, 90), TOL).all()  # −180 ≡ 180
    # 179.9° and −90.3° are 270.2° apart, i.e. 89.8° the short way round: a partner at 0.2°, not at 0.1°
    assert orthogonal_partner_mask(rad(179.9, -90.3), 0.2).all()
    assert not orthogonal_partner_mask(rad(179.9, -90.3), 0.1).any()
    # angles beyond one turn are reduced: 450° ≡ 90°
    assert orthogonal_partner_mask(rad(450, 0), TOL).all()


def test_antipodes_duplicates_and_singletons_are_not_partners():
    assert not orthogonal_partner_mask(rad(0, 180), TOL).any()
    assert not orthogonal_partner_mask(rad(37, 37), TOL).any()
    assert orthogonal_partner_mask(rad(37), TOL).tolist() == [False]
    assert math.isnan(orthogonal_partner_fraction(np.zeros(0), TOL)) and n_orthogonal_pairs(np.zeros(0), TOL) == 0


@pytest.mark.parametrize("base", [0.0, 33.3, -179.95, 179.95])
def test_tolerance_edges_are_inclusive(base):
    for off in (+1.0, -1.0):
        assert orthogonal_partner_mask(rad(base, base + off * (90.0 + TOL)), TOL).all()
        assert orthogonal_partner_mask(rad(base, base + off * (90.0 - TOL)), TOL).all()
        assert not orthogonal_partner_mask(rad(base, base + off * (90.0 + TOL + 1e-6)), TOL).any()
        assert not orthogonal_partner_mask(rad(base, base + off * (90.0 - TOL - 1e-6)), TOL).any()
    assert orthogonal_partner_mask(rad(base, base + 90.0), 0.0).all()  # zero tolerance: exactly 90° only
    assert not orthogonal_partner_mask(rad(base, base + 90.001), 0.0).any()


def test_mask_agrees_with_the_dot_product():
    """Independent reference: i has a partner iff some j ≠ i has |w_iᵀw_j| ≤ sin(tol) (w = (cos θ, sin θ))."""
    rng = np.random.default_rng(0)
    tol = 3.0
    for _ in range(200):
        n = int(rng.integers(2, 9))
        # angles on a 0.5° lattice (so no distance lies within 1e-3° of the tolerance edge 90° ± 3°) plus jitter
        t = np.deg2rad(rng.integers(-720, 720, size=n) * 0.5 + rng.uniform(-1e-4, 1e-4, size=n))
        w = np.stack([np.cos(t), np.sin(t)], axis=1)  # (n, 2)
        dots = np.abs(w @ w.T)  # (n, n)
        np.fill_diagonal(dots, np.inf)
        ref = (dots <= math.sin(math.radians(tol))).any(axis=1)
        assert orthogonal_partner_mask(t, tol).tolist() == ref.tolist(), np.rad2deg(t)


@pytest.mark.parametrize("bad", [-0.1, 45.0, float("nan")])
def test_bad_tolerance_is_rejected(bad):
    with pytest.raises(ValueError, match="tol_deg"):
        orthogonal_partner_mask(rad(0, 90), bad)


def test_non_finite_angles_are_rejected():
    with pytest.raises(ValueError, match="thetas"):
        orthogonal_partner_mask(np.array([0.0, np.nan]), TOL)


def _claim(out, cid):
    return {c.id: c for c in out.claims}[cid]


def test_quick_run_value_and_pca_control(tmp_path):
    """The App. E.1 data: no ReLU maximum has a partner (pass), the PCA directions located on the grid all do
    (control 1); the grid's ±φ₂ sit 90° from the eigen-decomposition's φ₁ within the grid (half a step)."""
    out = run_experiment("nonlinearity.fig8", quick=True, seeds=1, out=tmp_path)
    c = _claim(out, "relu-not-orthogonal")
    assert c.status == "pass" and c.value == 0.0 and c.control_value == 1.0 and not c.control_held
    s = out.run.summary["per_seed"]["0"] if "per_seed" in out.run.summary else out.run.summary
    assert s["n_pca_dirs_on_grid"] == 4 and s["ortho_tol_deg"] == pytest.approx(TOL)
    assert s["linear_min_dev_from_phi2_deg"] <= 0.5 * s["grid_step_deg"] + 1e-9
    # φ₁ from numpy's eigh of the centred 9-point covariance (independent of the experiment's probes)
    ang = np.array([-4 / 5, -1 / 2, -2 / 5, -1 / 6, 0, 1 / 5, 2 / 5, 3 / 5, 4 / 5]) * math.pi
    x = np.stack([np.cos(ang), np.sin(ang)], 1)
    phi1 = np.linalg.eigh(np.cov(x.T))[1][:, -1]
    d = abs((math.degrees(math.atan2(phi1[1], phi1[0])) - s["phi1_deg"] + 90) % 180 - 90)
    assert d < 1e-6


def test_claim_fails_on_a_landscape_whose_maxima_pair_up(tmp_path):
    """Data at 0°, 90°, 180°, 270° and 11.5°: 5 ReLU maxima, 4 of them in orthogonal pairs (fraction 0.8), so the
    claim fails although the count (> 4) and the v3 gap reading (smallest gap 11.4° < 89.8°) would pass."""
    out = run_experiment(
        "nonlinearity.fig8", quick=True, seeds=1, out=tmp_path,
        sets={"angles": [0.0, math.pi / 2, math.pi, 3 * math.pi / 2, math.radians(11.5)]},
    )  # fmt: skip
    c = _claim(out, "relu-not-orthogonal")
    assert c.status == "fail" and c.value == pytest.approx(0.8)
    assert _claim(out, "more-than-pca").status == "pass"


def test_relu_maxima_are_corner_maxima_not_power_iteration_fixed_points(tmp_path):
    """App. E.1 counts maxima of E_α(θ): on its 9-point batch every ReLU maximum sits on a kink θ_i ± 90° and is no
    fixed point of eq. PI, recomputed in numpy: ``A(w) = V[x·1[wᵀx > 0]]`` (uniform α, the population variance of
    the gated points); ``A(w)w`` is far from parallel to ``w``. The linear maxima ±φ₁ are smooth fixed points."""
    out = run_experiment("nonlinearity.fig8", quick=True, seeds=1, out=tmp_path)
    c = _claim(out, "relu-maxima-are-corners")
    assert c.kind == "sanity" and c.status == "pass" and c.value == 1.0 and c.control_value == 0.0
    assert "9 of 9 are non-smooth corner maxima" in _claim(out, "relu-many-maxima").details[0]
    s = out.run.summary["per_seed"]["0"] if "per_seed" in out.run.summary else out.run.summary
    assert s["maxima_on_kinks"] == s["corner_maxima"] == 9 and s["maxima_that_are_PI_fixed_points"] == 0
    assert s["linear_maxima_that_are_PI_fixed_points"] == 2 and s["frac_corner_maxima_linear"] == 0.0
    data = np.array([-4 / 5, -1 / 2, -2 / 5, -1 / 6, 0, 1 / 5, 2 / 5, 3 / 5, 4 / 5]) * math.pi
    x = np.stack([np.cos(data), np.sin(data)], 1)  # (9, 2)
    m = out.run.table("maxima")
    relu = m.loc[m["activation"] == "relu", "theta"].to_numpy()
    kinks = np.rad2deg(np.concatenate([data - math.pi / 2, data + math.pi / 2]))
    step = 360.0 / 3600
    for t in relu:
        assert np.min(np.abs((np.rad2deg(t) - kinks + 180) % 360 - 180)) <= 2 * step  # on a kink
        w = np.array([math.cos(t), math.sin(t)])
        g = x * (x @ w > 0)[:, None]  # (9, 2) the gated points x̃
        a_w = np.cov(g.T, bias=True) @ w
        assert math.degrees(math.acos(abs(a_w @ w) / np.linalg.norm(a_w))) > 2 * step  # A(w)w ∦ w: no fixed point
    for t in m.loc[m["activation"] == "linear", "theta"].to_numpy():  # the control: ±φ₁, A = V[x] fixed
        w = np.array([math.cos(t), math.sin(t)])
        a_w = np.cov(x.T, bias=True) @ w
        assert math.degrees(math.acos(min(1.0, abs(a_w @ w) / np.linalg.norm(a_w)))) < 2 * step


def test_corner_claim_fails_for_a_smooth_activation(tmp_path):
    """With the quadratic activation E_α(θ) has no kinks: its maxima are smooth fixed points of eq. PI (fraction 0)."""
    out = run_experiment("nonlinearity.fig8", quick=True, seeds=1, out=tmp_path, sets={"activation": "quadratic"})
    c = _claim(out, "relu-maxima-are-corners")
    assert c.status == "fail" and c.value == 0.0
