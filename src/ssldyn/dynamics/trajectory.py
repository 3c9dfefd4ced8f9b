"""The one record every flow produces (docs/architecture.md, "Dynamics").

A :class:`Trajectory` is a long-format table ``(step, member, probe, value)`` plus optional
array snapshots ``name -> {step: array}``. Weight-space training, function-space flows,
manifold training, the q-ODE and power iteration all report into it, so two dynamics can be
compared side by side.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import numpy as np
import torch

if TYPE_CHECKING:  # pandas loads on the first to_frame() (issue 31: imports that cost nothing)
    import pandas as pd

__all__ = ["Trajectory", "FlowResult"]


def _to_float(v: Any) -> float:
    if isinstance(v, torch.Tensor):
        return float(v.detach().cpu().item())
    return float(v)


def _to_numpy(a: Any) -> np.ndarray:
    return a.cpu().numpy() if isinstance(a, torch.Tensor) else a


class Trajectory:
    """Probes over time for one or several ensemble members.

    Example::

        traj = Trajectory()
        traj.log(step=0, loss=1.3, silhouette=0.1)          # member 0
        traj.log(step=0, member=2, loss=torch.tensor(1.1))
        traj.log_members(step=5, probe="loss", values=torch.randn(4))  # (E,) one per member
        traj.snapshot(step=5, name="z", array=z)            # (n, d) embeddings
        df = traj.to_frame()
    """

    def __init__(self, meta: Mapping[str, Any] | None = None) -> None:
        self._done: list[tuple[int, int, str, float]] = []  # materialised rows
        # columnar blocks not yet read: (step, probe, values (E,) or scalar, member of a scalar); tensors stay on
        # their device until the table is read, so logging inside a training loop adds no host synchronisation
        self._pending: list[tuple[int, str, Any, int]] = []
        self._snaps: dict[str, dict[int, Any]] = {}  # tensors kept as they are (no host sync) until read
        self.meta: dict[str, Any] = dict(meta or {})

    # --- recording -------------------------------------------------------------------
    def log(self, step: int, member: int = 0, **probes: Any) -> None:
        """Record scalar probes ``name=value`` at ``step`` for one member."""
        for name, value in probes.items():
            if isinstance(value, torch.Tensor):
                if value.numel() != 1:
                    raise ValueError(f"Trajectory.log: {name!r} must be a scalar, got shape {tuple(value.shape)}")
                self._pending.append((int(step), name, value.detach().reshape(()).clone(), int(member)))
            else:
                self._pending.append((int(step), name, _to_float(value), int(member)))

    def log_members(self, step: int, probe: str, values: Any) -> None:
        """Record one probe for every member: ``values`` has shape ``(E,)`` (member ``e`` = entry ``e``)."""
        if isinstance(values, torch.Tensor):
            self._pending.append((int(step), probe, values.detach().reshape(-1).clone(), -1))
        else:
            self._pending.append((int(step), probe, np.array(values, dtype=np.float64).reshape(-1), -1))

    @property
    def _rows(self) -> list[tuple[int, int, str, float]]:
        """The long table as ``(step, member, probe, value)`` tuples, in logging order (reads pending blocks)."""
        if self._pending:
            for step, name, values, member in self._pending:
                if isinstance(values, torch.Tensor):
                    values = values.to("cpu", torch.float64).numpy()
                if member >= 0:
                    self._done.append((step, member, name, float(values)))
                else:
                    self._done.extend((step, m, name, float(v)) for m, v in enumerate(np.asarray(values).reshape(-1)))
            self._pending = []
        return self._done

    def snapshot(self, step: int, name: str, array: Any) -> None:
        """Keep a copy of an array (e.g. embeddings ``(n, d)``) at ``step``.

        A tensor is copied on its device and comes to the host only when read, so snapshots
        inside a training loop add no host synchronisation.
        """
        if isinstance(array, torch.Tensor):
            self._snaps.setdefault(name, {})[int(step)] = array.detach().clone()
        else:
            self._snaps.setdefault(name, {})[int(step)] = np.array(array, copy=True)

    # --- reading ---------------------------------------------------------------------
    def to_frame(self) -> pd.DataFrame:
        """The long table with columns ``step, member, probe, value``."""
        import pandas as pd

        return pd.DataFrame(self._rows, columns=["step", "member", "probe", "value"])

    def series(self, probe: str, member: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """``(steps, values)`` of one probe for one member, sorted by step."""
        rows = sorted((s, v) for s, m, p, v in self._rows if p == probe and m == member)
        if not rows:
            raise KeyError(f"no probe {probe!r} for member {member}; have {sorted(self.probes)}")
        s, v = zip(*rows)
        return np.asarray(s), np.asarray(v)

    def series_members(self, probe: str) -> tuple[np.ndarray, np.ndarray]:
        """``(steps (T,), values (T, E))`` of one probe for all members (NaN where a member has no value)."""
        rows = [(s, m, v) for s, m, p, v in self._rows if p == probe]
        if not rows:
            raise KeyError(f"no probe {probe!r}; have {sorted(self.probes)}")
        steps = np.unique(np.asarray([r[0] for r in rows]))
        members = 1 + max(r[1] for r in rows)
        out = np.full((len(steps), members), np.nan)
        pos = {int(s): i for i, s in enumerate(steps)}
        for s, m, v in rows:
            out[pos[s], m] = v
        return steps, out

    def columns(self) -> pd.DataFrame:
        """The wide table: one row per ``(step, member)``, one column per probe (NaN where not logged)."""
        import pandas as pd

        frame = self.to_frame()
        if frame.empty:
            return pd.DataFrame(columns=["step", "member"])
        wide = frame.pivot_table(index=["step", "member"], columns="probe", values="value", aggfunc="last")
        return wide.reset_index().rename_axis(columns=None)

    def last(self, probe: str, member: int = 0) -> float:
        return float(self.series(probe, member)[1][-1])

    @property
    def probes(self) -> set[str]:
        return {p for _, _, p, _ in self._rows}

    def snapshots(self, name: str) -> dict[int, np.ndarray]:
        """``{step: array}`` of one snapshot name, sorted by step (numpy, on the host)."""
        return {s: _to_numpy(a) for s, a in sorted(self._snaps.get(name, {}).items())}

    def stack(self, name: str, *, tensors: bool = False) -> tuple[np.ndarray, Any]:
        """``(steps (T,), arrays (T, ...))``: the snapshots of ``name`` stacked in step order.

        ``tensors=True`` stacks the kept tensors where they are (e.g. on the GPU; no host
        transfer) and returns a tensor; otherwise a numpy array.
        """
        snaps = dict(sorted(self._snaps.get(name, {}).items()))
        if not snaps:
            raise KeyError(f"no snapshot {name!r}; have {sorted(self._snaps)}")
        steps = np.asarray(list(snaps), dtype=np.int64)
        if tensors:
            return steps, torch.stack([torch.as_tensor(a) for a in snaps.values()])
        return steps, np.stack([_to_numpy(a) for a in snaps.values()])

    @property
    def snapshot_names(self) -> set[str]:
        return set(self._snaps)

    def snapshot_arrays(self, prefix: str = "") -> dict[str, np.ndarray]:
        """Snapshots flattened to ``{f"{prefix}{name}@{step}": array}`` for storage."""
        return {f"{prefix}{name}@{step}": _to_numpy(arr) for name, d in self._snaps.items() for step, arr in d.items()}

    def extend(self, other: Trajectory, member_offset: int = 0, *, prefix: str = "") -> None:
        """Append another trajectory's rows (members shifted, probe names prefixed)."""
        self._rows.extend((s, m + member_offset, prefix + p, v) for s, m, p, v in other._rows)
        for name, d in other._snaps.items():
            self._snaps.setdefault(prefix + name, {}).update(d)

    def state_dict(self) -> dict[str, Any]:
        """Rows, snapshots (host arrays) and ``meta``: what a checkpoint stores to resume a flow."""
        snaps = {name: {s: _to_numpy(a) for s, a in d.items()} for name, d in self._snaps.items()}
        return {"rows": list(self._rows), "snapshots": snaps, "meta": dict(self.meta)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned (replaces the current content)."""
        self._done, self._pending = [tuple(r) for r in state["rows"]], []  # type: ignore[misc]
        self._snaps = {name: dict(d) for name, d in state["snapshots"].items()}
        self.meta = dict(state["meta"])

    def __len__(self) -> int:
        return len(self._rows)


StateT = TypeVar("StateT")


@dataclass
class FlowResult(Generic[StateT]):
    """What every trainer and flow returns (docs/architecture.md, "Dynamics"): the final state and its record.

    Attributes:
        state: the advanced state — the trained module, the final embeddings ``(n, d)``, the
            final ``q`` of the q-ODE ``(E, d, z)``, the power-iteration fixed points ``(E, d)``...;
            each flow's docstring says what its state is.
        trajectory: the probes over time (a long table ``step, member, probe, value`` plus
            optional array snapshots).
    """

    state: StateT
    trajectory: Trajectory
