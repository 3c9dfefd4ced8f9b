"""The machinery around experiments: registry, configs, run store, runner, report, CLI."""

from ssldyn.lab.claims import Claim, check
from ssldyn.lab.config import ExperimentConfig
from ssldyn.lab.context import Context, seed_everything
from ssldyn.lab.errors import UserError
from ssldyn.lab.registry import Experiment, all_experiments, get_experiment, register
from ssldyn.lab.result import Result
from ssldyn.lab.runner import run_experiment

__all__ = [
    "Claim",
    "check",
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
