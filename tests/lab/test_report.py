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


def test_report_lists_failed_runs_escaped(toy, tmp_path):
    from ssldyn.lab.executors import execute
    from ssldyn.lab.runner import plan_run

    items = execute([plan_run(toy.name, sets={"fail": True, "label": "<b>x</b>"})], tmp_path)
    assert items[0].status == "failed"
    html = build_report(tmp_path).read_text()
    assert "Failed runs" in html and "RuntimeError: toy failure" in html
