"""session/cancel stops the model stream or the running tool and answers "cancelled" at once;
the transcript stays one a provider accepts on the next turn."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import replace
from typing import Any

import anyio
import pytest
from acp import text_block
from fakes.anthropic_server import FakeAnthropic
from fakes.openai_server import FakeOpenAI
from fakes.script import call, stall, text, tool_calls
from harness import Editor
from turnkit import HoldTool, fake_config, prompt, stored_messages, turn_agent

from acp_memory.engine.tool_calls import CANCELLED_RESULT, NOT_RUN_RESULT
from acp_memory.llm.provider import Provider, closing
from acp_memory.llm.registry import ModelHandle
from acp_memory.llm.types import ChatRequest, StreamEvent, ToolCallReady

pytestmark = pytest.mark.anyio

# The bound. Cancel is a few milliseconds of work (no waiting on the model or the
# tool); the margin is for a loaded 2-core machine.
CANCEL_BOUND_S = 1.0


async def cancel_when(
    ed: Editor, sid: str, ready: Callable[[], Awaitable[Any]]
) -> tuple[str, float]:
    """Prompt, wait for `ready`, cancel; the stopReason and seconds from cancel to answer."""
    answered = anyio.Event()
    result: dict[str, str] = {}

    async def run() -> None:
        resp = await ed.conn.prompt(session_id=sid, prompt=[text_block("go")])
        result["stop"] = resp.stop_reason
        answered.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        with anyio.fail_after(10):
            await ready()
        assert not answered.is_set()
        started = anyio.current_time()
        await ed.conn.cancel(session_id=sid)
        with anyio.fail_after(10):
            await answered.wait()
        elapsed = anyio.current_time() - started
    return result["stop"], elapsed


async def test_cancel_during_a_stalled_stream_answers_cancelled_and_drops_the_request(paths):
    async with FakeOpenAI() as server:
        server.script(text("partial answer", chunks=2).stalled_after(1), text("Next."))
        async with turn_agent(fake_config(server.base_url), paths) as (ed, _):
            sid = await ed.start_session(paths.cwd)

            async def mid_stream() -> None:
                await ed.client.wait_for(lambda: ed.client.text(sid) == "partial")

            stop, elapsed = await cancel_when(ed, sid, mid_stream)
            assert stop == "cancelled"
            assert elapsed < CANCEL_BOUND_S
            # The fake sees the connection go: the provider is not left generating.
            with anyio.fail_after(5):
                await server.client_gone.wait()
            # The session is usable again, with the partial reply in its history.
            assert await prompt(ed, sid, "again") == "end_turn"
    stored = stored_messages(paths, sid)
    assert [(m["role"], m["content"]) for m in stored] == [
        ("user", "go"), ("assistant", "partial"), ("user", "again"), ("assistant", "Next."),
    ]
    assert server.requests[1].messages[2] == {"role": "assistant", "content": "partial"}


async def test_cancel_before_the_first_byte_answers_cancelled(paths):
    async with FakeOpenAI() as server:
        server.script(stall(before_headers=True))
        async with turn_agent(fake_config(server.base_url), paths) as (ed, _):
            sid = await ed.start_session(paths.cwd)

            async def request_sent() -> None:
                await server.wait_for_requests(1)

            stop, elapsed = await cancel_when(ed, sid, request_sent)
            with anyio.fail_after(5):
                await server.client_gone.wait()
    assert stop == "cancelled" and elapsed < CANCEL_BOUND_S
    assert [m["role"] for m in stored_messages(paths, sid)] == ["user"]


async def test_cancel_during_a_running_tool_stops_it_and_records_a_cancelled_result(paths):
    hold = HoldTool()
    async with FakeOpenAI() as server:
        server.script(
            tool_calls(call("hold", {"label": "forever"}, id="h1"), call("list_directory", {})),
            text("Understood."),
        )
        async with turn_agent(fake_config(server.base_url), paths, hold) as (ed, _):
            sid = await ed.start_session(paths.cwd)

            async def tool_running() -> None:
                await hold.started.wait()

            stop, elapsed = await cancel_when(ed, sid, tool_running)
            assert stop == "cancelled" and elapsed < CANCEL_BOUND_S
            assert hold.cancelled.is_set()
            assert await prompt(ed, sid, "never mind") == "end_turn"
    # Both calls have a result (the second never started), so the next request is valid.
    results = [m for m in server.requests[1].messages if m["role"] == "tool"]
    assert [(m["tool_call_id"], m["content"]) for m in results] == [
        ("h1", CANCELLED_RESULT), ("call_1_1", NOT_RUN_RESULT),
    ]
    starts = [u for s, u in ed.client.updates if s == sid and u.session_update == "tool_call"]
    assert [u.tool_call_id for u in starts] == ["h1"]
    # The editor is told the interrupted call ended, so it is not shown in progress for ever.
    ends = [
        u for s, u in ed.client.updates if s == sid and u.session_update == "tool_call_update"
    ]
    assert [(u.tool_call_id, u.status) for u in ends][:1] == [("h1", "failed")]


class CallWatch:
    """A provider wrapper that says when a complete tool call has reached the engine."""

    def __init__(self, inner: Provider) -> None:
        self.inner = inner
        self.name = inner.name
        self.call_ready = anyio.Event()

    async def stream(self, request: ChatRequest) -> AsyncGenerator[StreamEvent, None]:
        events = self.inner.stream(request)
        async with closing(events):
            async for event in events:
                if isinstance(event, ToolCallReady):
                    self.call_ready.set()
                yield event


async def test_cancel_after_a_complete_tool_call_block_still_leaves_a_valid_history(paths):
    # Anthropic streams each tool_use block to its end: the first call is complete while the
    # second is still arriving when the stream stalls and the user cancels.
    async with FakeAnthropic() as server:
        server.script(
            tool_calls(
                call("list_directory", {}, id="toolu_a"),
                call("read_file", {"path": "x.md"}, id="toolu_b"),
            ).stalled_after(2),
            text("Starting over."),
        )
        cfg = fake_config(server.base_url, provider_type="anthropic")
        async with turn_agent(cfg, paths) as (ed, agent):
            resolve = agent.runner.model_for
            watches: list[CallWatch] = []

            def watched(model_id: str) -> ModelHandle:
                handle = resolve(model_id)
                watches.append(CallWatch(handle.provider))
                return replace(handle, provider=watches[-1])

            agent.runner.model_for = watched
            sid = await ed.start_session(paths.cwd)

            async def first_call_complete() -> None:
                await server.wait_for_requests(1)
                await watches[0].call_ready.wait()

            stop, _ = await cancel_when(ed, sid, first_call_complete)
            assert stop == "cancelled"
            assert await prompt(ed, sid, "again") == "end_turn"
    stored = stored_messages(paths, sid)
    assert stored[1]["toolCalls"][0]["id"] == "toolu_a" and len(stored[1]["toolCalls"]) == 1
    assert stored[2] | {"createdAt": None} == {
        "role": "tool", "content": NOT_RUN_RESULT, "toolCallId": "toolu_a",
        "name": "list_directory", "isError": True, "createdAt": None,
    }
    # On the wire: each tool_use is answered by a tool_result in the very next user turn.
    wire = server.requests[1].json["messages"]
    for i, turn in enumerate(wire):
        uses = [b["id"] for b in turn["content"] if b["type"] == "tool_use"]
        if uses:
            nxt = wire[i + 1]["content"]
            assert [b["tool_use_id"] for b in nxt if b["type"] == "tool_result"] == uses
