"""The web page in a real headless Chromium: Debian's `chromium` driven through its
version-matched `chromium-driver` by Selenium, against `acp-memory http` run as a subprocess
on a home of its own, the offline model slowed down so that a memory run can be watched.

Without a browser (or selenium) the tests are skipped, naming what to install; with
ACP_MEMORY_BROWSER_TESTS=required, as .ci/run sets it, they fail instead.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
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
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """`acp-memory http` on a free port, with a config and notes in both roots."""
    if webpage is None:
        _unavailable("selenium is not installed: pip install '.[test]'")
    if webpage.find_browser() is None:
        _unavailable(f"no Chromium with chromium-driver; install them: {webpage.INSTALL}")
    base = tmp_path_factory.mktemp("site")
    home, project = base / "home", base / "project"
    webpage.seed(home, project)
    env = {k: v for k, v in os.environ.items() if k != "ACP_MEMORY_HOME"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "acp_memory", "http", "--home", str(home), "--cwd", str(project),
         "--port", "0", "--log-level", "error"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env,
    )
    try:
        yield webpage.Site(webpage.listening_url(proc.stderr), home, project)
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=webpage.BOUND_S)
        assert proc.returncode == 0, err.decode(errors="replace")


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
