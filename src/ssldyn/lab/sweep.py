"""Sweeps: ``--sweep key=v1,v2,...`` grids expanded into validated run specs.

``expand_grid(["lr=0.1,0.01", "width=[10,100]"])`` gives the cartesian product as a list of
``{key: value}`` override dicts (values parsed like ``--set``; commas inside brackets or
quotes do not split).
"""

from __future__ import annotations

import itertools
from typing import Any

from ssldyn.lab.config import parse_value
from ssldyn.lab.errors import UserError


def split_top_level(text: str) -> list[str]:
    """Split on commas that are not inside ``[]``, ``{}`` or quotes."""
    parts, depth, quote, cur = [], 0, None, []
    for ch in text:
        if quote:
            quote = None if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
            continue
        cur.append(ch)
    parts.append("".join(cur))
    return [p.strip() for p in parts]


def parse_sweep(item: str) -> tuple[str, list[Any]]:
    """``"key=v1,v2"`` -> ``("key", [v1, v2])``."""
    key, eq, raw = item.partition("=")
    key = key.strip()
    if not eq or not key:
        raise UserError(f"--sweep {item!r}: expected key=v1,v2,... (e.g. --sweep tau=0.1,0.5)")
    values = split_top_level(raw)
    if not raw.strip() or any(v == "" for v in values):
        raise UserError(f"--sweep {item!r}: empty value in the grid; expected key=v1,v2,...")
    return key, [parse_value(v) for v in values]


def expand_grid(items: list[str] | None) -> list[dict[str, Any]]:
    """The cartesian product of all ``--sweep`` items as flat ``{dotted.key: value}`` dicts."""
    if not items:
        return [{}]
    axes = [parse_sweep(it) for it in items]
    keys = [k for k, _ in axes]
    dup = {k for k in keys if keys.count(k) > 1}
    if dup:
        raise UserError(f"--sweep: key {sorted(dup)[0]!r} given twice")
    return [dict(zip(keys, combo)) for combo in itertools.product(*(v for _, v in axes))]


def nest(flat: dict[str, Any]) -> dict[str, Any]:
    """``{"a.b": 1}`` -> ``{"a": {"b": 1}}``."""
    out: dict[str, Any] = {}
    for key, value in flat.items():
        node = out
        parts = key.split(".")
        for p in parts[:-1]:
            node = node.setdefault(p, {})
        node[parts[-1]] = value
    return out
