"""Every third-party import is declared in pyproject.toml, for the extra it belongs to.

A green CI once hid ``ModuleNotFoundError: No module named 'click'`` on a fresh machine:
``ssldyn.lab.cli`` imported click, which was not declared (typer ≥ 0.26 no longer depends on
it) and only present because the ``distributed`` extra's Ray pulls it in. This test walks
the source (AST, so function-level and optional imports count too) and maps each imported
top-level module to its distribution with ``importlib.metadata.packages_distributions()``.

Rules:
- ``src/ssldyn``: an import at module level needs a core dependency (``[project]
  dependencies``); an import inside a function, a ``try`` or an ``if`` may also come from a
  feature extra (e.g. ``ray`` from ``distributed``), never from the ``test``/``dev`` extras.
- ``tests`` and ``benchmarks``: anything declared (core, any extra).
- ``if TYPE_CHECKING:`` blocks are not run and are ignored.
"""

from __future__ import annotations

import ast
import importlib.metadata as md
import re
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")  # Python >= 3.11

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "ssldyn"
TOOL_EXTRAS = {"test", "dev"}  # never needed at run time


@dataclass(frozen=True)
class Import:
    module: str  # top-level name, e.g. "sklearn"
    file: str
    line: int
    lazy: bool  # inside a function, try, if or with: not needed to import the module


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_name(req: str) -> str:
    m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", req)
    assert m, f"cannot parse requirement {req!r}"
    return _normalise(m.group(1))


def declared() -> tuple[set[str], dict[str, set[str]]]:
    """(core distributions, {extra: distributions}) from pyproject.toml; self-references expanded."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    core = {_requirement_name(r) for r in project.get("dependencies", [])}
    extras = {
        extra: {_requirement_name(r) for r in reqs} for extra, reqs in project.get("optional-dependencies", {}).items()
    }
    me = _normalise(project["name"])
    for extra, names in extras.items():  # "ssldyn[test]" inside an extra
        for req in project["optional-dependencies"][extra]:
            m = re.match(rf"\s*{re.escape(project['name'])}\s*\[([^\]]+)\]", req)
            if m:
                for other in m.group(1).split(","):
                    names |= extras.get(other.strip(), set())
        names.discard(me)
    return core, extras


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _is_import_call(node: ast.AST) -> bool:
    """``importlib.import_module("x")`` / ``__import__("x")`` with a constant name."""
    if not isinstance(node, ast.Call) or not node.args:
        return False
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    arg = node.args[0]
    return name in ("import_module", "__import__") and isinstance(arg, ast.Constant) and isinstance(arg.value, str)


def imports_of(path: Path) -> list[Import]:
    """Absolute imports of a file (``import x``, ``from x import y``, ``importlib.import_module("x")``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    rel = str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)
    found: list[Import] = []

    def visit(node: ast.AST, lazy: bool) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                visit(child, lazy)
            return
        if isinstance(node, ast.Import):
            found.extend(Import(a.name.split(".")[0], rel, node.lineno, lazy) for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append(Import(node.module.split(".")[0], rel, node.lineno, lazy))
        elif _is_import_call(node):
            found.append(Import(node.args[0].value.split(".")[0], rel, node.lineno, True))
        # a function body runs later, a try/if block maybe never; a class body runs at import time
        inner = lazy or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.Try, ast.If))
        for child in ast.iter_child_nodes(node):
            visit(child, inner)

    for stmt in tree.body:
        visit(stmt, False)
    return found


FIRST_PARTY = {"ssldyn", "tests", "benchmarks", "__future__", "__main__"}


def third_party(imports: list[Import]) -> list[Import]:
    local = {p.stem for p in ROOT.glob("benchmarks/*.py")}
    return [i for i in imports if i.module not in sys.stdlib_module_names and i.module not in FIRST_PARTY | local]


@lru_cache(maxsize=1)
def _packages_distributions() -> dict[str, list[str]]:
    return md.packages_distributions()


def distributions(module: str) -> set[str]:
    """The distributions providing a top-level module; its own name when it is not installed."""
    found = _packages_distributions().get(module)
    return {_normalise(d) for d in found} if found else {_normalise(module)}


def _files(*dirs: str) -> list[Path]:
    return sorted(p for d in dirs for p in (ROOT / d).rglob("*.py") if "__pycache__" not in p.parts)


def _problems(files: list[Path], allowed_eager: set[str], allowed_lazy: set[str]) -> list[str]:
    out = []
    for path in files:
        for imp in third_party(imports_of(path)):
            dists = distributions(imp.module)
            allowed = allowed_lazy if imp.lazy else allowed_eager
            if not dists & allowed:
                where = "in a function / optional block" if imp.lazy else "at module level"
                out.append(f"{imp.file}:{imp.line}: {imp.module!r} ({', '.join(sorted(dists))}) imported {where}")
    return out


def test_source_imports_are_core_or_feature_extra_dependencies():
    core, extras = declared()
    features = set().union(*(v for k, v in extras.items() if k not in TOOL_EXTRAS))
    problems = _problems(_files("src/ssldyn"), core, core | features)
    assert not problems, (
        "undeclared imports (module-level imports need [project] dependencies; lazy ones may use a "
        "feature extra such as 'distributed'):\n" + "\n".join(problems)
    )


def test_test_and_benchmark_imports_are_declared():
    core, extras = declared()
    everything = core.union(*extras.values())
    problems = _problems(_files("tests", "benchmarks"), everything, everything)
    assert not problems, "undeclared imports in tests/benchmarks:\n" + "\n".join(problems)


def test_the_walker_sees_function_level_and_optional_imports(tmp_path):
    """The AST walk itself: eager vs lazy, TYPE_CHECKING ignored, import_module strings seen."""
    f = tmp_path / "probe.py"
    f.write_text(
        "import os\nimport numpy as np\nfrom typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    import pandas\n"
        "try:\n    import ray\nexcept ImportError:\n    ray = None\n"
        "class A:\n    import scipy\n    def f(self):\n        import click\n"
        "def g():\n    import importlib\n    return importlib.import_module('kornia.augmentation')\n"
    )
    got = {(i.module, i.lazy) for i in third_party(imports_of(f))}
    assert got == {("numpy", False), ("ray", True), ("scipy", False), ("click", True), ("kornia", True)}


def test_an_undeclared_import_fails(tmp_path):
    """The check flags click imported by the CLI, as ``ssldyn.lab.cli`` did (the fresh-machine bug)."""
    f = tmp_path / "cli.py"
    f.write_text("import click\nimport typer\n\n\ndef later():\n    import ray\n")
    core, extras = declared()
    features = set().union(*(v for k, v in extras.items() if k not in TOOL_EXTRAS))
    problems = _problems([f], core, core | features)
    assert len(problems) == 1 and "'click'" in problems[0] and "module level" in problems[0], problems


def test_ray_is_only_a_lazy_import_from_the_distributed_extra():
    core, extras = declared()
    assert "ray" not in core and "ray" in extras["distributed"]
    eager = [i for p in _files("src/ssldyn") for i in imports_of(p) if i.module == "ray" and not i.lazy]
    assert not eager, eager
