"""Figure captions kept in a Markdown file beside the experiments (the built-in papers' ``captions.md``).

The format, read by :func:`read_captions`::

    # any title and text before the first section (ignored)
    ## paper.experiment
    ### fig5.png
    Fig. 5 (Conj. 2): the caption, over as many lines as it needs
    (joined with single spaces).
    ### fig5_P*.png
    ...

A ``## name`` section holds one experiment's captions; a ``### key`` heading starts one caption, keyed
by the figure file name or an fnmatch pattern (backticks around either are dropped). Captions are
prose, so they live here rather than as string literals in the experiment modules; an experiment
points at its file with ``captions_file`` and may still declare ``captions`` in code (which win).
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

__all__ = ["read_captions"]


def read_captions(path: Path | str) -> dict[str, dict[str, str]]:
    """``{experiment name: {file name or pattern: caption}}`` from a captions file (parsed once per path).

    Raises ValueError naming the file and line for a caption outside a ``##`` section, a key given twice in
    one section, a section given twice, or a key with no text.
    """
    return {k: dict(v) for k, v in _parse(str(Path(path).resolve())).items()}


@cache
def _parse(path: str) -> dict[str, tuple[tuple[str, str], ...]]:
    sections: dict[str, dict[str, list[str]]] = {}
    section: dict[str, list[str]] | None = None
    lines: list[str] | None = None
    where = ""
    for no, raw in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        line = raw.strip()
        where = f"{path}, line {no}"
        if line.startswith("### "):
            if section is None:
                raise ValueError(f"{where}: caption {line[4:]!r} outside a '## experiment' section")
            key = line[4:].strip().strip("`")
            if key in section:
                raise ValueError(f"{where}: caption {key!r} given twice")
            lines = section[key] = []
        elif line.startswith("## "):
            name = line[3:].strip().strip("`")
            if name in sections:
                raise ValueError(f"{where}: section {name!r} given twice")
            section, lines = sections.setdefault(name, {}), None
        elif line and lines is not None:
            lines.append(line)
    out: dict[str, tuple[tuple[str, str], ...]] = {}
    for name, caps in sections.items():
        for key, text in caps.items():
            if not text:
                raise ValueError(f"{path}: caption {key!r} of {name} has no text")
        out[name] = tuple((key, " ".join(text)) for key, text in caps.items())
    return out
