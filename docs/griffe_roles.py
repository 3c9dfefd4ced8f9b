"""Griffe extension: Sphinx roles in docstrings become mkdocstrings cross-references.

The library's docstrings name other objects the Sphinx way (``:func:`train_ssl```,
``:class:`~ssldyn.dynamics.guards.LossGuard```, ``:mod:`ssldyn.dynamics```), which reads well
in ``help()``. For the site, every role is rewritten — once the whole package is loaded, so
names resolve like Python would — into an autorefs link
``<autoref identifier="ssldyn.dynamics.ssl.train_ssl" optional>`train_ssl`</autoref>``:

* the target is found in the object's scope (its module's imports and members, its class),
  then as a dotted path from the package root, then as the only object of the package whose
  path ends with the name; a re-export is followed to where the object is documented;
* ``~a.b.c`` shows ``c``; a leading ``.`` is relative to the current package;
* a target with no page (private, or outside ssldyn) is rendered as plain code, never as a
  literal role and never as a broken link (``optional``).
"""

from __future__ import annotations

import html
import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:py:)?(func|class|meth|mod|attr|data|exc|obj|const):`([^`]+)`")


def _index(pkg: Any) -> dict[str, list[str]]:
    """Every object path of the package by its last name (aliases left out)."""
    out: dict[str, list[str]] = {}

    def walk(obj: Any) -> None:
        for member in list(obj.members.values()):
            if member.is_alias:
                continue
            out.setdefault(member.name, []).append(member.path)
            if member.is_module or member.is_class:
                walk(member)

    out.setdefault(pkg.name, []).append(pkg.path)
    walk(pkg)
    return out


def _lookup(pkg: Any, path: str) -> Any | None:
    if path == pkg.path:
        return pkg
    if not path.startswith(pkg.path + "."):
        return None
    try:
        return pkg[path[len(pkg.path) + 1 :]]
    except Exception:
        return None


def _final(pkg: Any, path: str) -> str | None:
    """The documented path of ``path`` (aliases followed), or None when it is not a package object."""
    obj = _lookup(pkg, path)
    if obj is None:
        return None
    if obj.is_alias:
        try:
            return obj.final_target.path
        except Exception:
            return obj.target_path
    return obj.path


def resolve(pkg: Any, obj: Any, name: str, index: dict[str, list[str]]) -> str | None:
    """The full path of the object a role names inside ``obj``'s docstring (None: unknown)."""
    name = name.strip().removesuffix("()")
    if name.startswith("."):
        module = obj if obj.is_module else obj.module
        base = module.path if module.is_init_module else module.path.rsplit(".", 1)[0]
        name = base + name
    head, _, rest = name.partition(".")
    candidates = []
    scope = obj
    while scope is not None:
        try:
            full = scope.resolve(head)
        except Exception:
            full = None
        if full:
            candidates.append(f"{full}.{rest}" if rest else full)
        scope = scope.parent
    candidates.append(name)
    for c in candidates:
        found = _final(pkg, c)
        if found:
            return found
    last = name.rsplit(".", 1)[-1]
    matches = [p for p in index.get(last, []) if p == name or p.endswith("." + name)]
    if len(matches) == 1:
        return matches[0]
    for c in candidates:
        if not c.startswith(pkg.path + ".") and c != pkg.path:
            return c  # outside the package (torch.Tensor): optional, plain code unless documented
    return None


def rewrite(text: str, pkg: Any, obj: Any, index: dict[str, list[str]]) -> str:
    """Replace every role of ``text``."""

    def repl(m: re.Match[str]) -> str:
        target = m.group(2).strip()
        title = target
        explicit = re.fullmatch(r"(.*?)\s*<([^>]+)>", target)
        if explicit:
            title, target = explicit.group(1), explicit.group(2)
        elif target.startswith("~"):
            target = target[1:]
            title = target.rsplit(".", 1)[-1]
        path = resolve(pkg, obj, target, index)
        code = f"`{title}`"  # a Markdown code span (mkdocstrings renders the docstring as Markdown)
        if path is None:
            return code
        return f'<autoref identifier="{html.escape(path)}" optional>{code}</autoref>'

    return ROLE.sub(repl, text)


class SphinxRoles(griffe.Extension):
    """Rewrite the Sphinx roles of every docstring of the loaded package."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        index = _index(pkg)

        def walk(obj: Any) -> None:
            if obj.docstring is not None and ":" in obj.docstring.value:
                obj.docstring.value = rewrite(obj.docstring.value, pkg, obj, index)
            for member in list(obj.members.values()):
                if not member.is_alias:
                    walk(member)

        walk(pkg)
