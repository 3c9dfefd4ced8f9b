"""Package faces that load their public names on first use (PEP 562).

``import ssldyn`` or ``import ssldyn.lab.cli`` must not import torch, pandas or the experiments
(``ssldyn --help`` answers at once), so a package's ``__init__`` names where each public name
lives and :func:`lazy_face` makes the module-level ``__getattr__`` / ``__dir__`` that import it
when it is first used.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any


def lazy_face(package: str, exports: Mapping[str, str],
              public: Sequence[str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:  # fmt: skip
    """``(__getattr__, __dir__)`` of ``package``, whose name ``n`` lives in the module ``exports[n]``.

    ``exports`` maps a public name to the full path of the module defining it; a name whose
    module is ``f"{package}.{n}"`` is that submodule itself. ``public`` is the package's
    ``__all__``. A loaded name is stored in the package's namespace, so later look-ups are plain.
    """

    def __getattr__(name: str) -> Any:
        where = exports.get(name)
        if where is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module = importlib.import_module(where)
        value = module if where == f"{package}.{name}" else getattr(module, name)
        vars(sys.modules[package])[name] = value  # later look-ups skip this function
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *public})

    return __getattr__, __dir__
