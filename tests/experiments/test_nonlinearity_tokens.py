"""Token-generator experiments of `nonlinearity` Sec. 5 / App. E.2 at their quick presets."""

import numpy as np
import pytest

from ssldyn.dynamics.ensemble_trainer import TokenRun, train_token_ensemble
from ssldyn.experiments.nonlinearity.token_grid import final_table, grid_frame, make_runs, run_grid
from ssldyn.lab import run_experiment


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    """Each test computes its runs (no hits from a user's ~/.cache/ssldyn)."""
    monkeypatch.setenv("SSLDYN_CACHE_DIR", str(tmp_path / "cache"))


def _claims(out):
    return {c.id: c for c in out.claims}


# claims that do not hold at the quick preset's 400-800 steps for seed 0 (measured and reported, not asserted)
NOISY_AT_QUICK = {"bn-small-zeta-no-gain"}


def _check_quick(name, out_dir):
    out = run_experiment(name, quick=True, seeds=1, out=out_dir)
    claims = _claims(out)
    assert claims, "every experiment checks claims"
    failed = {k: (c.measured, c.expected) for k, c in claims.items() if c.status == "fail" and k not in NOISY_AT_QUICK}
    assert not failed, failed
    assert list((out.run.path / "figures").glob("*.png"))
    return out


def test_fig4_and_fig10_quick_claims(tmp_path):
    _check_quick("nonlinearity.fig4", tmp_path)
    out = _check_quick("nonlinearity.fig10", tmp_path)  # reuses fig4's cached InfoNCE runs
    t = out.run.result().tables["final"]
    assert set(t["loss"]) == {"infonce", "quadratic"} and len(t) == 16


@pytest.mark.parametrize("name", ["nonlinearity.fig11", "nonlinearity.table1"])
def test_bn_experiments_quick_claims(name, tmp_path):
    out = _check_quick(name, tmp_path)
    if name.endswith("table1"):
        sbs = out.run.result().tables["side_by_side"]
        assert set(sbs["bn"]) == {"none", "var_only", "mean_only", "standard"}  # quick: no lr 2e-3 column
        paper = sbs.dropna(subset=["paper_mean"])
        assert len(paper) == 8 and (paper["diff"] == paper["ours"] - paper["paper_mean"]).all()


def test_fig5_quick_filters_and_scores(tmp_path):
    out = _check_quick("nonlinearity.fig5", tmp_path)
    s = out.run.summary
    chi = out.run.result().tables["chi"]
    relu = chi[chi["activation"] == "relu"].sort_values("step")
    # ReLU filters move towards the allowed tokens (χ̄₊ up by > 0.3 from init) and away from noise,
    # more than linear filters do
    assert s["chi_plus/P3_relu"] > relu["chi_plus"].iloc[0] + 0.3
    assert s["chi_minus/P3_relu"] < relu["chi_minus"].iloc[0]
    assert s["chi_minus/P3_relu"] < s["chi_minus/P3_linear"]
    assert s["chi_plus/P3_relu"] > s["chi_plus/P3_linear"]
    assert s["chi_plus/P3_relu"] == pytest.approx(relu["chi_plus"].iloc[-1])
    assert out.run.result().arrays["filters/P3_relu"].shape == (10, 15, 20)  # (K, M = β·P, d)


def test_grid_cache_roundtrip_and_tables(tmp_path):
    runs = make_runs(activations=["relu", "linear"], betas=[1, 2], Ps=[2], seeds=[0], base=TokenRun(batch=16))
    a = run_grid(runs, steps=12, log_every=6, cache=tmp_path)
    assert len(list(tmp_path.glob("*.npz"))) == len(runs)
    b = run_grid(runs, steps=12, log_every=6, cache=tmp_path)  # read back
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x.chi_plus, y.chi_plus)
    # a run read from a grid equals the same run trained alone
    alone = train_token_ensemble([runs[3]], steps=12, log_every=6)[0]
    np.testing.assert_allclose(a[3].chi_plus, alone.chi_plus, atol=1e-5)
    t = final_table(grid_frame(runs, a))
    assert len(t) == 4 and set(t["chi_plus_count"]) == {1}
