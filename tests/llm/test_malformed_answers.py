"""Answers of the wrong shape from both providers, streamed or not: always the provider's error.

A TypeError from deep inside the parser would reach the editor as "Internal error" with no
provider, no status and no word on whether output had already gone out.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import anyio
import httpx
import pytest
from anyio.from_thread import start_blocking_portal
from fakes.anthropic_server import FakeAnthropic
from fakes.httpserver import FakeModelServer
from fakes.openai_server import FakeOpenAI
from fakes.script import Reply, verbatim, verbatim_answer
from fakes.streams import collect, finished, text_of
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from acp_memory.llm.anthropic import AnthropicProvider
from acp_memory.llm.openai import OpenAIProvider
from acp_memory.llm.provider import Provider
from acp_memory.llm.types import (
    ChatRequest,
    LLMError,
    Message,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCallReady,
    Usage,
)

pytestmark = pytest.mark.anyio

STREAM = ChatRequest("m", [Message("user", "hi")])
ANSWER = ChatRequest("m", [Message("user", "hi")], stream=False)

# Well-formed answers in each dialect, text and a tool call, that the mutations start from.
OPENAI_CHUNKS: list[Any] = [
    {"choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hi"}}]},
    {
        "choices": [
            {
                "index": 0,
                "delta": {
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "read", "arguments": '{"path": "a"}'},
                        }
                    ]
                },
                "finish_reason": None,
            }
        ]
    },
    {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
    {
        "choices": [],
        "usage": {
            "prompt_tokens": 12,
            "completion_tokens": 7,
            "prompt_tokens_details": {"cached_tokens": 2},
        },
    },
    "[DONE]",
]
OPENAI_ANSWER: Any = {
    "choices": [
        {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": "Hi",
                "reasoning_content": "hmm",
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "read", "arguments": '{"path": "a"}'},
                    }
                ],
            },
            "finish_reason": "tool_calls",
        }
    ],
    "usage": {"prompt_tokens": 12, "completion_tokens": 7},
}
ANTHROPIC_EVENTS: list[tuple[str, Any]] = [
    (
        "message_start",
        {
            "type": "message_start",
            "message": {"role": "assistant", "content": [], "usage": {"input_tokens": 12}},
        },
    ),
    (
        "content_block_start",
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    ),
    (
        "content_block_delta",
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}},
    ),
    ("content_block_stop", {"type": "content_block_stop", "index": 0}),
    (
        "content_block_start",
        {
            "type": "content_block_start",
            "index": 1,
            "content_block": {"type": "tool_use", "id": "t1", "name": "read", "input": {}},
        },
    ),
    (
        "content_block_delta",
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "input_json_delta", "partial_json": '{"path": "a"}'},
        },
    ),
    ("content_block_stop", {"type": "content_block_stop", "index": 1}),
    (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use"},
            "usage": {"output_tokens": 7},
        },
    ),
    ("message_stop", {"type": "message_stop"}),
]
ANTHROPIC_ANSWER: Any = {
    "content": [
        {"type": "thinking", "thinking": "hmm"},
        {"type": "text", "text": "Hi"},
        {"type": "tool_use", "id": "t1", "name": "read", "input": {"path": "a"}},
    ],
    "stop_reason": "tool_use",
    "usage": {"input_tokens": 12, "output_tokens": 7, "cache_read_input_tokens": None},
}


def provider(server: FakeModelServer, client: httpx.AsyncClient) -> Provider:
    cls = OpenAIProvider if isinstance(server, FakeOpenAI) else AnthropicProvider
    return cls(client, name="fake", api_base=server.base_url, api_key="sk-fake-key")


async def failure(
    provider: Provider, request: ChatRequest, got: list[StreamEvent] | None = None
) -> LLMError:
    with anyio.fail_after(5), pytest.raises(LLMError) as caught:
        await collect(provider.stream(request), got)
    return caught.value


def assert_reported(err: LLMError, server: FakeModelServer, *, after_output: bool) -> None:
    """What the editor is told: the provider, the call, whether output had gone out."""
    assert err.provider == "fake" and err.model == "m" and err.url == server.url
    assert err.after_output is after_output
    assert err.status is None and not err.retryable


async def test_a_string_where_an_openai_choice_belongs_is_a_provider_error(client):
    async with FakeOpenAI(verbatim({"choices": ["x"]})) as server:
        err = await failure(provider(server, client), STREAM)
    assert err.message == 'malformed chunk: {"choices": ["x"]}'
    assert_reported(err, server, after_output=False)


async def test_a_malformed_openai_chunk_after_text_is_marked_after_output(client):
    chunks = [OPENAI_CHUNKS[0], {"choices": [{"delta": {"tool_calls": "read"}}]}]
    async with FakeOpenAI(verbatim(*chunks)) as server:
        got: list[StreamEvent] = []
        err = await failure(provider(server, client), STREAM, got)
    assert text_of(got) == "Hi"
    assert err.message.startswith("malformed chunk: ")
    assert_reported(err, server, after_output=True)


async def test_a_string_where_an_openai_answer_choice_belongs_is_a_provider_error(client):
    async with FakeOpenAI(verbatim_answer({"choices": ["x"]})) as server:
        err = await failure(provider(server, client), ANSWER)
    assert err.message == 'malformed answer: {"choices": ["x"]}'
    assert_reported(err, server, after_output=False)


async def test_a_string_where_an_anthropic_delta_belongs_is_a_provider_error(client):
    bad = {"type": "content_block_delta", "delta": "x"}
    async with FakeAnthropic(
        verbatim(*ANTHROPIC_EVENTS[:2], ("content_block_delta", bad))
    ) as server:
        err = await failure(provider(server, client), STREAM)
    assert err.message == 'malformed event: {"type": "content_block_delta", "delta": "x"}'
    assert_reported(err, server, after_output=False)


async def test_a_malformed_anthropic_event_after_text_is_marked_after_output(client):
    bad = {"type": "content_block_stop", "index": [1]}
    async with FakeAnthropic(verbatim(*ANTHROPIC_EVENTS[:3], ("content_block_stop", bad))) as fake:
        got: list[StreamEvent] = []
        err = await failure(provider(fake, client), STREAM, got)
    assert text_of(got) == "Hi"
    assert err.message.startswith("malformed event: ")
    assert_reported(err, fake, after_output=True)


async def test_a_string_where_an_anthropic_content_block_belongs_is_a_provider_error(client):
    async with FakeAnthropic(verbatim_answer({"content": ["x"]})) as server:
        err = await failure(provider(server, client), ANSWER)
    assert err.message == 'malformed answer: {"content": ["x"]}'
    assert_reported(err, server, after_output=False)


async def test_an_anthropic_error_event_that_is_not_an_object_keeps_its_words(client):
    async with FakeAnthropic(verbatim(("error", {"type": "error", "error": "gone"}))) as server:
        err = await failure(provider(server, client), STREAM)
    assert err.message == "gone" and err.provider == "fake"


def bad_usage_replies() -> Iterator[Any]:
    tokens = {"prompt_tokens": "lots", "completion_tokens": 7}
    chunks = [*OPENAI_CHUNKS[:3], {"choices": [], "usage": tokens}, "[DONE]"]
    answer = {**OPENAI_ANSWER, "usage": tokens}
    yield pytest.param(FakeOpenAI, verbatim(*chunks), True, None, id="openai-stream")
    yield pytest.param(FakeOpenAI, verbatim_answer(answer), False, None, id="openai-json")
    events = copy.deepcopy(ANTHROPIC_EVENTS)
    events[0][1]["message"]["usage"] = "lots"  # the good block after it is void too
    yield pytest.param(FakeAnthropic, verbatim(*events), True, None, id="anthropic-stream")
    answer = {**ANTHROPIC_ANSWER, "usage": {"input_tokens": 1e999, "output_tokens": 7}}
    yield pytest.param(FakeAnthropic, verbatim_answer(answer), False, None, id="anthropic-json")
    answer = {**ANTHROPIC_ANSWER, "usage": {"input_tokens": 10**30, "output_tokens": 7}}
    yield pytest.param(FakeAnthropic, verbatim_answer(answer), False, None, id="anthropic-huge")
    tokens = {"prompt_tokens": 10**12 + 1, "completion_tokens": 7}
    answer = {**OPENAI_ANSWER, "usage": tokens}
    yield pytest.param(FakeOpenAI, verbatim_answer(answer), False, None, id="openai-huge")
    tokens = {"prompt_tokens": 10**12, "completion_tokens": 12.0}
    answer = {**OPENAI_ANSWER, "usage": tokens}
    counted = Usage(input_tokens=10**12, output_tokens=12)  # the largest count, 12.0 as 12
    yield pytest.param(FakeOpenAI, verbatim_answer(answer), False, counted, id="openai-edge")


@pytest.mark.parametrize(("fake", "reply", "stream", "usage"), list(bad_usage_replies()))
async def test_a_bad_usage_block_voids_the_answers_usage_and_the_answer_stands(
    client, fake: type[FakeModelServer], reply: Reply, stream: bool, usage: Usage | None
):
    async with fake(reply) as server:
        with anyio.fail_after(5):
            events = await collect(provider(server, client).stream(STREAM if stream else ANSWER))
    assert text_of(events) == "Hi"
    assert [e.call.name for e in events if isinstance(e, ToolCallReady)] == ["read"]
    assert finished(events).reason == "tool_calls"
    assert finished(events).usage == usage
    void = finished(events).usage_void
    assert void.startswith("a malformed usage block: ") if usage is None else void == ""


# Property: whatever one part of a well-formed answer is replaced with (or if it is removed),
# the caller gets well-typed events or the provider's LLMError, never another exception.

_DROP = object()
_SCALARS = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=4)
_JSON = st.recursive(
    _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=5,
)


def _paths(value: Any, here: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield here
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, (*here, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _paths(item, (*here, index))


def _mutated(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    value = copy.copy(value)
    head, rest = path[0], path[1:]
    if new is _DROP and not rest:
        del value[head]
    else:
        value[head] = _mutated(value[head], rest, new)
    return value


def _well_typed(events: list[StreamEvent]) -> bool:
    for event in events:
        if isinstance(event, TextDelta | ReasoningDelta) and not isinstance(event.text, str):
            return False
        if isinstance(event, ToolCallReady):
            call = event.call
            if not all(isinstance(v, str) for v in (call.id, call.name, call.arguments)):
                return False
    usage = finished(events).usage
    counts = () if usage is None else vars(usage).values()
    return all(type(n) is int and n >= 0 for n in counts)


def _template(dialect: str, stream: bool) -> Any:
    if dialect == "openai":
        return OPENAI_CHUNKS if stream else OPENAI_ANSWER
    return [data for _, data in ANTHROPIC_EVENTS] if stream else ANTHROPIC_ANSWER


def _reply(dialect: str, stream: bool, payload: Any) -> Reply:
    if not stream:
        return verbatim_answer(payload)
    if dialect == "openai":
        return verbatim(*payload)
    return verbatim(*zip([name for name, _ in ANTHROPIC_EVENTS], payload, strict=True))


@contextmanager
def _serving(dialect: str, stream: bool) -> Iterator[Callable[[Any], None]]:
    """A checker of one payload each call, over one server and one client for all of them.

    They live on an event loop in another thread, so that hypothesis drives plain functions.
    """
    fake: FakeModelServer = FakeOpenAI() if dialect == "openai" else FakeAnthropic()
    with start_blocking_portal() as portal, portal.wrap_async_context_manager(fake) as server:
        client = httpx.AsyncClient()
        llm = provider(server, client)

        async def outcome() -> tuple[list[StreamEvent], Exception | None]:
            got: list[StreamEvent] = []
            try:
                with anyio.fail_after(5):
                    await collect(llm.stream(STREAM if stream else ANSWER), got)
            except Exception as exc:  # which exception it is, is the question
                return got, exc
            return got, None

        def check(payload: Any) -> None:
            server.script(_reply(dialect, stream, payload))
            got, exc = portal.call(outcome)
            if exc is None:
                assert _well_typed(got), (payload, got)
            else:
                assert isinstance(exc, LLMError), (payload, exc)
                assert exc.provider == "fake" and exc.after_output == bool(got), (payload, exc)

        try:
            yield check
        finally:
            portal.call(client.aclose)


def _parts(dialect: str, stream: bool) -> list[tuple[Any, ...]]:
    # A stream is replaced event by event, never as a whole.
    return [p for p in _paths(_template(dialect, stream)) if p or not stream]


def _droppable(dialect: str, stream: bool, path: tuple[Any, ...]) -> bool:
    # Nothing is left without the whole answer; Anthropic's event names pair up by position.
    return bool(path) and not (stream and dialect == "anthropic" and len(path) == 1)


COMBINATIONS = pytest.mark.parametrize(
    ("dialect", "stream"),
    [("openai", True), ("openai", False), ("anthropic", True), ("anthropic", False)],
    ids=["openai-stream", "openai-json", "anthropic-stream", "anthropic-json"],
)
# One value of every JSON type (and no value at all): each part of an answer gets each in turn.
_WRONG = [_DROP, None, True, 1.5, "x", ["x"], {"x": "y"}]


@COMBINATIONS
def test_every_part_of_the_wrong_type_gives_well_typed_events_or_the_providers_error(
    dialect: str, stream: bool
) -> None:
    template = _template(dialect, stream)
    with _serving(dialect, stream) as check:
        for path in _parts(dialect, stream):
            for new in _WRONG:
                if new is not _DROP or _droppable(dialect, stream, path):
                    check(_mutated(template, path, new))


@COMBINATIONS
def test_any_malformed_part_gives_well_typed_events_or_the_providers_error(
    dialect: str, stream: bool
) -> None:
    template = _template(dialect, stream)
    with _serving(dialect, stream) as check:

        @settings(max_examples=60, deadline=None, database=None)
        @given(path=st.sampled_from(_parts(dialect, stream)), new=_JSON | st.just(_DROP))
        def mutated(path: tuple[Any, ...], new: Any) -> None:
            assume(new is not _DROP or _droppable(dialect, stream, path))
            check(_mutated(template, path, new))

        mutated()
