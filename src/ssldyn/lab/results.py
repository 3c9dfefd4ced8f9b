"""Finished runs as pandas DataFrames: ``ssldyn.results.load(out)``.

::

    from ssldyn.results import load

    res = load("ssldyn-runs")                       # every finished run under the directory
    res.runs          # one row per run: experiment, hash, label, preset, canonical, seeds, overrides, ...
    res.claims        # one row per claim per seed: claim, kind, seed, value, seed_passed, estimate, lo, hi, passed
    res.summaries     # one row per summary number per seed: seed, name, value
    res.trajectories  # one row per logged probe value: seed, table, <key columns>, step, member, probe, value
    fig5 = res.select("variational.fig5", tau=1.0)  # filter by experiment and config values
    default = res.select("variational.fig5", overrides={})  # the paper-default configuration

Every frame carries the run's ``experiment``, ``hash``, ``label`` (``tau=1.0, seeds=0..1``),
``preset`` (``quick``/``paper``: what the overrides are relative to) and ``canonical`` (the
paper-default configuration with the default seeds), plus one column per config key that any
loaded run overrides, holding that run's value of the key (lists as tuples, so that every column
can be grouped by; a key that clashes with a column above is named ``config.<key>``). The report (:mod:`ssldyn.lab.report`) is built on this module.

A run whose files cannot be read (damaged, half-deleted) never stops :func:`load`: it is
listed in :attr:`Results.damaged` with its path and the error.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import pandas as pd

from ssldyn.contract.claims import Claim
from ssldyn.lab.scores import SCORED_KINDS, outcome_counts
from ssldyn.lab.store import record_seeds
from ssldyn.lab.study import Study, config_value, selects
from ssldyn.lab.sweep import flatten

__all__ = ["load", "key_columns", "Results", "RunRecord"]

#: scored claim kinds (the report's headline counts these; sanity checks are separate)
RUN_KEYS = ("experiment", "hash", "label", "preset", "canonical")
#: the columns every trajectory row has (the others a table logged are its key columns and coordinates)
TRAJECTORY_COLUMNS = ("seed", "table", "step", "member", "probe", "value")
_READ_ERRORS = (OSError, ValueError, KeyError, TypeError, AttributeError, IndexError)


def _number(v: Any) -> float:
    """``v`` as a float (bools as 0/1; ``"nan"``/``"inf"`` strings as stored by claims.json); NaN otherwise."""
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, str) and v.strip().lower() in {"nan", "inf", "-inf", "+inf"}:
        return float(v)
    return math.nan


def key_columns(frame: pd.DataFrame, within: Sequence[str] = ("table", "seed", "member", "probe")) -> list[str]:
    """The logged columns of a trajectory frame that tell its curves apart (``dynamics``, ``lr``, ...).

    Every column other than ``step``, ``value`` and ``within`` is a candidate (run columns such as
    ``experiment`` or ``hash`` included). A candidate is a *coordinate* instead of a key when it
    is numeric, the rows stay unique per ``(*within, *other keys, step)`` without it, and it
    changes along a curve named by the keys found so far (``time = lr · step`` in
    ``variational.fig5``); every other candidate is a key (a text column always is). Numeric
    candidates are examined from the most distinct values down; of two numeric columns that name
    the same curves, one is kept as the key. Columns that are entirely missing are left out.

    >>> f = pd.DataFrame({"probe": "loss", "dynamics": ["net", "net", "gd", "gd"], "lr": [0.5, 0.5, 0.1, 0.1],
    ...                   "step": [0, 1, 0, 1], "time": [0.0, 0.5, 0.0, 0.1], "value": [1.0, 0.5, 1.0, 0.9]})
    >>> key_columns(f, within=("probe",))
    ['dynamics', 'lr']
    """
    within = [c for c in within if c in frame.columns]
    cand = [c for c in frame.columns if c not in {*within, "step", "value"} and frame[c].notna().any()]
    if frame.empty or not cand:
        return cand
    nunique = {c: int(frame[c].nunique(dropna=False)) for c in cand}
    numeric = {c for c in cand if pd.api.types.is_numeric_dtype(frame[c]) and not pd.api.types.is_bool_dtype(frame[c])}
    keys, kept = list(cand), set(cand) - numeric
    for c in sorted(numeric, key=lambda c: (-nunique[c], -cand.index(c))):  # ties: the later column goes first, so
        # the earlier one stays the key (never set order, which depends on PYTHONHASHSEED)
        rest = [k for k in keys if k != c]
        if frame.duplicated([*within, *rest, "step"]).any():
            kept.add(c)  # c tells rows apart: a key
            continue
        by = [*within, *(k for k in rest if k in kept)]
        varies = (frame.groupby(by, dropna=False)[c].nunique(dropna=False) > 1).any() if by else nunique[c] > 1
        if varies:
            keys = rest
        else:
            kept.add(c)
    return [c for c in cand if c in keys]


@dataclass
class RunRecord:
    """One finished run, read once from its directory (what the frames and the report are built from).

    Has the attributes of :class:`ssldyn.lab.store.StoredRun` that the report and the scores use
    (``path``, ``experiment``, ``config_record``, ``meta``, ``claims``, ``summaries``, ``notes``,
    ``figures``, ``seeds``), read once, so a file that changes or breaks later does not matter.
    """

    path: Path
    experiment: str
    config_record: dict[str, Any]
    meta: dict[str, Any]
    claims: list[Claim]
    summaries: dict[int, dict[str, Any]]
    notes: list[str]
    figures: list[Path]

    @property
    def hash(self) -> str:
        return str(self.config_record.get("hash") or self.path.name)

    @property
    def seeds(self) -> list[int]:
        return record_seeds(self.config_record)

    @property
    def config(self) -> dict[str, Any]:
        return dict(self.config_record.get("config", {}))

    @property
    def preset(self) -> str:
        return str(self.meta.get("preset") or self.config_record.get("preset") or "")

    @property
    def overrides(self) -> dict[str, Any]:
        ov = self.meta.get("overrides", self.config_record.get("overrides"))
        return dict(ov) if isinstance(ov, Mapping) else {}

    @property
    def canonical(self) -> bool:
        return bool(self.meta.get("canonical"))

    @property
    def label(self) -> str:
        return str(self.meta.get("label") or self.hash)

    def value(self, key: str) -> Any:
        """This run's config value at a dotted ``key``."""
        return config_value(self.config, key)


