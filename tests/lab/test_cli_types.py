"""``ssldyn show`` writes config types for people (the renderer on real pydantic fields)."""

import enum
import re
from typing import Literal

import pytest
from pydantic import BaseModel, Field, PositiveFloat, confloat, conint

from ssldyn.contract.config import config_schema_rows, describe_type, format_value
from ssldyn.lab import manifest


class Act(enum.Enum):
    RELU = "relu"
    TANH = "tanh"


class Inner(BaseModel):
    lr: PositiveFloat = 0.1


class C(BaseModel):
    a: conint(ge=1) = 1
    b: float = Field(0.5, gt=0, lt=1)
    c: Literal["relu", "linear"] = "relu"
    d: list[PositiveFloat] = [1.0]
    e: list[PositiveFloat] = Field([1.0, 2.0, 3.0], min_length=3)
    f: str | None = None
    g: tuple[float, float] = (0.5, 1.0)
    h: list[Literal[2, 3]] = [2]
    i: confloat(ge=0, le=1) = 0.5
    j: int = Field(3, lt=5)
    k: list[conint(ge=0, le=9)] = Field([4, 9], min_length=2, max_length=2)
    m: Act = Act.RELU
    n: int = Field(4, multiple_of=2, ge=0)
    o: float = Field(0.1, ge=0, lt=0.382)
    p: bool = True
    q: str = "x"
    r: float = Field(2.0, gt=1.0)
    s: list[int] = Field([1], max_length=4)
    inner: Inner = Inner()


EXPECTED = {
    "a": "int ≥ 1",
    "b": "float in (0, 1)",
    "c": "one of relu | linear",
    "d": "list of float > 0",
    "e": "list of float > 0, ≥ 3 items",
    "f": "str or null",
    "g": "pair of float",
    "h": "list, each one of 2 | 3",
    "i": "float in [0, 1]",
    "j": "int < 5",
    "k": "list of int in [0, 9], exactly 2 items",
    "m": "one of relu | tanh",
    "n": "int ≥ 0, multiple of 2",
    "o": "float in [0, 0.382)",
    "p": "bool",
    "q": "str",
    "r": "float > 1",
    "s": "list of int, ≤ 4 items",
    "inner.lr": "float > 0",
}


@pytest.mark.parametrize("key", sorted(EXPECTED))
def test_types_for_people(key):
    rows = {k: t for k, t, _, _ in config_schema_rows(C)}
    assert rows[key] == EXPECTED[key]


def test_describe_type_on_field_metadata_directly():
    field = C.model_fields["a"]
    assert describe_type(field.annotation, field.metadata) == "int ≥ 1"
    assert describe_type(int) == "int" and describe_type(list[str]) == "list of str"


def test_defaults_as_typed_after_set():
    rows = {k: d for k, _, d, _ in config_schema_rows(C)}
    assert rows["c"] == "relu" and rows["f"] == "null" and rows["e"] == "[1.0, 2.0, 3.0]"
    assert rows["g"] == "[0.5, 1.0]" and rows["m"] == "relu" and rows["inner.lr"] == "0.1"
    assert format_value("") == '""' and format_value("a b") == '"a b"' and format_value(True) == "true"


INTERNALS = re.compile(r"Interval\(|Annotated|typing\.|<class|\bNone\b|Gt\(|Ge\(|MinLen|FieldInfo")


def test_no_pydantic_internals_in_any_shipped_experiment():
    """The old ``show`` printed ``int None Interval(gt=None, ge=1, lt=None, le=None) None``."""
    bad = [
        (e["name"], r["key"], r["type"])
        for e in manifest.experiments()
        for r in e["config"]
        if INTERNALS.search(r["type"])
    ]
    assert not bad, bad


def test_a_parents_default_for_a_nested_config_wins():
    """``cifar_simclr: SimCLRConfig = SimCLRConfig(steps=10000)`` showed the nested class's 3000."""

    class Outer(BaseModel):
        a: Inner = Inner()
        b: Inner = Inner(lr=0.5)

    rows = {k: d for k, _, d, _ in config_schema_rows(Outer)}
    assert rows == {"a.lr": "0.1", "b.lr": "0.5"}
