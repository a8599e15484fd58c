"""The offline model's `/stream N` directive: N short chunks, the same every time."""

from __future__ import annotations

import pytest
from fakes.streams import collect

from acp_memory.llm.offline.provider import OfflineProvider
from acp_memory.llm.types import ChatRequest, Finished, Message, StreamEvent, TextDelta, ToolCall

pytestmark = pytest.mark.anyio


async def _events(*messages: Message) -> list[StreamEvent]:
    return await collect(OfflineProvider().stream(ChatRequest("default", list(messages))))


async def test_a_stream_directive_streams_that_many_short_chunks_then_stops():
    events = await _events(Message("user", "measure this\n/stream 5\n"))
    assert [e.text for e in events if isinstance(e, TextDelta)] == [
        "w0 ",
        "w1 ",
        "w2 ",
        "w3 ",
        "w4 ",
    ]
    assert len(events) == 6 and isinstance(events[-1], Finished) and events[-1].reason == "stop"


async def test_the_stream_is_the_same_every_time():
    message = Message("user", "/stream 300")
    assert await _events(message) == await _events(message)


async def test_only_the_newest_user_message_asks_for_a_stream():
    events = await _events(
        Message("user", "/stream 3"), Message("assistant", "w0 w1 w2"), Message("user", "thanks")
    )
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert "offline model" in text and '"thanks"' in text


async def test_a_stream_directive_inside_a_line_is_just_text():
    events = await _events(Message("user", "please /stream 3 now"))
    assert "w0 " not in [e.text for e in events if isinstance(e, TextDelta)]


async def test_tool_results_are_reported_even_when_they_hold_a_stream_directive():
    call = ToolCall("offline_1_0", "read_file", "{}")
    events = await _events(
        Message("user", "/tool read_file"),
        Message("assistant", "", tool_calls=(call,)),
        Message("tool", "notes.md says\n/stream 3\n", tool_call_id=call.id, name="read_file"),
    )
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert "read_file returned" in text and "w0" not in text
