"""The browser the web tests play in: Debian's chromium (``/usr/bin/chromium``) headless,
driven by Playwright for Python; a test is skipped when either is missing, and a test of the
in-browser engine when ``web/node_modules`` (``npm ci`` in ``web/``) is."""

import os
from pathlib import Path

import pytest

from ttt_research.web import server
from ttt_research.web.server import find_node_modules

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]


def _playwright():
    if not Path(CHROMIUM).is_file():
        pytest.skip(f"chromium is not installed at {CHROMIUM} (apt-get install -y chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("Playwright for Python is not installed (pip install -e '.[dev]')")
    return sync_playwright


@pytest.fixture(scope="module")
def browser():
    sync_playwright = _playwright()
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield b
        b.close()


@pytest.fixture(autouse=True)
def _hide_node_modules(monkeypatch):
    """``TTT_TEST_NO_NODE_MODULES=1``: the tests run as on a clone without ``npm ci`` (used by
    test_web_without_npm.py to prove that every in-browser test then skips, whatever
    chromium's state)."""
    if os.environ.get("TTT_TEST_NO_NODE_MODULES") == "1":
        monkeypatch.setattr(server, "NODE_MODULES", Path("/nonexistent/web/node_modules"))


@pytest.fixture
def ort_installed():
    """Skip a test of the in-browser engine when the checkout has no onnxruntime-web."""
    if find_node_modules() is None:
        pytest.skip("web/node_modules is missing (run `npm ci` in web/)")


@pytest.fixture
def page(browser):
    context = browser.new_context()
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    yield page
    context.close()
    assert not errors, errors
