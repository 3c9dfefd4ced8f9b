"""The ensemble contract of the seed-batched grassmann experiments.

Every grassmann experiment computes all seeds of a run at once (``batch_seeds``). Result ``i`` of a
batched call must equal a one-seed run with seed ``ctx.seeds[i]``: the same data, initialisations
and numbers. Runs that go through an adaptive ODE solver (one step-size control for the whole
batch) agree to the solver's tolerance; the others to float round-off.
"""

import math

import pytest

from ssldyn.contract.config import build_config
from ssldyn.lab import Context, get_experiment

SMALL = {
    "grassmann.fig1": {"epochs": 40, "hidden": 10, "inits": 2, "record_every": 10, "collapse_epoch": 30},
    "grassmann.fig2": {"widths": [10, 30], "inits": 2, "epochs": 4, "record_every": 2, "lemma2_widths": [10, 100],
                       "lemma2_draws": 20, "activations": ["sigmoid", "tanh"], "thm1_widths": [100, 1000],
                       "thm1_draws": 2},
    "grassmann.fig3": {"widths": [10, 20], "inits": 1, "steps": 40, "record_every": 10, "t_order": 0.4},
    "grassmann.fig4": {"steps": 10, "h_train": 40, "pca_dim": 20, "z": 3, "timing_widths": [40, 60, 80],
                       "fit_from": 40, "timing_steps": 2, "timing_repeats": 2, "per_class": 30},
    "grassmann.fig5": {"t_final": 5.0, "h": 8},
    "grassmann.fig6": {"steps": 20, "h": 6, "record_every": 5},
    "grassmann.collapse": {"epochs": 20, "record_every": 10, "ntk_widths": [10, 20], "ntk_points": 4,
                           "features": 16, "remark2_points": 12, "projector_z": 4},
    "grassmann.thm3": {"trials": 4, "t_final": 5.0, "reference_trials": 1, "gd_trials": 2},
    "grassmann.prop3": {"steps": 20, "mc_draws": 10},
}  # fmt: skip
ADAPTIVE = {"grassmann.fig3", "grassmann.fig5", "grassmann.thm3"}
SKIP_KEYS = (
    "seconds",
    "wall",
    "time_slope",
    "speedup",
    "half_ratio",
    "device",
)  # wall-clock timings are not reproducible


def _flat(x, prefix=""):
    if isinstance(x, dict):
        for k, v in x.items():
            if not any(s in str(k) for s in SKIP_KEYS):
                yield from _flat(v, f"{prefix}{k}.")
    elif isinstance(x, (list, tuple)):
        for i, v in enumerate(x):
            yield from _flat(v, f"{prefix}{i}.")
    else:
        yield prefix.rstrip("."), x


@pytest.mark.parametrize("name", sorted(SMALL))
def test_batched_seed_equals_one_seed_run(name):
    exp_cls = get_experiment(name)
    assert exp_cls.batch_seeds
    cfg = build_config(exp_cls.Config, SMALL[name])
    exp = exp_cls()
    batched = exp.run(cfg, Context(seed=3, seeds=(3, 8)))
    single = exp.run(cfg, Context(seed=8, seeds=(8,)))
    assert len(batched) == 2 and len(single) == 1
    a, b = dict(_flat(batched[1].summary)), dict(_flat(single[0].summary))
    assert a.keys() == b.keys()
    rtol, atol = (1e-5, 1e-8) if name in ADAPTIVE else (1e-9, 1e-12)
    for k, va in a.items():
        vb = b[k]
        if isinstance(va, float) and isinstance(vb, float):
            if math.isnan(va):
                assert math.isnan(vb), k
            else:
                assert va == pytest.approx(vb, rel=rtol, abs=atol), k
        else:
            assert va == vb, k
    # and the other member is a different seed, not a copy
    assert dict(_flat(batched[0].summary)) != a
