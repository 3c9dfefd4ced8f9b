"""The result of one experiment run: tables, arrays and summary numbers."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["Result"]


@dataclass
class Result:
    """What ``Experiment.run`` returns.

    Attributes:
        tables: named long-format tables (``"metrics"`` is the trajectory table with columns
            step, member, probe, value); stored as parquet.
        arrays: named numpy arrays (snapshots, embeddings, filters); stored in ``arrays.npz``.
        summary: JSON-serialisable scalars (fits, final values) used by claims and the report.
        notes: free-text remarks shown in the report (choices that deviate from the paper...).
        seed: the seed this result belongs to (set by the lab).
        seed_results: every seed's result of the run, in seed order (set by the lab before
            ``plots`` is called, so a figure may show all seeds).
    """

    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    seed: int | None = None
    seed_results: list[Result] = field(default_factory=list, repr=False)

    def add_trajectory(self, traj: Any, name: str = "metrics") -> None:
        """Store a :class:`ssldyn.dynamics.Trajectory` (its table and snapshots)."""
        frame = traj.to_frame()
        if name in self.tables:
            frame = pd.concat([self.tables[name], frame], ignore_index=True)
        self.tables[name] = frame
        for key, arr in traj.snapshot_arrays(prefix=f"{name}/").items():
            self.arrays[key] = arr
