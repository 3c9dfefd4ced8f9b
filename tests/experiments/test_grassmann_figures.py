"""The grassmann figures: what they plot is what the claims read, and every figure renders with a caption.

The data-selection tests compare a figure's plotted series with the claim's reading computed
independently from the run's summary (they fail on the code before rev31: Fig. 5's k < z panels
plotted the rank-cut-off projection, Thm. 3's middle panel |⟨q, v_1⟩| instead of the distance to ±v_1).
"""

import numpy as np
import pytest
from tests.experiments.test_grassmann_batching import SMALL as BATCHING_SMALL

from ssldyn.contract.config import build_config
from ssldyn.lab import Context, get_experiment

#: small configs (a few seconds each) with the shapes of the paper-scale ones: the batching tests' configs, with
#: every activation of Fig. 2, three widths, more initialisations and Fig. 5's full time
SMALL = {
    **BATCHING_SMALL,
    "grassmann.fig2": {**BATCHING_SMALL["grassmann.fig2"], "widths": [10, 30, 60], "activations": None},
    "grassmann.fig3": {**BATCHING_SMALL["grassmann.fig3"], "widths": [10, 20, 40], "inits": 2},
    "grassmann.fig5": {**BATCHING_SMALL["grassmann.fig5"], "t_final": 20.0},
    "grassmann.thm3": {**BATCHING_SMALL["grassmann.thm3"], "trials": 6},
}
SMALL["grassmann.fig2"] = {k: v for k, v in SMALL["grassmann.fig2"].items() if v is not None}


def _run(name: str, seeds=(0, 1), **over):
    exp_cls = get_experiment(name)
    cfg = build_config(exp_cls.Config, {**SMALL[name], **over})
    exp = exp_cls()
    results = exp.run(cfg, Context(seed=seeds[0], seeds=tuple(seeds)))
    for s, r in zip(seeds, results):
        r.seed = s
    return exp, cfg, results


@pytest.mark.parametrize("name", sorted(SMALL))
def test_every_figure_renders_and_has_a_caption(name, tmp_path):
    exp, cfg, results = _run(name, seeds=(0, 1, 2))
    first = results[0]
    first.seed_results = results
    paths = exp.plots(cfg, first, tmp_path)
    assert paths and all(p.exists() and p.stat().st_size > 0 for p in paths)
    for p in paths:
        caption = type(exp).caption(p.name)
        assert caption, f"{name}: no caption for {p.name}"
        assert caption.startswith(("Fig.", "Example", "Extra (not a paper figure):")), caption


def test_fig5_fewer_negative_panels_plot_the_weighted_projection_of_the_claim():
    """The k < z panels plot ‖qᵀv_i‖ = sqrt(diag(q qᵀ))_i: at t_final within the claim's Gram error of
    sqrt(diag Π_k) (the old rank-cut-off curve drew v_3 at 1 for k = 2), and the singular values of q."""
    from ssldyn.experiments.grassmann.fig5 import panel_series

    _, cfg, results = _run("grassmann.fig5", seeds=(0,))
    r = results[0]
    zmax = max(cfg.zs)
    panels = {p.tag: p for p in panel_series(cfg, r)}
    for k in cfg.fewer_negative:
        p = panels[f"z{zmax}_k{k}"]
        err = r.summary[f"ode_z{zmax}_k{k}_gram_error"]  # max |q qᵀ − Π_k| at t_final (the claim's reading)
        target = np.array([1.0] * k + [0.0] * (p.norms.shape[1] - k))  # diag Π_k on v_1..v_3
        assert np.all(np.abs(p.norms[-1] ** 2 - target) <= err + 1e-12)
        assert p.svals[-1] == pytest.approx(r.summary[f"ode_z{zmax}_k{k}_singular_values"], rel=1e-9, abs=1e-15)
        assert p.k == k and p.svals.shape[1] == zmax
    for z in cfg.zs:  # the full-rank panels keep ‖P_span(q) v_i‖ (the span-converges reading)
        p = panels[f"z{z}"]
        assert p.norms[-1] == pytest.approx(r.summary[f"ode_z{z}_final_norms"][:3], abs=1e-12)


def test_thm3_middle_panel_plots_the_distance_negative_to_v1_reads():
    from ssldyn.experiments.grassmann.thm3 import v1_distance

    _, cfg, results = _run("grassmann.thm3", seeds=(0,))
    r = results[0]
    final = v1_distance(r.arrays)[-1]  # (trials,): every trial is drawn (trials ≤ 50)
    assert len(final) == cfg.trials
    assert final.max() == pytest.approx(r.summary["negative_max_dist"], rel=1e-9)
    assert np.mean(final < cfg.tol) == pytest.approx(r.summary["negative_fraction"])
    assert r.arrays["gd/norm_h_eq_d"].min() == pytest.approx(r.summary["gd_min_norm_h_eq_d"])


def test_fig6_gram_path_ends_at_the_same_embedding_reading():
    _, cfg, results = _run("grassmann.fig6", seeds=(0,))
    r = results[0]
    gram = r.summary["gram_distance_to_depth1"]
    for key, v in gram.items():
        assert r.arrays[f"gram_path/{key}"][-1] == pytest.approx(v, rel=1e-9, abs=1e-15)
    assert r.arrays["gram_path/1"][-1] == pytest.approx(0.0, abs=1e-12)  # the one-layer map against itself
    assert len(r.arrays["gram_path/ode"]) == len(r.arrays["steps"])


def test_fig1_window_means_are_the_windows_the_convergence_claims_compare():
    from ssldyn.experiments.grassmann._common import last_windows, window_drift

    curve = -1.0 + 0.05 * np.sin(np.arange(301) / 2.0) + np.linspace(0.1, 0.0, 301)
    k, before, last = last_windows(curve)
    assert k == 60  # round(0.2 · 301): epochs 181–240 and 241–300, written out
    assert before == pytest.approx(curve[181:241].mean()) and last == pytest.approx(curve[241:].mean())
    assert abs(last - before) / abs(last) == pytest.approx(window_drift(curve))
