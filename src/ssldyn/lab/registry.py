"""Finding the experiments: the lab's side of the registry.

The contract an experiment follows (:class:`~ssldyn.contract.experiment.Experiment`,
:func:`~ssldyn.contract.experiment.register`) sits below the experiments; this module sits above
them and imports them. :func:`load_all` imports every module under :mod:`ssldyn.experiments`, so
adding a module is enough to register its experiments. Your own experiments (outside the package)
are registered by listing their modules in the environment variable ``SSLDYN_PLUGINS``
(comma-separated module names, :mod:`ssldyn.lab.plugins`); Ray workers inherit it.
"""

from __future__ import annotations

import importlib
import pkgutil

from ssldyn.contract.config import echo, unknown_experiment
from ssldyn.contract.experiment import PAPERS, Experiment, registered
from ssldyn.errors import UserError
from ssldyn.lab.plugins import load_plugins

__all__ = ["load_all", "all_experiments", "get_experiment"]

_LOADED = False


def load_all() -> None:
    """Import every module under :mod:`ssldyn.experiments` and ``SSLDYN_PLUGINS`` (idempotent)."""
    global _LOADED
    if _LOADED:
        return
    pkg = importlib.import_module("ssldyn.experiments")
    for mod in pkgutil.walk_packages(pkg.__path__, prefix="ssldyn.experiments."):
        importlib.import_module(mod.name)
    load_plugins()
    _LOADED = True


def all_experiments(paper: str | None = None) -> list[type[Experiment]]:
    """Every registered experiment (of one paper), in the papers' order, then by name."""
    load_all()
    if paper is not None and paper not in PAPERS:
        raise UserError(f"unknown paper {echo(paper)}; allowed: {', '.join(sorted(PAPERS))}")
    order = list(PAPERS)
    exps = [e for e in registered() if paper is None or e.paper == paper]
    return sorted(exps, key=lambda e: (order.index(e.paper), e.name))


def get_experiment(name: str) -> type[Experiment]:
    """Look up by full name; unknown names raise a UserError suggesting the closest ones."""
    load_all()
    by_name = {e.name: e for e in registered()}
    if name in by_name:
        return by_name[name]
    raise unknown_experiment(name, by_name)
