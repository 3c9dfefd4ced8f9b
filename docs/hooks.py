"""mkdocs hook: the generated pages of the site.

* **API reference** — one page per public module (``api/<package>/<module>.md`` holding one
  ``::: ssldyn.<package>.<module>`` block of mkdocstrings) and one index page per subpackage
  (``api/<package>/index.md``: the package docstring and a table of its modules), found by
  walking ``src/``, so a new module appears in the API reference and the navigation without
  editing the docs. ``api/errors.md`` and ``api/results.md`` document the root modules.
* **Tutorials** — the jupytext scripts of ``tutorials/`` (outside ``docs/``) are added as
  ``tutorials/<name>.py``; the mkdocs-jupyter plugin executes them at build time and renders
  them as notebooks with their outputs and figures. This hook runs before the plugin
  (``event_priority``) so the plugin sees them.
* **Navigation** — the ``API reference`` and ``Experiments`` sections of ``mkdocs.yml``'s nav
  are filled in from the same walk.

The Sphinx roles of the docstrings (``:func:`x```) are turned into mkdocstrings cross-references
by the griffe extension ``docs/griffe_roles.py``.
"""

from __future__ import annotations

import ast
import pkgutil
import re
from pathlib import Path

from mkdocs.plugins import event_priority
from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"
TUTORIALS = ROOT / "tutorials"
PACKAGES = (
    "data",
    "models",
    "objectives",
    "kernels",
    "dynamics",
    "probes",
    "viz",
    "contract",
    "lab",
    "experiments/variational",
    "experiments/nonlinearity",
    "experiments/grassmann",
)
ROOT_MODULES = ("checks", "errors", "files", "memory", "results", "streams")  # public modules at the package root
ROLE = re.compile(r":(?:py:)?(?:func|class|meth|mod|attr|data|exc|obj|const):`([^`]+)`")  # as in griffe_roles.py
OPTIONS = "    options:\n      show_root_heading: true\n      heading_level: 1\n"


def public_modules(package: str) -> list[str]:
    """Dotted names of the public modules of ``ssldyn.<package>`` (sorted)."""
    path = SRC / "ssldyn" / package
    dotted = package.replace("/", ".")
    return sorted(f"ssldyn.{dotted}.{m.name}" for m in pkgutil.iter_modules([str(path)]) if not m.name.startswith("_"))


def summary(module: str) -> str:
    """The first sentence of a module's docstring (read with ``ast``, nothing is imported)."""
    rel = module.split(".")[1:]
    path = SRC / "ssldyn" / Path(*rel)
    path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    first = doc.strip().split("\n\n")[0].replace("\n", " ")
    first = ROLE.sub(
        lambda m: "`" + m.group(1).lstrip("~").rsplit(".", 1)[-1 if m.group(1).startswith("~") else 0] + "`", first
    )
    first = first.replace("|", "\\|")
    return first[:200] + ("…" if len(first) > 200 else "")


def module_uri(module: str) -> str:
    """``ssldyn.dynamics.ssl`` -> ``api/dynamics/ssl.md``."""
    return "api/" + "/".join(module.split(".")[1:]) + ".md"


def package_page(package: str) -> str:
    dotted = package.replace("/", ".")
    lines = [
        f"# ssldyn.{dotted}\n",
        f"::: ssldyn.{dotted}\n    options:\n      members: false\n      show_root_heading: false\n",
        "| module | what it holds |",
        "| --- | --- |",
    ]
    for mod in public_modules(package):
        name = mod.rsplit(".", 1)[1]
        lines.append(f"| [`{name}`]({name}.md) | {summary(mod)} |")
    return "\n".join(lines) + "\n"


def module_page(module: str) -> str:
    return f"::: {module}\n{OPTIONS}"


def nav_section(packages: tuple[str, ...], title_prefix: str = "ssldyn.") -> list:
    section = []
    for package in packages:
        dotted = package.replace("/", ".")
        entries: list = [f"api/{package}/index.md"]
        entries += [{m.rsplit(".", 1)[1]: module_uri(m)} for m in public_modules(package)]
        title = f"{title_prefix}{dotted}" if title_prefix else dotted.rsplit(".", 1)[1]
        section.append({title: entries})
    return section


def on_config(config):
    if not (ROOT / "docs" / "architecture.md").is_file():  # written separately; left out until it exists
        config["nav"] = [i for i in config["nav"] if not (isinstance(i, dict) and "Architecture" in i)]
    library = tuple(p for p in PACKAGES if not p.startswith("experiments/"))
    experiments = tuple(p for p in PACKAGES if p.startswith("experiments/"))
    nav = config["nav"]
    for i, item in enumerate(nav):
        if not isinstance(item, dict):
            continue
        ((title, value),) = item.items()
        if title == "API reference":
            nav[i] = {
                title: ["api/index.md", *nav_section(library), *({f"ssldyn.{m}": f"api/{m}.md"} for m in ROOT_MODULES)]
            }
        elif title == "Experiments":
            nav[i] = {title: nav_section(experiments, title_prefix="")}
    return config


@event_priority(100)  # before mkdocs-jupyter, which turns the tutorials into notebook pages
def on_files(files, config):
    for path in sorted(TUTORIALS.glob("*.py")):
        files.append(File(f"tutorials/{path.name}", str(ROOT), config["site_dir"], config["use_directory_urls"]))
    for package in PACKAGES:
        files.append(File.generated(config, f"api/{package}/index.md", content=package_page(package)))
        for mod in public_modules(package):
            files.append(File.generated(config, module_uri(mod), content=module_page(mod)))
    for root_module in ROOT_MODULES:
        files.append(File.generated(config, f"api/{root_module}.md", content=module_page(f"ssldyn.{root_module}")))
    return files


def on_page_content(html, page, config, files):
    """A tutorial page starts with a link to its script (copied next to the page by mkdocs-jupyter)."""
    src = page.file.src_uri
    if src.startswith("tutorials/") and src.endswith(".py"):
        name = src.rsplit("/", 1)[1]
        link = (
            f'<p class="tutorial-source">Source: <a href="{name}" download><code>tutorials/{name}</code></a> '
            f"— a jupytext script: run it with <code>python tutorials/{name}</code> or open it as a notebook "
            f"(<code>jupytext --to ipynb tutorials/{name}</code>). Below: the notebook as executed when this "
            "site was built.</p>"
        )
        return link + html
    return html
