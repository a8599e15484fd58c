"""The Anthropic provider against the fake server: events, tool_use blocks, cache breakpoints."""

from __future__ import annotations

import json

import httpx
import pytest
from fakes.anthropic_server import FakeAnthropic
from fakes.script import call, error, text, tool_calls
from fakes.streams import calls_of, collect, finished, reasoning_of, text_of

from acp_memory.llm.anthropic import AnthropicProvider, to_wire
from acp_memory.llm.types import (
    ChatRequest,
    LLMError,
    Message,
    StreamEvent,
    ToolCall,
    ToolSpec,
    Usage,
)

pytestmark = pytest.mark.anyio

EPHEMERAL = {"type": "ephemeral"}
READ = ToolSpec(
    "read", "Read a file", {"type": "object", "properties": {"path": {"type": "string"}}}
)


def provider(server: FakeAnthropic, client: httpx.AsyncClient) -> AnthropicProvider:
    return AnthropicProvider(client, name="claude", api_base=server.base_url, api_key="sk-ant-test")


def ask(**kw: object) -> ChatRequest:
    messages = [Message("system", "be brief"), Message("user", "hi")]
    return ChatRequest("claude-test", messages, **kw)  # type: ignore[arg-type]


async def test_text_and_thinking_stream_with_usage_and_headers(anthropic_server, client):
    anthropic_server.script(text("Hello there", reasoning="user greets", chunks=3))
    events = await collect(provider(anthropic_server, client).stream(ask()))

    assert reasoning_of(events) == "user greets"
    assert text_of(events) == "Hello there"
    assert finished(events).reason == "stop"
    assert finished(events).usage == Usage(input_tokens=12, output_tokens=7)
    sent = anthropic_server.requests[0]
    assert sent.path == "/v1/messages"
    assert sent.headers["x-api-key"] == "sk-ant-test"
    assert sent.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in sent.headers
    assert sent.json["model"] == "claude-test"
    assert sent.json["max_tokens"] == 8192
    assert sent.json["stream"] is True
    assert sent.json["system"] == [{"type": "text", "text": "be brief", "cache_control": EPHEMERAL}]
    assert sent.json["messages"] == [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]


async def test_tool_use_blocks_are_assembled_from_json_pieces(anthropic_server, client):
    anthropic_server.script(
        tool_calls(
            call("read", {"path": "a.md", "n": [1, 2]}, id="t1", chunks=6),
            call("read", {"path": "b.md"}, id="t2", chunks=3),
            text="Both.",
        )
    )
    request = ask(tools=[READ], tool_choice="required")
    events = await collect(provider(anthropic_server, client).stream(request))

    assert text_of(events) == "Both."
    assert calls_of(events) == [
        ToolCall("t1", "read", json.dumps({"path": "a.md", "n": [1, 2]})),
        ToolCall("t2", "read", json.dumps({"path": "b.md"})),
    ]
    assert finished(events).reason == "tool_calls"
    sent = anthropic_server.requests[0].json
    assert sent["tools"] == [
        {"name": "read", "description": "Read a file", "input_schema": READ.parameters}
    ]
    assert sent["tool_choice"] == {"type": "any"}


async def test_max_tokens_stop_maps_to_length(anthropic_server, client):
    anthropic_server.script(text("cut", finish="length"))
    events = await collect(provider(anthropic_server, client).stream(ask()))
    assert finished(events).reason == "length"


async def test_stream_false_reads_one_json_message(anthropic_server, client):
    anthropic_server.script(tool_calls(call("read", {"path": "a"}, id="t1"), text="Looking."))
    events = await collect(provider(anthropic_server, client).stream(ask(stream=False)))
    assert anthropic_server.requests[0].json["stream"] is False
    assert text_of(events) == "Looking."
    assert calls_of(events) == [ToolCall("t1", "read", '{"path": "a"}')]
    assert finished(events).reason == "tool_calls"


