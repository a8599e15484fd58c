from __future__ import annotations

import pytest
from fakes.streams import collect

from acp_memory.llm.offline.provider import OfflineProvider
from acp_memory.llm.types import ChatRequest, Finished, Message, TextDelta, ToolCall, ToolCallReady

pytestmark = pytest.mark.anyio

CONTEXT = Message("user", "<turn_context> Runtime state\n</turn_context>")


async def _events(*messages: Message):
    request = ChatRequest("default", [*messages, CONTEXT], cache_prefix_len=len(messages))
    return await collect(OfflineProvider().stream(request))


async def test_it_says_it_is_the_offline_model_and_echoes_the_message():
    events = await _events(Message("system", "sys"), Message("user", "hello there"))
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert "offline model" in text and '"hello there"' in text
    assert "turn_context" not in text and "Runtime state" not in text
    assert events[-1] == Finished("stop", events[-1].usage)


async def test_the_same_conversation_gets_the_same_answer():
    convo = (Message("user", "one"), Message("assistant", "x"), Message("user", "two"))
    assert await _events(*convo) == await _events(*convo)


async def test_a_tool_directive_becomes_tool_calls():
    events = await _events(
        Message("user", 'please\n/tool read_file {"path": "a.md"}\n/tool list_directory')
    )
    calls = [e.call for e in events if isinstance(e, ToolCallReady)]
    assert [(c.name, c.arguments) for c in calls] == [
        ("read_file", '{"path": "a.md"}'),
        ("list_directory", "{}"),
    ]
    assert len({c.id for c in calls}) == 2
    assert isinstance(events[-1], Finished) and events[-1].reason == "tool_calls"


async def test_tool_results_are_reported_and_not_called_again():
    call = ToolCall("offline_1_0", "read_file", '{"path": "a.md"}')
    events = await _events(
        Message("user", '/tool read_file {"path": "a.md"}'),
        Message("assistant", "", tool_calls=(call,)),
        Message("tool", "file contents here", tool_call_id=call.id, name="read_file"),
    )
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert "read_file returned" in text and "file contents here" in text
    assert not any(isinstance(e, ToolCallReady) for e in events)
