"""The experiment contract: what an experiment declares and what it is given.

An experiment (under :mod:`ssldyn.experiments`, or your own module) is a subclass of
:class:`Experiment` decorated with :func:`register`: an :class:`ExperimentConfig`, the
:class:`ClaimSpec` records of the paper it checks, and ``run(cfg, ctx: Context) -> Result``
plus ``measure``. This package sits below the experiments and imports none of them; the lab
(:mod:`ssldyn.lab`) sits above, finds the experiments and runs them. Names load on first use
(PEP 562), so the command line can read configs without importing torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ssldyn._lazy import lazy_face

_CLAIMS = ("MEAN_AND_80", "Claim", "ClaimSpec", "Erratum", "Measured", "Relation", "Robustness", "Rule", "between",
           "equals", "every_seed", "ge", "gt", "is_true", "le", "lt", "pooled", "whole_interval")  # fmt: skip

# public name -> the module that defines it
EXPORTS = {
    **dict.fromkeys(_CLAIMS, "ssldyn.contract.claims"),
    "ExperimentConfig": "ssldyn.contract.config",
    "Context": "ssldyn.contract.context",
    "seed_everything": "ssldyn.contract.context",
    "PAPERS": "ssldyn.contract.experiment",
    "Experiment": "ssldyn.contract.experiment",
    "register": "ssldyn.contract.experiment",
    "Result": "ssldyn.contract.result",
}
__all__ = [
    "MEAN_AND_80",
    "Claim",
    "ClaimSpec",
    "Erratum",
    "Measured",
    "Relation",
    "Robustness",
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
    "PAPERS",
    "Experiment",
    "register",
    "Result",
]

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs
    from ssldyn.contract.claims import (
        MEAN_AND_80,
        Claim,
        ClaimSpec,
        Erratum,
        Measured,
        Relation,
        Robustness,
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
    from ssldyn.contract.config import ExperimentConfig
    from ssldyn.contract.context import Context, seed_everything
    from ssldyn.contract.experiment import PAPERS, Experiment, register
    from ssldyn.contract.result import Result

__getattr__, __dir__ = lazy_face(__name__, EXPORTS, __all__)