async def test_overloaded_error_event_after_text_is_marked_after_output(anthropic_server, client):
    anthropic_server.script(text("Hal", chunks=2).then_error(529, "Overloaded"))
    got: list[StreamEvent] = []
    with pytest.raises(LLMError) as caught:
        await collect(provider(anthropic_server, client).stream(ask()), got)
    assert text_of(got) == "Hal"
    assert caught.value.status == 529 and caught.value.after_output
    assert "Overloaded" in str(caught.value)


async def test_overloaded_error_event_before_output_is_retryable(anthropic_server, client):
    anthropic_server.script(error(529, "Overloaded", in_stream=True))
    with pytest.raises(LLMError) as caught:
        await collect(provider(anthropic_server, client).stream(ask()))
    assert caught.value.retryable and not caught.value.after_output


HISTORY = [
    Message("system", "You are helpful."),
    Message("system", "Notes: none."),
    Message("user", "read a and b"),
    Message(
        "assistant",
        "Reading.",
        tool_calls=(
            ToolCall("t1", "read", '{"path": "a"}'),
            ToolCall("t2", "read", '{"path": "b"}'),
        ),
    ),
    Message("tool", "file a", tool_call_id="t1", name="read"),
    Message("tool", "file b", tool_call_id="t2", name="read"),
    Message("user", "<turn_context>\nruntime state\n</turn_context>"),
]


def test_history_converts_to_blocks_with_merged_tool_results() -> None:
    system, messages = to_wire(HISTORY, cache_prefix_len=6)

    assert [b["text"] for b in system] == ["You are helpful.", "Notes: none."]
    assert "cache_control" not in system[0] and system[1]["cache_control"] == EPHEMERAL
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "user"]
    assert messages[1]["content"] == [
        {"type": "text", "text": "Reading."},
        {"type": "tool_use", "id": "t1", "name": "read", "input": {"path": "a"}},
        {"type": "tool_use", "id": "t2", "name": "read", "input": {"path": "b"}},
    ]
    results = messages[2]["content"]
    assert [r["tool_use_id"] for r in results] == ["t1", "t2"]
    assert [r["type"] for r in results] == ["tool_result", "tool_result"]


def test_cache_breakpoint_marks_the_end_of_the_stable_history_not_the_turn_context() -> None:
    _, messages = to_wire(HISTORY, cache_prefix_len=6)
    marked = [
        (i, j)
        for i, m in enumerate(messages)
        for j, b in enumerate(m["content"])
        if "cache_control" in b
    ]
    assert marked == [(2, 1)]  # the last tool result: the turn context tail stays outside


def test_cache_breakpoint_inside_merged_tool_results_marks_that_result() -> None:
    _, messages = to_wire(HISTORY, cache_prefix_len=5)
    assert messages[2]["content"][0]["cache_control"] == EPHEMERAL
    assert "cache_control" not in messages[2]["content"][1]


def test_no_history_breakpoint_when_the_prefix_is_only_the_system_prompt() -> None:
    system, messages = to_wire(HISTORY, cache_prefix_len=2)
    assert system[-1]["cache_control"] == EPHEMERAL
    assert not any("cache_control" in b for m in messages for b in m["content"])


def test_invalid_tool_arguments_still_make_an_object_input() -> None:
    _, messages = to_wire([Message("assistant", "", tool_calls=(ToolCall("t", "x", "{oops"),))])
    assert messages[0]["content"] == [
        {"type": "tool_use", "id": "t", "name": "x", "input": {"_raw_arguments": "{oops"}}
    ]


async def test_cache_breakpoints_reach_the_wire(anthropic_server, client):
    anthropic_server.script(text("ok"))
    request = ChatRequest("claude-test", HISTORY, cache_prefix_len=6)
    await collect(provider(anthropic_server, client).stream(request))
    sent = anthropic_server.requests[0].json
    assert sent["system"][-1]["cache_control"] == EPHEMERAL
    assert sent["messages"][2]["content"][-1]["cache_control"] == EPHEMERAL
    assert "cache_control" not in sent["messages"][3]["content"][-1]
