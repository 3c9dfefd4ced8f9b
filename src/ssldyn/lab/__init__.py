"""The lab: finds the experiments and runs them — run store, executors, report, CLI.

It re-exports the experiment contract (:mod:`ssldyn.contract`: ``Experiment``, ``register``,
``ClaimSpec``, ...) next to its own entry points, so ``from ssldyn.lab import run_experiment,
ClaimSpec`` works. The names load on first use (PEP 562), so that ``import ssldyn.lab.cli``
(``ssldyn --help``, ``ssldyn list``, ``ssldyn show``) does not import torch, pandas or the
experiment modules.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import ssldyn.contract as contract
from ssldyn._lazy import lazy_face
from ssldyn.errors import UserError  # a root module of its own: light, loaded at once

# public name -> the module that defines it
EXPORTS = {
    **contract.EXPORTS,
    "all_experiments": "ssldyn.lab.registry",
    "get_experiment": "ssldyn.lab.registry",
    "run_experiment": "ssldyn.lab.api",
}
__all__ = ["UserError", "all_experiments", "get_experiment", "run_experiment"]
__all__ += contract.__all__

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs
    from ssldyn.contract import *  # noqa: F403
    from ssldyn.lab.api import run_experiment
    from ssldyn.lab.registry import all_experiments, get_experiment

__getattr__, __dir__ = lazy_face(__name__, EXPORTS, __all__)
