"""Your own experiments: the modules named in ``SSLDYN_PLUGINS`` (comma-separated), imported so that
they register their experiments. Light (no torch), so that ``ssldyn list`` reads them too; used by
:func:`ssldyn.lab.registry.load_all` and :mod:`ssldyn.lab.manifest`. Ray workers inherit the variable.
"""

from __future__ import annotations

import importlib
import os

from ssldyn.errors import UserError

__all__ = ["load_plugins"]


def load_plugins() -> None:
    """Import every module named in ``SSLDYN_PLUGINS``; one that cannot be imported is a UserError naming it."""
    for name in filter(None, (m.strip() for m in os.environ.get("SSLDYN_PLUGINS", "").split(","))):
        try:
            importlib.import_module(name)
        except ImportError as e:
            raise UserError(f"SSLDYN_PLUGINS: cannot import module {name!r} ({e})") from None
