"""The web page on a shared project root (memory.shared) whose server is out of reach: the
tree names the workspace root with its project key, and a search says it answered from the
local copy."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("selenium", reason="selenium is in the test extra: pip install '.[test]'")

import webpage
from selenium.webdriver.common.keys import Keys

pytestmark = pytest.mark.browser

KEY = "github.com/org/repo"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory, browser_ready: None) -> Iterator[Any]:
    """`acp-memory http` in a clone of the team's repository, its DSN a server not running."""
    base = tmp_path_factory.mktemp("shared-site")
    home, project, gone = base / "home", base / "project", base / "no-server"
    home.mkdir()
    gone.mkdir()
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    subprocess.run(["git", "-C", str(project), "remote", "add", "origin",
                    "git@github.com:Org/Repo.git"], check=True)
    (home / "config.yaml").write_text(
        f'memory:\n  shared:\n    dsn: "postgresql://alice@/team?host={gone}"\n')
    with webpage.serve(home, project) as served:
        yield served


def test_the_tree_names_the_shared_root_and_a_search_says_it_is_offline(page: Any) -> None:
    page.open()
    assert page.node(f"workspace (shared: {KEY})").get_attribute("data-root") == "workspace"
    page.node("global")
    page.one("#search-q").send_keys("deploy keys", Keys.ENTER)
    page.wait(lambda: "shared memory offline" in page.text("#search-results .hint"),
              "the offline marker")
    assert page.text("#search-results .hint") == (
        "No note matches “deploy keys”. (shared memory offline: synced never)")
    assert page.script_errors() == []
