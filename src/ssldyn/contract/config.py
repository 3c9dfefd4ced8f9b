"""Experiment configs: pydantic models with the papers' settings as defaults.

Overrides come from a quick preset, a YAML file (``--config``) and ``--set key=value``
pairs (nested keys with dots, values parsed as JSON when possible, so lists are written
``--set taus=[0.1,0.5]``). Any invalid key or value becomes one :class:`UserError` line.
"""

from __future__ import annotations

import copy
import difflib
import enum
import json
import reprlib
import types
import typing
from collections import abc
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError, model_validator
from pydantic.fields import FieldInfo

from ssldyn.errors import UserError

__all__ = [
    "ECHO_CHARS",
    "cap",
    "echo",
    "ExperimentConfig",
    "parse_value",
    "parse_sets",
    "deep_merge",
    "CONFIG_MAX_BYTES",
    "load_config_file",
    "keys_overlap",
    "set_keys",
    "format_validation_error",
    "build_config",
    "config_schema_rows",
    "format_value",
    "describe_type",
]

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
    if origin in (dict, abc.Mapping) and isinstance(value, dict):  # the values of a mapping setting too
        args = typing.get_args(ann)
        return len(args) == 2 and any(_find_bool(args[1], v) for v in value.values())
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
                    raise ValueError(f"{name!r} must be a number{_bounds_text(field)}, got {echo(data[name])}")
        return data


def _bounds_text(field: FieldInfo) -> str:
    """`` > 0 and < 0.5`` from a field's ``gt``/``ge``/``lt``/``le`` constraints (annotated-types metadata), or ``""``."""
    ops = (("gt", ">"), ("ge", ">="), ("lt", "<"), ("le", "<="))
    parts = [f"{sym} {getattr(m, op)}" for m in field.metadata for op, sym in ops if getattr(m, op, None) is not None]
    return (" " + " and ".join(parts)) if parts else ""


def parse_value(text: str) -> Any:
    """Parse a ``--set`` value: JSON (numbers, lists, true/false/null, quoted strings) or a bare string."""
    try:
        return json.loads(text)
    except (json.JSONDecodeError, ValueError):
        low = text.strip().lower()
        if low in {"true", "false"}:
            return low == "true"
        return text


def keys_overlap(a: str, b: str) -> bool:
    """Whether two dotted config keys name the same setting or one contains the other (``optim``, ``optim.lr``)."""
    return a == b or a.startswith(b + ".") or b.startswith(a + ".")


def set_keys(pairs: list[str] | None) -> list[str]:
    """The keys of ``--set key=value`` pairs, as given (malformed pairs are :func:`parse_sets`'s to refuse)."""
    return [pair.partition("=")[0].strip() for pair in pairs or [] if "=" in pair]


def parse_sets(pairs: list[str] | None) -> dict[str, Any]:
    """``["a.b=1", "c=[1,2]"]`` -> ``{"a": {"b": 1}, "c": [1, 2]}``; a key given twice (or a key and a key inside it,
    ``optim={...}`` and ``optim.lr=...``) is one :class:`UserError`: a later value would silently win."""
    out: dict[str, Any] = {}
    given: dict[str, tuple[str, Any]] = {}  # key -> (its pair, its value)
    for pair in pairs or []:
        if "=" not in pair:
            raise UserError(f"--set {echo(pair)}: expected key=value (e.g. --set tau=0.5)")
        key, _, raw = pair.partition("=")
        key = key.strip()
        if not key or any(not part for part in key.split(".")):
            raise UserError(f"--set {echo(pair)}: empty key; expected key=value")
        value = parse_value(raw)
        for earlier, (earlier_pair, earlier_value) in given.items():
            below_a_value = key.startswith(earlier + ".") and not isinstance(earlier_value, dict)
            if keys_overlap(key, earlier) and not below_a_value:  # (below a value: set_path's error)
                what = f"{echo(key)} is given twice" if key == earlier else f"{echo(key)} overlaps {echo(earlier)}"
                raise UserError(f"--set {echo(pair)}: {what} (also --set {echo(earlier_pair)}); give each key once")
        try:
            set_path(out, key, value)
        except ValueError as e:
            raise UserError(f"--set {echo(pair)}: {e}") from None
        given[key] = (pair, value)
    return out