def read_run(run: Any) -> RunRecord:
    """Read every small file of a :class:`~ssldyn.lab.store.StoredRun` once (raises on a damaged run)."""
    rec = run.config_record
    if not isinstance(rec, Mapping) or "experiment" not in rec:
        raise ValueError("config.json has no 'experiment'")
    meta = run.meta
    if not isinstance(meta, Mapping):
        raise ValueError("meta.json is not an object")
    claims = list(run.claims)
    summaries = {int(k): dict(v) for k, v in run.summaries.items()}
    return RunRecord(Path(run.path), str(rec["experiment"]), dict(rec), dict(meta), claims, summaries,
                     [str(n) for n in run.notes], list(run.figures))  # fmt: skip


def _names(experiment: str | Sequence[str] | None) -> list[str] | None:
    """The ``experiment`` argument of :func:`load` and :meth:`Results.select` as a list (``None``: every experiment)."""
    if experiment is None:
        return None
    return [experiment] if isinstance(experiment, str) else list(experiment)


#: the presets a run is relative to (``--quick`` or the paper's settings)
PRESETS = ("quick", "paper")


def _known_names() -> set[str]:
    """Registered experiment names and papers (from the manifest and live registrations: imports no experiment)."""
    from ssldyn.lab import manifest

    return set(manifest.papers()) | {e["name"] for e in manifest.experiments()}


def _plain(value: Any) -> Any:
    """A filter value as stored in ``config.json`` (JSON): tuples become lists, at any depth."""
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _hashable(value: Any) -> Any:
    """A config value as a frame column holds it: lists become tuples, at any depth, so that a swept
    list-valued key (``taus=[0.5, 1.0]``) can be grouped by, like the ``seeds`` column."""
    if isinstance(value, (list, tuple)):
        return tuple(_hashable(v) for v in value)
    return value


_ABSENT = object()


def _has_key(config: Mapping[str, Any], key: str) -> bool:
    """Whether the nested ``config`` has the dotted ``key`` (its value may be ``None``)."""
    return config_value(config, key, _ABSENT) is not _ABSENT


