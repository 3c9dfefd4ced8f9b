"""Trajectories as TensorBoard scalars (``ssldyn run EXP --tensorboard``; extra ``ssldyn[tensorboard]``).

Every probe of every stored trajectory table becomes one scalar series, written to
``<out>/tensorboard/<experiment>/<hash>-<label>/seed=<s>/`` with the tag ``<table>/<probe>``
(``<table>/<probe>/member=<m>`` when the table has several ensemble members) and the
trajectory's step as TensorBoard's step. Run directories themselves are never written to.
View with ``tensorboard --logdir <out>/tensorboard``. Writing a run again replaces its
scalars (no duplicated points).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

from ssldyn.errors import UserError

__all__ = ["write_scalars", "run_logdir"]


def _slug(text: str, limit: int = 60) -> str:
    s = re.sub(r"[^A-Za-z0-9._=+-]+", "_", text).strip("_")
    return s[:limit] or "run"


def run_logdir(out: str | Path, experiment: str, digest: str, label: str) -> Path:
    """``<out>/tensorboard/<experiment>/<hash>-<label>``: one TensorBoard run per seed below it."""
    return Path(out) / "tensorboard" / _slug(experiment, 120) / f"{digest}-{_slug(label)}"


def write_scalars(out: str | Path, results: Any) -> Path:
    """Write the trajectories of every run in ``results`` (:class:`ssldyn.results.Results`) as scalars.

    Returns the log directory ``<out>/tensorboard``. Raises :class:`~ssldyn.errors.UserError`
    when TensorBoard is not installed.
    """
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        raise UserError("--tensorboard needs TensorBoard: pip install 'ssldyn[tensorboard]'") from None
    root = Path(out) / "tensorboard"
    traj = results.trajectories
    for rec in results.records:
        base = run_logdir(out, rec.experiment, rec.hash, rec.label)
        shutil.rmtree(base, ignore_errors=True)  # a re-export replaces the run's scalars
        frame = traj[traj["hash"] == rec.hash]
        for seed, per_seed in frame.groupby("seed", sort=True):
            with SummaryWriter(log_dir=str(base / f"seed={int(seed)}")) as writer:
                for (table, probe), series in per_seed.groupby(["table", "probe"], sort=True):
                    several = series["member"].nunique() > 1
                    for member, s in series.groupby("member", sort=True):
                        tag = f"{table}/{probe}" + (f"/member={int(member)}" if several else "")
                        for step, value in zip(s["step"].to_numpy(), s["value"].to_numpy()):
                            writer.add_scalar(tag, float(value), global_step=int(step))
    root.mkdir(parents=True, exist_ok=True)
    return root
