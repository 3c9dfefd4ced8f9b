"""Resolve a config and its seeds, run an experiment over them, evaluate the claims, plot.

:func:`plan_run` validates a request into a :class:`RunSpec` (no side effects);
:func:`compute_run` runs it in this process (every seed; claims measured per seed and
evaluated over seeds); :func:`commit_run` writes it into the run store. Executors
(:mod:`ssldyn.lab.executors`) drive these; :func:`ssldyn.lab.api.run_experiment` is the
one-call library entry point.
"""

from __future__ import annotations

import operator
import platform
import shutil
import tempfile
import time
import traceback
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import torch

from ssldyn._version import __version__
from ssldyn.contract.claims import Claim, evaluate
from ssldyn.contract.config import ExperimentConfig, build_config, load_config_file, parse_sets
from ssldyn.contract.context import Context, progress_display, resolve_device, seed_everything
from ssldyn.contract.experiment import Experiment
from ssldyn.contract.result import Result
from ssldyn.contract.threads import torch_threads
from ssldyn.errors import UserError
from ssldyn.lab.cache import RunCache
from ssldyn.lab.registry import get_experiment
from ssldyn.lab.store import RunStore, StoredRun, atomic_write_bytes, config_hash
from ssldyn.lab.tasks import TaskExecutor, Tasks, default_workers

__all__ = [
    "DEFAULT_OUT",
    "resolve_config",
    "DEFAULT_SEEDS",
    "MAX_SEEDS",
    "default_seeds",
    "flat_overrides",
    "RunSpec",
    "RunOutcome",
    "ComputedRun",
    "plan_run",
    "run_seeds",
    "evaluate_claims",
    "compute_run",
    "commit_run",
    "format_exception_line",
    "DEFAULT_PEAK_MEMORY",
    "estimate_memory",
    "check_memory",
]

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


#: seeds per claim when ``--seeds`` is not given: 3 with ``--quick``, 5 at paper scale (unless the paper states its
#: own count: ``Experiment.paper_seeds``, see :func:`default_seeds`)
DEFAULT_SEEDS = {"quick": 3, "paper": 5}
MAX_SEEDS = 1000


def default_seeds(exp: type[Experiment], preset: str, seed: int = 0, n: int | None = None) -> tuple[int, ...]:
    """The seeds of a run: ``seed, seed+1, …`` (``n`` of them; default by preset, or the paper's own count of
    repetitions at paper scale, ``Experiment.paper_seeds``); one for a deterministic experiment."""
    if not exp.seeded:
        return (int(seed),)
    if n is None:
        n = exp.paper_seeds if preset == "paper" and exp.paper_seeds is not None else DEFAULT_SEEDS[preset]
    return tuple(range(int(seed), int(seed) + int(n)))


