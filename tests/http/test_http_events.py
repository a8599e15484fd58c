"""The events fan-out: a publisher never waits, a lagging reader is dropped rather than
holding anyone up, streams end with their session or the server, and the SSE framing."""

from __future__ import annotations

import json

import anyio
import pytest

from acp_memory.httpserver import events
from acp_memory.httpserver.events import EventHub, sse_event, sse_frames

pytestmark = pytest.mark.anyio


def chunk(text: str) -> dict:
    return {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}


async def drain(stream) -> list[dict]:  # type: ignore[no-untyped-def]
    with anyio.fail_after(5):
        return [update async for update in stream]


async def test_a_reader_a_whole_buffer_behind_is_dropped_and_the_others_keep_theirs():
    hub = EventHub(buffer=2)
    slow = hub.subscribe("s1")
    other = hub.subscribe("s2")
    for i in range(3):
        hub.publish("s1", chunk(str(i)))  # never waits, though nobody reads
    hub.publish("s2", chunk("x"))
    hub.end("s2")
    assert [u["content"]["text"] for u in await drain(slow)] == ["0", "1"]
    assert [u["content"]["text"] for u in await drain(other)] == ["x"]


async def test_a_reader_that_left_is_forgotten_and_a_closed_hub_takes_no_new_readers():
    hub = EventHub()
    gone = hub.subscribe("s1")
    gone.close()
    hub.publish("s1", chunk("a"))  # no error for the reader that went away
    assert "s1" not in hub._readers  # nor anything kept for it
    stays = hub.subscribe("s1")
    hub.publish("s1", chunk("b"))
    hub.close()
    late = hub.subscribe("s1")
    assert [u["content"]["text"] for u in await drain(stays)] == ["b"]
    assert await drain(late) == []


async def test_each_update_is_one_event_named_after_it_with_one_json_data_line():
    update = {"sessionUpdate": "memory_run", "status": "skipped", "reason": "a\nb"}
    frame = sse_event("memory_run", update)
    lines = frame.decode().split("\n")
    assert lines[0] == "event: memory_run" and lines[2:] == ["", ""]
    assert json.loads(lines[1].removeprefix("data: ")) == update


async def test_an_idle_stream_sends_a_keepalive_comment(monkeypatch):
    monkeypatch.setattr(events, "PING_SECONDS", 0.01)
    hub = EventHub()
    frames = sse_frames(hub.subscribe("s1"))
    with anyio.fail_after(5):
        first = await anext(frames)
        hub.publish("s1", chunk("hi"))
        second = await anext(frames)
        hub.close()
        rest = [f async for f in frames]
    assert first == b": ping\n\n"
    assert second.startswith(b"event: agent_message_chunk\ndata: ")
    assert all(f == b": ping\n\n" for f in rest)
