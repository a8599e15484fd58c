"""What the editor sees of a turn: message and thought chunks as they stream, tool calls with
kind, title, locations and raw input, and their results. The harness validates every update
against the official ACP schema; these tests check the content."""

from __future__ import annotations

import pytest
from fakes.openai_server import FakeOpenAI
from fakes.script import call, text, tool_calls
from turnkit import fake_config, prompt, stored_messages, turn_agent, updates_of

pytestmark = pytest.mark.anyio


async def test_a_turn_streams_thoughts_text_tool_calls_and_their_results(paths):
    (paths.cwd / "a.md").write_text("alpha\n")
    async with FakeOpenAI() as server:
        server.script(
            tool_calls(
                call("read_file", {"path": "a.md"}, id="r1", chunks=4),
                reasoning="I should read it.",
                text="Reading.",
            ),
            text("It says alpha.", chunks=4, reasoning="Got it."),
        )
        async with turn_agent(fake_config(server.base_url), paths) as (ed, _):
            sid = await ed.start_session(paths.cwd)
            assert await prompt(ed, sid, "What is in a.md?") == "end_turn"
            updates = [u for s, u in ed.client.updates if s == sid]
            kinds = ed.client.kinds(sid)

    # Streamed piece by piece, not as one final message.
    assert kinds.count("agent_message_chunk") == 1 + 4
    assert kinds.count("agent_thought_chunk") == 1 + 4
    assert ed.client.text(sid) == "Reading.It says alpha."
    assert ed.client.text(sid, "agent_thought_chunk") == "I should read it.Got it."
    # Thought, then text, then the tool call, then its result, then the answer; then the
    # session's title.
    order = [k for i, k in enumerate(kinds) if i == 0 or kinds[i - 1] != k]
    assert order == [
        "agent_thought_chunk", "agent_message_chunk", "tool_call", "tool_call_update",
        "agent_thought_chunk", "agent_message_chunk", "session_info_update",
    ]
    start = next(u for u in updates if u.session_update == "tool_call")
    assert (start.tool_call_id, start.kind, start.title) == ("r1", "read", "Read a.md")
    assert start.status == "in_progress"
    assert start.raw_input == {"path": "a.md"}
    assert [loc.path for loc in start.locations] == [str((paths.cwd / "a.md").resolve())]
    done = next(u for u in updates if u.session_update == "tool_call_update")
    assert (done.tool_call_id, done.status) == ("r1", "completed")
    assert [c.content.text for c in done.content] == ["alpha\n"]
    assert [loc.path for loc in done.locations] == [str((paths.cwd / "a.md").resolve())]
    # The transcript keeps the same story, reasoning included.
    stored = stored_messages(paths, sid)
    assert stored[1]["reasoning"] == "I should read it."
    assert stored[1]["toolCalls"][0] == {
        "id": "r1", "name": "read_file", "arguments": '{"path": "a.md"}',
        "title": "Read a.md", "kind": "read",
        "locations": [str((paths.cwd / "a.md").resolve())],
    }
    stored[2].pop("createdAt", None)
    assert stored[2] == {
        "role": "tool", "content": "alpha\n", "toolCallId": "r1", "name": "read_file",
        "locations": [str((paths.cwd / "a.md").resolve())],
    }
    assert stored[3]["content"] == "It says alpha."


async def test_a_failing_tool_reports_failed_with_the_error_text(paths):
    async with FakeOpenAI() as server:
        server.script(
            tool_calls(call("read_file", {"path": "missing.txt"}, id="m1")),
            text("It does not exist."),
        )
        async with turn_agent(fake_config(server.base_url), paths) as (ed, _):
            sid = await ed.start_session(paths.cwd)
            assert await prompt(ed, sid, "Read missing.txt") == "end_turn"
            done = updates_of(ed, sid, "tool_call_update")[0]
    assert done.status == "failed"
    assert "cannot read missing.txt" in done.content[0].content.text
