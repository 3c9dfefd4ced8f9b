"""The machinery around experiments: registry, configs, claims, run store, runner, report, CLI.

The public names below are loaded on first use (PEP 562), so that ``import ssldyn.lab.cli``
(``ssldyn --help``, ``ssldyn list``, ``ssldyn show``) does not import torch, pandas or the
experiment modules. ``from ssldyn.lab import run_experiment`` works as usual.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ssldyn.errors import UserError  # a root module of its own: light, loaded at once

_CLAIMS = ("MEAN_AND_80", "Claim", "ClaimSpec", "Erratum", "Measured", "Relation", "Rule", "between",
           "equals", "every_seed", "ge", "gt", "is_true", "le", "lt", "pooled", "whole_interval")  # fmt: skip

# public name -> the submodule that defines it
_EXPORTS = {
    **dict.fromkeys(_CLAIMS, "claims"),
    "ExperimentConfig": "config",
    "Context": "context",
    "seed_everything": "context",
    "Experiment": "registry",
    "all_experiments": "registry",
    "get_experiment": "registry",
    "register": "registry",
    "Result": "result",
    "run_experiment": "api",
}

__all__ = [
    "MEAN_AND_80",
    "Claim",
    "ClaimSpec",
    "Erratum",
    "Measured",
    "Relation",
    "Rule",
    "between",
    "equals",
    "every_seed",
    "ge",
    "gt",
    "is_true",
    "le",
    "lt",
    "pooled",
    "whole_interval",
    "ExperimentConfig",
    "Context",
    "seed_everything",
    "UserError",
    "Experiment",
    "all_experiments",
    "get_experiment",
    "register",
    "Result",
    "run_experiment",
]

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs
    from ssldyn.lab.api import run_experiment
    from ssldyn.lab.claims import (
        MEAN_AND_80,
        Claim,
        ClaimSpec,
        Erratum,
        Measured,
        Relation,
        Rule,
        between,
        equals,
        every_seed,
        ge,
        gt,
        is_true,
        le,
        lt,
        pooled,
        whole_interval,
    )
    from ssldyn.lab.config import ExperimentConfig
    from ssldyn.lab.context import Context, seed_everything
    from ssldyn.lab.registry import Experiment, all_experiments, get_experiment, register
    from ssldyn.lab.result import Result


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'ssldyn.lab' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"ssldyn.lab.{module}"), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
