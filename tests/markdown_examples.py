"""Reading and checking the examples of a Markdown page (README.md, the user guide): shared by
``test_readme.py`` and ``test_guide_pages.py``.

- :func:`parse_markdown`: the fenced blocks and the inline code spans outside them, with line numbers.
- :func:`shell_segments`: the ``ssldyn ...`` commands of a shell block, with their ``VAR=value`` prefixes.
- :func:`check_command`: one ``ssldyn ...`` line against the real CLI: a *synopsis* (``[--quick]``, ``...``,
  ``key=value``) must name an existing command and only existing options; a concrete line (placeholders such
  as ``EXP`` or ``DIR`` substituted) goes through the real command line: ``run``/``reproduce``/``robustness``
  with ``--dry-run`` (typer parsing, unknown options fail; every config built with the real validation,
  unknown keys fail), and the cheap ones (``list``, ``show``, ``report``, ``--help``, and ``run`` lines whose
  planned runs are estimated at ≤ 20 s) are executed for real. ``--device cuda`` is validated as ``--device
  cpu`` where CUDA is absent; lines that need CUDA, Ray or an extra that is not installed are not executed.
"""

from __future__ import annotations

import importlib.util
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
import typer

from ssldyn.lab import cli

ROOT = Path(__file__).resolve().parents[1]
FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)[^\n]*$")
SHELLS = {"bash", "sh", "shell", "console", "zsh"}
PYTHON = {"python", "py", "python3"}
EXEC_BUDGET_S = 20.0  # a run line is executed when its planned runs are estimated at most this long
# placeholders of synopsis lines -> concrete values (EXP: an experiment that runs in seconds)
PLACEHOLDERS = {"EXP": "variational.fig3", "NAME": "grassmann", "S": "0", "N": "2"}


@dataclass(frozen=True)
class Block:
    lang: str
    code: str
    line: int
    heading: str

    @property
    def id(self) -> str:
        return f"L{self.line}-{re.sub(r'[^A-Za-z0-9]+', '-', self.heading).strip('-')[:40]}"


def parse_markdown(text: str, source: str = "README.md") -> tuple[list[Block], list[tuple[int, str]]]:
    """Fenced blocks, and the inline code spans outside them (with their line numbers)."""
    blocks, spans = [], []
    heading, fence, buf, start, lang = "top", None, [], 0, ""
    for no, line in enumerate(text.splitlines(), 1):
        m = FENCE.match(line)
        if fence is None:
            if m:
                fence, lang, start, buf = m.group(2), m.group(3).lower(), no, []
                continue
            if line.startswith("#"):
                heading = line.lstrip("#").strip()
            spans += [(no, s) for s in re.findall(r"(?<!`)`([^`\n]+)`(?!`)", line)]
        elif m and m.group(2).startswith(fence) and not m.group(3):
            blocks.append(Block(lang, "\n".join(buf) + "\n", start, heading))
            fence = None
        else:
            buf.append(line)
    assert fence is None, f"{source}: fence opened at line {start} is never closed"
    return blocks, spans


def shell_segments(code: str) -> list[tuple[dict[str, str], str]]:
    """``(env, "ssldyn ...")`` for each ``ssldyn`` segment of the shell lines (continuations joined, comments
    dropped, split on ``&& ; ||``); ``env`` holds the segment's ``VAR=value`` prefixes."""
    out = []
    for line in code.replace("\\\n", " ").splitlines():
        line = re.sub(r"^\s*\$\s+", "", line)
        try:
            lex = shlex.shlex(line, posix=False, punctuation_chars=";&|")
            lex.whitespace_split, lex.commenters = True, "#"
            tokens = list(lex)
        except ValueError:
            continue
        seg: list[str] = []
        for tok in [*tokens, ";"]:
            if set(tok) <= set(";&|"):
                env = {}
                while seg and re.match(r"^[A-Z_][A-Z0-9_]*=", seg[0]):  # VAR=value prefixes
                    key, _, value = seg.pop(0).partition("=")
                    env[key] = value
                if seg and seg[0] == "ssldyn":
                    out.append((env, " ".join(seg)))
                seg = []
            else:
                seg.append(tok)
    return out


def shell_commands(code: str) -> list[str]:
    """The ``ssldyn ...`` segments of :func:`shell_segments`, without their prefixes."""
    return [command for _, command in shell_segments(code)]


def _command(name: str):
    group = typer.main.get_command(cli.app)
    assert name in group.commands, f"`ssldyn {name}`: no such command (have {', '.join(group.commands)})"
    return group.commands[name]


