"""update_plan: the whole plan sent as a `plan` session update at each call, kept in the
transcript so that session/load replays it where it was; a bad entry is a tool error."""

from __future__ import annotations

from typing import Any

import pytest
from engine.turnkit import fake_config, prompt, turn_agent
from fakes.openai_server import FakeOpenAI
from fakes.script import call, text, tool_calls
from filetools_kit import open_session, scripted_agent, tool_results, updates_of
from harness import in_process_agent

pytestmark = pytest.mark.anyio

FIRST = [
    {"content": "Read the parser", "status": "in_progress", "priority": "high"},
    {"content": "Fix the bug", "status": "pending"},
]
SECOND = [
    {"content": "Read the parser", "status": "completed", "priority": "high"},
    {"content": "Fix the bug", "status": "in_progress", "priority": "low"},
]


def _plans(updates: list[Any]) -> list[list[dict[str, Any]]]:
    return [
        [e.model_dump(mode="json", exclude_none=True) for e in u.entries]
        for u in updates
        if u.session_update == "plan"
    ]


def _kinds(updates: list[Any]) -> list[str]:
    # The turn's own stream, without the per-turn bookkeeping other parts send.
    shown = {"user_message_chunk", "agent_message_chunk", "tool_call", "tool_call_update", "plan"}
    return [u.session_update for u in updates if u.session_update in shown]


async def test_each_update_plan_call_sends_the_whole_plan_and_load_replays_it(paths):
    replies = (
        tool_calls(call("update_plan", {"entries": FIRST})),
        tool_calls(call("update_plan", {"entries": SECOND})),
    )
    async with scripted_agent(paths, *replies) as (server, ed, _):
        sid = await open_session(ed, paths)
        assert await prompt(ed, sid, "Fix the parser.") == "end_turn"
        live = [u for s, u in ed.client.updates if s == sid]
    # priority defaults to medium: the schema requires one.
    expected = [
        [{**FIRST[0]}, {**FIRST[1], "priority": "medium"}],
        SECOND,
    ]
    assert _plans(live) == expected
    # Each plan follows its call's result, as the editor saw it live.
    assert _kinds(live) == [
        "tool_call", "tool_call_update", "plan",
        "tool_call", "tool_call_update", "plan",
        "agent_message_chunk",
    ]
    assert tool_results(server)[:2] == [
        "The plan is shown: 2 entries (1 pending, 1 in progress, 0 completed).",
        "The plan is shown: 2 entries (0 pending, 1 in progress, 1 completed).",
    ]
    async with in_process_agent(fake_config(server.base_url), paths) as ed:
        await ed.conn.initialize(protocol_version=1)
        await ed.conn.load_session(session_id=sid, cwd=str(paths.cwd), mcp_servers=[])
        replayed = [u for s, u in ed.client.updates if s == sid]
    assert _plans(replayed) == expected
    assert _kinds(replayed) == ["user_message_chunk", *_kinds(live)]


async def test_a_bad_status_is_a_tool_error_the_model_reads_and_no_plan_is_sent(paths):
    bad = [{"content": "Ship it", "status": "done"}]
    async with scripted_agent(paths, tool_calls(call("update_plan", {"entries": bad}))) as (
        server,
        ed,
        _,
    ):
        sid = await open_session(ed, paths)
        assert await prompt(ed, sid, "Plan.") == "end_turn"
        [finished] = [u for u in updates_of(ed, sid, "tool_call_update") if u.status]
    [result] = tool_results(server)
    assert result.startswith("Error: invalid arguments for update_plan: entries.0.status:")
    assert "'done' is not one of" in result
    assert finished.status == "failed"
    assert _plans([u for s, u in ed.client.updates if s == sid]) == []


async def test_an_entry_without_content_is_a_tool_error(paths):
    blank = [{"content": "Read", "status": "completed"}, {"content": "  ", "status": "pending"}]
    async with scripted_agent(paths, tool_calls(call("update_plan", {"entries": blank}))) as (
        server,
        ed,
        _,
    ):
        sid = await open_session(ed, paths)
        await prompt(ed, sid, "Plan.")
    assert tool_results(server) == ["Error: entry 2 has no content; say what the step does"]
    assert _plans([u for s, u in ed.client.updates if s == sid]) == []


async def test_update_plan_is_offered_in_plan_mode_and_never_to_a_spawned_child(paths):
    async with FakeOpenAI() as server:
        server.script(
            tool_calls(call("spawn_agent", {"prompt": "Look around."})),
            text("Seen."),  # the child
            text("Done."),  # the parent
            text("Planned."),  # plan mode
        )
        async with turn_agent(fake_config(server.base_url), paths) as (ed, _):
            sid = await ed.start_session(paths.cwd)
            await prompt(ed, sid, "delegate")
            await ed.conn.set_session_mode(session_id=sid, mode_id="plan")
            await prompt(ed, sid, "plan it")
    parent, child, _, planning = (
        {t["function"]["name"] for t in r.json.get("tools", [])} for r in server.requests
    )
    assert "update_plan" in parent and "update_plan" in planning
    assert "update_plan" not in child  # its plan would reach no editor
