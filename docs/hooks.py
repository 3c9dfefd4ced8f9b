"""mkdocs hook: one API page per subpackage, generated from the docstrings of its public modules.

``api/<package>.md`` gets the package docstring and one ``::: ssldyn.<package>.<module>`` block
(mkdocstrings) per public module (names not starting with ``_``), found by walking ``src/``, so a
new module appears in the API reference without editing the docs. ``api/errors.md`` documents
the root module ``ssldyn.errors``.
"""

from __future__ import annotations

import pkgutil
from pathlib import Path

from mkdocs.structure.files import File

SRC = Path(__file__).resolve().parent.parent / "src"
PACKAGES = (
    "data",
    "models",
    "objectives",
    "kernels",
    "dynamics",
    "probes",
    "viz",
    "lab",
    "experiments/variational",
    "experiments/grassmann",
    "experiments/nonlinearity",
)
ROOT_MODULES = ("errors", "results")  # public modules at the package root
OPTIONS = "    options:\n      show_root_heading: true\n"


def public_modules(package: str) -> list[str]:
    """Dotted names of the public modules of ``ssldyn.<package>`` (sorted)."""
    path = SRC / "ssldyn" / package
    dotted = package.replace("/", ".")
    return sorted(f"ssldyn.{dotted}.{m.name}" for m in pkgutil.iter_modules([str(path)]) if not m.name.startswith("_"))


def page(package: str) -> str:
    dotted = package.replace("/", ".")
    lines = [
        f"# ssldyn.{dotted}\n",
        f"::: ssldyn.{dotted}\n    options:\n      members: false\n      show_root_heading: false\n",
    ]
    for mod in public_modules(package):
        lines.append(f"::: {mod}\n{OPTIONS}")
    return "\n".join(lines)


def on_files(files, config):
    for package in PACKAGES:
        files.append(File.generated(config, f"api/{package}.md", content=page(package)))
    for root_module in ROOT_MODULES:
        files.append(
            File.generated(
                config,
                f"api/{root_module}.md",
                content=f"# ssldyn.{root_module}\n\n::: ssldyn.{root_module}\n" + OPTIONS,
            )
        )
    return files
