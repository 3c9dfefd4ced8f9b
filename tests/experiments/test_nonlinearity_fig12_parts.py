"""nonlinearity.fig12's per-RF filter statistics (App. E.3) against the formulas written out in numpy, per receptive
field and averaged over the K fields; the MNIST standardisation against hand-worked numbers."""

import math

import numpy as np
import pytest
import torch

from ssldyn.experiments.nonlinearity.fig12 import _rf_mean, _standardize, filter_stats


def test_standardize_uses_the_usual_mnist_mean_and_std():
    x = torch.tensor([0.1307, 0.1307 + 0.3081, 0.0, 1.0], dtype=torch.float64)
    np.testing.assert_allclose(_standardize(x).numpy(), [0.0, 1.0, -0.1307 / 0.3081, 0.8693 / 0.3081], atol=1e-15)


def test_rf_mean_averages_a_statistic_over_the_receptive_fields_with_their_own_patches():
    W = torch.arange(3 * 2 * 4, dtype=torch.float64).reshape(3, 2, 4)  # (K, M, D)
    assert _rf_mean(lambda w: float(w.sum()), W) == pytest.approx(np.mean([W[k].sum().item() for k in range(3)]))
    patches = torch.zeros(5, 3, 4, dtype=torch.float64)  # (n, K, D): RF k's patches are all equal to k
    for k in range(3):
        patches[:, k] = k
    # stat(W[k], patches[:, k]) = k·5 (the patch sum): mean (0 + 20 + 40)/3 = 20; patches[k] would read (K, D) rows
    assert _rf_mean(lambda w, p: float(p.sum()) * 5 / 20, W, patches) == pytest.approx(np.mean([0, 5, 10]))
    assert _rf_mean(lambda w, p: float(p.shape[0]), W, patches) == 5.0


def _cos(A, B):
    A = A / np.linalg.norm(A, axis=1, keepdims=True)
    B = B / np.linalg.norm(B, axis=1, keepdims=True)
    return A @ B.T


def _ref_stats(W, X):
    """Per RF: Laplacian energy ‖Δw‖²/‖w‖² (interior 5-point stencil), TV/L1, mean cos and |cos| over ordered pairs
    m ≠ n, the fraction of filters whose largest |cos| with another is < 0.9, the mean best cos with a patch."""
    out = {k: [] for k in ("laplacian", "tv", "cos", "abs_cos", "distinct", "match")}
    K, M, _ = W.shape
    for k in range(K):
        w = W[k].reshape(M, 14, 14)
        lap = 4 * w[:, 1:-1, 1:-1] - w[:, :-2, 1:-1] - w[:, 2:, 1:-1] - w[:, 1:-1, :-2] - w[:, 1:-1, 2:]
        out["laplacian"].append(np.mean((lap**2).sum((1, 2)) / (w**2).sum((1, 2))))
        tv = np.abs(np.diff(w, axis=1)).sum((1, 2)) + np.abs(np.diff(w, axis=2)).sum((1, 2))
        out["tv"].append(np.mean(tv / np.abs(w).sum((1, 2))))
        C = _cos(W[k], W[k])
        off = C[~np.eye(M, dtype=bool)]
        out["cos"].append(off.mean())
        out["abs_cos"].append(np.abs(off).mean())
        A = np.abs(C)
        np.fill_diagonal(A, 0)
        out["distinct"].append((A.max(1) < 0.9).sum() / M)
        out["match"].append(_cos(W[k], X[:, k]).max(1).mean())
    return {key: float(np.mean(v)) for key, v in out.items()}


def test_filter_stats_against_numpy_per_rf_then_mean():
    """K = 3 RFs of M = 4 filters (196 = 14×14), each RF different: RF 0 random, RF 1 smooth (a plane wave) with a
    near-duplicate pair (|cos| > 0.9: 2 of 4 distinct), RF 2 random with filter 3 = −filter 0 (cos −1)."""
    rng = np.random.default_rng(4)
    W = rng.normal(size=(3, 4, 196))
    ii, jj = np.meshgrid(np.arange(14), np.arange(14), indexing="ij")
    for m in range(4):
        W[1, m] = (np.sin(0.3 * (m + 1) * ii + 0.2 * jj) + 0.05 * rng.normal(size=(14, 14))).reshape(-1)
    W[1, 1] = W[1, 0] + 0.01 * rng.normal(size=196)
    W[2, 3] = -W[2, 0]
    X = rng.normal(size=(7, 3, 196))  # (n, K, 196) patches
    X[:, 1] += W[1, 2]  # RF 1's patches resemble filter 2
    ref = _ref_stats(W, X)
    got = filter_stats(torch.tensor(W), torch.tensor(X))
    assert set(got) == set(ref)
    for key in ref:
        assert got[key] == pytest.approx(ref[key], rel=1e-12), key
    # the per-RF values differ, so the mean over K is not any single RF's value
    per_rf = [filter_stats(torch.tensor(W[k : k + 1]), torch.tensor(X[:, k : k + 1])) for k in range(3)]
    assert got["distinct"] == pytest.approx(np.mean([r["distinct"] for r in per_rf]))
    assert {r["distinct"] for r in per_rf} == {1.0, 0.5}
    assert not math.isclose(per_rf[0]["laplacian"], per_rf[1]["laplacian"], rel_tol=0.5)
    # without patches: no "match"
    assert "match" not in filter_stats(torch.tensor(W))


def test_filter_grid_tiles_the_m_filters_of_each_receptive_field(tmp_path, monkeypatch):
    """Fig. 12 / 13 panels: panel k shows the M filters of RF k (the stored array is one seed's (4, M, 196)); the old
    code indexed [0] (RF 0, believed to be a seed) and showed filter k of RF 0 as "RF k"."""
    from ssldyn.contract import Result
    from ssldyn.experiments.nonlinearity import fig12
    from ssldyn.viz.images import tile_filters

    M = 16
    rng = np.random.default_rng(0)
    W = rng.normal(size=(4, M, 196)) + 10.0 * np.arange(4)[:, None, None]  # every RF distinct
    summary = {f"{k}_noaug": 1.0 for k in ("laplacian", "tv", "abs_cos")}
    res = Result(arrays={"filters_noaug": W}, summary=summary, seed=0)
    figs = []

    def keep(fig, path):
        figs.append(fig)
        return path

    monkeypatch.setattr(fig12, "save_figure", keep)
    fig12.Fig12()._grid(res, "noaug", tmp_path, "x.png")
    (fig,) = figs
    axes = [a for a in fig.axes if a.images]
    assert len(axes) == 4
    for k, a in enumerate(axes):
        shown = a.images[0].get_array()
        expected = tile_filters(W[k].reshape(M, 14, 14))  # 4 × 4 tiles of RF k's filters
        assert shown.shape == expected.shape
        np.testing.assert_allclose(np.ma.filled(shown, np.nan), expected)
        assert str(k) in a.get_title()
    with pytest.raises(ValueError, match=r"expected \(4 RFs, M, 196\)"):
        fig12.Fig12()._grid(Result(arrays={"filters_noaug": W[None]}, summary=summary), "noaug", tmp_path, "y.png")
