"""Stored trajectories never mix curves: a real quick ``variational.fig5`` run logs the network and
vanilla GD curves in one table (columns ``dynamics, lr, step, time, probe, value``); the results
frame keeps ``dynamics`` and ``lr`` so every (dynamics, seed, member, probe, step) is one row, and
the TensorBoard export writes the two curves under two tags.

The reference is the run's own parquet file read with pandas, split by its ``dynamics`` column.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ssldyn.lab import run_experiment
from ssldyn.results import key_columns, load


@pytest.fixture(scope="module")
def fig5(tmp_path_factory):
    out = tmp_path_factory.mktemp("fig5")
    run = run_experiment("variational.fig5", quick=True, out=out).run
    return out, run.path


@pytest.mark.slow
def test_fig5_trajectories_have_one_row_per_curve_and_step(fig5):
    out, path = fig5
    traj = load(out).trajectories
    raw = pd.read_parquet(path / "tables" / "metrics.parquet")
    assert set(raw["dynamics"]) == {"network", "vanilla"}
    # without the key column the two curves collide (the bug this guards against) ...
    assert raw.duplicated(["seed", "probe", "step"]).any()
    # ... with it, one row per (dynamics, seed, member, probe, step)
    metrics = traj[traj["table"] == "metrics"]
    assert {"dynamics", "lr", "time"} <= set(metrics.columns)
    assert not metrics.duplicated(["dynamics", "seed", "member", "probe", "step"]).any()
    assert len(metrics) == len(raw)
    assert key_columns(metrics[["seed", "member", "probe", "dynamics", "lr", "time", "step", "value"]]) == [
        "dynamics",
        "lr",
    ]  # time = lr · step is a coordinate, not a key
    for (dyn, seed, probe), want in raw.groupby(["dynamics", "seed", "probe"]):
        got = metrics[(metrics["dynamics"] == dyn) & (metrics["seed"] == seed) & (metrics["probe"] == probe)]
        got = got.sort_values("step")
        want = want.sort_values("step")
        assert got["step"].tolist() == want["step"].tolist()
        np.testing.assert_array_equal(got["value"].to_numpy(), want["value"].to_numpy())
        np.testing.assert_array_equal(got["lr"].to_numpy(), want["lr"].to_numpy())


@pytest.mark.slow
def test_fig5_tensorboard_keeps_network_and_vanilla_apart(fig5, tmp_path):
    pytest.importorskip("tensorboard", reason="tensorboard is not installed (pip install -e '.[tensorboard]')")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from ssldyn.lab.tensorboard import write_scalars

    out, path = fig5
    res = load(out)
    root = write_scalars(tmp_path, res)
    raw = pd.read_parquet(path / "tables" / "metrics.parquet")
    seed_dirs = sorted(root.glob("variational.fig5/*/seed=*"))
    assert [int(d.name.split("=")[1]) for d in seed_dirs] == sorted(raw["seed"].unique())
    for d in seed_dirs:
        seed = int(d.name.split("=")[1])
        acc = EventAccumulator(str(d), size_guidance={"scalars": 0})
        acc.Reload()
        tags = set(acc.Tags()["scalars"])
        for dyn in ("network", "vanilla"):
            lr = float(raw.loc[raw["dynamics"] == dyn, "lr"].iloc[0])
            tag = f"metrics/silhouette/dynamics={dyn},lr={lr!r}"
            assert tag in tags, sorted(tags)
            ev = acc.Scalars(tag)
            want = raw[(raw["seed"] == seed) & (raw["dynamics"] == dyn) & (raw["probe"] == "silhouette")]
            want = want.sort_values("step")
            assert [e.step for e in ev] == want["step"].tolist()  # one point per step: no mixing
            np.testing.assert_allclose([e.value for e in ev], want["value"], rtol=1e-6, atol=1e-7)  # float32
        assert "metrics/silhouette" not in tags  # no tag holds both curves