def unknown_experiment(name: str, known: abc.Iterable[str]) -> UserError:
    """The error for an experiment name that is not registered, suggesting the (up to 3) closest known names."""
    near = difflib.get_close_matches(name, list(known), n=3, cutoff=0.4) if len(name) <= 200 else []
    hint = f"; did you mean {', '.join(near)}?" if near else ""
    return UserError(f"unknown experiment {echo(name)}{hint} (see `ssldyn list`)")


def set_path(tree: dict[str, Any], key: str, value: Any) -> None:
    """``tree[a][b] = value`` for the dotted ``key = "a.b"``, creating the inner dicts; a ``ValueError`` naming the
    part if a prefix already holds a value (``a=1`` and then ``a.b=2``)."""
    node = tree
    parts = key.split(".")
    for part in parts[:-1]:
        nxt = node.setdefault(part, {})
        if not isinstance(nxt, dict):
            raise ValueError(f"{echo(part)} was already set to a value")
        node = nxt
    node[parts[-1]] = value


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
        data = yaml.load(p.read_text(encoding="utf-8"), Loader=_UniqueKeyLoader)  # a SafeLoader
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
    if e.get("type") == "list_type":  # a list on the command line is JSON
        msg += f" (a list is JSON: --set '{key}=[1,2]'; a sweep over lists: --sweep '{key}=[1],[1,2]')"
    return f"invalid value for {echo(key)}: {echo(value)}: {cap(msg, 300)}"


def build_config(cls: type[ExperimentConfig], *layers: dict[str, Any]) -> ExperimentConfig:
    """Validate the merge of ``layers`` (later wins) into ``cls``; errors become :class:`UserError`.

    The merge starts from the defaults ``cls()``, so a layer that sets one key of a nested config (``--set
    optim.lr=...``) changes that key only: the nested config's other keys keep the parent's defaults (its
    ``default_factory``), not the nested class's own (pydantic fills a partial dict from those). A config with
    required keys (no defaults to start from) merges from nothing."""
    try:
        data: dict[str, Any] = cls().model_dump(mode="python")
    except ValidationError:
        data = {}
    for layer in layers:
        data = deep_merge(data, layer or {})
    try:
        return cls.model_validate(data)
    except ValidationError as err:
        raise UserError(format_validation_error(cls, err, data)) from None


def config_schema_rows(
    cls: type[BaseModel], prefix: str = "", defaults: BaseModel | None = None
) -> list[tuple[str, str, str, str]]:
    """``(key, type, default, description)`` rows for ``ssldyn show``, types written for people.

    Nested configs are flattened into dotted keys (``optim.lr``); the type is
    :func:`describe_type` of the field, the default its value in ``defaults`` (an instance of
    ``cls``; by default ``cls()``) so that a parent's default for a nested config wins over the
    nested class's own defaults.
    """
    if defaults is None:
        defaults = cls()
    rows = []
    for name, field in cls.model_fields.items():
        ann = field.annotation
        key = f"{prefix}{name}"
        value = getattr(defaults, name)
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            rows.extend(config_schema_rows(ann, prefix=key + ".", defaults=value))
            continue
        rows.append((key, describe_type(ann, field.metadata), format_value(value), field.description or ""))
    return rows


def format_value(value: Any) -> str:
    """A config value as a user would type it after ``--set key=``: JSON; strings bare where that reads back the same."""
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    if isinstance(value, enum.Enum):
        value = value.value
    if isinstance(value, str) and value and not any(c.isspace() for c in value) and parse_value(value) == value:
        return value  # what --set key=value reads back as this string
    return json.dumps(value, default=str, ensure_ascii=False)


