"""The HTTP memory routes on a shared project root: the scope keeps its name (`workspace`) and
every answer naming it adds `"shared": "<key>"`; the global root's answers do not."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from acp_memory.config import Config, Paths

# The HTTP tests' kit lives beside them, where pytest puts it on sys.path only when it collects
# one of them (as team_kit.py does).
sys.path.append(str(Path(__file__).resolve().parents[1] / "http"))
from httpkit import served
from test_http_memory import memory_url, put

pytestmark = pytest.mark.anyio

KEY = "github.com/org/repo"


async def test_every_answer_naming_the_shared_workspace_adds_its_key(
    clone: Paths, shared_config: Config
) -> None:
    paths, cfg = clone, shared_config
    async with served(cfg, paths) as api:
        sid = await api.new_session()
        roots = (await api.client.get(memory_url(sid, "tree"))).json()["roots"]
        written = await put(api, sid, "workspace", "api/auth.md", "Tokens expire in 15 min.\n")
        mine = await put(api, sid, "global", "prefs.md", "I like tabs.\n")
        tree = (await api.client.get(memory_url(sid, "tree"),
                                     params={"root": "workspace"})).json()
        read = (await api.client.get(memory_url(sid, "file"),
                                     params={"root": "workspace", "path": "api/auth.md"})).json()
        made = (await api.client.post(memory_url(sid, "dir"),
                                      json={"root": "workspace", "path": "ops"})).json()
        hits = (await api.client.get(memory_url(sid, "search"),
                                     params={"q": "tokens expire"})).json()["hits"]
        changes = (await api.client.get(memory_url(sid, "history"))).json()["changes"]
        deleted = (await api.client.request("DELETE", memory_url(sid, "file"),
                                            params={"root": "workspace", "path": "ops"})).json()
    assert [(r["root"], r.get("shared")) for r in roots] == [("global", None),
                                                            ("workspace", KEY)]
    assert (written["root"], written["shared"]) == ("workspace", KEY)
    assert "shared" not in mine
    assert tree["shared"] == KEY and read["shared"] == KEY and made["shared"] == KEY
    assert deleted["shared"] == KEY
    assert [(h["root"], h["shared"]) for h in hits] == [("workspace", KEY)]
    assert {(c["root"], c.get("shared")) for c in changes} == {("workspace", KEY),
                                                              ("global", None)}
