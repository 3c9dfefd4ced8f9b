"""The report's study pages: the plotted numbers (against the toy's closed form), the page's
table, plots and stepper markup, and its static fallback. The stepper in a browser is tested
in ``test_report_browser.py``."""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from scipy import stats

from ssldyn.lab.executors import execute
from ssldyn.lab.report import build_report
from ssldyn.lab.report_study import claim_points, plot_against_axes, study_page_path, summary_points
from ssldyn.lab.runner import plan_run
from ssldyn.lab.study import record_study
from ssldyn.results import load
from tests.lab.test_results import x0_norm

LRS = (0.2, 0.05, 0.01)
SEEDS = [0, 1, 2]
N, STEPS = 8, 10


def closed_form_rms(lr: float) -> list[float]:
    return [(1 - lr) ** STEPS * x0_norm(s, N) / np.sqrt(N) for s in SEEDS]


@pytest.fixture
def sweep(toy_sweep, tmp_path):
    specs = [plan_run(toy_sweep.name, quick=True, sets={"lr": lr}) for lr in LRS]
    execute(specs, tmp_path)
    return tmp_path, record_study(tmp_path, specs, ["lr"])


def test_claim_and_summary_points_are_the_seed_statistics(sweep):
    out, study = sweep
    res = load(out)
    pts = claim_points(res, study, "rms-small")
    assert pts["lr"].tolist() == list(LRS)
    for _, row in pts.iterrows():
        v = closed_form_rms(row["lr"])
        half = stats.t.ppf(0.975, len(v) - 1) * stats.sem(v)
        np.testing.assert_allclose(row["values"], v, rtol=1e-5)
        np.testing.assert_allclose([row["estimate"], row["lo"], row["hi"]], [np.mean(v), np.mean(v) - half,
                                   np.mean(v) + half], rtol=1e-4)  # fmt: skip
        assert row["passed"] == (np.mean(v) < 0.5 and sum(x < 0.5 for x in v) >= 0.8 * len(v))
    summ = summary_points(res, study, "rms0")  # not a claim: the mean of a summary number with its t interval
    for _, row in summ.iterrows():
        v = [x0_norm(s, N) / np.sqrt(N) for s in SEEDS]
        half = stats.t.ppf(0.975, 2) * stats.sem(v)
        np.testing.assert_allclose([row["estimate"], row["lo"], row["hi"]], [np.mean(v), np.mean(v) - half,
                                   np.mean(v) + half], rtol=1e-12)  # fmt: skip


def test_plot_draws_the_points_intervals_seeds_and_threshold(sweep, monkeypatch, tmp_path):
    out, study = sweep
    pts = claim_points(load(out), study, "rms-small")
    captured = {}

    def keep(fig, path, dpi=110):
        captured["fig"] = fig
        return Path(path)

    monkeypatch.setattr("ssldyn.viz.common.save_figure", keep)
    plot_against_axes(pts, study, "rms-small", tmp_path / "p.png")
    ax = captured["fig"].axes[0]
    line = ax.lines[0]  # the statistic against lr, in grid order
    np.testing.assert_allclose(line.get_xdata(), LRS)
    np.testing.assert_allclose(line.get_ydata(), [np.mean(closed_form_rms(lr)) for lr in LRS], rtol=1e-5)
    assert ax.get_xscale() == "log" and ax.get_xlabel() == "lr"  # lr spans a factor 20
    seeds = np.concatenate([c.get_offsets()[:, 1] for c in ax.collections if len(c.get_offsets()) == len(SEEDS)])
    np.testing.assert_allclose(np.sort(seeds), np.sort(np.concatenate([closed_form_rms(lr) for lr in LRS])),
                               rtol=1e-5)  # every seed is a dot  # fmt: skip
    assert any(
        np.shape(ln.get_ydata()) == (2,) and np.allclose(ln.get_ydata(), 0.5) for ln in ax.lines[1:]
    )  # the claim's threshold "< 0.5"


class Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.stack, self.imgs, self.links, self.points, self.options, self.form, self.scripts = (
            [],
            [],
            [],
            [],
            [],
            {},
            [],
        )

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "img":
            self.imgs.append(a["src"])
        if tag == "a":
            self.links.append(a["href"])
        if tag == "section" and "point" in a.get("class", ""):
            self.points.append(a)
        if tag == "option":
            self.options.append(a["value"])
        if tag == "form":
            self.form = a
        if tag == "script":
            self.scripts.append(a)


def test_study_page_table_plots_and_static_stepper(sweep):
    out, study = sweep
    index = build_report(out)
    page = study_page_path(out / "report", study)
    html = page.read_text()
    p = Page()
    p.feed(html)
    # the index links to the page and lists the study under the experiment
    assert page.relative_to(out / "report").as_posix() in index.read_text() and study.title in index.read_text()
    # one plot per claim and per numeric summary number (rms0, rms; 'kind' is text), each a real PNG
    plots = [s for s in p.imgs if "/claim-" in s or "/summary-" in s or s.startswith(study.id)]
    assert sorted(Path(s).name for s in plots) == sorted(["claim-rms-small.png", "claim-ratio-exact.png",
                                                          "summary-rms0.png", "summary-rms.png"])  # fmt: skip
    for src in p.imgs:
        f = (page.parent / src).resolve()
        with Image.open(f) as img:
            assert img.size[0] > 100
    assert all(not (s.startswith("http") or s.startswith("//")) for s in p.imgs + p.links)  # offline
    assert p.scripts == [{}] and "cdn" not in html.lower()  # one inline script, nothing fetched
    # the stepper: a select per axis over the axis values; hidden until the script shows it
    assert "hidden" in p.form and p.options == ["0", "1", "2"]
    for i, lr in enumerate(LRS):
        assert f"<option value='{i}'>{lr}</option>" in html
    # static fallback: every grid point is visible, each with its run's figure and claims
    assert [pt.get("data-point") for pt in p.points] == ["a0=0", "a0=1", "a0=2"]
    assert not any("hidden" in pt for pt in p.points)
    for lr in LRS:
        assert f"<h3>lr = {lr}</h3>" in html
    assert sum("figures/sweep.png" in s for s in p.imgs) == 3
    # the grid table: each point's claim cell, with the verdict and the seeds that hold
    for lr in LRS:
        v = closed_form_rms(lr)
        k = sum(x < 0.5 for x in v)
        assert f"({k}/3)" in html


def test_report_lists_damaged_runs_and_still_builds(sweep):
    out, study = sweep
    res = load(out)
    bad = res.records[0].path
    (bad / "meta.json").write_text("[")
    html = build_report(out).read_text()
    assert "Damaged runs" in html and str(bad) in html
    page = study_page_path(out / "report", study).read_text()
    assert "not finished" in page  # the damaged run's grid point is shown as missing
