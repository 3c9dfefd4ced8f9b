"""Experiment configs: pydantic models with the papers' settings as defaults.

Overrides come from a quick preset, a YAML file (``--config``) and ``--set key=value``
pairs (nested keys with dots, values parsed as JSON when possible, so lists are written
``--set taus=[0.1,0.5]``). Any invalid key or value becomes one :class:`UserError` line.
"""

from __future__ import annotations

import copy
import difflib
import json
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from ssldyn.lab.errors import UserError


class ExperimentConfig(BaseModel):
    """Base class of experiment configs: unknown keys are errors, NaN/inf are rejected, instances are frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True, allow_inf_nan=False)


def parse_value(text: str) -> Any:
    """Parse a ``--set`` value: JSON (numbers, lists, true/false/null, quoted strings) or a bare string."""
    try:
        return json.loads(text)
    except (json.JSONDecodeError, ValueError):
        low = text.strip().lower()
        if low in {"true", "false"}:
            return low == "true"
        return text


def parse_sets(pairs: list[str] | None) -> dict[str, Any]:
    """``["a.b=1", "c=[1,2]"]`` -> ``{"a": {"b": 1}, "c": [1, 2]}``."""
    out: dict[str, Any] = {}
    for pair in pairs or []:
        if "=" not in pair:
            raise UserError(f"--set {pair!r}: expected key=value (e.g. --set tau=0.5)")
        key, _, raw = pair.partition("=")
        key = key.strip()
        if not key or any(not part for part in key.split(".")):
            raise UserError(f"--set {pair!r}: empty key; expected key=value")
        node = out
        parts = key.split(".")
        for part in parts[:-1]:
            nxt = node.setdefault(part, {})
            if not isinstance(nxt, dict):
                raise UserError(f"--set {pair!r}: {part!r} was already set to a value")
            node = nxt
        node[parts[-1]] = parse_value(raw)
    return out


def deep_merge(base: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for k, v in update.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = deep_merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def load_config_file(path: str | Path) -> dict[str, Any]:
    """Read a YAML (or JSON) mapping with ``yaml.safe_load``."""
    p = Path(path)
    if not p.is_file():
        raise UserError(f"--config {str(p)!r}: file not found")
    try:
        data = yaml.safe_load(p.read_text())
    except yaml.YAMLError as e:
        raise UserError(f"--config {str(p)!r}: not valid YAML ({str(e).splitlines()[0]})") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise UserError(f"--config {str(p)!r}: expected a mapping of key: value, got {type(data).__name__}")
    return data


def _allowed_keys(cls: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    model: Any = cls
    for part in loc[:-1]:
        field = getattr(model, "model_fields", {}).get(part)
        ann = getattr(field, "annotation", None)
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            model = ann
        else:
            return []
    return sorted(getattr(model, "model_fields", {}))


def format_validation_error(cls: type[BaseModel], err: ValidationError, data: dict[str, Any]) -> str:
    """One line naming the first bad key/value and what is allowed."""
    e = err.errors()[0]
    loc = tuple(e.get("loc", ()))
    key = ".".join(str(p) for p in loc) or "<config>"
    if e.get("type") == "extra_forbidden":
        allowed = _allowed_keys(cls, loc)
        near = difflib.get_close_matches(str(loc[-1]), allowed, n=1)
        hint = f" (did you mean {near[0]!r}?)" if near else ""
        return f"unknown config key {key!r}{hint}; allowed keys: {', '.join(allowed)}"
    value = e.get("input")
    msg = e.get("msg", "invalid value")
    return f"invalid value for {key!r}: {value!r}: {msg}"


def build_config(cls: type[ExperimentConfig], *layers: dict[str, Any]) -> ExperimentConfig:
    """Validate the merge of ``layers`` (later wins) into ``cls``; errors become :class:`UserError`."""
    data: dict[str, Any] = {}
    for layer in layers:
        data = deep_merge(data, layer or {})
    try:
        return cls.model_validate(data)
    except ValidationError as err:
        raise UserError(format_validation_error(cls, err, data)) from None


def config_schema_rows(cls: type[BaseModel], prefix: str = "") -> list[tuple[str, str, str, str]]:
    """``(key, type, default, description)`` rows for ``ssldyn show``."""
    rows = []
    for name, field in cls.model_fields.items():
        ann = field.annotation
        key = f"{prefix}{name}"
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            rows.extend(config_schema_rows(ann, prefix=key + "."))
            continue
        tname = getattr(ann, "__name__", None) or str(ann).replace("typing.", "")
        default = field.get_default(call_default_factory=True)
        if isinstance(default, BaseModel):
            default = default.model_dump()
        meta = " ".join(str(m) for m in field.metadata)
        rows.append((key, f"{tname} {meta}".strip(), json.dumps(default, default=str), field.description or ""))
    return rows
