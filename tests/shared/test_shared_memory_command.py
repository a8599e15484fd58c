"""/memory on a shared project root: the root named `project (shared: <key>)`, its notes
counted in the local copy."""

from __future__ import annotations

from typing import Any

import pytest
from engine.turnkit import prompt, updates_of
from harness import in_process_agent

from acp_memory.config import Config, Paths
from acp_memory.memory.roots import shared_copy_folder

pytestmark = pytest.mark.anyio

KEY = "github.com/org/repo"


def said(ed: Any, sid: str) -> str:
    return "".join(u.content.text for u in updates_of(ed, sid, "agent_message_chunk"))


async def test_memory_names_the_shared_project_root_with_its_key(
    clone: Paths, shared_config: Config
) -> None:
    paths, cfg = clone, shared_config
    async with in_process_agent(cfg, paths) as ed:
        sid = await ed.start_session(paths.cwd)
        assert await prompt(ed, sid, "/memory") == "end_turn"
        status = said(ed, sid)
        ed.client.updates.clear()
        assert await prompt(ed, sid, "/memory log") == "end_turn"
        log = said(ed, sid)
    copy = shared_copy_folder(paths.cache_dir, KEY) / "notes"
    assert f"- project (shared: {KEY}): 0 notes in {copy}" in status
    assert log == (f"No changes of the global or project (shared: {KEY}) notes in the memory "
                   "history yet.")
