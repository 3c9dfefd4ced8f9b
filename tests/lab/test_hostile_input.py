"""Random invalid CLI input: always exit 2 with one line, never a traceback, never a run."""

import re
import typing

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from ssldyn.contract.config import build_config, parse_sets
from ssldyn.lab import UserError
from ssldyn.lab.cli import main
from ssldyn.lab.registry import all_experiments

EXPS = {e.name: e for e in all_experiments()}
HOSTILE = [
    "-1",
    "0",
    "-0.5",
    "abc",
    "[]",
    "{}",
    "null",
    "1e999",
    "nan",
    "-inf",
    "[-1]",
    "[0]",
    '["x"]',
    "<script>alert(1)</script>",
    "../../etc/passwd",
    "true",
    "1.5",
    "99999999999999999999",
    "[1,",
    '{"a": 1}',
]


def _keys(exp):
    return sorted(exp.Config.model_fields)


def _cli(args, capsys):
    with pytest.raises(SystemExit) as e:
        main(args)
    cap = capsys.readouterr()
    return e.value.code, cap.out, cap.err


def _assert_one_line_exit_2(args, capsys, tmp_path):
    code, out, err = _cli(args, capsys)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2, (args, out, err)
    assert len(lines) == 1 and lines[0].startswith("error:") and "Traceback" not in out + err, (args, err)
    assert not list(tmp_path.glob("**/DONE"))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_invalid_overrides(data, capsys, tmp_path):
    name = data.draw(st.sampled_from(sorted(EXPS)))
    exp = EXPS[name]
    key = data.draw(
        st.one_of(st.sampled_from(_keys(exp)), st.from_regex(r"[a-z_]{1,12}(\.[a-z]{1,5})?", fullmatch=True))
    )
    value = data.draw(st.one_of(st.sampled_from(HOSTILE), st.text(max_size=8)))
    pair = f"{key}={value}"
    try:
        build_config(exp.Config, exp.quick, parse_sets([pair]))
        assume(False)  # a valid config: not this test's business (and would start a run)
    except UserError:
        pass
    _assert_one_line_exit_2(["run", name, "--quick", "--set", pair, "--out", str(tmp_path)], capsys, tmp_path)


@pytest.mark.parametrize(
    "args",
    [
        ["run", "no.such"],
        ["run", "variational"],
        ["show", "nope"],
        ["reproduce", "--paper", "nope"],
        ["run", "variational.fig3", "--config", "/nonexistent/c.yaml"],
        ["run", "variational.fig3", "--seed", "-3"],
        ["run", "variational.fig3", "--device", "tpu"],
        ["run", "variational.fig3", "--sweep", "taus="],
        ["run", "variational.fig3", "--sweep", "nokeys"],
        ["run", "variational.fig3", "--executor", "dask"],
        ["run", "variational.fig3", "--max-retries", "-1"],
        ["report", "/nonexistent/dir"],
    ],
)
def test_bad_arguments(args, capsys, tmp_path):
    if args[0] == "run":
        args = args + ["--out", str(tmp_path)]
    _assert_one_line_exit_2(args, capsys, tmp_path)


def test_out_is_a_file(capsys, tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    _assert_one_line_exit_2(["run", "variational.fig3", "--quick", "--out", str(f)], capsys, tmp_path)


POSITIVE = re.compile(
    r"(^|_)(tau|taus|temperature|lr|lrs|learning_rate|width|widths|steps|epochs|iters|"
    r"iterations|batch|batch_size|n|ns|h|hs|seeds|n_samples|n_steps)($|_)"
)


def _numeric(ann) -> bool:
    args = typing.get_args(ann)
    return (
        ann in (int, float)
        or any(_numeric(a) for a in args)
        or getattr(ann, "__origin__", None) in (int, float)
        or str(ann).startswith(("typing.Annotated[int", "typing.Annotated[float"))
    )


@pytest.mark.parametrize("name", sorted(EXPS))
def test_widths_temperatures_and_learning_rates_must_be_positive(name):
    exp = EXPS[name]
    for key, field in exp.Config.model_fields.items():
        if not POSITIVE.search(key):
            continue
        default = field.get_default(call_default_factory=True)
        bad = [[-1], [0]] if isinstance(default, list) else [-1, 0]
        if isinstance(default, bool) or not (isinstance(default, (int, float, list))):
            continue
        for b in bad:
            with pytest.raises(UserError):
                build_config(exp.Config, exp.quick, {key: b})
