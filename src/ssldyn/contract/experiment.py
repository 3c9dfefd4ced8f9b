"""The experiment contract: every figure/table/result of the papers under ``<paper>.<result>``.

An experiment is a subclass of :class:`Experiment` decorated with :func:`register`; it
declares a config, its claims, and how one seed is run and measured::

    class Fig3Config(ExperimentConfig):
        tau: PositiveFloat = 0.5           # paper setting (cite section)

    @register
    class Fig3(Experiment):
        name = "variational.fig3"
        paper = "variational"
        figure = "Fig. 3, Remark 3.1"
        description = "NT-Xent of K-point measures on S^1"
        Config = Fig3Config
        quick = {"n": 60}                  # overrides for --quick
        est_seconds = (5, 60)              # (quick, full) on a 2-core CPU
        claims = (
            ClaimSpec("loss-decreases", "The loss decreases with K.", "Fig. 3, Remark 3.1", kind="paper",
                      reading="drop L(1) - L(K_max) relative to L(1)", relation=gt(0.0),
                      basis="relation: 'decreases' means a positive drop"),
        )

        def run(self, cfg: Fig3Config, ctx: Context) -> Result: ...         # one seed (ctx.seed)
        def measure(self, cfg: Fig3Config, result: Result) -> dict: ...    # {claim id: number}
        def plots(self, cfg: Fig3Config, result: Result, fig_dir: Path) -> list[Path]: ...

The lab runs every seed of the run (``--seeds``), measures each claim per seed and
evaluates it over seeds (:func:`ssldyn.contract.claims.evaluate`).

This module is the contract alone: it imports no experiment. The lab finds the experiments
(:func:`ssldyn.lab.registry.load_all` imports every module under :mod:`ssldyn.experiments` and
those named in ``SSLDYN_PLUGINS``), and each module registers its own through :func:`register`.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from ssldyn.contract.claims import ClaimSpec, Robustness
from ssldyn.contract.config import ExperimentConfig
from ssldyn.contract.context import Context
from ssldyn.contract.result import Result

__all__ = ["PAPERS", "Experiment", "register", "registered"]

PAPERS = {
    "variational": "Calder & Lee — Understanding Contrastive Learning through Variational Analysis "
    "and Neural Network Optimization Perspectives",
    "nonlinearity": "Tian — Understanding the Role of Nonlinearity in Training Dynamics of Contrastive Learning",
    "grassmann": "Esser, Mukherjee, Ghoshdastidar — Representation Learning Dynamics of Self-Supervised Models",
}

_REGISTRY: dict[str, type[Experiment]] = {}


class Experiment:
    """Base class: a config, a run, declared claims measured per seed, and the paper's figures.

    Class attributes an experiment declares:
        name, paper, figure, description, Config, quick, version: as above.
        est_seconds: ``(quick, paper scale)`` seconds of the whole run (all its seeds) in one
            single-thread worker of the 2-core CPU — for an experiment that ``reuses`` another,
            with the other's cached results in place, as in ``reproduce``. ``--jobs N`` starts
            runs by these (longest chain of reusers first) and ``--dry-run`` adds them up.
        claims: the :class:`~ssldyn.contract.claims.ClaimSpec` records it checks (each measured per
            seed by :meth:`measure`; a ``pooled`` rule by :meth:`measure_pooled`).
        seeded: ``False`` for a deterministic computation (closed forms, fixed grids): one
            evaluation, whatever ``--seeds`` asks.
        batch_seeds: ``True`` when :meth:`run` computes every seed of ``ctx.seeds`` at once (seeds
            as an ensemble axis) and returns one :class:`Result` per seed; otherwise the lab calls
            :meth:`run` once per seed with ``ctx.seed`` set.
        threads: torch intra-op threads on the CPU while :meth:`run` runs (``1`` for experiments
            made of many small tensor ops; ``None`` leaves the process setting).
        reuses: experiments whose cached sub-results this one reads (``ctx.cached`` entries with
            the same keys, e.g. the shared token grid of nonlinearity Fig. 4 and Fig. 10): when
            both are computed in one batch of parallel runs (``--jobs``), this one starts after
            them, so the shared entries are computed once.
        paper_seeds: seeds of the paper-scale run when the paper states its own number of
            repetitions (e.g. "each setting is repeated 3 times"), with ``paper_seeds_reason``
            quoting where; ``None``: the lab's default (5).
        robustness: :class:`~ssldyn.contract.claims.Robustness` maps of this experiment's headline
            claims — the protocol knobs the paper leaves open and the values to try
            (``ssldyn robustness EXP`` runs them as a study).
        captions: ``{figure file name or fnmatch pattern: caption}`` for every file :meth:`plots`
            writes. A caption starts with the paper location the figure reproduces ("Fig. 5
            (Conj. 2): ...") or with "Extra (not a paper figure): ...", and says what is plotted and
            how it differs from the paper's figure. The lab stores them with the run (``meta.json``)
            and the report prints them under each image.
        captions_file: a Markdown captions file (format: :mod:`ssldyn.contract.captions`) whose
            section named after the experiment adds captions (``captions`` in code win); the built-in
            papers keep theirs in ``experiments/<paper>/captions.md``.
    """

    name: ClassVar[str]
    paper: ClassVar[str]
    figure: ClassVar[str]
    description: ClassVar[str]
    Config: ClassVar[type[ExperimentConfig]]
    quick: ClassVar[dict[str, Any]] = {}
    est_seconds: ClassVar[tuple[float, float]] = (30.0, 300.0)
    version: ClassVar[str] = "1"  # bump when the experiment's code changes its results
    claims: ClassVar[tuple[ClaimSpec, ...]] = ()
    seeded: ClassVar[bool] = True
    batch_seeds: ClassVar[bool] = False
    threads: ClassVar[int | None] = None
    reuses: ClassVar[tuple[str, ...]] = ()
    paper_seeds: ClassVar[int | None] = None
    paper_seeds_reason: ClassVar[str] = ""
    robustness: ClassVar[tuple[Robustness, ...]] = ()
    captions: ClassVar[Mapping[str, str]] = {}
    captions_file: ClassVar[Path | None] = None

    def run(self, cfg: Any, ctx: Context) -> Result | list[Result]:  # pragma: no cover - abstract
        raise NotImplementedError

    def measure(self, cfg: Any, result: Result) -> Mapping[str, Any]:
        """One measurement per declared claim (``{claim id: value or Measured}``) for one seed's result."""
        return {}

    def measure_pooled(self, cfg: Any, results: list[Result]) -> Mapping[str, Any]:
        """Measurements of the claims whose rule is ``pooled``, from all seeds' results together."""
        return {}

    def plots(self, cfg: Any, result: Result, fig_dir: Path) -> list[Path]:
        """The paper's figure(s) from the first seed's result (``result.seed_results`` holds all seeds)."""
        return []

    @classmethod
    def figure_captions(cls) -> dict[str, str]:
        """Every declared caption: this experiment's section of ``captions_file``, then ``captions`` (they win)."""
        from ssldyn.contract.captions import read_captions

        from_file = {} if cls.captions_file is None else read_captions(cls.captions_file).get(cls.name, {})
        return {**from_file, **cls.captions}

    @classmethod
    def caption(cls, filename: str) -> str | None:
        """The declared caption of figure file ``filename`` (an exact key first, then the patterns in order)."""
        caps = cls.figure_captions()
        if filename in caps:
            return caps[filename]
        return next((c for key, c in caps.items() if fnmatch.fnmatchcase(filename, key)), None)

    # -- configs ----------------------------------------------------------------------
    @classmethod
    def default_config(cls) -> ExperimentConfig:
        return cls.Config()

    @classmethod
    def quick_config(cls) -> ExperimentConfig:
        from ssldyn.contract.config import build_config

        return build_config(cls.Config, cls.quick)


def register(cls: type[Experiment]) -> type[Experiment]:
    """Class decorator adding an experiment to the registry (name must be ``<paper>.<result>``)."""
    paper, dot, rest = cls.name.partition(".")
    if not re.fullmatch(r"[a-z0-9][a-z0-9_-]*\.[a-z0-9][a-z0-9._-]*", cls.name) or paper not in PAPERS:
        raise ValueError(
            f"experiment name {cls.name!r} must be '<paper>.<result>' (lowercase letters, digits, '-', '_', '.') "
            f"with paper in {sorted(PAPERS)}"
        )
    if cls.paper != paper:
        raise ValueError(f"experiment {cls.name!r} declares paper {cls.paper!r}")
    if cls.name in _REGISTRY and _REGISTRY[cls.name] is not cls:
        raise ValueError(f"experiment {cls.name!r} registered twice")
    if not isinstance(cls.claims, tuple) or not all(isinstance(s, ClaimSpec) for s in cls.claims):
        raise ValueError(
            f"experiment {cls.name!r}: claims must be a tuple of ClaimSpec records (ssldyn.contract.ClaimSpec)"
        )
    ids = [s.id for s in cls.claims]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    if dup:
        raise ValueError(f"experiment {cls.name!r}: claim id {dup[0]!r} declared twice")
    if not isinstance(cls.reuses, tuple) or not all(isinstance(r, str) and r != cls.name for r in cls.reuses):
        raise ValueError(f"experiment {cls.name!r}: reuses must be a tuple of other experiments' names")
    if cls.paper_seeds is not None and (not isinstance(cls.paper_seeds, int) or isinstance(cls.paper_seeds, bool)
                                        or cls.paper_seeds < 1
                                        or not cls.paper_seeds_reason.strip()):  # fmt: skip
        raise ValueError(f"experiment {cls.name!r}: paper_seeds must be an int >= 1 with a paper_seeds_reason")
    if not isinstance(cls.robustness, tuple) or not all(isinstance(r, Robustness) for r in cls.robustness):
        raise ValueError(f"experiment {cls.name!r}: robustness must be a tuple of Robustness records")
    for rb in cls.robustness:
        unknown = [c for c in rb.claims if c not in ids]
        if unknown:
            raise ValueError(f"experiment {cls.name!r}: robustness map names undeclared claims {unknown}")
        bad = [k for k in rb.knobs if k not in cls.Config.model_fields]
        if bad:
            raise ValueError(f"experiment {cls.name!r}: robustness knobs {bad} are not config keys")
    cls.quick_config()  # the quick preset must validate
    _REGISTRY[cls.name] = cls
    return cls


def registered() -> list[type[Experiment]]:
    """The experiments registered so far in this process, without importing any module.

    Used by :mod:`ssldyn.lab.manifest` so that ``ssldyn list``/``show`` see your own
    experiments (``SSLDYN_PLUGINS``) next to the committed manifest of the shipped ones.
    """
    return list(_REGISTRY.values())
