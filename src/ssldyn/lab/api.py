"""The one-call library entry point: run an experiment into the store and return it."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ssldyn.lab.executors import Executor, execute
from ssldyn.lab.runner import DEFAULT_OUT, RunOutcome, plan_run

__all__ = ["run_experiment"]


def run_experiment(
    name: str,
    *,
    quick: bool = False,
    config_file: str | Path | None = None,
    sets: list[str] | dict[str, Any] | None = None,
    seed: int = 0,
    seeds: int | Sequence[int] | None = None,
    device: str = "cpu",
    out: str | Path = DEFAULT_OUT,
    force: bool = False,
    progress: Any = False,
    executor: Executor = "local",
) -> RunOutcome:
    """Run one experiment (every seed of it) into the store and return the finished run.

    Same as ``ssldyn run NAME``: ``seeds`` is a count (default 3 with ``quick``; 5 at paper
    scale, or the paper's own count) or an explicit list; a finished run with the same hash is
    returned without recomputation unless ``force``. User mistakes raise
    :class:`ssldyn.errors.UserError` before anything is written; a failed computation raises its error.
    """
    spec = plan_run(name, quick=quick, config_file=config_file, sets=sets, seed=seed, seeds=seeds, device=device)
    t0 = time.perf_counter()
    (item,) = execute([spec], out, executor=executor, force=force, progress=progress, raise_errors=True)
    assert item.run is not None
    return RunOutcome(item.run, cached=item.status == "cached", seconds=time.perf_counter() - t0)
