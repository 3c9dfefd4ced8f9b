"""ssldyn: learning dynamics of self-supervised representation learning.

Subpackages follow the pipeline of docs/architecture.md::

    data -> models -> objectives -> dynamics -> probes -> experiments (on the contract) -> lab (runs, report)

``kernels`` holds empirical/closed-form neural tangent kernels and ``viz`` the figures.

The main entry points are importable from the top level; they (and the subpackages) are loaded
on first use (PEP 562), so ``import ssldyn`` does not import torch::

    import ssldyn

    res = ssldyn.run_experiment("grassmann.fig3", quick=True)  # one experiment, claims checked
    runs = ssldyn.load("ssldyn-runs")  # the run store as tables
    out = ssldyn.train_ssl(model, x, objective=info_nce, augment=aug, steps=200, batch_size=256)  # a FlowResult
    K = ssldyn.empirical_ntk(model, None, x)  # the empirical NTK of your model
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ssldyn._lazy import lazy_face
from ssldyn._version import __version__

# public name -> the module that defines it
_EXPORTS = {
    "run_experiment": "ssldyn.lab.api",
    "get_experiment": "ssldyn.lab.registry",
    "all_experiments": "ssldyn.lab.registry",
    "load": "ssldyn.results",
    "Results": "ssldyn.results",
    "UserError": "ssldyn.errors",
    "train_ssl": "ssldyn.dynamics.ssl",
    "FlowResult": "ssldyn.dynamics.trajectory",
    "empirical_ntk": "ssldyn.kernels.ntk",
    "function_space_flow": "ssldyn.dynamics.function_space",
    "power_iteration": "ssldyn.dynamics.alpha_cl",
}
_SUBPACKAGES = ("data", "models", "objectives", "kernels", "dynamics", "probes", "viz", "contract", "lab", "results",
                "errors")  # fmt: skip

__all__ = [
    "__version__",
    "run_experiment",
    "get_experiment",
    "all_experiments",
    "load",
    "Results",
    "UserError",
    "train_ssl",
    "FlowResult",
    "empirical_ntk",
    "function_space_flow",
    "power_iteration",
    "data",
    "models",
    "objectives",
    "kernels",
    "dynamics",
    "probes",
    "viz",
    "contract",
    "lab",
    "results",
    "errors",
]

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs
    from ssldyn import contract, data, dynamics, errors, kernels, lab, models, objectives, probes, results, viz
    from ssldyn.dynamics.alpha_cl import power_iteration
    from ssldyn.dynamics.function_space import function_space_flow
    from ssldyn.dynamics.ssl import train_ssl
    from ssldyn.dynamics.trajectory import FlowResult
    from ssldyn.errors import UserError
    from ssldyn.kernels.ntk import empirical_ntk
    from ssldyn.lab.api import run_experiment
    from ssldyn.lab.registry import all_experiments, get_experiment
    from ssldyn.results import Results, load


__getattr__, __dir__ = lazy_face(__name__, {**_EXPORTS, **{p: f"ssldyn.{p}" for p in _SUBPACKAGES}}, __all__)
