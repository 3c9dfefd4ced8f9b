"""The study page's stepper in headless Chromium (the system Chromium driven by Playwright).

Load the page, screenshot, change the select to another grid point, screenshot again: the
shown grid point's region must change (another run's figure and claims) while the page above
the stepper stays pixel-identical. Without JavaScript every grid point must be shown.
"""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from ssldyn.lab.executors import execute
from ssldyn.lab.report import build_report
from ssldyn.lab.report_study import study_page_path
from ssldyn.lab.runner import plan_run
from ssldyn.lab.study import record_study
from tests.lab.chromium import SKIP, chromium_page, images_loaded

pytestmark = [pytest.mark.browser, pytest.mark.skipif(bool(SKIP), reason=SKIP)]

VISIBLE = "Array.from(document.querySelectorAll('section.point')).filter(p => !p.hidden && p.offsetHeight > 0)"


def rect(page, js: str) -> tuple[int, int, int, int]:
    """``(left, top, right, bottom)`` in viewport pixels of the element ``js`` evaluates to."""
    r = page.evaluate(
        f"(() => {{ const b = ({js}).getBoundingClientRect(); return [b.left, b.top, b.right, b.bottom]; }})()"
    )
    return tuple(int(round(v)) for v in r)


def crop(png: bytes, box: tuple[int, int, int, int]) -> np.ndarray:
    img = Image.open(io.BytesIO(png)).convert("RGB")
    left, top, right, bottom = box
    return np.asarray(img.crop((max(0, left), max(0, top), min(img.width, right), min(img.height, bottom))), dtype=int)


@pytest.fixture
def page(toy_sweep, tmp_path):
    specs = [plan_run(toy_sweep.name, quick=True, sets={"lr": lr}, seeds=2) for lr in (0.2, 0.05, 0.01)]
    execute(specs, tmp_path)
    study = record_study(tmp_path, specs, ["lr"])
    build_report(tmp_path)
    return study_page_path(tmp_path / "report", study)


def test_stepper_changes_the_shown_grid_point(page):
    with chromium_page() as browser:
        browser.goto(page.resolve().as_uri())
        images_loaded(browser)
        # the script shows the stepper and only the first grid point
        assert browser.evaluate("document.getElementById('stepper').hidden") is False
        assert browser.evaluate(f"{VISIBLE}.map(p => p.querySelector('h3').textContent)") == ["lr = 0.2"]
        browser.evaluate("document.querySelector('#step h2').scrollIntoView()")
        before = browser.screenshot()
        form = rect(browser, "document.getElementById('stepper')")
        shown = rect(browser, f"{VISIBLE}[0]")
        browser.select_option("#stepper select", "2")  # as a user picks it (fires input and change)
        images_loaded(browser)
        assert browser.evaluate(f"{VISIBLE}.map(p => p.querySelector('h3').textContent)") == ["lr = 0.01"]
        assert browser.evaluate("window.scrollY > 0")  # still scrolled to the stepper
        after = browser.screenshot()
        shown_after = rect(browser, f"{VISIBLE}[0]")
        assert shown_after[1] == shown[1]  # the grid point's block starts at the same place
        # above the stepper nothing changes; the grid point's region does (another run's figure and claims)
        above = (0, 0, 1200, form[1])
        assert form[1] > 20 and np.array_equal(crop(before, above), crop(after, above))
        region = (shown[0], shown[1], shown[2], min(900, max(shown[3], shown_after[3])))
        a, b = crop(before, region), crop(after, region)
        changed = np.any(a != b, axis=-1).mean()
        assert changed > 0.02, changed
        # the toy's figure draws lr < 0.1 in red: red pixels appear only after the change
        red = lambda x: ((x[..., 0] > 180) & (x[..., 1] < 90) & (x[..., 2] < 90)).sum()  # noqa: E731
        assert red(b) > 500 and red(b) > 5 * red(a)
        # a link to a grid point (the table's run column) selects it too
        browser.evaluate("location.hash = '#point-1'")
        assert browser.evaluate(f"{VISIBLE}.map(p => p.querySelector('h3').textContent)") == ["lr = 0.05"]
        assert browser.evaluate("document.querySelector('#stepper select').value") == "1"
    # without JavaScript: no stepper, every grid point shown one after the other
    with chromium_page(scripts=False) as browser:
        browser.goto(page.resolve().as_uri())
        images_loaded(browser)
        assert browser.evaluate(f"{VISIBLE}.length") == 3
        assert browser.evaluate("document.getElementById('stepper').offsetHeight") == 0
        static = browser.screenshot()
        assert Image.open(io.BytesIO(static)).convert("L").getextrema()[0] < 80  # rendered, not blank


def test_index_renders_in_chromium(page, tmp_path, toy_sweep):
    from ssldyn.lab import run_experiment

    run_experiment(toy_sweep.name, quick=True, out=tmp_path)  # the paper-default run (quick): the headline
    build_report(tmp_path)
    with chromium_page() as browser:
        browser.goto((page.parents[2] / "index.html").resolve().as_uri())
        images_loaded(browser)
        assert browser.evaluate("document.getElementById('headline').textContent").startswith(
            "1/1 paper and consequence claims pass"
        )
        broken = browser.evaluate("Array.from(document.images).filter(i => i.loading !== 'lazy' && !i.naturalWidth)"
                                  ".map(i => i.src)")  # fmt: skip
        assert broken == []
