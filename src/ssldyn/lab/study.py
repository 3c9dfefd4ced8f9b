"""Studies: a sweep stored as a result that knows its axes, and the human-readable run index.

A sweep (``ssldyn run EXP --sweep tau=0.2,0.5,1.0``) is one run per grid point, each with all
its seeds. :func:`record_study` stores the grid as ``<out>/<experiment>/studies/<id>.json``::

    {"id": "sweep-3f2a…", "experiment": "variational.fig5", "preset": "quick", "seeds": [0, 1],
     "axes": [{"key": "tau", "values": [0.2, 0.5, 1.0]}], "base": {"width": 50},
     "points": [{"values": {"tau": 0.2}, "hash": "…", "label": "tau=0.2, seeds=0..1"}, …]}

``base`` holds the overrides every point shares (``--set``); the id is a hash of experiment,
preset, axes, base, seeds and device, so the same sweep run again is the same study.
:func:`infer_studies` also finds grids that were run as separate ``--set`` variants (same
overridden keys, same seeds, different values) and presents them as studies of ``source``
``variants``; those are not written to disk.

:func:`write_index` writes ``<out>/<experiment>/runs.csv``: one line per run (hash, label,
status, preset, seeds, overrides, claims passed, studies), finished, failed or damaged.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ssldyn.lab.scores import outcome_counts

__all__ = [
    "Axis", "Study", "value_text", "point_text", "value_key", "selects", "config_value", "record_study", "read_studies",
    "infer_studies", "write_index", "studies_dir",
]  # fmt: skip


@dataclass(frozen=True)
class Axis:
    """One swept config key (dotted) and its values, in grid order."""

    key: str
    values: tuple[Any, ...]

    @property
    def numeric(self) -> bool:
        return all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in self.values)


def value_text(v: Any) -> str:
    """A config value as the user writes it (``1.0``, ``relu``, ``[1, 2]``): strings bare, the rest as JSON.

    The one spelling of swept values and grid points in the CLI, the report and the run labels.
    """
    return v if isinstance(v, str) else json.dumps(v, default=str)


def point_text(values: Mapping[str, Any]) -> str:
    """``tau=0.2, width=10``: a grid point's values (:func:`value_text`) in the order given."""
    return ", ".join(f"{k}={value_text(v)}" for k, v in values.items())


def value_key(v: Any) -> str:
    """A config value as a key that two equal values share (JSON with sorted keys): grid points are
    matched on it."""
    return json.dumps(v, sort_keys=True, default=str)


def selects(names: Sequence[str] | None, experiment: str) -> bool:
    """Whether ``names`` (experiment names or papers: ``variational.fig5``, ``grassmann``) select
    ``experiment``; ``None`` selects every experiment."""
    return names is None or any(experiment == n or experiment.split(".")[0] == n for n in names)


@dataclass
class Study:
    """A grid of runs of one experiment: its axes and, per grid point, the axis values and the run hash."""

    id: str
    experiment: str
    axes: list[Axis]
    points: list[dict[str, Any]]
    preset: str = ""
    seeds: list[int] = field(default_factory=list)
    base: dict[str, Any] = field(default_factory=dict)
    source: str = "sweep"
    created: str = ""
    path: Path | None = None

    @property
    def keys(self) -> list[str]:
        return [a.key for a in self.axes]

    @property
    def hashes(self) -> list[str]:
        return [str(p["hash"]) for p in self.points]

    @property
    def title(self) -> str:
        """``tau ∈ {0.2, 0.5, 1.0} × width ∈ {10, 100}``."""
        return " × ".join(f"{a.key} ∈ {{{', '.join(value_text(v) for v in a.values)}}}" for a in self.axes)

    def values_of(self, digest: str) -> dict[str, Any]:
        """The axis values of the grid point run as ``digest``."""
        for p in self.points:
            if p["hash"] == digest:
                return dict(p["values"])
        raise KeyError(f"study {self.id}: no point with hash {digest!r}")

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "experiment": self.experiment, "preset": self.preset, "seeds": list(self.seeds),
                "axes": [{"key": a.key, "values": list(a.values)} for a in self.axes], "base": self.base,
                "points": self.points, "source": self.source, "created": self.created}  # fmt: skip

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], path: Path | None = None) -> Study:
        axes = [Axis(str(a["key"]), tuple(a["values"])) for a in d["axes"]]
        points = [{"values": dict(p["values"]), "hash": str(p["hash"]), "label": str(p.get("label", ""))}
                  for p in d["points"]]  # fmt: skip
        if not axes or not points or any(set(p["values"]) != {a.key for a in axes} for p in points):
            raise ValueError("a study needs axes and points whose values name every axis")
        return cls(str(d["id"]), str(d["experiment"]), axes, points, str(d.get("preset", "")),
                   [int(s) for s in d.get("seeds", [])], dict(d.get("base", {})), str(d.get("source", "sweep")),
                   str(d.get("created", "")), path)  # fmt: skip


