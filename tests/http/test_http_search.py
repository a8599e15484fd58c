"""/coddy/sessions/{id}/memory/search over a real socket: the store's ranked search over both
roots of a session, each snippet cut into runs with the matches flagged."""

from __future__ import annotations

import threading
from pathlib import Path

import anyio
import pytest
from httpkit import served

from acp_memory.config import Config
from acp_memory.config.models import MemoryConfig
from acp_memory.memory.index.indexes import SearchIndexes

pytestmark = pytest.mark.anyio


@pytest.fixture
def cfg(tmp_path) -> Config:
    return Config(memory=MemoryConfig(dir=str(tmp_path / "global-notes")))


def write_notes(cfg: Config, paths) -> None:
    global_root = Path(cfg.memory.dir)
    (global_root / "food").mkdir(parents=True)
    (global_root / "food" / "fruit.md").write_text("My favourite fruit is the mango.\n")
    workspace = paths.cwd / "memory"
    workspace.mkdir()
    (workspace / "shop.md").write_text("Buy mangoes and tea on Friday.\n")
    (workspace / "unrelated.md").write_text("The build uses hatchling.\n")


async def test_a_search_ranks_notes_of_both_roots_and_marks_the_matches(cfg, paths):
    write_notes(cfg, paths)
    async with served(cfg, paths) as api:
        sid = await api.new_session()
        resp = await api.client.get(
            f"/coddy/sessions/{sid}/memory/search", params={"q": "favourite mango"}
        )
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["object"] == "memory_search" and body["query"] == "favourite mango"
    assert [(h["root"], h["path"]) for h in body["hits"]] == [
        ("global", "food/fruit.md"), ("workspace", "shop.md"),
    ]
    best = body["hits"][0]
    assert best["snippet"] == "My favourite fruit is the mango."
    assert best["runs"] == [
        {"text": "My ", "match": False},
        {"text": "favourite", "match": True},
        {"text": " fruit is the ", "match": False},
        {"text": "mango", "match": True},
        {"text": ".", "match": False},
    ]
    # A stem matches the words it begins, as the search ranks them.
    assert {"text": "mango", "match": True} in body["hits"][1]["runs"]


async def test_a_search_of_one_root_leaves_the_other_out(cfg, paths):
    write_notes(cfg, paths)
    async with served(cfg, paths) as api:
        sid = await api.new_session()
        resp = await api.client.get(
            f"/coddy/sessions/{sid}/memory/search",
            params={"q": "mango", "root": "workspace", "limit": 5},
        )
    assert [(h["root"], h["path"]) for h in resp.json()["hits"]] == [("workspace", "shop.md")]


@pytest.mark.parametrize(
    ("params", "says"),
    [
        ({}, "query parameter q"),
        ({"q": ""}, "query parameter q"),
        ({"q": "   "}, "the query is empty"),
        ({"q": "x", "root": "elsewhere"}, "query parameter root"),
        ({"q": "x", "limit": 0}, "query parameter limit"),
    ],
)
async def test_a_bad_search_is_400_naming_the_parameter(cfg, paths, params, says):
    async with served(cfg, paths) as api:
        sid = await api.new_session()
        resp = await api.client.get(f"/coddy/sessions/{sid}/memory/search", params=params)
    assert resp.status_code == 400
    assert says in resp.json()["error"]["message"]


async def test_a_search_in_an_unknown_session_is_404(cfg, paths):
    async with served(cfg, paths) as api:
        resp = await api.client.get(
            f"/coddy/sessions/sess_{'0' * 24}/memory/search", params={"q": "mango"}
        )
    assert resp.status_code == 404


async def test_the_page_s_routes_join_the_openapi_document(cfg, paths):
    async with served(cfg, paths) as api:
        doc = (await api.client.get("/openapi.json")).json()
    paths_doc = doc["paths"]
    assert set(paths_doc["/coddy/sessions/{id}/memory/search"]) == {"get"}
    assert set(paths_doc["/coddy/settings/memory"]) == {"get", "put"}
    assert set(paths_doc["/coddy/markdown"]) == {"post"}
    assert set(paths_doc["/coddy/server"]) == {"get"}
    assert "/" not in paths_doc  # the page is not part of the API
    for path in ("/coddy/sessions/{id}/memory/search", "/coddy/settings/memory"):
        for operation in paths_doc[path].values():
            assert "422" not in operation["responses"]


async def test_a_search_while_the_index_is_built_scans_the_files_and_says_it_is_partial(
    cfg, paths, monkeypatch
):
    write_notes(cfg, paths)
    release, built = threading.Event(), threading.Event()
    roots_built: set[Path] = set()
    build = SearchIndexes.build

    def held_back(self, root, progress=None, stop=None):
        release.wait(10)
        try:
            return build(self, root, progress, stop)
        finally:
            roots_built.add(root)
            if len(roots_built) == 2:  # the global root and the workspace's
                built.set()

    monkeypatch.setattr(SearchIndexes, "build", held_back)
    async with served(cfg, paths) as api:
        sid = await api.new_session()
        url = f"/coddy/sessions/{sid}/memory/search"
        during = (await api.client.get(url, params={"q": "favourite mango"})).json()
        release.set()
        with anyio.fail_after(10):
            await anyio.to_thread.run_sync(built.wait)
        after = (await api.client.get(url, params={"q": "favourite mango"})).json()
    assert during["partial"] is True
    best = during["hits"][0]
    assert (best["root"], best["path"]) == ("global", "food/fruit.md")
    assert "partial" not in after
    assert [(h["root"], h["path"]) for h in after["hits"]] == [
        ("global", "food/fruit.md"), ("workspace", "shop.md"),
    ]
