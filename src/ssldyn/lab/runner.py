"""Resolve a config, run an experiment (or return it from the store), check claims, plot."""

from __future__ import annotations

import platform
import shutil
import time
import traceback
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import torch

from ssldyn import __version__
from ssldyn.lab.claims import Claim
from ssldyn.lab.config import ExperimentConfig, build_config, load_config_file, parse_sets
from ssldyn.lab.context import Context, resolve_device, seed_everything
from ssldyn.lab.errors import UserError
from ssldyn.lab.registry import Experiment, get_experiment
from ssldyn.lab.store import RunStore, StoredRun, config_hash

DEFAULT_OUT = "ssldyn-runs"


def resolve_config(exp: type[Experiment], *, quick: bool = False, config_file: str | Path | None = None,
                   sets: list[str] | dict[str, Any] | None = None) -> ExperimentConfig:
    """Defaults <- quick preset <- YAML file <- ``--set`` pairs, validated by pydantic."""
    layers = [exp.quick if quick else {}]
    if config_file is not None:
        layers.append(load_config_file(config_file))
    layers.append(sets if isinstance(sets, dict) else parse_sets(sets))
    return build_config(exp.Config, *layers)


@dataclass
class RunOutcome:
    """What :func:`run_experiment` returns."""

    run: StoredRun
    cached: bool
    seconds: float

    @property
    def claims(self) -> list[Claim]:
        return self.run.claims


def run_experiment(name: str, *, quick: bool = False, config_file: str | Path | None = None,
                   sets: list[str] | dict[str, Any] | None = None, seed: int = 0, device: str = "cpu",
                   out: str | Path = DEFAULT_OUT, force: bool = False, progress: Any = False) -> RunOutcome:
    """Run one experiment into the store and return the finished run.

    A finished run with the same config hash is returned without recomputation unless
    ``force``. All user mistakes raise :class:`UserError` before anything is written.
    ``progress`` is a bool, or an open ``rich.progress.Progress`` to add the run's bars to.
    """
    exp_cls = get_experiment(name)
    cfg = resolve_config(exp_cls, quick=quick, config_file=config_file, sets=sets)
    if not isinstance(seed, int) or seed < 0:
        raise UserError(f"--seed {seed!r}: must be a non-negative integer")
    dev = resolve_device(device)
    cfg_json = cfg.model_dump(mode="json")
    digest = config_hash(exp_cls.name, cfg_json, seed, dev.type, exp_cls.version)
    store = RunStore(out)
    existing = store.get(exp_cls.name, digest)
    if existing is not None and not force:
        return RunOutcome(existing, cached=True, seconds=0.0)

    partial = store.new_partial(exp_cls.name, digest)
    try:
        t0 = time.perf_counter()
        started = datetime.now(timezone.utc).isoformat(timespec="seconds")
        seed_everything(seed)
        bar = None if isinstance(progress, bool) else progress
        ctx = Context(seed=seed, device=dev, progress=bool(progress), run_dir=partial, _bar=bar)
        exp = exp_cls()
        with ctx.progress_bars():
            result = exp.run(cfg, ctx)
        run_seconds = time.perf_counter() - t0
        claims = list(exp.claims(cfg, result))
        fig_dir = partial / "figures"
        fig_dir.mkdir(exist_ok=True)
        exp.plots(cfg, result, fig_dir)
        preset = "quick" if quick else "default"
        if sets or config_file:
            preset += "+overrides"
        record = {"experiment": exp_cls.name, "config": cfg_json, "seed": seed, "device": dev.type,
                  "package": __version__, "version": exp_cls.version, "hash": digest}
        meta = {"experiment": exp_cls.name, "paper": exp_cls.paper, "figure": exp_cls.figure,
                "description": exp_cls.description, "preset": preset, "started": started,
                "run_seconds": round(run_seconds, 3), "total_seconds": round(time.perf_counter() - t0, 3),
                "torch": torch.__version__, "python": platform.python_version(),
                "threads": torch.get_num_threads()}
        store.write_result(partial, record, meta, result, claims)
        run = store.commit(partial, exp_cls.name, digest)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    return RunOutcome(run, cached=False, seconds=time.perf_counter() - t0)


def format_exception_line(exc: BaseException) -> str:
    """One line for an unexpected failure (the full traceback goes to a log file)."""
    last = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
    where = f" at {Path(last.filename).name}:{last.lineno}" if last else ""
    return f"{type(exc).__name__}: {exc}{where}"
