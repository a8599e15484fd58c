"""A memory run's changes reach the journal under the home with where they came from: the
parent session, the run's task and the first line of the turn's message (redacted)."""

from __future__ import annotations

import pytest
from engine.turnkit import prompt, turn_agent
from fakes.script import call, text, tool_calls
from runtime.test_memory_run import MemoryRoutedOpenAI, memory_config

from acp_memory.config import Paths
from acp_memory.memory.history.journal import Journal
from acp_memory.memory.history.records import ChangeSource

pytestmark = pytest.mark.anyio


async def test_a_persist_through_the_memory_run_is_journaled_with_session_task_and_message(
    paths: Paths,
) -> None:
    save = {"title": "Tea", "body": "The user drinks green tea.", "scope": "global"}
    async with MemoryRoutedOpenAI() as server:
        server.child = [tool_calls(call("memory_save", save)), text("Saved: green tea.")]
        server.script(text("Noted."))
        async with turn_agent(memory_config(server), paths) as (ed, _):
            sid = await ed.start_session(paths.cwd)
            message = ("Remember that I drink green tea; my token is "
                       "ghp_0123456789abcdefghijABCDEFGHIJ012345\nsecond line")
            assert await prompt(ed, sid, message) == "end_turn"
    journal = Journal(paths.history_dir / "journal.sqlite3")
    try:
        (change,) = journal.changes([paths.home / "memory"])
    finally:
        journal.close()
    assert (change.action, change.path, change.scope) == ("create", "tea.md", "global")
    assert change.source == ChangeSource(
        "memory_run", sid, "bg_1",
        "Remember that I drink green tea; my token is [REDACTED:github_token]")
    assert not any(paths.home.glob("memory/**/*.sqlite3"))  # never inside a root
