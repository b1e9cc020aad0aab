"""What the browser tests share: the system's Chromium, driven by Playwright, and the folder for screenshots; and
a failed test marked on its item, so the fixture that opened its pages saves screenshots."""
import os
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("CHROMIUM", shutil.which("chromium") or "/usr/bin/chromium")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    if outcome.get_result().failed:
        item.failed = True


@pytest.fixture(scope="session")
def artifacts() -> Path:
    """Where screenshots go: ``$BROWSER_ARTIFACTS``, by default ``browser-artifacts/``."""
    return Path(os.environ.get("BROWSER_ARTIFACTS", ROOT / "browser-artifacts"))


@pytest.fixture(scope="module")
def browser():
    playwright = pytest.importorskip("playwright.sync_api")
    if not Path(CHROMIUM).exists():  # these tests exist to run in a browser: no silent skip
        pytest.fail(f"no Chromium at {CHROMIUM}: apt-get install chromium, or set CHROMIUM=/path/to/chromium")
    with playwright.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield chromium
        chromium.close()
