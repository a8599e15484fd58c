"""How a turn ends (the step bound, a length stop) and how bad tool calls go back to the model
as tool errors while the turn goes on."""

from __future__ import annotations

import pytest
from fakes.openai_server import FakeOpenAI
from fakes.script import call, text, tool_calls
from turnkit import HoldTool, fake_config, prompt, stored_messages, turn_agent, updates_of

pytestmark = pytest.mark.anyio


async def test_the_step_bound_ends_the_turn_with_max_turn_requests(paths):
    async with FakeOpenAI(default=tool_calls(call("list_directory", {}))) as server:
        cfg = fake_config(server.base_url, max_turns=3)
        async with turn_agent(cfg, paths) as (ed, _):
            sid = await ed.start_session(paths.cwd)
            assert await prompt(ed, sid, "Loop forever.") == "max_turn_requests"
            assert len(server.requests) == 3  # agent.max_turns model steps, not one more
            # The bound is per turn: the next turn gets its own steps.
            server.default = text("Fine.")
            assert await prompt(ed, sid, "Stop now.") == "end_turn"
    assert len(server.requests) == 4
    roles = [m["role"] for m in stored_messages(paths, sid)]
    assert roles == ["user", *["assistant", "tool"] * 3, "user", "assistant"]


async def test_a_length_stop_ends_the_turn_with_max_tokens(paths):
    async with FakeOpenAI() as server:
        server.script(text("This answer was cut sh", chunks=3, finish="length"))
        async with turn_agent(fake_config(server.base_url), paths) as (ed, _):
            sid = await ed.start_session(paths.cwd)
            assert await prompt(ed, sid, "Write a novel.") == "max_tokens"
            assert ed.client.text(sid) == "This answer was cut sh"
    assert server.requests[0].json["max_tokens"] == 256  # the model's configured bound
    assert stored_messages(paths, sid)[-1]["content"] == "This answer was cut sh"


@pytest.mark.parametrize(
    ("bad_call", "error_words"),
    [
        (call("delete_everything", {}), "no tool named 'delete_everything'"),
        (call("read_file", '{"path": "a.md"'), "not valid JSON"),
        (call("read_file", "[1, 2]"), "must be a JSON object"),
        (call("read_file", {"file": "a.md"}), "invalid arguments for read_file"),
        (call("read_file", {"path": 42}), "path: 42 is not of type 'string'"),
    ],
    ids=["unknown-tool", "broken-json", "not-an-object", "missing-required", "wrong-type"],
)
async def test_a_bad_tool_call_goes_back_to_the_model_as_a_tool_error(paths, bad_call, error_words):
    async with FakeOpenAI() as server:
        server.script(tool_calls(bad_call), text("Sorry, let me answer directly."))
        async with turn_agent(fake_config(server.base_url), paths) as (ed, _):
            sid = await ed.start_session(paths.cwd)
            assert await prompt(ed, sid, "Do it.") == "end_turn"
            update = updates_of(ed, sid, "tool_call_update")[0]
    # The model's next request carries the error as the call's result; the turn went on.
    result = server.requests[1].messages[-2]
    assert result["role"] == "tool" and result["tool_call_id"] == "call_0_1"
    assert result["content"].startswith("Error: ") and error_words in result["content"]
    assert update.status == "failed" and error_words in update.content[0].content.text
    stored = stored_messages(paths, sid)
    assert stored[2]["isError"] is True
    assert stored[-1]["content"] == "Sorry, let me answer directly."


async def test_a_tool_of_another_mode_is_refused_in_ask_mode(paths):
    async with FakeOpenAI() as server:
        server.script(tool_calls(call("hold", {"label": "x"})), text("Read-only here."))
        hold = HoldTool()
        async with turn_agent(fake_config(server.base_url), paths, hold) as (ed, _):
            sid = await ed.start_session(paths.cwd)
            await ed.conn.set_session_mode(session_id=sid, mode_id="ask")
            assert await prompt(ed, sid, "Hold on.") == "end_turn"
    assert not hold.started.is_set()
    result = server.requests[1].messages[-2]["content"]
    assert "no tool named 'hold' in ask mode" in result
    assert "Tools: read_file, list_directory" in result
