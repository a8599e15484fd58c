"""`messageId` on message chunks: one id per message, the same on each of its chunks, a thought
apart from its reply, and the same ids again when session/load replays the transcript."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from acp import text_block
from gated import gated_agent
from harness import Editor, in_process_agent

from acp_memory.llm.types import (
    ChatRequest,
    Finished,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallReady,
)

pytestmark = pytest.mark.anyio

CHUNKS = ("agent_message_chunk", "agent_thought_chunk", "user_message_chunk")


class ThinkingProvider:
    """Each answer thinks in two chunks and replies in two; the first of a turn also lists
    the folder, so the turn has two model responses."""

    name = "thinking"

    def __init__(self) -> None:
        self.answers = 0

    async def stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        self.answers += 1
        n = self.answers
        yield ReasoningDelta(f"think {n} ")
        yield ReasoningDelta("more")
        yield TextDelta(f"reply {n} ")
        yield TextDelta("done")
        if n % 2:  # the first answer of a turn
            yield ToolCallReady(ToolCall(f"call_{n}", "list_directory", '{"path": "."}'))
            yield Finished("tool_calls")
        else:
            yield Finished("stop")


def _chunks(ed: Editor, sid: str) -> list[tuple[str, str, str | None]]:
    """(kind, text, messageId) of every message chunk of `sid`, as the wire carried them."""
    out = []
    for m in ed.checker.sent:
        if m.get("method") != "session/update" or m["params"]["sessionId"] != sid:
            continue
        update = m["params"]["update"]
        if update["sessionUpdate"] in CHUNKS:
            out.append((update["sessionUpdate"], update["content"]["text"], update["messageId"]))
    return out


def _messages(chunks: list[tuple[str, str, str | None]]) -> list[tuple[str, str, str | None]]:
    """The chunks joined by messageId, in order of first appearance: (kind, text, id)."""
    joined: dict[str | None, list[Any]] = {}
    for kind, text, message_id in chunks:
        if message_id in joined:
            assert joined[message_id][0] == kind, f"{message_id} carries {kind} and another kind"
            joined[message_id][1] += text
        else:
            joined[message_id] = [kind, text]
    return [(kind, text, message_id) for message_id, (kind, text) in joined.items()]


async def test_each_message_has_one_id_on_all_its_chunks_and_a_replay_gives_the_same(cfg, paths):
    provider = ThinkingProvider()
    async with in_process_agent(cfg, paths, gated_agent(cfg, paths, provider)) as ed:
        sid = await ed.start_session(paths.cwd)
        for text in ("first", "second"):
            resp = await ed.conn.prompt(session_id=sid, prompt=[text_block(text)])
            assert resp.stop_reason == "end_turn"
        live = _messages(_chunks(ed, sid))
    # Two turns of two model responses each: eight messages, each its thought and its reply.
    assert [(kind, text) for kind, text, _ in live] == [
        (kind, f"{word} {n} {tail}")
        for n in (1, 2, 3, 4)
        for kind, word, tail in (
            ("agent_thought_chunk", "think", "more"),
            ("agent_message_chunk", "reply", "done"),
        )
    ]
    assert len({message_id for _, _, message_id in live}) == 8  # a thought is not its reply
    async with in_process_agent(cfg, paths) as ed:
        await ed.conn.initialize(protocol_version=1)
        await ed.conn.load_session(cwd=str(paths.cwd), session_id=sid, mcp_servers=[])
        replayed = _messages(_chunks(ed, sid))
    users = [r for r in replayed if r[0] == "user_message_chunk"]
    assert [text for _, text, _ in users] == ["first", "second"]
    assert [r for r in replayed if r[0] != "user_message_chunk"] == live
    # The user messages' ids are the ones stored with them.
    stored = json.loads((paths.sessions_dir / sid / "messages.json").read_text())["messages"]
    assert [m["messageId"] for m in stored if m["role"] == "user"] == [i for *_, i in users]