def describe_type(annotation: Any, metadata: Any = ()) -> str:
    """A type and its constraints written for people.

    ``conint(ge=1)`` -> ``int ≥ 1``; ``confloat(gt=0, lt=1)`` -> ``float in (0, 1)``;
    ``Literal["relu", "linear"]`` -> ``one of relu | linear``; ``list[PositiveFloat]`` with
    ``min_length=3`` -> ``list of float > 0, ≥ 3 items``; ``str | None`` -> ``str or null``.
    ``metadata`` are the constraint objects pydantic keeps next to the annotation
    (``FieldInfo.metadata``: ``annotated_types`` ``Gt``/``Ge``/``Lt``/``Le``/``Interval``/
    ``MinLen``/``MaxLen``/``MultipleOf``); unknown metadata are ignored.
    """
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Annotated:
        return describe_type(args[0], [*annotation.__metadata__, *_as_list(metadata)])
    c = _constraints(metadata)
    if origin in (Union, types.UnionType):
        parts = [describe_type(a) for a in args if a is not type(None)]
        text = " or ".join(parts) + (" or null" if type(None) in args else "")
        return _with_bounds(text, c) if len(parts) == 1 else text
    if origin is Literal:
        return "one of " + " | ".join(format_value(a) for a in args)
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return "one of " + " | ".join(format_value(m.value) for m in annotation)
    if origin in (list, set, frozenset, abc.Sequence) or (origin is tuple and len(args) == 2 and args[1] is ...):
        kind = "set" if origin in (set, frozenset) else "list"
        item = describe_type(args[0]) if args else "values"
        joint = ", each " if item.startswith("one of ") else " of "
        return f"{kind}{joint}{item}{_length(c)}"
    if origin is tuple:
        inner = [describe_type(a) for a in args]
        if len(inner) == 2 and inner[0] == inner[1]:
            return f"pair of {inner[0]}"
        return f"tuple ({', '.join(inner)})"
    if origin in (dict, abc.Mapping):
        k, v = (describe_type(a) for a in args) if args else ("str", "value")
        return f"mapping of {k} to {v}{_length(c)}"
    if annotation is Any:
        return "any value"
    if isinstance(annotation, type) and issubclass(annotation, Path):
        base = "path"
    else:
        base = getattr(annotation, "__name__", None) or str(annotation).replace("typing.", "")
    if annotation in (str, bytes):
        return base + _length(c, unit="characters")
    return _with_bounds(base, c)


def _as_list(metadata: Any) -> list[Any]:
    return list(metadata or ())


def _constraints(metadata: Any) -> dict[str, Any]:
    """Collect bounds from ``annotated_types`` metadata (``Interval`` carries all four) and ``FieldInfo``."""
    out: dict[str, Any] = {}
    stack = _as_list(metadata)
    while stack:
        m = stack.pop(0)
        if m is None:
            continue
        if isinstance(m, FieldInfo):
            stack[:0] = _as_list(m.metadata)
            continue
        for name in ("gt", "ge", "lt", "le", "multiple_of", "min_length", "max_length"):
            value = getattr(m, name, None)
            if value is not None:
                out[name] = value
    return out


def _num(v: Any) -> str:
    if isinstance(v, float) and v.is_integer() and abs(v) < 1e15:
        return str(int(v))
    return str(v)


def _with_bounds(base: str, c: dict[str, Any]) -> str:
    lo = ("(", c["gt"]) if "gt" in c else ("[", c["ge"]) if "ge" in c else None
    hi = (")", c["lt"]) if "lt" in c else ("]", c["le"]) if "le" in c else None
    if lo and hi:
        text = f"{base} in {lo[0]}{_num(lo[1])}, {_num(hi[1])}{hi[0]}"
    elif lo:
        text = f"{base} {'>' if lo[0] == '(' else '≥'} {_num(lo[1])}"
    elif hi:
        text = f"{base} {'<' if hi[0] == ')' else '≤'} {_num(hi[1])}"
    else:
        text = base
    if "multiple_of" in c:
        text += f", multiple of {_num(c['multiple_of'])}"
    return text + _length(c, unit="characters" if base == "str" else "items")


def _length(c: dict[str, Any], unit: str = "items") -> str:
    lo, hi = c.get("min_length"), c.get("max_length")
    one = unit[:-1]
    if lo is not None and hi is not None:
        return f", exactly {lo} {one if lo == 1 else unit}" if lo == hi else f", {lo} to {hi} {unit}"
    if lo:  # min_length=0 says nothing
        return f", ≥ {lo} {one if lo == 1 else unit}"
    if hi is not None:
        return f", ≤ {hi} {one if hi == 1 else unit}"
    return ""
