"""The OpenAI-compatible provider against the fake server: streaming, tool calls, wire form."""

from __future__ import annotations

import json

import httpx
import pytest
from fakes.openai_server import FakeOpenAI
from fakes.script import call, text, tool_calls
from fakes.streams import calls_of, collect, finished, reasoning_of, text_of

from acp_memory.llm.openai import OpenAIProvider, _CallAssembler
from acp_memory.llm.types import (
    ChatRequest,
    LLMError,
    Message,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolSpec,
    Usage,
)

pytestmark = pytest.mark.anyio

READ = ToolSpec(
    "read", "Read a file", {"type": "object", "properties": {"path": {"type": "string"}}}
)


def provider(server: FakeOpenAI, client: httpx.AsyncClient, key: str = "sk-test") -> OpenAIProvider:
    return OpenAIProvider(client, name="local", api_base=server.base_url, api_key=key)


def ask(content: str = "hi", **kw: object) -> ChatRequest:
    return ChatRequest("gpt-test", [Message("system", "be brief"), Message("user", content)], **kw)  # type: ignore[arg-type]


async def test_text_streams_in_pieces_and_ends_with_usage(openai_server, client):
    openai_server.script(text("Hello there, friend", chunks=3))
    events = await collect(provider(openai_server, client).stream(ask()))

    pieces = [e.text for e in events if isinstance(e, TextDelta)]
    assert len(pieces) == 3 and "".join(pieces) == "Hello there, friend"
    assert finished(events).reason == "stop"
    assert finished(events).usage == Usage(input_tokens=12, output_tokens=7)
    sent = openai_server.requests[0]
    assert (sent.method, sent.path) == ("POST", "/v1/chat/completions")
    assert sent.headers["authorization"] == "Bearer sk-test"
    assert sent.json["model"] == "gpt-test"
    assert sent.json["stream"] is True
    assert sent.json["stream_options"] == {"include_usage": True}
    assert sent.json["max_tokens"] == 8192
    assert sent.json["messages"] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hi"},
    ]


async def test_tool_calls_are_assembled_from_argument_pieces(openai_server, client):
    openai_server.script(
        tool_calls(
            call("read", {"path": "notes/a.md", "lines": [1, 2, 3]}, id="c1", chunks=7),
            call("read", {"path": "b.md"}, id="c2", chunks=4),
            text="Reading both.",
        )
    )
    events = await collect(provider(openai_server, client).stream(ask()))

    assert text_of(events) == "Reading both."
    assert calls_of(events) == [
        ToolCall("c1", "read", json.dumps({"path": "notes/a.md", "lines": [1, 2, 3]})),
        ToolCall("c2", "read", json.dumps({"path": "b.md"})),
    ]
    assert finished(events).reason == "tool_calls"


async def test_reasoning_content_becomes_reasoning_deltas(openai_server, client):
    openai_server.script(text("42", reasoning="six times seven", chunks=3))
    events = await collect(provider(openai_server, client).stream(ask()))

    assert reasoning_of(events) == "six times seven"
    assert text_of(events) == "42"
    first_text = next(i for i, e in enumerate(events) if isinstance(e, TextDelta))
    assert all(not isinstance(e, TextDelta) for e in events[:first_text])


async def test_length_finish_reason_maps_to_length(openai_server, client):
    openai_server.script(text("cut sh", finish="length"))
    events = await collect(provider(openai_server, client).stream(ask()))
    assert finished(events).reason == "length"


async def test_stream_false_sends_one_request_and_yields_the_same_events(openai_server, client):
    openai_server.script(
        tool_calls(call("read", {"path": "a"}, id="c1"), text="Looking.", reasoning="hmm")
    )
    events = await collect(provider(openai_server, client).stream(ask(stream=False)))

    sent = openai_server.requests[0].json
    assert sent["stream"] is False and "stream_options" not in sent
    assert reasoning_of(events) == "hmm"
    assert text_of(events) == "Looking."
    assert calls_of(events) == [ToolCall("c1", "read", '{"path": "a"}')]
    assert finished(events).reason == "tool_calls"
    assert finished(events).usage == Usage(input_tokens=12, output_tokens=7)


async def test_history_goes_out_in_chat_completions_form(openai_server, client):
    openai_server.script(text("ok"))
    history = [
        Message("system", "sys"),
        Message("user", "read a"),
        Message("assistant", "", tool_calls=(ToolCall("c1", "read", '{"path": "a"}'),)),
        Message("tool", "file a", tool_call_id="c1", name="read"),
    ]
    request = ChatRequest(
        "gpt-test", history, tools=[READ], tool_choice="required", temperature=0.2
    )
    await collect(provider(openai_server, client).stream(request))

    sent = openai_server.requests[0].json
    assert sent["messages"][2] == {
        "role": "assistant",
        "content": "",  # never null next to tool calls
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "read", "arguments": '{"path": "a"}'},
            }
        ],
    }
    assert sent["messages"][3] == {"role": "tool", "tool_call_id": "c1", "content": "file a"}
    assert sent["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "read",
                "description": "Read a file",
                "parameters": READ.parameters,
            },
        }
    ]
    assert sent["tool_choice"] == "required"
    assert sent["temperature"] == 0.2


async def test_tool_choice_is_left_out_without_tools(openai_server, client):
    openai_server.script(text("ok"))
    await collect(provider(openai_server, client).stream(ask(tool_choice="none")))
    assert "tool_choice" not in openai_server.requests[0].json
    assert "tools" not in openai_server.requests[0].json


async def test_error_event_inside_the_stream_surfaces_after_output(openai_server, client):
    openai_server.script(text("partial").then_error(503, "upstream went away"))
    got: list[StreamEvent] = []
    with pytest.raises(LLMError) as caught:
        await collect(provider(openai_server, client).stream(ask()), got)
    assert text_of(got) == "partial"
    assert caught.value.after_output
    assert "upstream went away" in str(caught.value)


def test_official_api_gets_max_completion_tokens() -> None:
    official = OpenAIProvider(httpx.AsyncClient(), api_key="k")
    assert official.body(ask())["max_completion_tokens"] == 8192
    assert "max_tokens" not in official.body(ask())


def test_calls_without_index_are_told_apart_by_id() -> None:
    calls = _CallAssembler()
    calls.add([{"id": "a", "function": {"name": "x", "arguments": '{"k":'}}])
    calls.add([{"function": {"arguments": "1}"}}])
    calls.add([{"id": "b", "function": {"name": "y", "arguments": {"z": 2}}}])
    assert calls.take() == [ToolCall("a", "x", '{"k":1}'), ToolCall("b", "y", '{"z": 2}')]
