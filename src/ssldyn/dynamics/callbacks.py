"""Callbacks for :func:`ssldyn.dynamics.engine.run` and the trainers built on it (``callbacks=[...]``).

* :class:`TensorBoardLogger` — live TensorBoard logging: every logged value as a scalar when it is
  logged (flushed, so TensorBoard shows the run as it trains), the hyperparameters with the final
  values at the end (the HPARAMS tab).
* :class:`History` — keeps every row passed to ``on_log`` (a list of ``(step, row)``; tests, notebooks).

A callback is any object with some of ``on_step(step, state, loss)``, ``on_log(step, state, row)``,
``on_end(state, trajectory)`` (:class:`~ssldyn.dynamics.engine.Callback`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

__all__ = ["TensorBoardLogger", "History"]


def _values(value: Any) -> np.ndarray:
    """A logged value as a float64 array of one value per member."""
    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu", torch.float64).reshape(-1).numpy()
    return np.asarray(value, dtype=np.float64).reshape(-1)


class TensorBoardLogger:
    """Write each logged value to TensorBoard as it happens.

    Tags: ``{prefix}{name}`` for a one-member run, ``{prefix}{name}/member_{e}`` for an ensemble
    (one curve per member). At the end, ``hparams`` (scalars and strings) with the last value of
    every logged name as the metrics (``hparam/{name}``, the mean over members).

    Args:
        log_dir: the event directory (created if missing).
        hparams: the run's settings shown in the HPARAMS tab (None: none written).
        prefix: prepended to every tag (e.g. ``"ssl/"``).
        flush: flush after every logged step (live curves; default True).

    Example::

        res = train_ssl(net, x, objective=InfoNCE(0.5), augment=aug, steps=500, batch_size=256,
                        callbacks=[TensorBoardLogger("runs/simclr", hparams={"tau": 0.5, "lr": 1e-3})])
    """

    def __init__(
        self,
        log_dir: str | os.PathLike,
        *,
        hparams: Mapping[str, Any] | None = None,
        prefix: str = "",
        flush: bool = True,
    ) -> None:
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError as e:  # pragma: no cover - tensorboard is an optional extra
            raise ImportError("TensorBoardLogger needs tensorboard: pip install 'ssldyn[tensorboard]'") from e
        self.log_dir = str(log_dir)
        self.writer = SummaryWriter(self.log_dir)
        self.hparams, self.prefix, self.flush = dict(hparams or {}), prefix, flush
        self.last: dict[str, float] = {}

    def on_log(self, step: int, state: Any, row: Mapping[str, Any]) -> None:
        for name, value in row.items():
            v = _values(value)
            if v.size == 1:
                self.writer.add_scalar(f"{self.prefix}{name}", float(v[0]), step)
            else:
                for e, x in enumerate(v):
                    self.writer.add_scalar(f"{self.prefix}{name}/member_{e}", float(x), step)
            self.last[name] = float(np.nanmean(v)) if v.size else float("nan")
        if self.flush:
            self.writer.flush()

    def on_end(self, state: Any, trajectory: Any) -> None:
        if self.hparams:
            hp = {k: (v if isinstance(v, (int, float, str, bool)) else str(v)) for k, v in self.hparams.items()}
            metrics = {f"hparam/{k}": v for k, v in self.last.items()}
            self.writer.add_hparams(hp, metrics, run_name=".")
        self.writer.flush()
        self.writer.close()


class History:
    """Keeps ``(step, row)`` for every ``on_log`` and ``(step, loss)`` for every ``on_step``."""

    def __init__(self) -> None:
        self.logs: list[tuple[int, dict[str, Any]]] = []
        self.steps: list[tuple[int, Any]] = []
        self.ended = False

    def on_step(self, step: int, state: Any, loss: Any) -> None:
        self.steps.append((step, loss))

    def on_log(self, step: int, state: Any, row: Mapping[str, Any]) -> None:
        self.logs.append((step, dict(row)))

    def on_end(self, state: Any, trajectory: Any) -> None:
        self.ended = True
