import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from ssldyn.lab import run_experiment
from ssldyn.lab.report import build_report


class Collector(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags, self.imgs, self.links, self.text = [], [], [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        a = dict(attrs)
        if tag == "img":
            self.imgs.append(a["src"])
        if tag == "a":
            self.links.append(a["href"])

    def handle_data(self, data):
        self.text.append(data)


def test_report_lists_runs_claims_figures_and_escapes(toy, tmp_path):
    run_experiment(toy.name, out=tmp_path)  # the paper-default run: headline and badge
    run_experiment(toy.name, out=tmp_path, sets=["label=<script>alert(1)</script>"])  # a variant
    path = build_report(tmp_path)
    html = path.read_text()
    p = Collector()
    p.feed(html)
    assert "script" not in p.tags  # the config value and the '<b>' in the description are escaped
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "toy experiment for the lab tests &lt;b&gt;" in html
    text = " ".join(p.text)
    assert "1/1 claims pass" in text and "PASS" in text and "‖x‖ decays" in text
    assert "Other runs" in text and "label=<script>alert(1)</script>" in text  # the variant, named by its override
    assert p.imgs and all((path.parent / src).resolve().is_file() for src in p.imgs)
    assert all(not link.startswith("http") for link in p.links + p.imgs)  # offline
    assert "<script" not in html.lower() and "cdn" not in html.lower()


def test_report_labels_the_start_time_as_started(toy, tmp_path):
    """The time a run block shows is when the run started (``meta.json``'s ``started``), and says so."""
    import json

    o = run_experiment(toy.name, out=tmp_path)
    started = json.loads((o.run.path / "meta.json").read_text())["started"]
    html = build_report(tmp_path).read_text()
    assert f" · started {started}" in html and f"finished {started}" not in html


def test_report_escapes_markup_in_run_directory_names(toy, tmp_path):
    o = run_experiment(toy.name, out=tmp_path)
    weird = o.run.path.with_name("<img src=x onerror=alert(1)>")
    o.run.path.rename(weird)
    html = build_report(tmp_path).read_text()
    assert "<img src=x" not in html and "&lt;img src=x onerror=alert(1)&gt;" in html


def test_empty_report(tmp_path):
    assert "No finished runs yet" in build_report(tmp_path).read_text()


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.browser
@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")
def test_report_renders_non_blank_in_headless_chromium(toy, tmp_path):
    from PIL import Image

    run_experiment(toy.name, out=tmp_path)
    page = build_report(tmp_path)
    shot = tmp_path / "shot.png"
    subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--window-size=1200,900",
            f"--screenshot={shot}",
            page.resolve().as_uri(),
        ],
        check=True,
        timeout=120,
        capture_output=True,
    )
    img = Image.open(shot).convert("L")
    hist = img.histogram()
    # non-blank: many distinct grey levels and the dark header band present
    assert sum(1 for h in hist if h > 0) > 20
    assert min(img.getextrema()) < 80 and max(img.getextrema()) > 200
    Path(shot).unlink()


def test_report_lists_failed_runs_escaped(toy, tmp_path, monkeypatch):
    from ssldyn.lab.executors import execute
    from ssldyn.lab.runner import plan_run

    def run(self, cfg, ctx):
        raise RuntimeError(f"toy failure <img src=x onerror=alert(1)> {cfg.label}")

    monkeypatch.setattr(toy, "run", run)
    spec = plan_run(toy.name, sets={"label": "<b>x</b>"})
    items = execute([spec], tmp_path)
    assert items[0].status == "failed"
    html = build_report(tmp_path).read_text()
    p = Collector()
    p.feed(html)
    assert "img" not in p.tags and "b" not in p.tags  # the error's markup is text, not elements
    assert "Failed runs" in html
    # the failed run's row: its experiment, its hash and its error (then where it was raised), escaped
    assert (f"<tr><td>{toy.name}</td><td><code>{spec.digest}</code></td><td>RuntimeError: toy failure "
            "&lt;img src=x onerror=alert(1)&gt; &lt;b&gt;x&lt;/b&gt; at test_report.py:") in html  # fmt: skip


def _headline_and_badge(html: str, name: str) -> tuple[str, str, str]:
    import re

    headline = re.search(r"<p id='headline'>(.*?) · built", html).group(1)
    art = re.search(rf"<article id='{re.escape(name)}'>(.*?)</article>", html, flags=re.S).group(1)
    badge = re.search(r"<span class='badge (\w+)'>([^<]*)</span>", art).groups()
    head_run = re.search(r"run directory ([0-9a-f]{12})</a>", art).group(1)  # the first run block: the headline's
    return headline, " ".join(badge), head_run


def test_variant_in_the_default_output_directory_leaves_the_paper_default_headline(toy_sweep, tmp_path, monkeypatch,
                                                                                   capsys):  # fmt: skip
    """Issue 22: a variant run after a paper-scale run must not change the headline or the badge."""
    from tests.lab.test_cli import run_cli
    from tests.lab.test_results import x0_norm

    monkeypatch.chdir(tmp_path)  # the default output directory: ./ssldyn-runs
    assert run_cli(["run", toy_sweep.name], capsys)[0] == 0  # paper scale, the default 5 seeds: canonical
    assert run_cli(["run", toy_sweep.name, "--quick"], capsys)[0] == 0  # quick scale: canonical too
    assert run_cli(["report"], capsys)[0] == 0
    index = tmp_path / "ssldyn-runs" / "report" / "index.html"
    html = index.read_text()
    before = _headline_and_badge(html, toy_sweep.name)
    # the paper-scale run (n = 16, lr = 0.2, seeds 0..4) passes rms-small (0.8^10 ‖x_0‖/4 < 0.5 for every seed)
    rms = [0.8**10 * x0_norm(s, 16) / 4 for s in range(5)]
    assert (
        max(rms) < 0.5
        and before[0].startswith("1/1 paper and consequence claims pass")
        and before[1] == "bp 1/1 claims pass"
    )
    paper_hash = [p.parent.name for p in (tmp_path / "ssldyn-runs" / toy_sweep.name).glob("*/config.json")
                  if '"preset": "paper"' in p.read_text()][0]  # fmt: skip
    assert before[2] == paper_hash
    assert "Paper scale and quick, side by side" in html  # both canonical runs shown
    # a variant whose claim does not pass (3 seeds: inconclusive or failing), run last into the same directory
    code, out, _ = run_cli(["run", toy_sweep.name, "--quick", "--set", "lr=0.01"], capsys)
    assert code == 0 and ("FAIL" in out or "INCONCLUSIVE" in out)
    assert run_cli(["report"], capsys)[0] == 0
    html = index.read_text()
    assert _headline_and_badge(html, toy_sweep.name) == before
    assert "lr=0.01, seeds=0..2 (quick) · 0/1 claims pass" in html  # the variant, folded under its label
