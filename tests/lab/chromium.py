"""Headless Chromium for the browser tests, driven by Playwright for Python (the ``test`` extra).

Playwright drives the *system* Chromium (``executable_path``): no browser is downloaded. The
tests that use :func:`chromium_page` are skipped, with the reason, when there is no
``chromium`` binary on the ``PATH`` or Playwright is not installed::

    pytestmark = [pytest.mark.browser, pytest.mark.skipif(bool(SKIP), reason=SKIP)]

    def test_x():
        with chromium_page() as page:
            page.goto(path.resolve().as_uri())
            assert page.evaluate("document.title") == "..."
"""

from __future__ import annotations

import importlib.util
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
HAVE_PLAYWRIGHT = importlib.util.find_spec("playwright") is not None
#: why the browser tests cannot run here ("" when they can)
SKIP = (
    "no chromium binary on the PATH (apt-get install chromium)"
    if CHROMIUM is None
    else "Playwright is not installed (pip install -e '.[test]')"
    if not HAVE_PLAYWRIGHT
    else ""
)


@contextmanager
def chromium_page(width: int = 1200, height: int = 900, scripts: bool = True) -> Iterator[Any]:
    """A Playwright ``Page`` of a fresh headless system Chromium (``scripts=False``: JavaScript off).

    ``page.evaluate`` still works with the page's scripts off (Playwright evaluates in the page,
    not as one of its scripts).
    """
    if SKIP:
        raise RuntimeError(SKIP)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--disable-gpu"])
        try:
            context = browser.new_context(viewport={"width": width, "height": height}, java_script_enabled=scripts)
            yield context.new_page()
        finally:
            browser.close()


def images_loaded(page: Any, timeout_ms: float = 30_000) -> None:
    """Wait until every non-lazy image of the page has loaded (or failed to)."""
    page.wait_for_function(
        "Array.from(document.images).filter(i => i.loading !== 'lazy').every(i => i.complete)", timeout=timeout_ms
    )
