"""Griffe extension: split grouped Google-style parameters (``z1, z2: embeddings``) into one entry each.

The library documents parameters that share a meaning on one line (``z1, z2: embeddings of the two
views``). Griffe's Google parser reads ``"z1, z2"`` as one unknown name; this extension rewrites
such a line into ``z1: …`` and ``z2: …`` (same description) before parsing, so the API pages list
every parameter and ``mkdocs build --strict`` still reports parameters that really are not in the
signature.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_SECTION = re.compile(r"^(\s*)(Args|Arguments|Parameters|Other Parameters):\s*$")
_GROUPED = re.compile(r"^(\s+)([A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)+)(\s*\([^)]*\))?:(\s.*)?$")


def split_grouped(text: str) -> str:
    """Rewrite grouped parameter entries of the Args sections of a docstring."""
    lines, out, i = text.split("\n"), [], 0
    section_indent: int | None = None
    while i < len(lines):
        line = lines[i]
        header = _SECTION.match(line)
        if header:
            section_indent = len(header.group(1))
            out.append(line)
            i += 1
            continue
        indent = len(line) - len(line.lstrip())
        if section_indent is not None and line.strip() and indent <= section_indent:
            section_indent = None  # the section ended
        m = _GROUPED.match(line) if section_indent is not None else None
        if not m:
            out.append(line)
            i += 1
            continue
        item_indent, names, typ, desc = m.group(1), m.group(2), m.group(3) or "", m.group(4) or ""
        cont = []  # continuation lines (deeper indentation)
        i += 1
        while i < len(lines) and (not lines[i].strip() or len(lines[i]) - len(lines[i].lstrip()) > len(item_indent)):
            if not lines[i].strip() and (i + 1 >= len(lines) or not lines[i + 1].startswith(item_indent + " ")):
                break
            cont.append(lines[i])
            i += 1
        for name in (n.strip() for n in names.split(",")):
            out.append(f"{item_indent}{name}{typ}:{desc}")
            out.extend(cont)
    return "\n".join(out)


class GroupedParams(griffe.Extension):
    """Split ``a, b: description`` parameter entries of functions and classes."""

    def _fix(self, obj: Any) -> None:
        if obj.docstring is not None and "," in obj.docstring.value:
            obj.docstring.value = split_grouped(obj.docstring.value)

    def on_function_instance(self, *, func: griffe.Function, **kwargs: Any) -> None:
        self._fix(func)

    def on_class_instance(self, *, cls: griffe.Class, **kwargs: Any) -> None:
        self._fix(cls)
