"""Layers point one way and the import graph has no circle (docs/architecture.md, "Layers").

Every ``import`` statement of the package is read with ``ast`` — module-level and inside functions
(a lazy import is still an arrow) — and resolved to a module of ``src/ssldyn``:

* ``data``, ``models``, ``objectives``, ``kernels``, ``probes``, ``viz`` import none of ``dynamics``,
  ``experiments``, ``lab`` or ``ssldyn.results``;
* ``dynamics`` imports none of ``contract``, ``experiments``, ``lab`` or ``ssldyn.results``;
* ``contract`` (what an experiment declares and is given) imports nothing above it: no
  ``dynamics``, experiment, ``lab`` or ``ssldyn.results`` — nor the data, models and the rest;
* the experiments import none of ``lab`` (they follow ``contract``) or ``ssldyn.results``;
* ``lab`` sits above the experiments (it finds them by name: :func:`ssldyn.lab.registry.load_all`),
  but does not import ``ssldyn.results`` (the public path of :mod:`ssldyn.lab.results`, above the lab);
* no module imports the package root ``ssldyn`` (its ``__init__`` exposes entry points lazily;
  the version lives in ``ssldyn._version``);
* ``ssldyn.errors`` and ``ssldyn._version`` import nothing of the package;
* no two modules reach each other through imports (no strongly connected component > 1), on the
  real graph: package ``__init__`` arrows to their own modules included, the root included.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
LOWER = {"data", "models", "objectives", "kernels", "probes", "viz"}
_ALL = {"data", "models", "objectives", "kernels", "probes", "viz", "dynamics", "contract", "experiments", "lab",
        "results", "root"}  # fmt: skip
FORBIDDEN = {
    **dict.fromkeys(LOWER, {"dynamics", "contract", "experiments", "lab", "results", "root"}),
    "dynamics": {"contract", "experiments", "lab", "results", "root"},
    "contract": _ALL - {"contract"},
    "experiments": {"lab", "results", "root"},
    "lab": {"results", "root"},
    "errors": _ALL,
    "_version": _ALL,
    "memory": _ALL,  # machine memory, usable by every layer: imports nothing of the package
    "files": _ALL,  # atomic writes, usable by every layer: imports nothing of the package
    "checks": _ALL,  # scalar argument checks, usable by every layer: imports nothing of the package
    "streams": _ALL,  # derived seeds, usable by every layer: imports only ssldyn.checks
    "_lazy": _ALL,  # the lazy package faces: imports nothing of the package
}


def _modules() -> dict[str, Path]:
    out = {}
    for f in (SRC / "ssldyn").rglob("*.py"):
        parts = f.relative_to(SRC).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = f
    return out


MODULES = _modules()


def _targets(module: str, node: ast.AST) -> list[str]:
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        assert isinstance(node, ast.ImportFrom)
        if node.level:
            pkg = module if MODULES[module].name == "__init__.py" else module.rsplit(".", 1)[0]
            parts = pkg.split(".")
            base = ".".join(parts[: len(parts) - node.level + 1])
            target = base + ("." + node.module if node.module else "")
        else:
            target = node.module or ""
        names = [target] + [f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in MODULES]
    out = []
    for t in names:
        if not t.startswith("ssldyn"):
            continue
        while t not in MODULES and "." in t:
            t = t.rsplit(".", 1)[0]
        if t in MODULES and t != module:
            out.append(t)
    return out


def _graph() -> dict[str, set[str]]:
    graph = {}
    for name, path in MODULES.items():
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                deps.update(_targets(name, node))
        graph[name] = deps
    return graph


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "root"


def test_layers_point_one_way():
    graph = _graph()
    upward = sorted((a, b) for a, deps in graph.items() for b in deps if _layer(b) in FORBIDDEN.get(_layer(a), set()))
    assert not upward, "imports against the layering:\n" + "\n".join(f"  {a} -> {b}" for a, b in upward)


def _strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:  # Tarjan's algorithm
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_no_import_circles():
    """The real graph, parent -> child arrows of package ``__init__`` files and the root included."""
    graph = _graph()
    assert "ssldyn" in graph and _strongly_connected(graph) == []


def test_nothing_imports_the_package_root():
    graph = _graph()
    into_root = sorted(a for a, deps in graph.items() if "ssldyn" in deps)
    assert not into_root, f"modules importing the package root: {into_root}"


def test_the_checks_can_fail():
    """The detector itself: an upward arrow and a two-module circle are found."""
    assert _layer("ssldyn.data.mnist") == "data" and "lab" in FORBIDDEN["data"]
    assert _strongly_connected({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]
    fake = ast.parse("from ssldyn.lab.store import RunStore\nimport ssldyn.dynamics.manifold")
    targets = [t for node in ast.walk(fake) if isinstance(node, (ast.Import, ast.ImportFrom))
               for t in _targets("ssldyn.data.mnist", node)]  # fmt: skip
    assert {_layer(t) for t in targets} == {"lab", "dynamics"}
