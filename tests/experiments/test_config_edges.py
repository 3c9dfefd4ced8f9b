"""Configs the validation accepts but the defaults never reach: each case was found by a bug hunt over the
experiments (a verdict read from the wrong row, a run that crashed after computing, a claim value taken from
another setting than the table) and is checked here on the smallest run that shows it."""

from __future__ import annotations

import pytest

from ssldyn.contract.config import build_config
from ssldyn.lab import UserError, run_experiment


def test_variational_fig5_step_table_always_has_the_runs_own_step(tmp_path):
    """step-independent reads the table row of lr_network: with lr_network = 0.2 and no 0.2 row it read the nearest
    one (σ = 0.3, 10× the value). The run's own step is now always a row of the table."""
    out = run_experiment("variational.fig5", quick=True, seeds=1, sets={"lr_network": 0.2}, out=tmp_path)
    table = out.run.table("step_table").set_index("lr")
    assert 0.2 in table.index
    (c,) = [c for c in out.claims if c.id == "step-independent"]
    expected = abs(table.loc[0.2, "silhouette"] - table.loc[table.index.min(), "silhouette"])
    assert c.values[0] == pytest.approx(expected, rel=1e-5)


def test_grassmann_fig6_compares_with_the_one_hidden_layer_net():
    """The reference was depths[0], whatever it was: depths = [2, 1, 3] measured 'to depth 1' against depth 2."""
    from ssldyn.experiments.grassmann.fig6 import Fig6Config

    with pytest.raises(UserError, match=r"must hold 1"):
        build_config(Fig6Config, {"depths": [2, 3]})
    with pytest.raises(UserError, match=r"no depth twice"):
        build_config(Fig6Config, {"depths": [1, 2, 2]})
    build_config(Fig6Config, {"depths": [2, 1, 3]})


def test_nonlinearity_modulation_reads_c_and_eps_in_order():
    """basin-grows took cs[0] as c = 0 and cs[-1] as the largest c: the same values reversed flipped its verdict."""
    from ssldyn.experiments.nonlinearity.modulation import ModulationConfig

    with pytest.raises(UserError, match=r"cs=.* must be increasing"):
        build_config(ModulationConfig, {"cs": [2.0, 1.0, 0.5, 0.0]})
    with pytest.raises(UserError, match=r"start at 0"):
        build_config(ModulationConfig, {"cs": [0.1, 0.5]})
    with pytest.raises(UserError, match=r"eps_grid=.* must be increasing"):
        build_config(ModulationConfig, {"eps_grid": [0.5, -0.5]})


def test_grassmann_collapse_runs_when_epochs_is_not_a_multiple_of_record_every(tmp_path):
    """The epochs array skipped the last recorded epoch: the plot raised and the run (18 claims) was lost."""
    out = run_experiment("grassmann.collapse", quick=True, seeds=1, sets={"epochs": 310}, out=tmp_path)
    assert len(out.claims) >= 18 and (tmp_path / "grassmann.collapse").is_dir()


def test_variational_fig3_plateau_is_not_run_when_a_tau_cannot_be_read(tmp_path):
    """With threshold_k_max = 20 some τ have 2K* beyond the K grid: b-plateau took the max of the others (NaN
    skipped) and passed; it now says it could not be measured."""
    out = run_experiment("variational.fig3", quick=True, sets={"threshold_k_max": 20}, out=tmp_path)
    (c,) = [c for c in out.claims if c.id == "b-plateau"]
    assert c.status == "not-run" and "not measurable" in c.note


def test_nonlinearity_fig5_claims_read_the_token_set_the_table_shows(tmp_path):
    """chi_tokens picks the token set of the table (and plot); the claims always read the generators' scores, so
    with few generators (G = 4) they stayed at +0.0167 while the table's ReLU − linear χ̄₊ was −0.0060."""
    small = {"G": 4, "steps": 300, "log_every": 100}
    vals = {}
    for tokens in ("generators", "candidates"):
        out = run_experiment("nonlinearity.fig5", quick=True, seeds=1, sets={**small, "chi_tokens": tokens},
                             out=tmp_path)  # fmt: skip
        (c,) = [c for c in out.claims if c.id == "relu-beats-linear"]
        vals[tokens] = c.values[0]
    assert vals["generators"] != vals["candidates"]
    assert vals["candidates"] == pytest.approx(-0.006, abs=1e-3)  # the table's value at these settings
