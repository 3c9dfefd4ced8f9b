"""Every page of the user guide (``docs/index.md``, ``docs/guide/*.md``) runs as a reader would follow it:
top to bottom, in one working directory and one Python namespace.

- A fenced ```python block is executed in the page's namespace, so a block may use what an earlier block
  of the page defined; a block whose first line names a file (``# my_spread.py — ...``) is a module the page
  asks the reader to save: it is written to the working directory (which is on ``sys.path``) instead, as is
  every ```yaml block (``# my-settings.yaml — ...``: a config file).
- Each ``ssldyn ...`` line (shell blocks and inline code spans) is checked as README.md's are
  (:func:`tests.markdown_examples.check_command`: synopses against the CLI's options, run lines through
  ``--dry-run``, the cheap ones executed), with its ``SSLDYN_PLUGINS=...`` prefix honoured (the plugin is
  unloaded afterwards).
- The working directory starts with one finished quick run of ``variational.fig5`` in ``ssldyn-runs``: the
  pages on results read an existing store ("every finished run of an output directory").

``docs/architecture.md`` is the design document: its ```python blocks are signatures, not programs, so only
its ``ssldyn`` lines are checked.
"""

from __future__ import annotations

import contextlib
import re
import shutil
from pathlib import Path

import pytest

from tests.lab.conftest import plugin_loaded
from tests.markdown_examples import PYTHON, ROOT, SHELLS, check_command, parse_markdown, shell_segments

DOCS = ROOT / "docs"
PAGES = [DOCS / "index.md", *sorted((DOCS / "guide").glob("*.md"))]
DESIGN = DOCS / "architecture.md"
SAVED_FILE = re.compile(r"#\s*([A-Za-z_][\w-]*\.(?:py|ya?ml))\b")  # first line of a block the reader saves
YAML = {"yaml", "yml"}


def _ssldyn_spans(spans: list[tuple[int, str]]) -> list[tuple[int, str]]:
    return [(no, s.replace("\\|", "|").strip()) for no, s in spans if s.startswith("ssldyn ") or s == "ssldyn"]


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    """A run store with one finished quick run of ``variational.fig5`` (a few seconds)."""
    from ssldyn.lab import run_experiment

    out = tmp_path_factory.mktemp("store") / "ssldyn-runs"
    run_experiment("variational.fig5", quick=True, out=out)
    return out


def _rel(page: Path) -> str:
    return str(page.relative_to(ROOT)) if page.is_relative_to(ROOT) else page.name


def run_page(page: Path, workdir: Path, monkeypatch, capsys, *, python: bool = True) -> list[str]:
    """Follow ``page`` top to bottom in ``workdir``; returns what was done (``"python L7"``, ``"saved f.py"``,
    ``"ran L24: ssldyn list"``, ``"checked L24: ..."``), for the tests to see that the page was exercised."""
    monkeypatch.chdir(workdir)
    monkeypatch.syspath_prepend(str(workdir))
    monkeypatch.delenv("SSLDYN_PLUGINS", raising=False)
    where = _rel(page)
    blocks, spans = parse_markdown(page.read_text(encoding="utf-8"), where)
    steps = sorted([(b.line, "block", b) for b in blocks] + [(no, "span", s) for no, s in _ssldyn_spans(spans)],
                   key=lambda item: item[0])  # fmt: skip
    namespace: dict = {"__name__": "__guide__"}
    done = []

    def command(line: int, env: dict[str, str], text: str) -> None:
        plugin = env.get("SSLDYN_PLUGINS")
        with plugin_loaded(plugin) if plugin else contextlib.nullcontext():
            ran = check_command(f"{where}:{line}", text, workdir, capsys)
        done.append(f"{'ran' if ran else 'checked'} L{line}: {text}")

    for line, kind, item in steps:
        if kind == "span":
            command(line, {}, item)
        elif item.lang in SHELLS:
            for env, text in shell_segments(item.code):
                command(line, env, text)
        elif item.lang in PYTHON | YAML and python:
            saved = SAVED_FILE.match(item.code)
            if saved or item.lang in YAML:
                assert saved, f"{where}:{line}: a YAML block names the file it is saved as in its first line"
                (workdir / saved.group(1)).write_text(item.code, encoding="utf-8")
                done.append(f"saved {saved.group(1)}")
                continue
            exec(compile(item.code, f"{where}:{line} ({item.heading})", "exec"), namespace)
            done.append(f"python L{line}")
    return done


def test_there_are_guide_pages_with_examples():
    assert len(PAGES) >= 8, PAGES
    n_python = sum(b.lang in PYTHON for p in PAGES for b in parse_markdown(p.read_text(encoding="utf-8"))[0])
    assert n_python >= 5


@pytest.mark.parametrize("page", PAGES, ids=[p.stem if p.parent.name == "guide" else "index" for p in PAGES])
def test_guide_page_runs_top_to_bottom(page, store, tmp_path, monkeypatch, capsys):
    shutil.copytree(store, tmp_path / "ssldyn-runs")
    done = run_page(page, tmp_path, monkeypatch, capsys)
    blocks, spans = parse_markdown(page.read_text(encoding="utf-8"), _rel(page))
    expected = sum(b.lang in PYTHON | YAML for b in blocks) + sum(
        len(shell_segments(b.code)) for b in blocks if b.lang in SHELLS
    ) + len(_ssldyn_spans(spans))  # fmt: skip
    assert len(done) == expected, done


def test_the_design_documents_commands(store, tmp_path, monkeypatch, capsys):
    shutil.copytree(store, tmp_path / "ssldyn-runs")
    done = run_page(DESIGN, tmp_path, monkeypatch, capsys, python=False)
    assert done, "docs/architecture.md names no ssldyn command"


def test_a_page_that_does_not_run_fails(tmp_path, monkeypatch, capsys):
    """The checks are not vacuous: a block using a name no earlier block defined, an unknown key, and a saved
    module; and a later block sees what an earlier one defined."""
    page = tmp_path / "page.md"
    work = tmp_path / "work"
    work.mkdir()
    page.write_text("# P\n\n```python\nx = 2\n```\n\n```python\nassert x == 2\n```\n", encoding="utf-8")
    assert run_page(page, work, monkeypatch, capsys) == ["python L3", "python L7"]
    page.write_text("# P\n\n```python\nprint(undefined_name)\n```\n", encoding="utf-8")
    with pytest.raises(NameError):
        run_page(page, work, monkeypatch, capsys)
    page.write_text("# P\n\n```bash\nssldyn run grassmann.fig3 --set h=3\n```\n", encoding="utf-8")
    with pytest.raises(AssertionError, match="rejected by the CLI"):
        run_page(page, work, monkeypatch, capsys)
    page.write_text("# P\n\n```python\n# mod_x.py — a module\nVALUE = 3\n```\n\n```python\nimport mod_x\n"
                    "assert mod_x.VALUE == 3\n```\n", encoding="utf-8")  # fmt: skip
    assert run_page(page, work, monkeypatch, capsys) == ["saved mod_x.py", "python L8"]
