"""memory.review: ask over the HTTP API: a turn has no editor to ask, so its memory run's
change is held for approval, never written and never lost."""

from __future__ import annotations

import pytest
from httpkit import memory_config, served

from acp_memory.memory.history.journal import Journal

pytestmark = pytest.mark.anyio


async def test_an_http_turns_memory_save_is_held_for_approval(paths):
    async with served(memory_config(review="ask"), paths) as api:
        sid = await api.new_session()
        resp = await api.prompt(sid, "Remember that my favourite fruit is the mango.")
        assert resp.status_code == 200, resp.text
        messages = (await api.client.get(f"/coddy/sessions/{sid}/messages")).json()
    reply = messages["messages"][-1]["content"]
    assert "Not saved yet: held for approval (pnd_" in reply
    assert not list((paths.home / "memory").rglob("*.md"))
    journal = Journal(paths.home / "history" / "journal.sqlite3")
    try:
        (held,) = journal.held(session_id=sid)
    finally:
        journal.close()
    assert (held.scope, held.action, held.source.surface) == ("global", "create", "memory_run")
    assert held.id in reply
