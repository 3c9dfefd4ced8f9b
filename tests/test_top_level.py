"""The top-level ``ssldyn`` namespace: every name in ``__all__`` resolves to the object its defining
module exports, and importing ``ssldyn`` alone loads neither torch nor the lab."""

import importlib
import subprocess
import sys

import pytest

import ssldyn


@pytest.mark.parametrize("name", sorted(ssldyn._EXPORTS))
def test_every_entry_point_is_the_defining_modules_object(name):
    module = importlib.import_module(ssldyn._EXPORTS[name])
    assert getattr(ssldyn, name) is getattr(module, name)
    assert name in module.__all__  # the defining module exports it too


def test_all_lists_exactly_the_entry_points_and_subpackages():
    assert set(ssldyn.__all__) == {"__version__", *ssldyn._EXPORTS, *ssldyn._SUBPACKAGES}


def test_subpackages_and_dir():
    assert ssldyn.dynamics is importlib.import_module("ssldyn.dynamics")
    assert set(ssldyn.__all__) <= set(dir(ssldyn))
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        ssldyn.nope  # noqa: B018


def test_import_ssldyn_is_cold():
    code = "import sys, ssldyn; print(sorted(m for m in ('torch', 'pandas', 'ssldyn.lab') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
