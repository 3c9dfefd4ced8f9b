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
from ssldyn.lab.result import Result
from ssldyn.lab.store import RunStore, StoredRun, atomic_write_bytes, config_hash

DEFAULT_OUT = "ssldyn-runs"


def resolve_config(
    exp: type[Experiment],
    *,
    quick: bool = False,
    config_file: str | Path | None = None,
    sets: list[str] | dict[str, Any] | None = None,
) -> ExperimentConfig:
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


@dataclass(frozen=True)
class RunSpec:
    """A validated, hashable request for one run (what executors send to workers)."""

    experiment: str
    config: dict[str, Any]
    seed: int
    device: str
    digest: str
    preset: str

    @property
    def label(self) -> str:
        return f"{self.experiment}[{self.digest}]"


@dataclass
class ComputedRun:
    """A run computed in memory (possibly on a remote worker): nothing written yet."""

    spec: RunSpec
    record: dict[str, Any]
    meta: dict[str, Any]
    result: Result
    claims: list[Claim]
    figures: dict[str, bytes]


def plan_run(
    name: str,
    *,
    quick: bool = False,
    config_file: str | Path | None = None,
    sets: list[str] | dict[str, Any] | None = None,
    seed: int = 0,
    device: str = "cpu",
) -> RunSpec:
    """Validate everything the user asked for and compute the config hash (no side effects)."""
    exp_cls = get_experiment(name)
    cfg = resolve_config(exp_cls, quick=quick, config_file=config_file, sets=sets)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise UserError(f"--seed {seed!r}: must be a non-negative integer")
    dev = resolve_device(device)
    cfg_json = cfg.model_dump(mode="json")
    digest = config_hash(exp_cls.name, cfg_json, seed, dev.type, exp_cls.version)
    preset = ("quick" if quick else "default") + ("+overrides" if (sets or config_file) else "")
    return RunSpec(exp_cls.name, cfg_json, seed, str(dev), digest, preset)


def compute_run(
    spec: RunSpec,
    progress: Any = False,
    cache_dir: str | Path | None = None,
    executor: str = "processes",
    workers: int | None = None,
) -> ComputedRun:
    """Run the experiment of ``spec`` in this process; figures are rendered to bytes.

    ``cache_dir`` (normally ``<out>/.cache``) is handed to the experiment as ``ctx.cache_dir``;
    ``executor`` / ``workers`` run its tasks (``ctx.map``; see :func:`ssldyn.lab.executors.map_tasks`).
    """
    import tempfile

    exp_cls = get_experiment(spec.experiment)
    cfg = exp_cls.Config.model_validate(spec.config)
    dev = resolve_device(spec.device)
    t0 = time.perf_counter()
    started = datetime.now(timezone.utc).isoformat(timespec="seconds")
    seed_everything(spec.seed)
    bar = None if isinstance(progress, bool) else progress
    with tempfile.TemporaryDirectory(prefix="ssldyn-run-") as tmp:
        ctx = Context(
            seed=spec.seed,
            device=dev,
            progress=bool(progress),
            run_dir=Path(tmp),
            cache_dir=Path(cache_dir) if cache_dir is not None else None,
            executor=executor,
            workers=workers if workers is not None else _default_workers(),
            _bar=bar,
        )
        exp = exp_cls()
        with ctx.progress_bars():
            result = exp.run(cfg, ctx)
        run_seconds = time.perf_counter() - t0
        claims = list(exp.claims(cfg, result))
        fig_dir = Path(tmp) / "figures"
        fig_dir.mkdir()
        exp.plots(cfg, result, fig_dir)
        figures = {p.name: p.read_bytes() for p in sorted(fig_dir.iterdir()) if p.is_file()}
    record = {
        "experiment": exp_cls.name,
        "config": spec.config,
        "seed": spec.seed,
        "device": dev.type,
        "package": __version__,
        "version": exp_cls.version,
        "hash": spec.digest,
    }
    meta = {
        "experiment": exp_cls.name,
        "paper": exp_cls.paper,
        "figure": exp_cls.figure,
        "description": exp_cls.description,
        "preset": spec.preset,
        "started": started,
        "run_seconds": round(run_seconds, 3),
        "total_seconds": round(time.perf_counter() - t0, 3),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "host": platform.node(),
        "threads": torch.get_num_threads(),
    }
    return ComputedRun(spec, record, meta, result, claims, figures)


def commit_run(store: RunStore, computed: ComputedRun) -> StoredRun:
    """Write a computed run into the store atomically (only the driver calls this)."""
    spec = computed.spec
    partial = store.new_partial(spec.experiment, spec.digest)
    try:
        store.write_result(partial, computed.record, computed.meta, computed.result, computed.claims)
        for name, data in computed.figures.items():
            atomic_write_bytes(partial / "figures" / Path(name).name, data)
        run = store.commit(partial, spec.experiment, spec.digest)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    store.clear_failure(spec.experiment, spec.digest)
    return run


def run_experiment(
    name: str,
    *,
    quick: bool = False,
    config_file: str | Path | None = None,
    sets: list[str] | dict[str, Any] | None = None,
    seed: int = 0,
    device: str = "cpu",
    out: str | Path = DEFAULT_OUT,
    force: bool = False,
    progress: Any = False,
) -> RunOutcome:
    """Run one experiment into the store and return the finished run.

    A finished run with the same config hash is returned without recomputation unless
    ``force``. All user mistakes raise :class:`UserError` before anything is written.
    ``progress`` is a bool, or an open ``rich.progress.Progress`` to add the run's bars to.
    """
    spec = plan_run(name, quick=quick, config_file=config_file, sets=sets, seed=seed, device=device)
    from ssldyn.lab.executors import check_out_dir

    check_out_dir(out)
    store = RunStore(out)
    existing = store.get(spec.experiment, spec.digest)
    if existing is not None and not force:
        return RunOutcome(existing, cached=True, seconds=0.0)
    t0 = time.perf_counter()
    run = commit_run(store, compute_run(spec, progress=progress, cache_dir=store.cache_dir))
    return RunOutcome(run, cached=False, seconds=time.perf_counter() - t0)


def _default_workers() -> int:
    from ssldyn.lab.executors import default_workers

    return default_workers()


def format_exception_line(exc: BaseException) -> str:
    """One line for an unexpected failure (the full traceback goes to a log file)."""
    last = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
    where = f" at {Path(last.filename).name}:{last.lineno}" if last else ""
    return f"{type(exc).__name__}: {exc}{where}"
