"""/v1 over a real socket: the modes as models, chat completions with and without streaming
in OpenAI's shapes, the body's conversation starting a session, and X-Coddy-Session-Id
continuing one."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest
from engine.turnkit import fake_config
from fakes.openai_server import FakeOpenAI
from fakes.script import text
from httpkit import BOUND_S, HeldProvider, served, use_model

from acp_memory.config import Config
from acp_memory.engine.prompt import TURN_CONTEXT_OPEN
from acp_memory.llm.types import ChatRequest, LLMError, StreamEvent

pytestmark = pytest.mark.anyio

HEADER = "X-Coddy-Session-Id"


def chat(text: str, model: str = "agent", **extra: Any) -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": text}], **extra}


async def test_the_modes_are_the_models(paths):
    async with served(Config(), paths) as api:
        models = (await api.client.get("/v1/models")).json()
    assert models["object"] == "list"
    assert [(m["id"], m["object"]) for m in models["data"]] == [
        ("agent", "model"), ("plan", "model"), ("ask", "model"),
    ]


async def test_a_completion_answers_in_openais_shape_with_the_session_in_a_header(paths):
    body = {
        "model": "ask",
        "messages": [
            {"role": "system", "content": "ignored: the session keeps its own"},
            {"role": "user", "content": "an earlier turn"},
            {"role": "assistant", "content": "sure"},
            {"role": "user", "content": [{"type": "text", "text": "Hello there"}]},
        ],
        "temperature": 0.2,
        "metadata": {"model": "offline/default"},
    }
    async with served(Config(), paths) as api:
        resp = await api.client.post("/v1/chat/completions", json=body)
        sid = resp.headers[HEADER]
        record = (await api.client.get(f"/coddy/sessions/{sid}")).json()
    completion = resp.json()
    assert resp.status_code == 200 and completion["object"] == "chat.completion"
    assert completion["id"].startswith("chatcmpl-") and completion["model"] == "ask"
    assert isinstance(completion["created"], int)
    (choice,) = completion["choices"]
    assert choice["index"] == 0 and choice["finish_reason"] == "stop"
    assert choice["message"]["role"] == "assistant"
    assert 'You said: "Hello there"' in choice["message"]["content"]
    # The body's conversation is the session's: the earlier turn came first.
    assert "This is message 2 of our conversation." in choice["message"]["content"]
    assert 'Your previous message was: "an earlier turn"' in choice["message"]["content"]
    assert record["mode"] == "ask" and record["cwd"] == str(paths.cwd)
    usage = completion["usage"]
    assert set(usage) == {"prompt_tokens", "completion_tokens", "total_tokens",
                          "prompt_tokens_details"}
    assert usage["prompt_tokens"] > 0 and usage["completion_tokens"] > 0
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]


def _said(request: Any) -> list[tuple[str, str]]:
    """The conversation a model request carried, as (role, text): no system message, no
    turn context."""
    return [
        (m["role"], m["content"]) for m in request.messages
        if m["role"] != "system" and not str(m["content"]).startswith(TURN_CONTEXT_OPEN)
    ]


async def test_without_the_header_the_model_sees_the_body_s_earlier_messages(paths):
    body = {
        "model": "agent",
        "messages": [
            {"role": "system", "content": "You are a pirate."},
            {"role": "user", "content": "My name is Ada."},
            {"role": "assistant", "content": [{"type": "text", "text": "Hello Ada."}]},
            {"role": "assistant", "content": None},  # no text: nothing to replay
            {"role": "user", "content": "What is my name?"},
        ],
    }
    async with FakeOpenAI(default=text("Ada.").costing(30, 4, cached=20)) as model:
        async with served(fake_config(model.base_url), paths) as api:
            resp = await api.client.post("/v1/chat/completions", json=body)
            sid = resp.headers[HEADER]
            stored = (await api.client.get(f"/coddy/sessions/{sid}/messages")).json()
            record = (await api.client.get(f"/coddy/sessions/{sid}")).json()
    assert resp.status_code == 200, resp.text
    [request] = model.requests
    assert _said(request) == [
        ("user", "My name is Ada."), ("assistant", "Hello Ada."), ("user", "What is my name?"),
    ]
    assert all("pirate" not in json.dumps(m) for m in request.messages)
    assert [(m["role"], m["content"]) for m in stored["messages"]] == [
        ("user", "My name is Ada."), ("assistant", "Hello Ada."),
        ("user", "What is my name?"), ("assistant", "Ada."),
    ]
    assert record["title"] == "My name is Ada."
    # The turn's tokens as OpenAI gives them: the cached ones within prompt_tokens.
    assert resp.json()["usage"] == {"prompt_tokens": 30, "completion_tokens": 4,
                                    "total_tokens": 34,
                                    "prompt_tokens_details": {"cached_tokens": 20}}


async def test_with_the_header_the_session_s_history_is_the_conversation(paths):
    async with FakeOpenAI(default=text("Noted.")) as model:
        async with served(fake_config(model.base_url), paths) as api:
            first = await api.client.post("/v1/chat/completions", json=chat("First words"))
            sid = first.headers[HEADER]
            body = {"model": "agent", "messages": [
                {"role": "user", "content": "a turn this session never had"},
                {"role": "assistant", "content": "nor this"},
                {"role": "user", "content": "Second words"},
            ]}
            second = await api.client.post(
                "/v1/chat/completions", json=body, headers={HEADER: sid}
            )
    assert second.status_code == 200, second.text
    assert _said(model.requests[-1]) == [
        ("user", "First words"), ("assistant", "Noted."), ("user", "Second words"),
    ]


async def test_a_streamed_completion_asked_for_usage_ends_with_a_usage_chunk(paths):
    async with FakeOpenAI(default=text("Streamed.").costing(21, 5, cached=16)) as model:
        async with served(fake_config(model.base_url), paths) as api:
            body = chat("Count me", stream=True, stream_options={"include_usage": True})
            async with api.client.stream("POST", "/v1/chat/completions", json=body) as resp:
                lines = [line async for line in resp.aiter_lines() if line]
            async with api.client.stream(
                "POST", "/v1/chat/completions", json=chat("Count me", stream=True)
            ) as resp:
                plain = [line async for line in resp.aiter_lines() if line]
    assert lines[-1] == "data: [DONE]"
    chunks = [json.loads(line.removeprefix("data: ")) for line in lines[:-1]]
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop"
    last = chunks[-1]
    assert (last["object"], last["id"], last["choices"]) == (
        "chat.completion.chunk", chunks[0]["id"], []
    )
    assert last["usage"] == {"prompt_tokens": 21, "completion_tokens": 5, "total_tokens": 26,
                             "prompt_tokens_details": {"cached_tokens": 16}}
    assert all("usage" not in json.loads(line.removeprefix("data: ")) for line in plain[:-1])


async def test_the_session_header_goes_out_in_go_s_canonical_casing(paths):
    async with served(Config(), paths) as api:
        resp = await api.client.post("/v1/chat/completions", json=chat("hi"))
        async with api.client.stream(
            "POST", "/v1/chat/completions", json=chat("hi", stream=True)
        ) as streamed:
            streamed_names = [name for name, _ in streamed.headers.raw]
            await streamed.aread()
    # The bytes as they came off the socket (httpx keeps the names' casing in .raw).
    names = [name for name, _ in resp.headers.raw]
    assert HEADER.encode() in names and HEADER.encode() in streamed_names
    assert HEADER.lower().encode() not in names


async def test_the_session_header_continues_the_session_and_the_model_switches_its_mode(paths):
    async with served(Config(), paths) as api:
        first = await api.client.post("/v1/chat/completions", json=chat("First words"))
        sid = first.headers[HEADER]
        second = await api.client.post(
            "/v1/chat/completions", json=chat("Second words", "plan"), headers={HEADER: sid}
        )
        record = (await api.client.get(f"/coddy/sessions/{sid}")).json()
    assert second.headers[HEADER] == sid
    reply = second.json()["choices"][0]["message"]["content"]
    assert "This is message 2 of our conversation." in reply
    assert 'Your previous message was: "First words"' in reply
    assert record["mode"] == "plan"


async def test_a_streamed_completion_sends_chunks_then_the_finish_then_done(paths):
    async with served(Config(), paths) as api:
        async with api.client.stream(
            "POST", "/v1/chat/completions", json=chat("Stream to me", stream=True)
        ) as resp:
            sid = resp.headers[HEADER]
            kind = resp.headers["content-type"]
            lines = [line async for line in resp.aiter_lines() if line]
        messages = (await api.client.get(f"/coddy/sessions/{sid}/messages")).json()["messages"]
    assert kind.startswith("text/event-stream")
    assert all(line.startswith("data: ") for line in lines)
    assert lines[-1] == "data: [DONE]"
    chunks = [json.loads(line.removeprefix("data: ")) for line in lines[:-1]]
    assert len({c["id"] for c in chunks}) == 1 and chunks[0]["id"].startswith("chatcmpl-")
    assert all(c["object"] == "chat.completion.chunk" and c["model"] == "agent" for c in chunks)
    deltas = [c["choices"][0]["delta"] for c in chunks]
    finishes = [c["choices"][0]["finish_reason"] for c in chunks]
    assert deltas[0] == {"role": "assistant", "content": ""}
    assert deltas[-1] == {} and finishes[-1] == "stop" and set(finishes[:-1]) == {None}
    assert len(deltas) > 3  # the reply came in pieces, as it was made
    assert "".join(d.get("content", "") for d in deltas) == messages[-1]["content"]


async def test_a_reply_split_by_a_tool_call_has_a_blank_line_between_its_messages(paths):
    async with served(Config(), paths) as api:
        resp = await api.client.post(
            "/v1/chat/completions", json=chat('/tool list_directory {"path": "."}')
        )
    content = resp.json()["choices"][0]["message"]["content"]
    assert 'Calling list_directory {"path": "."}.\n\nThe tool list_directory returned:' in content


class FailingProvider:
    """A model whose every call fails with `error`."""

    name = "failing"

    def __init__(self, error: Exception) -> None:
        self.error = error

    async def stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        raise self.error
        yield  # an async generator that fails on its first step


@pytest.mark.parametrize(
    ("error", "status", "kind", "says"),
    [
        (LLMError("402 Payment Required: out of credit", status=402, provider="fake"), 502,
         "model_error", "out of credit"),
        # A bug, not a model's refusal: a JSON 500 too, and a streamed turn's failure must not
        # stop the server (the turn runs in the server's task group).
        (RuntimeError("a bug in the provider"), 500, "server_error", "a bug in the provider"),
    ],
)
async def test_a_failure_is_an_error_answer_or_chunk_and_the_server_keeps_serving(
    paths, error, status, kind, says
):
    async with served(Config(), paths) as api:
        use_model(api, FailingProvider(error))
        plain = await api.client.post("/v1/chat/completions", json=chat("hi"))
        async with api.client.stream(
            "POST", "/v1/chat/completions", json=chat("hi", stream=True)
        ) as resp:
            lines = [line async for line in resp.aiter_lines() if line]
        after = await api.client.get("/v1/models")
    assert plain.status_code == status
    assert plain.json()["error"]["type"] == kind
    assert says in plain.json()["error"]["message"]
    last = json.loads(lines[-1].removeprefix("data: "))
    assert last["error"]["type"] == kind and says in last["error"]["message"]
    assert after.status_code == 200


BAD_COMPLETIONS = [
    (chat("hi", "gpt-4o"), {}, 400, "unknown mode 'gpt-4o'"),
    (chat("hi", metadata={"model": "nobody/x"}), {}, 400, "unknown model"),
    (chat("hi", metadata={"model": 7}), {}, 400, "metadata.model"),
    ({"model": "agent", "messages": [{"role": "system", "content": "x"}]}, {}, 400,
     "no user message"),
    ({"model": "agent", "messages": []}, {}, 400, "messages"),
    (chat("   "), {}, 400, "no text"),
    ({"model": "agent", "messages": [
        {"role": "user", "content": "run it"},
        {"role": "tool", "content": "done", "tool_call_id": "call_1"},
        {"role": "user", "content": "and now?"},
    ]}, {}, 400, "messages[1]: a 'tool' message cannot be replayed"),
    ({"model": "agent", "messages": [
        {"role": "function", "name": "f", "content": "done"},
        {"role": "user", "content": "and now?"},
    ]}, {}, 400, "messages[0]: a 'function' message cannot be replayed"),
    (chat("hi"), {HEADER: "sess_" + "2" * 24}, 404, "session not found"),
]


async def test_a_bad_completion_request_is_refused_naming_the_problem(paths):
    async with served(Config(), paths) as api:
        answers = [
            await api.client.post("/v1/chat/completions", json=body, headers=headers)
            for body, headers, _, _ in BAD_COMPLETIONS
        ]
    for (body, _, status, says), resp in zip(BAD_COMPLETIONS, answers, strict=True):
        assert resp.status_code == status, (body, resp.text)
        assert says in resp.json()["error"]["message"], body
    assert not paths.sessions_dir.exists()  # nothing was created for a refused request


async def test_a_continued_streamed_completion_with_an_unknown_model_is_400_before_any_chunk(
    paths,
):
    async with served(Config(), paths) as api:
        sid = await api.new_session()
        resp = await api.client.post(
            "/v1/chat/completions", json=chat("hi", stream=True, metadata={"model": "nobody/x"}),
            headers={HEADER: sid},
        )
        messages = (await api.client.get(f"/coddy/sessions/{sid}/messages")).json()["messages"]
    assert resp.status_code == 400
    assert "unknown model 'nobody/x'" in resp.json()["error"]["message"]
    assert messages == []


async def test_a_completion_for_a_busy_session_is_409(paths):
    held = HeldProvider()
    async with served(Config(), paths) as api:
        use_model(api, held)
        sid = await api.new_session()
        async with anyio.create_task_group() as tg:
            tg.start_soon(api.prompt, sid, "hold on")
            with anyio.fail_after(BOUND_S):
                await held.started.wait()
            plain = await api.client.post(
                "/v1/chat/completions", json=chat("me too"), headers={HEADER: sid}
            )
            streamed = await api.client.post(
                "/v1/chat/completions", json=chat("me too", stream=True), headers={HEADER: sid}
            )
            held.release.set()
    assert plain.status_code == streamed.status_code == 409


async def test_a_client_leaving_a_streamed_completion_cancels_its_turn_at_once(paths):
    held = HeldProvider()
    async with served(Config(), paths) as api:
        use_model(api, held)
        async with api.client.stream(
            "POST", "/v1/chat/completions", json=chat("think long", stream=True)
        ) as resp:
            sid = resp.headers[HEADER]
            with anyio.fail_after(BOUND_S):
                await held.started.wait()
        # Closed while the model has said nothing yet: no chunk will tell the server.
        with anyio.fail_after(BOUND_S):
            await held.cancelled.wait()
        with anyio.fail_after(BOUND_S):
            while api.server.agent.running_turn(sid):  # the turn unwinds, then frees it
                await anyio.wait_all_tasks_blocked()
        held.release.set()
        again = await api.client.post(
            "/v1/chat/completions", json=chat("still there?"), headers={HEADER: sid}
        )
    assert again.status_code == 200  # the session is free for the next turn
