"""Experiment configs: pydantic models with the papers' settings as defaults.

Overrides come from a quick preset, a YAML file (``--config``) and ``--set key=value``
pairs (nested keys with dots, values parsed as JSON when possible, so lists are written
``--set taus=[0.1,0.5]``). Any invalid key or value becomes one :class:`UserError` line.
"""

from __future__ import annotations

import copy
import difflib
import json
import reprlib
import types
import typing
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from ssldyn.errors import UserError

#: longest echo of a user's value in an error message
ECHO_CHARS = 200


def cap(text: str, limit: int = ECHO_CHARS) -> str:
    """``text`` cut to ``limit`` characters (``…`` and the full length when cut)."""
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text)} characters)"


_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxlist, _REPR.maxtuple, _REPR.maxdict = 3, 8, 8, 8
_REPR.maxstring, _REPR.maxlong, _REPR.maxother = ECHO_CHARS, 60, 60


def echo(value: Any, limit: int = ECHO_CHARS) -> str:
    """A bounded ``repr(value)``: nesting, list lengths and strings are cut (``reprlib``), then at ``limit`` chars.

    Never builds the full repr, so an aliased YAML structure of 10^8 elements echoes in microseconds.
    """
    try:
        text = _REPR.repr(value)
    except (RecursionError, ValueError):  # pragma: no cover - pathological objects
        text = f"<{type(value).__name__}>"
    return cap(text, limit)


def _numeric_only(ann: Any) -> bool:
    """True when an annotation accepts numbers but not booleans (int/float, constrained or optional)."""
    origin = typing.get_origin(ann)
    if origin is typing.Annotated:
        return _numeric_only(typing.get_args(ann)[0])
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(ann) if a is not type(None)]
        return bool(args) and all(_numeric_only(a) for a in args)
    return isinstance(ann, type) and issubclass(ann, (int, float)) and not issubclass(ann, bool)


def _find_bool(ann: Any, value: Any) -> bool:
    """Whether ``value`` holds a bool where ``ann`` wants a number (also inside lists/tuples)."""
    if isinstance(value, bool):
        return _numeric_only(ann)
    origin = typing.get_origin(ann)
    if origin is typing.Annotated:
        return _find_bool(typing.get_args(ann)[0], value)
    if origin in (list, tuple, set, frozenset) and isinstance(value, (list, tuple)):
        args = [a for a in typing.get_args(ann) if a is not Ellipsis] or [Any]
        return any(_find_bool(args[min(i, len(args) - 1)], v) for i, v in enumerate(value))
    return False


class ExperimentConfig(BaseModel):
    """Base class of experiment configs: unknown keys are errors, NaN/inf are rejected, instances are frozen.

    Numbers are numbers: ``true``/``false`` given for an int or float setting is an error (pydantic
    would read them as 1/0). Cross-field rules belong in ``model_validator``s so they fail before any
    computation.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True, allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _no_bools_for_numbers(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for name, field in cls.model_fields.items():
                if name in data and _find_bool(field.annotation, data[name]):
                    raise ValueError(f"{name!r} must be a number, got {echo(data[name])}")
        return data


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
            raise UserError(f"--set {echo(pair)}: expected key=value (e.g. --set tau=0.5)")
        key, _, raw = pair.partition("=")
        key = key.strip()
        if not key or any(not part for part in key.split(".")):
            raise UserError(f"--set {echo(pair)}: empty key; expected key=value")
        node = out
        parts = key.split(".")
        for part in parts[:-1]:
            nxt = node.setdefault(part, {})
            if not isinstance(nxt, dict):
                raise UserError(f"--set {echo(pair)}: {echo(part)} was already set to a value")
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


class _UniqueKeyLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses duplicate keys (a later key would silently win)."""


def _construct_unique_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(None, None, f"duplicate key {echo(key)}", key_node.start_mark)
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_unique_mapping)

#: largest --config file read (bytes)
CONFIG_MAX_BYTES = 1 << 20


def load_config_file(path: str | Path) -> dict[str, Any]:
    """Read a YAML (or JSON) mapping with a safe loader (no tags, no duplicate keys, at most 1 MB)."""
    p = Path(path)
    if not p.is_file():
        raise UserError(f"--config {echo(str(p))}: file not found")
    if p.stat().st_size > CONFIG_MAX_BYTES:
        raise UserError(
            f"--config {echo(str(p))}: {p.stat().st_size} bytes; a config file is at most {CONFIG_MAX_BYTES}"
        )
    try:
        data = yaml.load(p.read_text(encoding="utf-8"), Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader
    except UnicodeDecodeError:
        raise UserError(f"--config {echo(str(p))}: not a text file (UTF-8 YAML expected)") from None
    except RecursionError:
        raise UserError(f"--config {echo(str(p))}: nested too deeply") from None
    except yaml.YAMLError as e:
        raise UserError(f"--config {echo(str(p))}: not valid YAML ({cap(str(e).splitlines()[0], 150)})") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise UserError(f"--config {echo(str(p))}: expected a mapping of key: value, got {type(data).__name__}")
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
        return f"unknown config key {echo(key)}{hint}; allowed keys: {', '.join(allowed)}"
    value = e.get("input")
    msg = e.get("msg", "invalid value")
    if loc == ():  # a model-level rule (a cross-field validator): its message says what is wrong
        return f"invalid config: {cap(msg.removeprefix('Value error, '), 300)}"
    return f"invalid value for {echo(key)}: {echo(value)}: {cap(msg, 300)}"


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