def _option_names(cmd) -> set[str]:
    return {o for p in cmd.params for o in (*p.opts, *p.secondary_opts) if o.startswith("-")} | {"--help"}


def _is_synopsis(tokens: list[str]) -> bool:
    return any(t.startswith("[") or t in ("...", "…") or t.startswith(("key=", "k=")) for t in tokens)


def _substitute(tokens: list[str], tmp_path: Path) -> tuple[list[str], set[str]]:
    """Concrete arguments for placeholders; returns the tokens and what needs hardware or extras we may lack."""
    out, needs = [], set()
    for i, t in enumerate(tokens):
        prev = tokens[i - 1] if i else ""
        if t in PLACEHOLDERS:
            t = PLACEHOLDERS[t]
        elif t == "DIR":
            t = str(tmp_path / "dir")
            (tmp_path / "dir").mkdir(exist_ok=True)
        elif re.fullmatch(r"[A-Z]+\.ya?ml", t):
            (tmp_path / "overrides.yaml").write_text("{}\n")
            t = str(tmp_path / "overrides.yaml")
        elif "|" in t:  # alternatives: the first one
            t = t.split("|")[0]
        if prev == "--device" and t.startswith("cuda"):
            needs.add("cuda")
            if not torch.cuda.is_available():
                t = "cpu"
        if prev == "--executor" and t == "ray":
            needs.add("ray")
        if prev in ("--address", "--ray-address"):
            needs.add("cluster")
        if t == "--tensorboard" and importlib.util.find_spec("tensorboard") is None:
            needs.add("tensorboard")
        out.append(t)
    unknown = [t for t in out if re.fullmatch(r"[A-Z][A-Z_]+", t)]
    assert not unknown, f"unknown placeholder(s) {unknown}: add them to PLACEHOLDERS in {__file__}"
    return out, needs


def run_cli(args: list[str], capsys) -> tuple[int, str]:
    """``ssldyn ARGS`` in this process: ``(exit code, stdout + stderr)``."""
    with pytest.raises(SystemExit) as e:
        cli.main(args)
    cap = capsys.readouterr()
    return e.value.code, cap.out + cap.err


def _estimated_seconds(plan_output: str) -> float:
    """The estimate printed by ``--dry-run`` ("dry run: 4 runs, 4 to run (estimated ~8 s ..."), the larger one
    where it gives two (", ~24 min if the cached results of X are not in the store")."""
    line = re.search(r"dry run: .*", " ".join(plan_output.split()))
    assert line, plan_output
    found = re.findall(r"~([\d.]+) (s|min|h)\b", line.group(0))
    assert found, plan_output
    return max(float(v) * {"s": 1, "min": 60, "h": 3600}[u] for v, u in found)


def check_command(where: str, command: str, tmp_path: Path, capsys) -> bool:
    """Check one ``ssldyn ...`` line (see the module docstring) found at ``where`` (``page:line``), in the
    current directory. Returns whether it was executed for real (not only parsed or dry-run)."""
    tokens = shlex.split(command.replace("\\|", "|"))[1:]
    name = next((t for t in tokens if not t.startswith("-")), None)
    if name is None:  # `ssldyn --help` or bare `ssldyn`
        code, out = run_cli(tokens, capsys)
        assert code == 0, f"{where}: `{command}` exited {code}: {out}"
        return True
    if _is_synopsis(tokens):
        cmd = _command(name.strip("[]"))
        known = _option_names(cmd)
        used = {t.strip("[]").split("=")[0] for t in tokens if t.strip("[").startswith("-")}
        assert used <= known, f"{where}: `{command}` names unknown options {sorted(used - known)}"
        return False
    args, needs = _substitute(tokens, tmp_path)
    _command(args[0])
    if args[0] in ("run", "reproduce", "robustness"):  # robustness grids: validated, not run (minutes)
        if "tensorboard" in needs:  # refused up front without TensorBoard: that line, then the rest validated
            code, out = run_cli([*args, "--dry-run"], capsys)
            assert code == 2 and "--tensorboard needs TensorBoard" in out, f"{where}: `{command}`: {out}"
            args = [a for a in args if a != "--tensorboard"]
        code, out = run_cli([*args, "--dry-run"], capsys)
        assert code == 0, f"{where}: `{command}` is rejected by the CLI:\n{out}"
        cheap = args[0] == "run" and not needs and _estimated_seconds(out) <= EXEC_BUDGET_S
        if not cheap or "--dry-run" in args:
            return False
    code, out = run_cli(args, capsys)
    assert code == 0, f"{where}: `{command}` exited {code}:\n{out}"
    return True
