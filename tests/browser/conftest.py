"""The web page in a real headless Chromium: Debian's `chromium` driven through its
version-matched `chromium-driver` by Selenium, against `acp-memory http` run as a subprocess
on a home of its own, the offline model slowed down so that a memory run can be watched.

Without a browser (or selenium) the tests are skipped, naming what to install; with
ACP_MEMORY_BROWSER_TESTS=required, as .ci/run sets it, they fail instead.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest


def _unavailable(reason: str) -> None:
    if os.environ.get("ACP_MEMORY_BROWSER_TESTS") == "required":
        pytest.fail(f"the browser tests must run here, but {reason}", pytrace=False)
    pytest.skip(reason)


try:
    import webpage
except ImportError:  # selenium is not installed
    webpage = None


@pytest.fixture(scope="module")
def browser_ready() -> None:
    """Skips (or, where required, fails) a module's tests without a browser to drive."""
    if webpage is None:
        _unavailable("selenium is not installed: pip install '.[test]'")
    if webpage.find_browser() is None:
        _unavailable(f"no Chromium with chromium-driver; install them: {webpage.INSTALL}")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory, browser_ready: None) -> Iterator[Any]:
    """`acp-memory http` on a free port, with a config and notes in both roots."""
    base = tmp_path_factory.mktemp("site")
    home, project = base / "home", base / "project"
    webpage.seed(home, project)
    with webpage.serve(home, project) as served:
        yield served


@pytest.fixture(scope="module")
def driver(site: Any) -> Iterator[Any]:
    """Headless Chromium, its console log kept."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    chromium, chromedriver = webpage.find_browser()
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                 "--window-size=1280,900", "--lang=en-GB"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    browser = webdriver.Chrome(options=options, service=Service(chromedriver))
    try:
        yield browser
    finally:
        browser.quit()


@pytest.fixture
def page(driver: Any, site: Any) -> Any:
    return webpage.Page(driver, site)
