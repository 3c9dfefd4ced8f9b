"""Registry metadata without importing the experiments: the committed ``manifest.json``.

``ssldyn list`` and ``ssldyn show`` need each experiment's name, paper, figure, description,
config schema (types written for people, paper defaults, quick preset), time estimates, claims
(what each checks, its rule and control) and robustness maps, but not torch, pandas or the experiment code. This module serves them from
``src/ssldyn/lab/manifest.json``, generated from the live registry::

    python -m ssldyn.lab.manifest --write     # regenerate after changing an experiment
    python -m ssldyn.lab.manifest --check     # exit 1 if the committed file is stale

``tests/lab/test_manifest.py`` fails when the committed file differs from the live registry.
Experiments registered in this process (your own ones through ``SSLDYN_PLUGINS``, or any
module that already imported the registry) are read live and take precedence.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any

from ssldyn.errors import UserError
from ssldyn.lab.plugins import load_plugins

__all__ = ["MANIFEST_PATH", "FORMAT", "entry", "claim_entry", "build", "dumps", "papers", "experiments", "find", "main"]

MANIFEST_PATH = Path(__file__).with_name("manifest.json")
FORMAT = 2  # 2: with claims and robustness maps
_BUILTIN_PREFIX = "ssldyn.experiments."


def entry(exp: Any) -> dict[str, Any]:
    """The manifest entry of one experiment class (JSON-ready)."""
    from ssldyn.contract.config import config_schema_rows, format_value
    from ssldyn.lab.study import config_value

    default_cfg, quick_cfg = exp.default_config(), exp.quick_config()
    defaults, quick = default_cfg.model_dump(mode="json"), quick_cfg.model_dump(mode="json")
    rows = []
    for key, type_text, default, description in config_schema_rows(exp.Config):
        q = config_value(quick, key)
        q_text = format_value(q)
        rows.append(
            {
                "key": key,
                "type": type_text,
                "default": default,
                "quick": "" if q_text == default else q_text,
                "description": description,
            }
        )
    out = {
        "name": exp.name,
        "paper": exp.paper,
        "figure": exp.figure,
        "description": exp.description,
        "doc": _dedent_doc(exp.__doc__),
        "est_seconds": list(exp.est_seconds),
        "reuses": list(exp.reuses),
        "version": exp.version,
        "quick": dict(exp.quick),
        "defaults": defaults,
        "config": rows,
        "claims": [claim_entry(spec, default_cfg, quick_cfg) for spec in exp.claims],
        "robustness": [
            {"claims": list(rb.claims), "knobs": {k: list(v) for k, v in rb.knobs.items()}, "paper": rb.paper}
            for rb in exp.robustness
        ],
    }
    return json.loads(json.dumps(out, default=str))


def claim_entry(spec: Any, default_cfg: Any, quick_cfg: Any) -> dict[str, Any]:
    """What ``ssldyn show`` says of one declared claim: its words, what is measured and the pass rule.

    ``expected`` is the relation at the paper's defaults; ``expected_quick`` the one of the quick preset
    where a config-dependent threshold differs there (else empty).
    """
    expected, quick = _relation_text(spec, default_cfg), _relation_text(spec, quick_cfg)
    return {
        "id": spec.id,
        "kind": spec.kind,
        "location": spec.location,
        "statement": spec.statement,
        "reading": spec.reading,
        "expected": expected,
        "expected_quick": "" if quick == expected else quick,
        "rule": spec.rule.describe(spec.statistic),
        "basis": spec.basis,
        "effect": spec.effect,
        "control": spec.control,
        "no_control": spec.no_control,
    }


def _relation_text(spec: Any, cfg: Any) -> str:
    """The relation of ``spec`` at ``cfg`` in words; a config-dependent relation that cannot be evaluated there (a
    plugin's) is named as such instead of stopping ``ssldyn list``/``show``."""
    try:
        return spec.relation_for(cfg).describe()
    except Exception as err:  # any error of user code: shown as text; the run itself reports it properly
        return f"set by the config (not evaluable here: {type(err).__name__}: {err})"


def build() -> dict[str, Any]:
    """The manifest of the experiments shipped in :mod:`ssldyn.experiments` (imports them all)."""
    from ssldyn.contract.experiment import PAPERS
    from ssldyn.lab.registry import all_experiments

    exps = [e for e in all_experiments() if e.__module__.startswith(_BUILTIN_PREFIX)]
    return {
        "format": FORMAT,
        "generated_by": "python -m ssldyn.lab.manifest --write",
        "papers": dict(PAPERS),
        "experiments": [entry(e) for e in exps],
    }


def dumps(manifest: dict[str, Any]) -> str:
    return json.dumps(manifest, indent=1, ensure_ascii=False) + "\n"


@lru_cache(maxsize=1)
def _committed() -> dict[str, Any] | None:
    try:
        data = json.loads(MANIFEST_PATH.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if data.get("format") == FORMAT else None


def _live_registry() -> Any:
    """The contract module holding the registered experiments if something in this process imported it (never imports it here)."""
    return sys.modules.get("ssldyn.contract.experiment")


def _catalogue() -> tuple[dict[str, str], dict[str, dict[str, Any]]]:
    """``(papers, {name: entry})``: the committed manifest, overridden by live registrations."""
    load_plugins()
    data = _committed()
    reg = _live_registry()
    if data is None:  # no (valid) manifest: ask the live registry, importing everything
        from ssldyn.lab import registry as reg

        reg.load_all()
        data = {"papers": dict(reg.PAPERS), "experiments": []}
    papers = dict(data["papers"])
    entries = {e["name"]: e for e in data["experiments"]}
    if reg is not None:
        papers.update(reg.PAPERS)
        for cls in reg.registered():
            entries[cls.name] = entry(cls)
    return papers, entries


def papers() -> dict[str, str]:
    """``{short name: citation}`` of the papers."""
    return _catalogue()[0]


def experiments(paper: str | None = None) -> list[dict[str, Any]]:
    """Manifest entries, ordered by paper then name; ``paper`` filters (unknown -> UserError)."""
    papers, entries = _catalogue()
    if paper is not None and paper not in papers:
        raise UserError(f"unknown paper {paper!r}; allowed: {', '.join(sorted(papers))}")
    order = list(papers)
    chosen = [e for e in entries.values() if paper is None or e["paper"] == paper]
    return sorted(chosen, key=lambda e: (order.index(e["paper"]) if e["paper"] in order else len(order), _natural(e)))


def _natural(e: dict[str, Any]) -> list[Any]:
    """``fig4`` before ``fig10``: digit runs compare as numbers."""
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", e["name"])]


def find(name: str) -> dict[str, Any]:
    """The entry of ``name``; unknown names raise a UserError suggesting the closest ones."""
    _, entries = _catalogue()
    if name in entries:
        return entries[name]
    from ssldyn.contract.config import unknown_experiment  # lazily: config imports pydantic

    raise unknown_experiment(name, entries)


def _dedent_doc(doc: str | None) -> str:
    import inspect

    return inspect.cleandoc(doc) if doc else ""


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m ssldyn.lab.manifest", description=(__doc__ or "").split("\n")[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--write", action="store_true", help=f"regenerate {MANIFEST_PATH.name} from the registry")
    group.add_argument("--check", action="store_true", help="exit 1 if the committed manifest is stale")
    args = parser.parse_args(argv)
    os.environ.pop("SSLDYN_PLUGINS", None)  # the manifest lists the shipped experiments only
    text = dumps(build())
    if args.write:
        MANIFEST_PATH.write_text(text, encoding="utf-8")
        print(f"wrote {MANIFEST_PATH}")
        return 0
    old = MANIFEST_PATH.read_text(encoding="utf-8") if MANIFEST_PATH.is_file() else ""
    if old == text:
        print(f"{MANIFEST_PATH.name} is up to date")
        return 0
    diff = difflib.unified_diff(old.splitlines(), text.splitlines(), "committed", "registry", lineterm="", n=1)
    print("\n".join(list(diff)[:60]))
    print(f"{MANIFEST_PATH} is stale: run python -m ssldyn.lab.manifest --write")
    return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
