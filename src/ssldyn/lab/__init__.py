"""The machinery around experiments: registry, configs, claims, run store, runner, report, CLI."""

from ssldyn.errors import UserError
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
    check,
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

__all__ = [
    "Claim",
    "ClaimSpec",
    "Erratum",
    "Measured",
    "Relation",
    "Rule",
    "MEAN_AND_80",
    "between",
    "check",
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