def studies_dir(out: str | Path, experiment: str) -> Path:
    return Path(out) / experiment / "studies"


def config_value(config: Mapping[str, Any], key: str, default: Any = None) -> Any:
    """The value at a dotted ``key`` of a nested config (``default`` when absent)."""
    node: Any = config
    for part in key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return default
        node = node[part]
    return node


def _digest(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:10]


def record_study(out: str | Path, specs: Sequence[Any], keys: Sequence[str], source: str = "sweep") -> Study:
    """Store the grid of ``specs`` (:class:`~ssldyn.lab.runner.RunSpec`, one per grid point) swept over ``keys``.

    The axis values are the validated config values of the runs (``--sweep tau=1`` is stored as
    ``1.0`` when τ is a float). Returns the :class:`Study`, written to ``studies/<id>.json``.
    """
    from ssldyn.lab.store import atomic_write_text

    if not specs:
        raise ValueError("record_study: no runs")
    exps = {s.experiment for s in specs}
    if len(exps) != 1:
        raise ValueError(f"record_study: one experiment per study, got {sorted(exps)}")
    experiment = specs[0].experiment
    keys = list(keys)
    values = [{k: config_value(s.config, k) for k in keys} for s in specs]
    axes = [Axis(k, tuple(_distinct(v[k] for v in values))) for k in keys]
    shared = [{k: v for k, v in s.overrides.items() if k not in keys} for s in specs]
    base = {k: v for k, v in shared[0].items() if all(o.get(k) == v for o in shared)}
    sid = f"{source}-" + _digest([experiment, specs[0].preset, [[a.key, list(a.values)] for a in axes], base,
                               list(specs[0].seeds), specs[0].device])  # fmt: skip
    points = [{"values": v, "hash": s.digest, "label": s.describe()} for v, s in zip(values, specs)]
    study = Study(sid, experiment, axes, points, specs[0].preset, list(specs[0].seeds), base, source,
                  datetime.now(timezone.utc).isoformat(timespec="seconds"))  # fmt: skip
    path = studies_dir(out, experiment) / f"{sid}.json"
    atomic_write_text(path, json.dumps(study.to_dict(), indent=2, sort_keys=True, default=str))
    study.path = path
    return study


def _distinct(values: Iterable[Any]) -> list[Any]:
    out: list[Any] = []
    for v in values:
        if not any(v == w and type(v) is type(w) for w in out):
            out.append(v)
    return out


def read_studies(
    out: str | Path, experiments: Sequence[str] | None = None
) -> tuple[list[Study], list[tuple[str, str]]]:
    """Every stored study under ``out`` (newest first) and the files that could not be read ``(path, error)``."""
    found, bad = [], []
    for p in Path(out).glob("*/studies/*.json"):
        exp = p.parent.parent.name
        if not selects(experiments, exp):
            continue
        try:
            found.append((p.stat().st_mtime, Study.from_dict(json.loads(p.read_text()), p)))
        except (OSError, ValueError, KeyError, TypeError) as e:
            bad.append((str(p), f"{type(e).__name__}: {e}"))
    return [s for _, s in sorted(found, key=lambda t: -t[0])], bad


def _sort_values(values: list[Any]) -> list[Any]:
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        return sorted(values)
    return values


