"""Plain-text tables that fit a terminal width and never break a word.

The CLI's tables (``list``, ``show``, ``run``, ``reproduce``) are laid out here rather than by
rich's ``Table``, whose ``overflow="fold"`` cuts words in the middle ("variatio/nal") when
columns are squeezed. Rules:

- a *wrap* column is never narrower than its longest word and wraps on spaces;
- a *truncate* column (only for values shown in full elsewhere, e.g. by ``ssldyn show``) is
  cut at a word boundary and ends with ``…``;
- any other column keeps its natural width;
- if even the narrowest such layout is wider than the terminal, :func:`table_lines` returns
  ``None`` and the caller prints one record per row (:func:`record_lines`).

Only the standard library is used, so importing this module costs nothing.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

__all__ = [
    "ELLIPSIS",
    "wrap_words",
    "shorten",
    "longest_word",
    "column_widths",
    "table_lines",
    "record_lines",
    "layout",
    "hanging",
]

ELLIPSIS = "…"


def wrap_words(text: str, width: int) -> list[str]:
    """Wrap on spaces to ``width``; a word longer than ``width`` stays whole on its own line."""
    out: list[str] = []
    for para in str(text).splitlines() or [""]:
        out.extend(textwrap.wrap(para, width, break_long_words=False, break_on_hyphens=False) or [""])
    return out


def shorten(text: str, width: int) -> str:
    """``text`` cut to ``width`` at a word boundary, ending in ``…`` when something was cut."""
    text = " ".join(str(text).split())
    if len(text) <= width:
        return text
    if width <= 1:
        return ELLIPSIS[:width]
    cut = text[: width - 1]
    space = cut.rfind(" ")
    if text[width - 1] != " " and space > 0:  # the cut is inside a word: drop that word
        cut = cut[:space]
    return cut.rstrip(" ,;:") + ELLIPSIS


def longest_word(text: str) -> int:
    return max((len(w) for w in str(text).split()), default=0)


def _natural(text: str) -> int:
    return max((len(line) for line in str(text).splitlines()), default=0)


def column_widths(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    width: int,
    *,
    wrap: Sequence[int] = (),
    truncate: Sequence[int] = (),
    gap: int = 2,
    min_truncated: int = 12,
) -> list[int] | None:
    """Column widths that fit ``width`` under the rules of this module, or ``None``."""
    n = len(headers)
    natural = [max([len(headers[i])] + [_natural(r[i]) for r in rows]) for i in range(n)]
    low = list(natural)
    for i in range(n):
        if i in wrap:  # headers of wrap columns wrap too
            low[i] = min(natural[i], max(longest_word(c) for c in [headers[i], *(r[i] for r in rows)]))
        elif i in truncate:
            low[i] = min(natural[i], max(len(headers[i]), min_truncated))
    room = width - gap * (n - 1)
    if sum(natural) <= room:
        return natural
    if sum(low) > room:
        return None
    widths = list(low)
    spare = room - sum(widths)
    while spare > 0:  # one character at a time to the column furthest (relatively) from its natural width
        i = max(range(n), key=lambda j: ((natural[j] - widths[j]) / max(1, natural[j]), -j))
        if natural[i] == widths[i]:
            break
        widths[i] += 1
        spare -= 1
    return widths


def table_lines(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    width: int,
    *,
    wrap: Sequence[int] = (),
    truncate: Sequence[int] = (),
    right: Sequence[int] = (),
    gap: int = 2,
) -> list[str] | None:
    """The table as lines of at most ``width`` characters (header, rule, rows), or ``None``."""
    rows = [[str(c) for c in r] for r in rows]
    widths = column_widths(headers, rows, width, wrap=wrap, truncate=truncate, gap=gap)
    if widths is None:
        return None
    sep = " " * gap

    def cell_lines(i: int, text: str) -> list[str]:
        if i in wrap:
            return wrap_words(text, widths[i])
        if i in truncate:
            return [shorten(text, widths[i])]
        return str(text).splitlines() or [""]

    def join(cells: list[str]) -> str:
        parts = [c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths))]
        return sep.join(parts).rstrip()

    def row_lines(r: Sequence[str]) -> list[str]:
        cells = [cell_lines(i, c) for i, c in enumerate(r)]
        return [join([c[k] if k < len(c) else "" for c in cells]) for k in range(max(len(c) for c in cells))]

    out = row_lines(headers)
    out.append("─" * (sum(widths) + gap * (len(widths) - 1)))
    for r in rows:
        out.extend(row_lines(r))
    return out


def record_lines(
    headers: Sequence[str], rows: Sequence[Sequence[str]], width: int, indent: int = 2, *, name_first: bool = False
) -> list[str]:
    """One block per row: the first cell as a heading (``header: value`` with ``name_first``, for a first cell
    that is a bare value such as ``False``), then ``header: value`` lines, wrapped on words."""
    out: list[str] = []
    for r in rows:
        out.extend(wrap_words(f"{headers[0]}: {r[0]}" if name_first else str(r[0]), width))
        for h, c in zip(headers[1:], r[1:]):
            if str(c).strip():
                lines = wrap_words(f"{h}: {c}" if h else str(c), max(1, width - indent - 2))
                out.append(" " * indent + lines[0])
                out.extend(" " * (indent + 2) + line for line in lines[1:])
    return out


def layout(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    width: int,
    *,
    wrap: Sequence[int] = (),
    truncate: Sequence[int] = (),
    right: Sequence[int] = (),
    name_first: bool = False,
) -> list[str]:
    """:func:`table_lines` when a table fits, else :func:`record_lines` (``name_first``: see there)."""
    lines = table_lines(headers, rows, width, wrap=wrap, truncate=truncate, right=right)
    return lines if lines is not None else record_lines(headers, rows, width, name_first=name_first)


def hanging(label: str, text: str, width: int, label_width: int) -> list[str]:
    """``label`` in a left column of ``label_width``, ``text`` wrapped on words beside it.

    A label wider than its column gets a line of its own.
    """
    room = max(1, width - label_width - 2)
    body = wrap_words(text, room)
    pad = " " * (label_width + 2)
    if len(label) > label_width:
        return [label] + [pad + line for line in body if line or len(body) == 1]
    return [label.ljust(label_width) + "  " + body[0]] + [pad + line for line in body[1:]]