@dataclass
class Results:
    """Finished runs of one output directory as DataFrames (see the module docstring).

    Attributes:
        out: the output directory.
        records: the runs, newest first (:class:`RunRecord`).
        damaged: runs (or files) that could not be read: DataFrame ``path, error``.
        failures: runs that raised an error: DataFrame ``experiment, hash, error``.
        studies: the sweeps stored under ``<out>/<experiment>/studies/`` and the variant grids
            found among the runs (:class:`ssldyn.lab.study.Study`).
    """

    out: Path
    records: list[RunRecord]
    damaged_list: list[tuple[str, str]] = field(default_factory=list)
    failure_list: list[dict[str, Any]] = field(default_factory=list)
    studies: list[Any] = field(default_factory=list)
    keys: list[str] | None = None
    _cache: dict[str, pd.DataFrame] = field(default_factory=dict, repr=False)

    # -- frames -------------------------------------------------------------------------
    @property
    def override_keys(self) -> list[str]:
        """Every config key that some loaded run overrides (sorted; a selection keeps the keys of what it came from)."""
        if self.keys is None:
            self.keys = sorted({k for r in self.records for k in r.overrides})
        return list(self.keys)

    def _key_columns(self) -> dict[str, str]:
        reserved = {*RUN_KEYS, "seed", "seeds", "n_seeds", "overrides", "claim", "kind", "value", "raw", "name",
                    "table", "step", "member", "probe", "estimate", "lo", "hi", "passed", "status", "path"}  # fmt: skip
        return {k: (f"config.{k}" if k in reserved else k) for k in self.override_keys}

    def _run_columns(self, r: RunRecord) -> dict[str, Any]:
        cols = {"experiment": r.experiment, "hash": r.hash, "label": r.label, "preset": r.preset,
                "canonical": r.canonical}  # fmt: skip
        for key, col in self._key_columns().items():
            cols[col] = _hashable(r.value(key))
        return cols

    @property
    def runs(self) -> pd.DataFrame:
        """One row per finished run (newest first)."""
        if "runs" not in self._cache:
            rows = []
            for r in self.records:
                every, scored = outcome_counts(r.claims, None), outcome_counts(r.claims, SCORED_KINDS)
                rows.append({
                    **self._run_columns(r), "seeds": tuple(r.seeds), "n_seeds": len(r.seeds),
                    "overrides": r.overrides, "claims_passed": every.passed,
                    "claims_total": every.total, "paper_claims_passed": scored.passed,
                    "paper_claims_total": scored.ran, "paper_claims_inconclusive": scored.inconclusive,
                    "paper_claims_vacuous": scored.vacuous, "paper_claims_not_run": scored.not_run,
                    "device": r.config_record.get("device"),
                    "started": r.meta.get("started"), "run_seconds": r.meta.get("run_seconds"),
                    "paper": r.meta.get("paper", r.experiment.split(".")[0]), "path": str(r.path),
                })  # fmt: skip
            self._cache["runs"] = self._frame(rows, [*RUN_KEYS, *self._key_columns().values(), "seeds", "n_seeds",
                                              "overrides", "claims_passed", "claims_total", "paper_claims_passed",
                                              "paper_claims_total", "paper_claims_inconclusive",
                                              "paper_claims_vacuous", "paper_claims_not_run", "device", "started", "run_seconds", "paper",
                                              "path"])  # fmt: skip
        return self._cache["runs"]

    @property
    def claims(self) -> pd.DataFrame:
        """One row per claim per seed (a pooled claim: one row with ``seed`` missing).

        ``value`` is the seed's measurement as a float (yes/no as 1/0; ``raw`` keeps it as stored),
        ``seed_passed`` whether the relation holds for that seed; ``estimate``, ``lo``, ``hi`` the
        claim's statistic over seeds and its 95 % interval (``statistic`` says which), ``passed``
        and ``status`` the claim's verdict under its ``rule``.
        """
        if "claims" not in self._cache:
            rows = []
            for r in self.records:
                base = self._run_columns(r)
                for c in r.claims:
                    lo, hi = c.interval if c.interval is not None else (None, None)
                    common = {
                        **base, "claim": c.id, "kind": c.kind, "result": c.result, "statement": c.statement,
                        "location": c.location, "statistic": c.statistic, "estimate": _number(c.value),
                        "lo": _number(lo), "hi": _number(hi), "passed": bool(c.passed), "status": c.status,
                        "expected": c.expected, "rule": c.rule, "n_seeds": len(c.seed_passed),
                        "control": c.control, "control_estimate": _number(c.control_value),
                        "control_held": c.control_held,
                    }  # fmt: skip
                    values = list(c.values)
                    per_seed = len(values) == len(c.seeds) and len(values) > 0
                    if per_seed:
                        oks = list(c.seed_passed) + [False] * (len(values) - len(c.seed_passed))
                        ctrl = list(c.control_values) if len(c.control_values) == len(values) else [None] * len(values)
                        for s, v, ok, cv in zip(c.seeds, values, oks, ctrl):
                            rows.append({**common, "seed": int(s), "value": _number(v), "raw": v,
                                         "seed_passed": bool(ok), "control_value": _number(cv)})  # fmt: skip
                    else:
                        v = values[0] if values else c.value
                        ok = bool(c.seed_passed[0]) if c.seed_passed else bool(c.passed)
                        cv = c.control_values[0] if c.control_values else None
                        rows.append({**common, "seed": None, "value": _number(v), "raw": v, "seed_passed": ok,
                                     "control_value": _number(cv)})  # fmt: skip
            cols = [*RUN_KEYS, *self._key_columns().values(), "claim", "kind", "result", "seed", "value", "raw",
                    "seed_passed", "statistic", "estimate", "lo", "hi", "passed", "status", "expected", "statement",
                    "location", "rule", "n_seeds", "control", "control_value", "control_estimate",
                    "control_held"]  # fmt: skip
            frame = self._frame(rows, cols)
            frame["seed"] = frame["seed"].astype("Int64")
            self._cache["claims"] = frame
        return self._cache["claims"]

    @property
    def summaries(self) -> pd.DataFrame:
        """One row per summary number per seed: ``seed, name, value`` (nested dicts as dotted names).

        ``value`` is a float (NaN for text and lists; ``raw`` keeps the stored value).
        """
        if "summaries" not in self._cache:
            rows = []
            for r in self.records:
                base = self._run_columns(r)
                for seed, summ in sorted(r.summaries.items()):
                    for name, v in flatten(summ):
                        rows.append({**base, "seed": int(seed), "name": name, "value": _number(v), "raw": v})
            cols = [*RUN_KEYS, *self._key_columns().values(), "seed", "name", "value", "raw"]
            self._cache["summaries"] = self._frame(rows, cols)
        return self._cache["summaries"]

    @property
    def trajectories(self) -> pd.DataFrame:
        """Every stored trajectory table (columns step, probe, value) of every run and seed, long format.

        Besides ``seed, table, step, member, probe, value`` the frame keeps every other column an
        experiment logged: its *key columns* (``dynamics``, ``lr``, ``width``, …: constant along one
        curve, so ``(table, seed, member, probe, *keys, step)`` names exactly one row) and its
        *coordinates* (``time``: changing with the step along a curve); see :func:`key_columns`.
        Two curves that share a seed and a probe (``variational.fig5``'s network and vanilla GD)
        therefore never mix. A logged column whose name clashes with a column of the run
        (``experiment``, an overridden config key, ...) is named ``logged.<name>``. A table without
        the column has ``NA`` there.

        Read on first use; a table that cannot be read is added to :attr:`damaged`.
        """
        if "trajectories" not in self._cache:
            frames = []
            run_cols = [*RUN_KEYS, *self._key_columns().values()]
            extra_cols: dict[str, None] = {}
            for r in self.records:
                base = self._run_columns(r)
                for p in sorted((r.path / "tables").glob("*.parquet")):
                    try:
                        t = pd.read_parquet(p)
                    except Exception as e:  # any unreadable file is reported, never raised
                        self.damaged_list.append((str(p), f"{type(e).__name__}: {e}"))
                        continue
                    if not {"step", "probe", "value"} <= set(t.columns):
                        continue
                    if "seed" not in t.columns:
                        t = t.assign(seed=r.seeds[0])
                    if "member" not in t.columns:
                        t = t.assign(member=0)
                    rename = {c: f"logged.{c}" for c in t.columns if c in base or c in {"table", *RUN_KEYS}}
                    t = t.rename(columns=rename)
                    for c in t.columns:
                        if c not in TRAJECTORY_COLUMNS:
                            extra_cols[c] = None
                    frames.append(t.assign(table=p.stem, **base))
            extra = list(extra_cols)
            cols = [*run_cols, "seed", "table", *extra, "step", "member", "probe", "value"]
            frame = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=cols)
            self._cache["trajectories"] = pd.DataFrame(frame[cols])
        return self._cache["trajectories"]

    @property
    def damaged(self) -> pd.DataFrame:
        """Runs or files that could not be read: ``path, error``."""
        return pd.DataFrame(self.damaged_list, columns=["path", "error"])

    @property
    def failures(self) -> pd.DataFrame:
        """Runs that raised an error (``<out>/<experiment>/<hash>.failed.json``): ``experiment, hash, error``."""
        rows = [{"experiment": f.get("experiment"), "hash": f.get("hash"), "error": f.get("error")}
                for f in self.failure_list]  # fmt: skip
        return pd.DataFrame(rows, columns=["experiment", "hash", "error"])

    @staticmethod
    def _frame(rows: list[dict[str, Any]], cols: list[str]) -> pd.DataFrame:
        return pd.DataFrame(rows, columns=list(dict.fromkeys(cols)))

    # -- selection ------------------------------------------------------------------------
    def record(self, digest: str) -> RunRecord:
        """The run with hash ``digest``."""
        for r in self.records:
            if r.hash == digest:
                return r
        raise KeyError(f"no finished run with hash {digest!r} in {self.out}")

    def select(
        self,
        experiment: str | Sequence[str] | None = None,
        *,
        preset: str | None = None,
        canonical: bool | None = None,
        overrides: Mapping[str, Any] | None = None,
        hashes: Iterable[str] | None = None,
        study: str | Study | None = None,
        config: Mapping[str, Any] | None = None,
        **values: Any,
    ) -> Results:
        """The runs that match every filter, as a new :class:`Results`.

        Args:
            experiment: a name (``variational.fig5``), a paper (``variational``) or a list of names.
            preset: ``quick`` or ``paper``.
            canonical: keep only (or drop) the paper-default runs with the default seeds.
            overrides: the run's overrides must equal this exactly (``{}``: the preset's default config).
            hashes: keep only these run hashes.
            study: keep only the runs of this study (a :class:`Study` of ``.studies`` or its id, e.g. the
                ``sweep-…`` id the CLI prints): ``select(study=s).claims.groupby([*s.keys, "claim"])`` is that
                sweep's answer, without the default run or other experiments' claims of the same name.
            config: ``{dotted key: value}`` the run's config must have (the value it ran with,
                overridden or not).
            **values: the same for plain keys (``tau=1.0``); write ``__`` for a dot (``optim__lr=0.1``).
                A tuple equals the stored list (``widths=(10,)`` selects ``widths: [10]``).

        Raises:
            UserError: (a ``ValueError``) for a preset other than ``quick``/``paper``, an experiment name that is
                neither registered, a paper nor in the store, or a config key that none of the runs of the
                selected experiments has (a typo never reads as "no such runs").
        """
        want = {k: _plain(v) for k, v in (config or {}).items()}
        want.update({k.replace("__", "."): _plain(v) for k, v in values.items()})
        names = _names(experiment)
        keep_hashes = set(hashes) if hashes is not None else None
        if study is not None:
            picked = self.study(study) if isinstance(study, str) else study
            keep_hashes = set(picked.hashes) if keep_hashes is None else keep_hashes & set(picked.hashes)
        self._check_selection(names, preset, want)
        overrides = None if overrides is None else {k: _plain(v) for k, v in overrides.items()}

        def ok(r: RunRecord) -> bool:
            if not selects(names, r.experiment):
                return False
            if preset is not None and r.preset != preset:
                return False
            if canonical is not None and r.canonical != canonical:
                return False
            if overrides is not None and r.overrides != overrides:
                return False
            if keep_hashes is not None and r.hash not in keep_hashes:
                return False
            return all(r.value(k) == v for k, v in want.items())

        recs = [r for r in self.records if ok(r)]
        kept = {r.hash for r in recs}
        studies = [s for s in self.studies if kept & set(s.hashes)]
        fails = [f for f in self.failure_list if selects(names, str(f.get("experiment")))]
        return Results(self.out, recs, list(self.damaged_list), fails, studies, self.override_keys)

    def _check_selection(
        self, names: list[str] | None, preset: str | None, want: Mapping[str, Any], where: str = "select"
    ) -> None:
        """:meth:`select`'s filters must name something that exists: a typo is one :class:`UserError` (a
        ``ValueError``) naming it and what is allowed, never a silently empty selection."""
        from ssldyn.errors import UserError

        if preset is not None and preset not in PRESETS:
            raise UserError(f"{where}: preset {preset!r}: allowed values are {', '.join(PRESETS)}")
        known = _known_names() | {r.experiment for r in self.records}
        for n in names or []:
            if n not in known and not any(n == k.split(".")[0] for k in known):
                import difflib

                near = difflib.get_close_matches(n, sorted(known), n=3, cutoff=0.6)
                hint = f"; did you mean {', '.join(near)}?" if near else " (an experiment name or a paper)"
                raise UserError(f"{where}: unknown experiment {n!r}{hint}")
        scope = [r for r in self.records if selects(names, r.experiment)]
        for key in want:
            if scope and not any(_has_key(r.config, key) for r in scope):
                have = sorted({k for r in scope for k, _ in flatten(r.config)})
                import difflib

                near = difflib.get_close_matches(key, have, n=3, cutoff=0.6)
                hint = f"did you mean {', '.join(near)}?" if near else f"config keys: {', '.join(have[:20])}"
                raise UserError(f"{where}: config key {key!r} is in none of the selected runs' configs; {hint}")

    def study(self, study_id: str) -> Study:
        """The study with id ``study_id``.

        Raises:
            UserError: (a ``ValueError``) naming the ids there are, when none has that id.
        """
        from ssldyn.errors import UserError

        for s in self.studies:
            if s.id == study_id:
                return s
        raise UserError(
            f"study {study_id!r}: not in this selection; have {', '.join(s.id for s in self.studies) or 'none'}"
        )

    def __len__(self) -> int:
        return len(self.records)

    def __repr__(self) -> str:
        return (f"Results({str(self.out)!r}: {len(self.records)} runs, {len(self.studies)} studies, "
                f"{len(self.damaged_list)} damaged, {len(self.failure_list)} failed)")  # fmt: skip


