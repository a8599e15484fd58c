"""Helpers of the browser tests: the server on a home of its own, and the page in Chromium
with explicit waits and screenshots."""

from __future__ import annotations

import contextlib
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

INSTALL = "apt-get install chromium chromium-driver"
BOUND_S = 15  # every wait on the page or the server
ARTIFACTS = Path(__file__).parents[2] / "test-artifacts" / "browser"
CONFIG = """\
# The browser tests' config: these comments must survive a save from Settings.
providers:
  - {name: offline, type: offline, delay_ms: 400}   # slow enough to watch a run
memory:
  enable: true          # a memory run on every turn
  wait_seconds: 20      # the turn waits for the report
  max_note_bytes: 600   # a long note is refused
"""
AUTH_NOTE = """\
# Auth

Tokens **rotate** daily; see [the docs](https://example.com/auth?a=1&b=2).
Never [click](javascript:window.__pwned=1) or <img src=x onerror="window.__pwned=1">.

- one
- `two`

```
<script>window.__pwned = 1</script>
```
"""


def find_browser() -> tuple[str, str] | None:
    """Chromium and its driver from the system's packages, or None."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    return (chromium, driver) if chromium and driver else None


@dataclass
class Site:
    """A running `acp-memory http` and the folders it works in."""

    url: str
    home: Path
    project: Path

    @property
    def config_file(self) -> Path:
        return self.home / "config.yaml"

    @property
    def global_notes(self) -> Path:
        return self.home / "memory"

    @property
    def workspace_notes(self) -> Path:
        return self.project / "memory"


def seed(home: Path, project: Path) -> None:
    """The config and a few notes in both roots."""
    (home / "memory").mkdir(parents=True)
    (project / "memory" / "api").mkdir(parents=True)
    (home / "config.yaml").write_text(CONFIG)
    (home / "memory" / "fruit.md").write_text("My favourite fruit is the mango.\n")
    (project / "memory" / "api" / "auth.md").write_text(AUTH_NOTE)
    (project / "memory" / "todo.md").write_text("# Todo\n\n- ship the page\n")


@contextlib.contextmanager
def serve(home: Path, project: Path) -> Iterator[Site]:
    """`acp-memory http` on a free port over `home`, its cwd `project`, until the block ends
    (stopped as by SIGTERM, which must end it cleanly)."""
    env = {k: v for k, v in os.environ.items() if k != "ACP_MEMORY_HOME"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "acp_memory", "http", "--home", str(home), "--cwd", str(project),
         "--port", "0", "--log-level", "error"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env,
    )
    try:
        yield Site(listening_url(proc.stderr), home, project)
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=BOUND_S)
        assert proc.returncode == 0, err.decode(errors="replace")


def listening_url(stderr: Any, bound_s: float = BOUND_S) -> str:
    """The address the server prints on stderr once it listens."""
    seen = b""
    deadline = time.monotonic() + bound_s
    while (found := re.search(rb"listening on (http://\S+)", seen)) is None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(f"acp-memory http did not listen: {seen.decode()}")
        ready, _, _ = select.select([stderr], [], [], remaining)
        chunk = os.read(stderr.fileno(), 4096) if ready else b""
        if ready and not chunk:
            raise RuntimeError(f"acp-memory http exited: {seen.decode(errors='replace')}")
        seen += chunk
    return found.group(1).decode()


class Page:
    """The page in the browser."""

    def __init__(self, driver: Any, site: Site) -> None:
        self.driver = driver
        self.site = site
        # A listing the page re-renders while a condition reads it is read again.
        self.waiter = WebDriverWait(
            driver, BOUND_S, poll_frequency=0.05,
            ignored_exceptions=[StaleElementReferenceException],
        )

    def open(self, width: int = 1280, dark: bool = False) -> None:
        """A fresh load of the page at `width` CSS pixels, once its roots and events are up."""
        self.viewport(width, dark)
        self.driver.get(self.site.url + "/")
        self.wait(lambda: len(self.all(".node.root")) == 2, "the two roots")
        self.wait(lambda: self.one("#live").get_attribute("textContent") == "live", "the events")

    def viewport(self, width: int, dark: bool = False) -> None:
        self.driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
            "width": width, "height": 900 if width > 500 else 844,
            "deviceScaleFactor": 1, "mobile": False,
        })
        self.driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {
            "features": [{"name": "prefers-color-scheme", "value": "dark" if dark else "light"}],
        })

    def wait(self, condition: Callable[[], Any], what: str) -> Any:
        return self.waiter.until(lambda _: condition(), f"waiting for {what}")

    def one(self, css: str) -> Any:
        return self.driver.find_element(By.CSS_SELECTOR, css)

    def all(self, css: str) -> list[Any]:
        return list(self.driver.find_elements(By.CSS_SELECTOR, css))

    def text(self, css: str) -> str:
        found = self.all(css)
        return str(found[0].text) if found else ""

    def node(self, name: str) -> Any:
        """The tree's button for an entry, once it is there."""
        return self.wait(
            lambda: next(
                (b for b in self.all("#tree .node") if b.text.split("\n")[0] == name), None
            ),
            f"{name} in the tree",
        )

    def open_folder(self, name: str) -> None:
        """Open a folder of the tree and wait for its listing."""
        button = self.node(name)
        if button.get_attribute("aria-expanded") != "true":
            button.click()
        self.wait(lambda: self.node(name).get_attribute("aria-expanded") == "true", name)

    def open_note(self, *names: str) -> None:
        """Open the folders down to a note, then the note."""
        for name in names[:-1]:
            self.open_folder(name)
        self.node(names[-1]).click()
        self.wait(lambda: self.text("#note-path").endswith(names[-1]), f"the note {names[-1]}")

    def shot(self, name: str) -> Path:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        path = ARTIFACTS / f"{name}.png"
        self.driver.save_screenshot(str(path))
        return path

    def script_errors(self) -> list[str]:
        """The console's errors, leaving out the failed requests a test asked for."""
        return [
            e["message"] for e in self.driver.get_log("browser")
            if e["level"] == "SEVERE" and "Failed to load resource" not in e["message"]
        ]
