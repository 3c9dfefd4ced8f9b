"""Sweeps: ``--sweep key=v1,v2,...`` grids expanded into validated run specs.

``expand_grid(["lr=0.1,0.01", "width=[10,100]"])`` gives the cartesian product as a list of
``{key: value}`` override dicts (values parsed like ``--set``; commas inside brackets or
quotes do not split).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Mapping
from typing import Any

from ssldyn.contract.config import echo, parse_value, set_path
from ssldyn.errors import UserError

__all__ = ["MAX_GRID", "split_top_level", "parse_sweep", "grid_axes", "expand_grid", "nest"]

#: largest grid run without ``--yes``
MAX_GRID = 200


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
        raise UserError(f"--sweep {echo(item)}: expected key=v1,v2,... (e.g. --sweep tau=0.1,0.5)")
    values = split_top_level(raw)
    if not raw.strip() or any(v == "" for v in values):
        raise UserError(f"--sweep {echo(item)}: empty value in the grid; expected key=v1,v2,...")
    parsed, seen = [], set()
    for v in (parse_value(v) for v in values):  # duplicate values would compute the same run twice
        k = repr(v)
        if k not in seen:
            seen.add(k)
            parsed.append(v)
    return key, parsed


def grid_axes(items: list[str] | None) -> list[tuple[str, list[Any]]]:
    """The axes of a grid: ``[(key, distinct values), ...]`` in the order given."""
    axes = [parse_sweep(it) for it in items or []]
    keys = [k for k, _ in axes]
    dup = {k for k in keys if keys.count(k) > 1}
    if dup:
        raise UserError(f"--sweep: key {echo(sorted(dup)[0])} given twice")
    return axes


def expand_grid(items: list[str] | None, *, limit: int | None = MAX_GRID) -> list[dict[str, Any]]:
    """The cartesian product of all ``--sweep`` items as flat ``{dotted.key: value}`` dicts.

    Duplicate values are dropped; a grid larger than ``limit`` points is refused (``--yes`` lifts
    the limit) before anything is expanded.
    """
    axes = grid_axes(items)
    if not axes:
        return [{}]
    size = math.prod(len(values) for _, values in axes)
    if limit is not None and size > limit:
        raise UserError(f"--sweep: the grid has {size} points (limit {limit}); narrow it or pass --yes")
    keys = [k for k, _ in axes]
    return [dict(zip(keys, combo)) for combo in itertools.product(*(v for _, v in axes))]


def flatten(tree: Mapping[str, Any], prefix: str = "", *, empty_leaf: bool = False) -> Iterator[tuple[str, Any]]:
    """``(dotted key, value)`` of a nested mapping's values, the inverse of :func:`nest`
    (``{"optim": {"lr": 1}}`` -> ``("optim.lr", 1)``). An empty mapping is skipped, or with ``empty_leaf`` yielded
    as a value of its own key."""
    for k, v in tree.items():
        if isinstance(v, Mapping) and (v or not empty_leaf):
            yield from flatten(v, f"{prefix}{k}.", empty_leaf=empty_leaf)
        else:
            yield f"{prefix}{k}", v


def nest(flat: dict[str, Any]) -> dict[str, Any]:
    """``{"a.b": 1}`` -> ``{"a": {"b": 1}}``."""
    out: dict[str, Any] = {}
    for key, value in flat.items():
        try:
            set_path(out, key, value)
        except ValueError as e:
            raise UserError(f"--sweep {echo(key)}: {e}") from None
    return out