def load(out: str | Path = "ssldyn-runs", experiment: str | Sequence[str] | None = None) -> Results:
    """Every finished run under ``out`` (optionally only ``experiment``: a name, a paper or a list).

    Damaged runs are listed in ``.damaged`` (path and error), never raised; runs that failed
    are in ``.failures``; sweeps are in ``.studies``.

    Raises:
        UserError: (a ``ValueError``) when ``out`` is not a directory, or ``experiment`` names neither a
            registered experiment, a paper nor one in the store — a typo never reads as "no runs".
    """
    from ssldyn.errors import UserError
    from ssldyn.lab.store import RunStore
    from ssldyn.lab.study import infer_studies, read_studies

    out = Path(out)
    if not out.is_dir():
        what = "is not a directory" if out.exists() else "does not exist"
        raise UserError(f"load: run store {str(out)!r} {what} (the --out folder of ssldyn run / reproduce)")
    store = RunStore(out)
    damaged: list[tuple[str, str]] = []
    try:
        finished = store.finished()
    except Exception as e:  # a run removed while listing; report it, keep going
        finished = []
        damaged.append((str(out), f"{type(e).__name__}: {e}"))
    names = _names(experiment)
    records = []
    for run in finished:
        if not selects(names, run.path.parent.name):
            continue
        try:
            records.append(read_run(run))
        except _READ_ERRORS as e:
            damaged.append((str(run.path), f"{type(e).__name__}: {e}"))
    listed = getattr(store, "damaged", None)  # the store may know damaged runs itself (checksums)
    if callable(listed):
        try:
            for d in cast(Iterable[Any], listed()):
                if isinstance(d, tuple):  # RunStore.damaged(): (run directory, reason)
                    p, err = str(d[0]), f"damaged: {d[1]}"
                else:
                    p = str(getattr(d, "path", d.get("path") if isinstance(d, Mapping) else d))
                    err = str(getattr(d, "error", d.get("error", "damaged") if isinstance(d, Mapping) else "damaged"))
                exp_name = Path(p).parent.name
                if not selects(names, exp_name):
                    continue
                if all(p != q for q, _ in damaged):
                    damaged.append((p, err))
        except Exception as e:
            damaged.append((str(out), f"listing damaged runs: {type(e).__name__}: {e}"))
    try:
        failures = [f for f in store.failures() if selects(names, str(f.get("experiment")))]
    except Exception as e:
        failures = []
        damaged.append((str(out), f"listing failed runs: {type(e).__name__}: {e}"))
    res = Results(out, records, damaged, failures)
    res._check_selection(names, None, {}, where="load")  # an unknown experiment or paper: one error
    stored, bad = read_studies(out, names)
    damaged.extend(bad)
    res.studies = stored + infer_studies(res.records, stored)
    return res