def infer_studies(records: Sequence[Any], stored: Sequence[Study] = ()) -> list[Study]:
    """Grids among runs made as separate variants: same experiment, preset, seeds and overridden keys.

    ``records`` are :class:`ssldyn.results.RunRecord` (newest first). Keys whose value differs
    between the runs are the axes; the others form the base. When every overridden key is an
    axis (or none varies), the preset's default-config run with the same seeds joins as the
    point at the default values, so one ``--set`` variant and the default run form a two-point
    grid. A grid already covered by a ``stored`` study is not repeated.
    """
    groups: dict[tuple[Any, ...], list[Any]] = defaultdict(list)
    defaults: dict[tuple[Any, ...], Any] = {}
    for r in records:
        keys = tuple(sorted(r.overrides))
        head = (r.experiment, r.preset, tuple(r.seeds))
        if keys:
            groups[(*head, keys)].append(r)
        else:
            defaults.setdefault(head, r)
    covered = [set(s.hashes) for s in stored]
    studies = []
    for (experiment, preset, seeds, keys), runs in groups.items():
        axis_keys = [k for k in keys if len(_distinct(r.overrides[k] for r in runs)) > 1]
        base = {k: runs[0].overrides[k] for k in keys if k not in axis_keys}
        default = defaults.get((experiment, preset, seeds))
        if default is not None and (not axis_keys or not base):  # the default run differs in every key
            axis_keys, base = list(keys), {}
        if not axis_keys:
            continue
        chosen: dict[str, Any] = {}
        for r in runs + ([default] if default is not None and not base else []):
            point = {k: r.value(k) for k in axis_keys}
            chosen.setdefault(value_key(point), r)  # newest run of a point wins
        if len(chosen) < 2:
            continue
        hashes = {r.hash for r in chosen.values()}
        if any(hashes <= c for c in covered):
            continue
        axes = [Axis(k, tuple(_sort_values(_distinct(r.value(k) for r in chosen.values())))) for k in axis_keys]
        order = {k: {value_key(v): i for i, v in enumerate(a.values)} for k, a in zip(axis_keys, axes)}
        pts = sorted(chosen.values(), key=lambda r: [order[k][value_key(r.value(k))] for k in axis_keys])
        points = [{"values": {k: r.value(k) for k in axis_keys}, "hash": r.hash, "label": r.label} for r in pts]
        sid = "variants-" + _digest([experiment, sorted(hashes)])
        studies.append(Study(sid, experiment, axes, points, preset, list(seeds), base, "variants"))
    return studies


INDEX_COLUMNS = ["hash", "label", "status", "preset", "canonical", "seeds", "overrides", "claims_passed",
                 "paper_claims_passed", "studies", "started", "run_seconds", "error", "path"]  # fmt: skip


def write_index(out: str | Path, results: Any, experiments: Iterable[str] | None = None) -> list[Path]:
    """Write ``<out>/<experiment>/runs.csv`` for every experiment with runs (or only ``experiments``).

    One line per finished run (newest first), then failed and damaged runs. ``results`` is
    ``ssldyn.results.load(out)`` (passed in: this module sits below ``ssldyn.results``). Returns
    the files written.
    """
    import pandas as pd

    from ssldyn.lab.store import atomic_write_text

    out = Path(out)
    res = results
    in_study: dict[str, list[str]] = defaultdict(list)
    for s in res.studies:
        for h in s.hashes:
            in_study[h].append(s.id)
    rows: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in res.records:
        every, scored = outcome_counts(r.claims, None), outcome_counts(r.claims)
        rows[r.experiment].append({
            "hash": r.hash, "label": r.label, "status": "done", "preset": r.preset, "canonical": r.canonical,
            "seeds": " ".join(map(str, r.seeds)), "overrides": json.dumps(r.overrides, sort_keys=True, default=str),
            "claims_passed": f"{every.passed}/{every.total}",
            "paper_claims_passed": scored.text(),
            "studies": " ".join(in_study.get(r.hash, [])), "started": r.meta.get("started", ""),
            "run_seconds": r.meta.get("run_seconds", ""), "error": "", "path": _rel(r.path, out),
        })  # fmt: skip
    for f in res.failure_list:
        exp = str(f.get("experiment"))
        rows[exp].append({"hash": f.get("hash"), "status": "failed", "error": f.get("error"),
                          "studies": " ".join(in_study.get(str(f.get("hash")), []))})  # fmt: skip
    for path, err in res.damaged_list:
        p = Path(path)
        try:
            rel = p.resolve().relative_to(out.resolve())
        except ValueError:
            continue
        if len(rel.parts) >= 2 and rel.parts[1] != "studies":
            rows[rel.parts[0]].append({"hash": rel.parts[1], "status": "damaged", "error": err,
                                       "path": rel.as_posix()})  # fmt: skip
    wanted = set(experiments) if experiments is not None else None
    written = []
    for exp, rs in sorted(rows.items()):
        if wanted is not None and exp not in wanted or not (out / exp).is_dir():
            continue
        path = out / exp / "runs.csv"
        atomic_write_text(path, pd.DataFrame(rs, columns=INDEX_COLUMNS).to_csv(index=False))
        written.append(path)
    return written


def _rel(path: Path, out: Path) -> str:
    try:
        return path.resolve().relative_to(out.resolve()).as_posix()
    except ValueError:
        return str(path)
