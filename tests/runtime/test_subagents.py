"""A spawn_agent child's turn as its task runs it: the shared child-turn path of subagents."""

from __future__ import annotations

import pytest
from engine.turnkit import fake_config, prompt, stored_messages, turn_agent
from fakes.openai_server import FakeOpenAI
from fakes.script import call, error, text, tool_calls
from runtime.test_memory_run import meta, task_log

pytestmark = pytest.mark.anyio


async def test_a_child_whose_model_fails_fails_its_task_with_the_providers_reason(paths):
    async with FakeOpenAI() as server:
        server.script(
            tool_calls(call("spawn_agent", {"prompt": "Count the files.", "name": "counter"})),
            error(402, "subscription expired"),  # the child's model call
            text("It failed."),
        )
        async with turn_agent(fake_config(server.base_url), paths) as (ed, _):
            sid = await ed.start_session(paths.cwd)
            assert await prompt(ed, sid, "delegate it") == "end_turn"
    reason = "402 Payment Required: subscription expired"
    record = meta(paths, sid, "bg_1")
    assert record["status"] == "failed" and record["error"] == reason
    assert "[the child's model failed:" in task_log(paths, sid, "bg_1")
    (result,) = [m for m in stored_messages(paths, sid) if m["role"] == "tool"]
    assert reason in result["content"]
