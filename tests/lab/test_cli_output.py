"""Terminal output at 80 columns: one screen for ``ssldyn list``, no word broken anywhere.

rich's ``overflow="fold"`` used to cut words when columns were squeezed ("variatio/nal");
the tables are now laid out by :mod:`ssldyn.lab.textlayout`. Checked on the real commands
and, as a property, on random tables.
"""

import io
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

from ssldyn.lab import cli, manifest, textlayout

ROOT = Path(__file__).resolve().parents[2]
RULE = "─"


def _env(columns: int | None = 80) -> dict[str, str]:
    """The environment of a CLI subprocess: this checkout's sources, no plugins, ``columns`` wide (None: as set)."""
    env = {k: v for k, v in os.environ.items() if k != "SSLDYN_PLUGINS"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    if columns is not None:
        env["COLUMNS"] = str(columns)
    return env


def _ssldyn(args, columns=80):
    done = subprocess.run(
        [sys.executable, "-m", "ssldyn.lab.cli", *args], env=_env(columns), capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _words(texts):
    return {w for t in texts for w in str(t).split()}


def assert_words_intact(lines, texts, truncated_ok=True):
    """Every token of ``lines`` is a whole word of ``texts`` (or, cut with ``…``, a whole word minus punctuation)."""
    words = _words(texts)
    stripped = {w.rstrip(",;:") for w in words}
    for line in lines:
        for tok in line.split():
            if set(tok) == {RULE} or tok in words:
                continue
            assert truncated_ok and tok.endswith(textlayout.ELLIPSIS) and tok[:-1] in stripped, (tok, line)


def _table_rows(out):
    lines = out.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln and set(ln) == {RULE})
    end = next(i for i, ln in enumerate(lines) if ln.startswith("details:"))
    return lines[:start], lines[start + 1 : end]


def test_list_fits_one_80_column_screen_without_broken_words():
    out = _ssldyn(["list"])
    lines = out.splitlines()
    assert max(map(len, lines)) <= 80, max(lines, key=len)
    assert len(lines) <= 40, len(lines)
    exps = manifest.experiments()
    header, rows = _table_rows(out)
    assert len(rows) == len(exps)  # one line per experiment
    texts = [e["name"] for e in exps] + [e["figure"] for e in exps]
    texts += [cli._fmt_s(s) for e in exps for s in e["est_seconds"]]
    assert_words_intact(rows, texts)
    assert_words_intact(header[-1:], ["experiment figure / section quick full"], truncated_ok=False)
    for e, row in zip(exps, rows):
        assert row.split()[0] == e["name"]


def test_list_wide_and_show_wrap_on_words():
    exps = manifest.experiments()
    out = _ssldyn(["list", "--wide"])
    assert max(map(len, out.splitlines())) <= 80
    texts = [e[k] for e in exps for k in ("name", "figure", "description")]
    texts += [cli._fmt_s(s) for e in exps for s in e["est_seconds"]] + [
        "experiment figure / section quick full what it shows"
    ]
    header, rows = _table_rows(out)
    assert_words_intact(rows, texts, truncated_ok=False)
    col = header[-2].index("what it shows")  # the description column, read top to bottom
    column = " ".join(" ".join(ln[col:] for ln in rows).split())
    for e in exps:  # every description is there in full (no ellipsis in --wide)
        assert " ".join(e["description"].split()) in column
    e = manifest.find("variational.fig1")
    out = _ssldyn(["show", e["name"]])
    body = out.split("change a key with --set key=value", 1)[1].splitlines()
    texts = [r[k] for r in e["config"] for k in ("key", "type", "default", "quick", "description")]
    assert_words_intact(body, texts + ["· default quick"], truncated_ok=False)


def _capture(monkeypatch, width):
    buf = io.StringIO()
    monkeypatch.setattr(cli, "console", Console(file=buf, width=width, color_system=None))
    return buf


LONG = (
    "Projected gradient descent at every width follows the Stiefel-gradient flow, "
    "and the q-ODE's outputs match the network's to within the stated tolerance"
)


def _claim(i, passed=True):
    return SimpleNamespace(
        passed=passed,
        kind="paper",
        statement=f"claim {i}: {LONG}",
        location="Thm. 2, Fig. 3, Sec. 4.2 (right panel)",
        measured=[0.123456789, 1.5e-07, 42.0],
        expected="≤ 0.07 for every width in [10, 100, 1000]",
    )


def test_run_and_sweep_tables_never_break_words(monkeypatch, tmp_path):
    for width in (60, 80, 120):
        buf = _capture(monkeypatch, width)
        run = SimpleNamespace(
            experiment="grassmann.fig3", claims=[_claim(1), _claim(2, False)], path=tmp_path / "grassmann.fig3" / "abc"
        )
        cli._print_run(SimpleNamespace(run=run, status="done", seconds=3.2))
        lines = buf.getvalue().splitlines()
        table = [
            ln
            for ln in lines
            if not ln.startswith(
                ("run directory:", "paper and consequence claims passed:", "claims passed (every kind):")
            )
        ]
        assert max(map(len, table)) <= width, (width, max(table, key=len))
        c = _claim(1)
        texts = [c.statement, "claim 2:", c.location, cli._fmt_measured(c.measured), c.expected, "PASS FAIL"]
        texts += ["grassmann.fig3 — 3.2 s", "claim paper measured expected", "claim: paper: measured: expected:"]
        assert_words_intact(table, texts, truncated_ok=False)

        buf = _capture(monkeypatch, width)
        spec = SimpleNamespace(experiment="nonlinearity.augmentation", seed=3, digest="0123456789ab")
        items = [
            SimpleNamespace(spec=spec, status="done", run=run, seconds=12.5, error=""),
            SimpleNamespace(spec=spec, status="failed", run=None, seconds=1.0, error=f"RuntimeError: {LONG}"),
        ]
        cli._print_items(items, title="nonlinearity.augmentation: 2 runs", out=tmp_path)
        lines = buf.getvalue().splitlines()
        table = lines[: next(i for i, ln in enumerate(lines) if ln.startswith("run directories:"))]
        assert max(map(len, table)) <= width
        texts = ["nonlinearity.augmentation (seed 3) done failed 12.5 s 1.0 s 1/2 0/0 0123456789ab"]
        texts += ["nonlinearity.augmentation: 2 runs", "run status time claims run directory"]
        texts += ["status: time: claims: directory:"]  # the record layout when a table cannot fit
        assert_words_intact(table, texts, truncated_ok=False)
        assert any(LONG.split()[-1] in ln for ln in lines)  # the error is printed in full below


WORD = st.text(alphabet="abcdefghijklmnopqrstuvwxyzαβ0123456789.,()", min_size=1, max_size=14)
CELL = st.lists(WORD, min_size=0, max_size=12).map(" ".join)


@settings(max_examples=200, deadline=None)
@given(
    st.integers(1, 5).flatmap(
        lambda n: st.tuples(
            st.lists(WORD, min_size=n, max_size=n),
            st.lists(st.lists(CELL, min_size=n, max_size=n), min_size=1, max_size=6),
            st.sets(st.integers(0, n - 1)),
            st.integers(20, 120),
        )
    )
)
def test_layout_property(args):
    """Any table: lines fit (when a table is possible), wrapped cells keep every word whole and in order."""
    headers, rows, wrap, width = args
    lines = textlayout.table_lines(headers, rows, width, wrap=wrap)
    fixed_total = sum(max([len(headers[i])] + [len(r[i]) for r in rows]) for i in range(len(headers)))
    if lines is None:
        low = [
            max(textlayout.longest_word(c) for c in [headers[i], *(r[i] for r in rows)])
            if i in wrap
            else max([len(headers[i])] + [len(r[i]) for r in rows])
            for i in range(len(headers))
        ]
        assert sum(low) + 2 * (len(headers) - 1) > width and fixed_total + 2 * (len(headers) - 1) > width
        lines = textlayout.record_lines(headers, rows, width)
        assert all(len(ln) <= width or any(len(w) > width - 4 for w in ln.split()) for ln in lines)
        cells = [c for r in rows for c in r]  # a record shows the headers of non-empty cells only
    else:
        assert max(map(len, lines)) <= width
        cells = [*headers, *(c for r in rows for c in r)]
    out_words = " ".join(lines).split()
    for cell in cells:
        for w in cell.split():
            assert w in out_words, (w, lines)


def test_shorten_cuts_at_a_word_boundary():
    assert textlayout.shorten("Sec. 4.1–4.2: Prop. 4.1, 4.3, 4.4, Thm. 4.5", 30) == "Sec. 4.1–4.2: Prop. 4.1, 4.3…"
    assert textlayout.shorten("short", 30) == "short"
    assert textlayout.shorten("unbreakableword", 6) == "unbre…"  # one word: cut (its full value is elsewhere)


@settings(max_examples=200, deadline=None)
@given(CELL, st.integers(2, 60))
def test_shorten_property(text, width):
    out = textlayout.shorten(text, width)
    assert len(out) <= width
    if out == " ".join(text.split()):
        return
    assert out.endswith(textlayout.ELLIPSIS)
    kept = out[:-1].split()
    words = text.split()
    if len(kept) > 1 or (kept and kept[0] == words[0].rstrip(",;:")):  # whole words, in order, from the start
        assert [w.rstrip(",;:") for w in words[: len(kept)]] == [w.rstrip(",;:") for w in kept]
    else:  # a single word longer than the width is cut (allowed only where shown in full elsewhere)
        assert not kept or words[0].startswith(kept[0])


def test_show_lists_each_claim_with_its_rule_and_control():
    """``ssldyn show`` says what a run checks: every declared claim with the relation at the paper's defaults (and
    at --quick where the threshold depends on the config), the pass rule, the control; the robustness maps."""
    e = manifest.find("grassmann.fig2")
    narrow = _ssldyn(["show", e["name"]], columns=80)
    assert max(map(len, narrow.splitlines())) <= 80
    out = " ".join(_ssldyn(["show", e["name"]], columns=200).split())
    for c in e["claims"]:
        assert f"{c['id']} · {c['kind']} · {c['location']}" in out
    # written out from the declaration in grassmann/fig2.py: lt(-0.25) under the whole-interval rule
    assert (
        "tanh-decreases-init · paper · Thm. 1, Fig. 2 claim tanh: the gap ‖u^φ − u^I‖ at initialisation decreases "
        "with the width h. measured log-log slope of the init-averaged gap at epoch 0 against h passes value < -0.25 "
        "(holds for the whole 95% interval of the mean)"
    ) in out
    assert (
        "control sigmoid (φ(0) ≠ 0, outside the conditions of Thm. 1), the same slope in the same run at epoch 0" in out
    )
    assert (
        "claims relu-decreases, tanh-decreases-training, relu-slower, sigmoid-increases knobs lr = 0.005, 0.01, 0.02 × "
        "epochs = 20, 100" in out
    )
    # nonlinearity.fig8 linear-at-phi1: le(2 · 360° / n_grid), n_grid 7200 at the paper's defaults and 3600 in --quick
    out8 = " ".join(_ssldyn(["show", "nonlinearity.fig8"], columns=200).split())
    assert "linear-at-phi1 · paper" in out8 and "passes value <= 0.1 (" in out8 and "; --quick: <= 0.2)" in out8


def test_show_part_selects_the_claims_or_the_config():
    claims = _ssldyn(["show", "grassmann.fig2", "--part", "claims"], columns=120)
    config = _ssldyn(["show", "grassmann.fig2", "--part", "config"], columns=120)
    whole = _ssldyn(["show", "grassmann.fig2"], columns=120)
    assert "claims: what a run checks" in claims and "robustness map" in claims and "config: key, type" not in claims
    assert (
        "config: key, type" in config and "claims: what a run checks" not in config and "tanh-decreases" not in config
    )
    head = whole.split("\n\n", 1)[0]  # name, description, estimated time: in every part
    assert claims.startswith(head) and config.startswith(head)
    assert whole.splitlines() == claims.splitlines() + config.splitlines()[len(head.splitlines()) :]
    env = _env(None)
    bad = subprocess.run([sys.executable, "-m", "ssldyn.lab.cli", "show", "grassmann.fig2", "--part", "both"], env=env,
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert bad.returncode == 2 and bad.stderr.strip() == "error: --part 'both': allowed values are all, claims, config"


def test_python_dash_m_ssldyn_is_the_console_command():
    """``python -m ssldyn`` runs the same command line as the ``ssldyn`` script: the same ``list`` output, and a user
    mistake gives one ``error:`` line and exit code 2 (no traceback)."""
    env = _env()
    done = subprocess.run(
        [sys.executable, "-m", "ssldyn", "list"], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == _ssldyn(["list"])
    bad = subprocess.run(
        [sys.executable, "-m", "ssldyn", "show", "no.such"], env=env, capture_output=True, text=True, timeout=120
    )
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert [ln for ln in bad.stderr.splitlines() if ln.strip()][0].startswith("error:"), bad.stderr


def test_record_layout_names_a_bare_first_value_when_asked():
    """A robustness map too wide for a table falls back to records: its first knob's value is printed with the
    knob's name (``positive_term: False``), never as a bare ``False``; tables of runs keep their label heading."""
    heads, rows = ["positive_term", "tau", "claim"], [["False", "0.2", "PASS 0.9 " + "x" * 90]]
    named = textlayout.layout(heads, rows, 40, wrap=(0, 1, 2), name_first=True)
    assert named[0] == "positive_term: False" and named[1] == "  tau: 0.2"
    assert textlayout.layout(heads, rows, 40, wrap=(0, 1, 2))[0] == "False"


def test_run_summary_counts_claims_as_the_reports_badge_does(monkeypatch, tmp_path):
    """The badge and headline score paper and consequence claims; the CLI line gives the same count and the
    sanity/erratum claims beside it (it counted every kind as one number, 6/12 beside the badge's 5/11)."""
    from ssldyn.lab.report import _badge

    claims = [_claim(1), _claim(2, False), _claim(3), _claim(4, False)]
    claims[1].kind, claims[2].kind, claims[3].kind = "consequence", "sanity", "erratum"
    buf = _capture(monkeypatch, 80)
    run = SimpleNamespace(experiment="grassmann.fig3", claims=claims, path=tmp_path / "grassmann.fig3" / "abc")
    cli._print_run(SimpleNamespace(run=run, status="done", seconds=1.0))
    line = next(ln for ln in buf.getvalue().splitlines() if "claims passed" in ln)
    assert line == "paper and consequence claims passed: 1/2 · 1 fail · sanity and errata 1/2 (paper scale)"
    assert _badge(claims) == ("bf", "1/2 claims pass · 1 fail")