def flat_overrides(cfg: dict[str, Any], base: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{dotted key: value}`` where ``cfg`` differs from ``base`` (the preset's config)."""
    out: dict[str, Any] = {}
    for k, v in cfg.items():
        b = base.get(k) if isinstance(base, dict) else None
        if isinstance(v, dict) and isinstance(b, dict):
            out.update(flat_overrides(v, b, f"{prefix}{k}."))
        elif v != b:
            out[f"{prefix}{k}"] = v
    return out


@dataclass(frozen=True)
class RunSpec:
    """A validated, hashable request for one run (what executors send to workers).

    Attributes:
        experiment: registered name.
        config: the validated config as JSON data.
        seeds: every seed the run computes (claims are evaluated over them).
        device: ``cpu`` / ``cuda``.
        digest: the run's hash (config + seeds + device + versions): its directory name.
        preset: ``quick`` or ``paper`` (the defaults the overrides are relative to).
        overrides: ``{dotted key: value}`` where the config differs from the preset.
    """

    experiment: str
    config: dict[str, Any]
    seeds: tuple[int, ...]
    device: str
    digest: str
    preset: str
    overrides: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)
    est_memory: int = field(default=0, hash=False, compare=False)  # estimated peak bytes (check_memory)

    @property
    def seed(self) -> int:
        return self.seeds[0]

    @property
    def label(self) -> str:
        return f"{self.experiment}[{self.digest}]"

    @property
    def canonical(self) -> bool:
        """The paper-default run of its preset: no overrides and the default seeds."""
        exp = get_experiment(self.experiment)
        return not self.overrides and self.seeds == default_seeds(exp, self.preset)

    def describe(self) -> str:
        """``tau=1.0, seeds=0..2`` — what this run is, for people."""
        parts = [f"{k}={_short(v)}" for k, v in sorted(self.overrides.items())]
        s = self.seeds
        parts.append(f"seed={s[0]}" if len(s) == 1 else f"seeds={s[0]}..{s[-1]}" if s == tuple(range(s[0], s[-1] + 1))
                     else "seeds=" + ",".join(map(str, s)))  # fmt: skip
        return ", ".join(parts)


#: peak memory assumed for an experiment that declares no estimate of its own (bytes): an allowance
#: for the interpreter, torch, the lab and a small computation (a run process measured ≈ 0.43 GB
#: VmHWM before computing), not a measurement of each experiment
DEFAULT_PEAK_MEMORY = 1 << 30


def estimate_memory(exp_cls: type[Experiment], cfg: ExperimentConfig, n_seeds: int) -> tuple[int, str]:
    """``(bytes, key)``: the estimated peak memory of a run, from its config, before anything is computed.

    An experiment estimates its own with a classmethod ``peak_memory(cfg, n_seeds) -> (bytes, key)``
    (``key``: the config key that drives it, named when a run is refused) or declares a constant
    ``est_memory`` (bytes); otherwise :data:`DEFAULT_PEAK_MEMORY`, with key ``""``.
    """
    fn = getattr(exp_cls, "peak_memory", None)
    if fn is not None:
        got = fn(cfg, n_seeds)
        if got is not None:
            return int(got[0]), str(got[1])
    return int(getattr(exp_cls, "est_memory", DEFAULT_PEAK_MEMORY)), ""


def check_memory(exp_cls: type[Experiment], cfg: ExperimentConfig, n_seeds: int, device: Any) -> int:
    """The estimated peak (:func:`estimate_memory`); a run that cannot fit in the device's memory (the
    host's RAM, or the GPU's) is one :class:`UserError` naming the config key that drives it."""
    from ssldyn.contract.config import echo
    from ssldyn.lab.study import config_value
    from ssldyn.memory import fmt_bytes, total_memory

    est, key = estimate_memory(exp_cls, cfg, n_seeds)
    limit = total_memory(device)
    if est > limit:
        what = f"{key}={echo(config_value(cfg.model_dump(), key), 80)}" if key else "its config"
        raise UserError(
            f"{exp_cls.name}: {what} needs an estimated {fmt_bytes(est)} of memory at its peak, more than the "
            f"{fmt_bytes(limit)} of this machine ({torch.device(device).type}); lower {key or 'the sizes'}"
        )
    return est


def _short(v: Any) -> str:
    """A value of a run label (:func:`~ssldyn.lab.study.value_text`), cut to 40 characters."""
    from ssldyn.lab.study import value_text

    text = value_text(v)
    return text if len(text) <= 40 else text[:39] + "…"


@dataclass
class RunOutcome:
    """What :func:`ssldyn.lab.api.run_experiment` returns."""

    run: StoredRun
    cached: bool
    seconds: float

    @property
    def claims(self) -> list[Claim]:
        return self.run.claims


@dataclass
class ComputedRun:
    """A run computed in memory (possibly on a remote worker): nothing written yet."""

    spec: RunSpec
    record: dict[str, Any]
    meta: dict[str, Any]
    results: list[Result]
    claims: list[Claim]
    figures: dict[str, bytes]


def plan_run(
    name: str,
    *,
    quick: bool = False,
    config_file: str | Path | None = None,
    sets: list[str] | dict[str, Any] | None = None,
    seed: int = 0,
    seeds: int | Sequence[int] | None = None,
    device: str = "cpu",
) -> RunSpec:
    """Validate everything the user asked for and compute the run hash (no side effects).

    A run whose estimated peak memory (:func:`estimate_memory`) cannot fit in the device's memory is
    refused here, naming the config key, before anything is computed.

    ``seeds`` is a count (``seed, seed+1, …``), an explicit list of distinct integers in ``[0, 2^63)``,
    or ``None`` for the preset's default (3 quick; 5 at paper scale, or the paper's own count,
    ``Experiment.paper_seeds``); a deterministic experiment always runs one seed.
    """
    exp_cls = get_experiment(name)
    cfg = resolve_config(exp_cls, quick=quick, config_file=config_file, sets=sets)
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**63:
        raise UserError(f"--seed {seed!r}: must be an integer in [0, 2^63)")
    preset = "quick" if quick else "paper"
    if seeds is None or isinstance(seeds, int) and not isinstance(seeds, bool):
        if seeds is not None and not 1 <= seeds <= MAX_SEEDS:
            raise UserError(f"--seeds {seeds!r}: must be an integer in [1, {MAX_SEEDS}]")
        seed_tuple = default_seeds(exp_cls, preset, seed, seeds)
        if seed_tuple[-1] >= 2**63:  # seed, seed+1, …: the last is the largest
            raise UserError(f"--seed {seed} with {len(seed_tuple)} seeds passes 2^63")
    else:
        try:
            given = list(seeds)  # type: ignore[arg-type]
            if any(isinstance(s, bool) for s in given):
                raise TypeError("a bool is not a seed")
            seed_tuple = tuple(operator.index(s) for s in given)  # integers only: 1.5 is not seed 1
        except (TypeError, ValueError):
            raise UserError(f"seeds {seeds!r}: expected a count or a list of integers") from None
        if (not seed_tuple or len(set(seed_tuple)) != len(seed_tuple) or min(seed_tuple) < 0
                or max(seed_tuple) >= 2**63):  # fmt: skip
            raise UserError(f"seeds {list(seed_tuple)!r}: expected distinct integers in [0, 2^63)")
        seed_tuple = seed_tuple if exp_cls.seeded else seed_tuple[:1]
    dev = resolve_device(device)
    cfg_json = cfg.model_dump(mode="json")
    base = (exp_cls.quick_config() if quick else exp_cls.default_config()).model_dump(mode="json")
    digest = config_hash(exp_cls.name, cfg_json, seed_tuple, dev.type, exp_cls.version)
    est = check_memory(exp_cls, cfg, len(seed_tuple), dev)  # refused here, before any compute
    return RunSpec(exp_cls.name, cfg_json, seed_tuple, str(dev), digest, preset, flat_overrides(cfg_json, base), est)


def _progress_display(progress: Any) -> tuple[Any, Any]:
    """``(bar, context manager)``: an open rich Progress to add bars to, or none."""
    if progress is True:
        bar = progress_display()
        return bar, bar
    from contextlib import nullcontext

    return (None if isinstance(progress, bool) or progress is None else progress), nullcontext()


def run_seeds(exp: Experiment, cfg: ExperimentConfig, seeds: Sequence[int], ctx_kw: dict[str, Any]) -> list[Result]:
    """Every seed's :class:`Result`: one call per seed, or one call for a ``batch_seeds`` experiment."""
    cls = type(exp)
    dev = ctx_kw["device"]
    with ExitStack() as stack:
        if cls.threads is not None:
            stack.enter_context(torch_threads(cls.threads, dev))
        if cls.batch_seeds:
            seed_everything(seeds[0])
            out = exp.run(cfg, Context(seed=seeds[0], seeds=tuple(seeds), **ctx_kw))
            results = list(out) if isinstance(out, (list, tuple)) else [out]
            if len(results) != len(seeds) or not all(isinstance(r, Result) for r in results):
                raise TypeError(f"{cls.name}.run (batch_seeds) must return one Result per seed ({len(seeds)})")
        else:
            results = []
            for s in seeds:
                seed_everything(s)
                r = exp.run(cfg, Context(seed=s, seeds=(s,), **ctx_kw))
                if isinstance(r, (list, tuple)) and len(r) == 1:  # a seed-batching run() called with one seed
                    r = r[0]
                if not isinstance(r, Result):
                    raise TypeError(f"{cls.name}.run must return a Result, got {type(r).__name__}")
                results.append(r)
    for r, s in zip(results, seeds):
        r.seed = int(s)
    return results


def evaluate_claims(exp: Experiment, cfg: ExperimentConfig, results: list[Result]) -> list[Claim]:
    """Measure every declared claim per seed (or pooled) and evaluate it over the seeds."""
    cls = type(exp)
    seeds = [int(r.seed) for r in results]  # type: ignore[arg-type]
    specs = cls.claims
    per_seed = [dict(exp.measure(cfg, r)) for r in results]
    pooled_specs = [s for s in specs if s.rule.name == "pooled"]
    pooled_m = dict(exp.measure_pooled(cfg, results)) if pooled_specs else {}
    declared = {s.id for s in specs}
    per_ids = {s.id for s in specs if s.rule.name != "pooled"}
    for i, m in enumerate(per_seed):
        extra, missing = set(m) - declared, per_ids - set(m)
        if extra or missing:
            raise ValueError(f"{cls.name}.measure (seed {seeds[i]}): undeclared claims {sorted(extra)}, "
                             f"missing {sorted(missing)}")  # fmt: skip
    if set(pooled_m) != {s.id for s in pooled_specs}:
        raise ValueError(f"{cls.name}.measure_pooled must return exactly {sorted(s.id for s in pooled_specs)}")
    note = "" if cls.seeded else "deterministic computation: one evaluation"
    out = []
    for spec in specs:
        if spec.rule.name == "pooled":
            out.append(evaluate(spec, cfg, seeds, [pooled_m[spec.id]], note=note))
        else:
            out.append(evaluate(spec, cfg, seeds, [m[spec.id] for m in per_seed], note=note))
    return out


def compute_run(
    spec: RunSpec,
    progress: Any = False,
    cache_dir: str | Path | None = None,
    executor: TaskExecutor = "processes",
    workers: int | None = None,
) -> ComputedRun:
    """Run the experiment of ``spec`` for every seed in this process; figures are rendered to bytes.

    ``cache_dir`` (normally ``<out>/.cache``) holds the cache handed to the experiment as ``ctx.cache``;
    ``executor`` / ``workers`` run its tasks (``ctx.map``; see :class:`ssldyn.lab.tasks.Tasks`).
    ``progress`` is a bool or an open ``rich.progress.Progress`` to add the run's bars to.
    """
    from ssldyn.memory import peak_rss, reset_peak_rss

    exp_cls = get_experiment(spec.experiment)
    cfg = exp_cls.Config.model_validate(spec.config)
    dev = resolve_device(spec.device)
    est, est_key = estimate_memory(exp_cls, cfg, len(spec.seeds))
    fresh_peak = reset_peak_rss()
    t0 = time.perf_counter()
    started = datetime.now(timezone.utc).isoformat(timespec="seconds")
    bar, display = _progress_display(progress)
    exp = exp_cls()
    with tempfile.TemporaryDirectory(prefix="ssldyn-run-") as tmp, display:
        ctx_kw = {"device": dev, "progress": bool(progress), "run_dir": Path(tmp), "_bar": bar,
                  "tasks": Tasks(executor, workers if workers is not None else default_workers()),
                  "cache": RunCache(cache_dir) if cache_dir is not None else None}  # fmt: skip
        results = run_seeds(exp, cfg, spec.seeds, ctx_kw)
        if spec.preset == "paper" and exp_cls.paper_seeds is not None and len(spec.seeds) == exp_cls.paper_seeds:
            note = f"{len(spec.seeds)} seeds at paper scale, the paper's own count: {exp_cls.paper_seeds_reason}"
            for r in results:
                r.notes.append(note)
        run_seconds = time.perf_counter() - t0
        claims = evaluate_claims(exp, cfg, results)
        fig_dir = Path(tmp) / "figures"
        fig_dir.mkdir()
        first = results[0]
        first.seed_results = results
        try:
            exp.plots(cfg, first, fig_dir)
        finally:
            first.seed_results = []
        figures = {p.name: p.read_bytes() for p in sorted(fig_dir.iterdir()) if p.is_file()}
    memory = {"estimated": est, "key": est_key, "measured_peak": peak_rss(),
              "measured": "peak resident size of the process that computed the run"
              + ("" if fresh_peak else " since it started") + " (tasks run in other processes not counted)"}  # fmt: skip
    record = {"experiment": exp_cls.name, "config": spec.config, "seeds": list(spec.seeds), "device": dev.type,
              "package": __version__, "version": exp_cls.version, "hash": spec.digest, "preset": spec.preset,
              "overrides": spec.overrides}  # fmt: skip
    meta = {"experiment": exp_cls.name, "paper": exp_cls.paper, "figure": exp_cls.figure,
            "description": exp_cls.description, "preset": spec.preset, "overrides": spec.overrides,
            "canonical": spec.canonical, "label": spec.describe(), "started": started,
            "run_seconds": round(run_seconds, 3), "total_seconds": round(time.perf_counter() - t0, 3),
            "torch": torch.__version__, "python": platform.python_version(), "host": platform.node(),
            "threads": torch.get_num_threads(), "memory": memory,
            "captions": {n: c for n in figures if (c := exp_cls.caption(n)) is not None}}  # fmt: skip
    return ComputedRun(spec, record, meta, results, claims, figures)


def commit_run(store: RunStore, computed: ComputedRun, *, force: bool = False) -> StoredRun:
    """Write a computed run into the store atomically, under the run's lock (only the driver calls this).

    Without ``force``, a run another process finished meanwhile is kept and returned instead.
    """
    spec = computed.spec
    with store.lock(spec.experiment, spec.digest):
        existing = None if force else store.get(spec.experiment, spec.digest)
        if existing is not None:
            return existing
        partial = store.new_partial(spec.experiment, spec.digest)
        try:
            store.write_result(partial, computed.record, computed.meta, computed.results, computed.claims)
            for name, data in computed.figures.items():
                atomic_write_bytes(partial / "figures" / Path(name).name, data, make_parents=False)
            run = store.commit(partial, spec.experiment, spec.digest)
        except BaseException:
            shutil.rmtree(partial, ignore_errors=True)
            raise
    store.clear_failure(spec.experiment, spec.digest)
    return run


def format_exception_line(exc: BaseException) -> str:
    """One line for an unexpected failure (the full traceback goes to a log file)."""
    last = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
    where = f" at {Path(last.filename).name}:{last.lineno}" if last else ""
    return f"{type(exc).__name__}: {exc}{where}"
