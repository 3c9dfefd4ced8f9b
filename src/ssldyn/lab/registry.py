"""The experiment registry: every figure/table/result of the papers under ``<paper>.<result>``.

An experiment is a subclass of :class:`Experiment` decorated with :func:`register`::

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

        def run(self, cfg, ctx) -> Result: ...
        def claims(self, cfg, result) -> list[Claim]: ...
        def plots(self, cfg, result, fig_dir) -> list[Path]: ...

Experiment modules live anywhere under :mod:`ssldyn.experiments`; :func:`load_all` imports
them all, so adding a module is enough to register its experiments. Your own experiments
(outside the package) are registered by listing their modules in the environment variable
``SSLDYN_PLUGINS`` (comma-separated module names); Ray workers inherit it.
"""

from __future__ import annotations

import difflib
import importlib
import os
import pkgutil
from pathlib import Path
from typing import Any, ClassVar

from ssldyn.lab.claims import Claim
from ssldyn.lab.config import ExperimentConfig
from ssldyn.lab.context import Context
from ssldyn.lab.errors import UserError
from ssldyn.lab.result import Result

PAPERS = {
    "variational": "Calder & Lee — Understanding Contrastive Learning through Variational Analysis "
    "and Neural Network Optimization Perspectives",
    "nonlinearity": "Tian — Understanding the Role of Nonlinearity in Training Dynamics of Contrastive Learning",
    "grassmann": "Esser, Mukherjee, Ghoshdastidar — Representation Learning Dynamics of Self-Supervised Models",
}

_REGISTRY: dict[str, type[Experiment]] = {}
_LOADED = False


class Experiment:
    """Base class: a config, a run, claims on the result, and the paper's figures."""

    name: ClassVar[str]
    paper: ClassVar[str]
    figure: ClassVar[str]
    description: ClassVar[str]
    Config: ClassVar[type[ExperimentConfig]]
    quick: ClassVar[dict[str, Any]] = {}
    est_seconds: ClassVar[tuple[float, float]] = (30.0, 300.0)
    version: ClassVar[str] = "1"  # bump when the experiment's code changes its results

    def run(self, cfg: Any, ctx: Context) -> Result:  # pragma: no cover - abstract
        raise NotImplementedError

    def claims(self, cfg: Any, result: Result) -> list[Claim]:
        return []

    def plots(self, cfg: Any, result: Result, fig_dir: Path) -> list[Path]:
        return []

    # -- configs ----------------------------------------------------------------------
    @classmethod
    def default_config(cls) -> ExperimentConfig:
        return cls.Config()

    @classmethod
    def quick_config(cls) -> ExperimentConfig:
        from ssldyn.lab.config import build_config

        return build_config(cls.Config, cls.quick)


def register(cls: type[Experiment]) -> type[Experiment]:
    """Class decorator adding an experiment to the registry (name must be ``<paper>.<result>``)."""
    paper, dot, rest = cls.name.partition(".")
    if not dot or not rest or paper not in PAPERS:
        raise ValueError(f"experiment name {cls.name!r} must be '<paper>.<result>' with paper in {sorted(PAPERS)}")
    if cls.paper != paper:
        raise ValueError(f"experiment {cls.name!r} declares paper {cls.paper!r}")
    if cls.name in _REGISTRY and _REGISTRY[cls.name] is not cls:
        raise ValueError(f"experiment {cls.name!r} registered twice")
    cls.quick_config()  # the quick preset must validate
    _REGISTRY[cls.name] = cls
    return cls


def load_all() -> None:
    """Import every module under :mod:`ssldyn.experiments` (idempotent)."""
    global _LOADED
    if _LOADED:
        return
    import ssldyn.experiments as pkg

    for mod in pkgutil.walk_packages(pkg.__path__, prefix="ssldyn.experiments."):
        importlib.import_module(mod.name)
    for name in filter(None, (m.strip() for m in os.environ.get("SSLDYN_PLUGINS", "").split(","))):
        try:
            importlib.import_module(name)
        except ImportError as e:
            raise UserError(f"SSLDYN_PLUGINS: cannot import module {name!r} ({e})") from None
    _LOADED = True


def all_experiments(paper: str | None = None) -> list[type[Experiment]]:
    load_all()
    if paper is not None and paper not in PAPERS:
        raise UserError(f"unknown paper {paper!r}; allowed: {', '.join(sorted(PAPERS))}")
    exps = [e for e in _REGISTRY.values() if paper is None or e.paper == paper]
    order = list(PAPERS)
    return sorted(exps, key=lambda e: (order.index(e.paper), e.name))


def get_experiment(name: str) -> type[Experiment]:
    """Look up by full name; unknown names raise a UserError suggesting the closest ones."""
    load_all()
    if name in _REGISTRY:
        return _REGISTRY[name]
    near = difflib.get_close_matches(name, list(_REGISTRY), n=3, cutoff=0.4)
    hint = f"; did you mean {', '.join(near)}?" if near else ""
    raise UserError(f"unknown experiment {name!r}{hint} (see `ssldyn list`)")


def registered() -> list[type[Experiment]]:
    """The experiments registered so far in this process, without importing any module.

    Used by :mod:`ssldyn.lab.manifest` so that ``ssldyn list``/``show`` see your own
    experiments (``SSLDYN_PLUGINS``) next to the committed manifest of the shipped ones.
    """
    return list(_REGISTRY.values())
