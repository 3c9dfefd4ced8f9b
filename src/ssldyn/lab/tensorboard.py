"""Trajectories as TensorBoard scalars (``ssldyn run EXP --tensorboard``; extra ``ssldyn[tensorboard]``).

Every probe of every stored trajectory table becomes one scalar series, written to
``<out>/tensorboard/<experiment>/<hash>-<label>/seed=<s>/`` with the tag ``<table>/<probe>``,
followed by the table's key columns that take several values (``/dynamics=network,lr=0.5``: the
curves :func:`ssldyn.results.key_columns` tells apart, so two curves never share a tag) and
``/member=<m>`` when the table has several ensemble members, and the trajectory's step as
TensorBoard's step. Run directories themselves are never written to.
View with ``tensorboard --logdir <out>/tensorboard``. Writing a run again replaces its
scalars (no duplicated points).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from ssldyn.errors import UserError

__all__ = ["check_tensorboard", "write_scalars", "run_logdir"]


def _slug(text: str, limit: int = 60) -> str:
    s = re.sub(r"[^A-Za-z0-9._=+-]+", "_", text).strip("_")
    return s[:limit] or "run"


def run_logdir(out: str | Path, experiment: str, digest: str, label: str) -> Path:
    """``<out>/tensorboard/<experiment>/<hash>-<label>``: one TensorBoard run per seed below it."""
    return Path(out) / "tensorboard" / _slug(experiment, 120) / f"{digest}-{_slug(label)}"


TENSORBOARD_MISSING = "--tensorboard needs TensorBoard: pip install 'ssldyn[tensorboard]'"


def check_tensorboard() -> None:
    """A :class:`~ssldyn.errors.UserError` when TensorBoard is not installed (found without importing it, or torch:
    ``run --tensorboard`` checks it before anything runs)."""
    import importlib.util

    try:
        found = importlib.util.find_spec("tensorboard") is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise UserError(TENSORBOARD_MISSING)


def write_scalars(out: str | Path, results: Any) -> Path:
    """Write the trajectories of every run in ``results`` (:class:`ssldyn.results.Results`) as scalars.

    Returns the log directory ``<out>/tensorboard``. Raises :class:`~ssldyn.errors.UserError`
    when TensorBoard is not installed.
    """
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        raise UserError(TENSORBOARD_MISSING) from None
    from ssldyn.lab.results import TRAJECTORY_COLUMNS, key_columns

    root = Path(out) / "tensorboard"
    traj = results.trajectories
    run_cols = set(results.runs.columns)
    for rec in results.records:
        base = run_logdir(out, rec.experiment, rec.hash, rec.label)
        shutil.rmtree(base, ignore_errors=True)  # a re-export replaces the run's scalars
        frame = traj[traj["hash"] == rec.hash]
        for seed, per_seed in frame.groupby("seed", sort=True):
            with SummaryWriter(log_dir=str(base / f"seed={int(seed)}")) as writer:
                for table, per_table in per_seed.groupby("table", sort=True):
                    logged = [c for c in per_table.columns if c not in run_cols and c not in TRAJECTORY_COLUMNS]
                    keys = key_columns(
                        per_table[["probe", "member", *logged, "step", "value"]], within=("probe", "member")
                    )
                    keys = [k for k in keys if per_table[k].nunique() > 1]
                    several = per_table["member"].nunique() > 1
                    for group, s in per_table.groupby(["probe", *keys, "member"], sort=True, dropna=False):
                        probe, *key_values, member = group
                        tag = f"{table}/{probe}"
                        if keys:
                            tag += "/" + ",".join(f"{k}={_value(v)}" for k, v in zip(keys, key_values))
                        if several:
                            tag += f"/member={int(member)}"
                        s = s.sort_values("step")
                        for step, value in zip(s["step"].to_numpy(), s["value"].to_numpy()):
                            writer.add_scalar(tag, float(value), global_step=int(step))
    root.mkdir(parents=True, exist_ok=True)
    return root


def _value(v: Any) -> str:
    """A key value in a tag: ``network``, ``0.5``, ``1e-05``, ``64`` (a float in its shortest exact form)."""
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)):
        return _slug(str(v), 40)
    if isinstance(v, (int, np.integer)) or float(v).is_integer():
        return str(int(v))
    return repr(float(v))
