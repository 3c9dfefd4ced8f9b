"""Figure captions: declared by each experiment, stored with the run, printed by the report (figure referee M3).

An experiment declares ``captions`` (file name or fnmatch pattern -> caption); the lab stores the caption of every
figure a run writes in ``meta.json``; the report prints it under the image, and falls back to the declaration for a
run stored before captions were kept, and to the file name alone where neither has one.
"""

from __future__ import annotations

import json
import re

import pytest

from ssldyn.contract.experiment import Experiment
from ssldyn.lab import run_experiment
from ssldyn.lab.registry import all_experiments, load_all
from ssldyn.lab.report import build_report

load_all()
BUILTIN = sorted(c.name for c in all_experiments() if c.__module__.startswith("ssldyn.experiments."))
#: a caption starts with the paper location it reproduces, or says it is not a paper figure
LEAD = re.compile(r"^(Fig\.|Figs\.|Table|Thm\.|Prop\.|Lemma|Lemmas|Cor\.|Corollary|Remark|Example|Conj\.|App\.|Sec\.|Def\."
                  r"|Eq\.|Extra \(not a paper figure\):)")  # fmt: skip


class _Patterned(Experiment):
    captions = {"fig5.png": "exact", "fig5_P*.png": "pattern", "*.gif": "animation"}


def test_caption_lookup_exact_key_first_then_patterns_in_order():
    assert _Patterned.caption("fig5.png") == "exact"
    assert _Patterned.caption("fig5_P3.png") == "pattern" and _Patterned.caption("fig5_P10.png") == "pattern"
    assert _Patterned.caption("fig6.gif") == "animation"
    assert _Patterned.caption("fig6.png") is None  # no key matches: no caption, not the nearest one
    assert Experiment.caption("anything.png") is None


@pytest.mark.parametrize("name", BUILTIN)
def test_every_experiment_declares_captions_that_name_a_paper_location(name):
    from ssldyn.lab.registry import get_experiment

    cls = get_experiment(name)
    caps = cls.figure_captions()
    assert caps, f"{name} declares no figure captions"
    for key, text in caps.items():
        assert key.endswith((".png", ".gif", ".svg")), f"{name}: caption key {key!r} is not a figure file name"
        assert LEAD.match(text), f"{name}: the caption of {key} starts with neither a paper location nor 'Extra'"
        assert len(text) >= 40, f"{name}: the caption of {key} is too short to say what is plotted"


def test_the_run_stores_the_caption_and_the_report_prints_it_escaped(toy, tmp_path):
    run = run_experiment(toy.name, out=tmp_path).run
    meta = json.loads((run.path / "meta.json").read_text())
    assert meta["captions"] == {"toy.png": "Fig. 0 (toy): ‖x_t‖ against the step <i>"}
    html = build_report(tmp_path).read_text()
    assert "<code>toy.png</code> — Fig. 0 (toy): ‖x_t‖ against the step &lt;i&gt;" in html
    assert "<i>" not in html


def test_a_run_stored_without_captions_gets_the_declared_one_then_the_file_name(toy, tmp_path, monkeypatch):
    declared = dict(toy.captions)
    monkeypatch.setattr(toy, "captions", {})  # as a run stored before captions were declared
    run = run_experiment(toy.name, out=tmp_path).run
    assert json.loads((run.path / "meta.json").read_text())["captions"] == {}
    assert "<figcaption><code>toy.png</code></figcaption>" in build_report(tmp_path).read_text()
    monkeypatch.setattr(toy, "captions", declared)  # the code declares one now
    assert "— Fig. 0 (toy): ‖x_t‖ against the step &lt;i&gt;" in build_report(tmp_path).read_text()


def test_captions_file_sections_keys_and_joined_lines(tmp_path):
    from ssldyn.contract.captions import read_captions

    f = tmp_path / "captions.md"
    f.write_text("# title\n\nintro text, ignored\n\n## `paper.a`\n\n### `a.png`\nFig. 1: first line\n  second line\n\n"
                 "### a_*.png\nExtra (not a paper figure): x\n## paper.b\n### b.gif\nFig. 2: y\n")  # fmt: skip
    assert read_captions(f) == {"paper.a": {"a.png": "Fig. 1: first line second line",
                                            "a_*.png": "Extra (not a paper figure): x"},
                                "paper.b": {"b.gif": "Fig. 2: y"}}  # fmt: skip

    class FromFile(Experiment):
        name = "paper.a"
        captions_file = f
        captions = {"a_*.png": "in code: wins"}

    assert FromFile.caption("a.png") == "Fig. 1: first line second line"
    assert FromFile.caption("a_3.png") == "in code: wins"


@pytest.mark.parametrize(
    ("text", "message"),
    [("### a.png\ntext\n", "outside a '## experiment' section"),
     ("## p.a\n### a.png\nx\n### a.png\ny\n", "given twice"),
     ("## p.a\n### a.png\nx\n## p.a\n", "section 'p.a' given twice"),
     ("## p.a\n### a.png\n\n", "has no text")],
)  # fmt: skip
def test_a_malformed_captions_file_is_one_error_naming_file_and_line(tmp_path, text, message):
    from ssldyn.contract.captions import read_captions

    f = tmp_path / "bad.md"
    f.write_text(text)
    with pytest.raises(ValueError, match=message) as err:
        read_captions(f)
    assert str(f) in str(err.value)


def test_every_captions_file_section_is_a_registered_experiment():
    """A section whose experiment was renamed or removed is a caption no figure gets: refused here."""
    from ssldyn.contract.captions import read_captions

    files = {c.captions_file for c in all_experiments() if c.captions_file is not None}
    names = {c.name for c in all_experiments()}
    assert len(files) == 3
    for f in files:
        assert set(read_captions(f)) <= names, f
