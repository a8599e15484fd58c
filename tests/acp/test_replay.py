"""session/load replays what the editor saw live, field for field."""

from __future__ import annotations

from typing import Any

import pytest
from acp import text_block
from harness import in_process_agent

from acp_memory.acp.updates import event_update

pytestmark = pytest.mark.anyio


def _tool_updates(updates: list[Any]) -> list[dict[str, Any]]:
    return [
        u.model_dump(mode="json", by_alias=True, exclude_none=True)
        for u in updates
        if u.session_update in ("tool_call", "tool_call_update")
    ]


def _text(updates: list[Any]) -> str:
    return "".join(u.content.text for u in updates if u.session_update == "agent_message_chunk")


async def test_replayed_tool_calls_match_the_live_ones_field_for_field(cfg, paths):
    (paths.cwd / "hello.txt").write_text("hi from disk")
    async with in_process_agent(cfg, paths) as ed:
        sid = await ed.start_session(paths.cwd)
        await ed.conn.prompt(
            session_id=sid,
            prompt=[
                text_block(
                    '/tool read_file {"path": "hello.txt"}\n/tool read_file {"path": "missing.txt"}'
                )
            ],
        )
        live = [u for s, u in ed.client.updates if s == sid]
    async with in_process_agent(cfg, paths) as ed:
        await ed.conn.initialize(protocol_version=1)
        await ed.conn.load_session(session_id=sid, cwd=str(paths.cwd), mcp_servers=[])
        replayed = [u for s, u in ed.client.updates if s == sid]
    live_tools = _tool_updates(live)
    assert [u["sessionUpdate"] for u in live_tools] == ["tool_call", "tool_call_update"] * 2
    assert live_tools[0]["locations"] == [{"path": str(paths.cwd / "hello.txt")}]
    assert live_tools[3]["status"] == "failed"
    assert _tool_updates(replayed) == live_tools
    assert _text(replayed) == _text(live)
    assert replayed[0].session_update == "user_message_chunk"


def test_an_event_of_an_unknown_kind_is_refused_not_taken_for_a_finished_tool_call():
    with pytest.raises(AssertionError):
        event_update("a new kind of event")  # type: ignore[arg-type]
