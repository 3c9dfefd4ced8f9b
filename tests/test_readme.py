"""Every example in README.md is exercised (generic: new README sections are covered automatically).

- Each fenced ```python block is executed, in a fresh namespace and an empty working directory.
- Each ``ssldyn ...`` command line (fenced bash/shell blocks, and inline code spans such as
  the command table) is checked against the real CLI:
  * a *synopsis* (``[--quick]``, ``...``, ``key=value``) must name an existing command and
    only existing options;
  * a concrete line (placeholders such as ``EXP`` or ``DIR`` substituted) goes through the
    real command line: ``run``/``reproduce``/``robustness`` with ``--dry-run`` (typer parsing, unknown
    options fail; every config built with the real validation, unknown keys fail), and the
    cheap ones (``list``, ``show``, ``report``, ``--help``, and ``run`` lines whose planned
    runs are estimated at ≤ 20 s) are executed for real.
  ``--device cuda`` is validated as ``--device cpu`` where CUDA is absent, and lines that need
  CUDA or Ray are not executed. ``pip``/``pytest`` lines are run by ``.ci/run``, not here.
"""

from __future__ import annotations

import pytest

from tests.markdown_examples import (
    PYTHON,
    ROOT,
    SHELLS,
    check_command,
    parse_markdown,
    run_cli,
    shell_commands,
)

README = ROOT / "README.md"
BLOCKS, SPANS = parse_markdown(README.read_text(encoding="utf-8"))
PY_BLOCKS = [b for b in BLOCKS if b.lang in PYTHON]
COMMANDS = sorted(
    {(b.line, c) for b in BLOCKS if b.lang in SHELLS for c in shell_commands(b.code)}
    | {(no, s.replace("\\|", "|").strip()) for no, s in SPANS if s.startswith("ssldyn ") or s == "ssldyn"}
)


def test_the_readme_has_examples():
    assert PY_BLOCKS and COMMANDS
    assert any(c == "ssldyn reproduce --quick" for _, c in COMMANDS)


@pytest.mark.parametrize("block", PY_BLOCKS, ids=[b.id for b in PY_BLOCKS])
def test_python_block_runs(block, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # runs land in ./ssldyn-runs of an empty directory
    (tmp_path / "ssldyn-runs").mkdir()  # an empty store: `load` refuses a folder that does not exist
    monkeypatch.delenv("SSLDYN_PLUGINS", raising=False)
    code = compile(block.code, f"README.md:{block.line} ({block.heading})", "exec")
    exec(code, {"__name__": "__readme__"})


@pytest.mark.parametrize("line,command", COMMANDS, ids=[f"L{no}:{c[:60]}" for no, c in COMMANDS])
def test_command_line(line, command, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SSLDYN_PLUGINS", raising=False)
    check_command(f"README.md:{line}", command, tmp_path, capsys)


def test_the_checks_fail_on_bad_lines(tmp_path, monkeypatch, capsys):
    """The old sweep example (``h`` is not a key of grassmann.fig3) and an unknown option are caught."""
    monkeypatch.chdir(tmp_path)
    code, out = run_cli(["run", "grassmann.fig3", "--sweep", "h=[10,100]", "--seeds", "3", "--dry-run"], capsys)
    assert code == 2 and "unknown config key 'h'" in out
    with pytest.raises(AssertionError, match="unknown options"):
        test_command_line(0, "ssldyn run EXP [--quickly]", tmp_path, monkeypatch, capsys)
    with pytest.raises(AssertionError, match="rejected by the CLI"):
        test_command_line(0, "ssldyn run grassmann.fig3 --sweep h=[10,100]", tmp_path, monkeypatch, capsys)
    with pytest.raises(AssertionError, match="unknown placeholder"):
        test_command_line(0, "ssldyn show EXPERIMENT", tmp_path, monkeypatch, capsys)
    blocks, spans = parse_markdown("# T\n\n```bash\nA=1 ssldyn list && ssldyn show x # c\n```\n`ssldyn report`\n")
    assert shell_commands(blocks[0].code) == ["ssldyn list", "ssldyn show x"] and spans == [(6, "ssldyn report")]
