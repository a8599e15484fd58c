"""A tool-calling turn through the Anthropic Messages API: cache breakpoints on the system
prompt and on the end of the history, the turn context after them, the prefix unchanged."""

from __future__ import annotations

import copy
import json
from itertools import pairwise
from typing import Any

import pytest
from fakes.anthropic_server import FakeAnthropic
from fakes.script import call, text, tool_calls
from turnkit import (
    API_KEY,
    check_turn_context,
    fake_config,
    is_turn_context,
    prompt,
    stored_messages,
    turn_agent,
    turn_context_text,
    updates_of,
)

pytestmark = pytest.mark.anyio
BREAKPOINT = {"type": "ephemeral"}


def _breakpoints(body: dict[str, Any]) -> list[tuple[str, int, int]]:
    """Where cache_control sits: ("system", block) or ("messages", turn, block)."""
    found = [("system", -1, i) for i, b in enumerate(body["system"]) if "cache_control" in b]
    for t, turn in enumerate(body["messages"]):
        found += [("messages", t, i) for i, b in enumerate(turn["content"]) if "cache_control" in b]
    return found


def _without_breakpoints(turns: list[dict[str, Any]]) -> list[str]:
    # A breakpoint marks where the cached prefix ends; it is not part of the cached content.
    out = copy.deepcopy(turns)
    for turn in out:
        for block in turn["content"]:
            block.pop("cache_control", None)
    return [json.dumps(t) for t in out]


async def test_an_anthropic_turn_caches_the_system_prompt_and_the_history(paths):
    (paths.cwd / "readme.md").write_text("# Project\n")
    async with FakeAnthropic() as server:
        server.script(
            tool_calls(call("read_file", {"path": "readme.md"}, id="toolu_1", chunks=3)),
            text("It is a project readme.", chunks=3, reasoning="Short file."),
            text("You are welcome."),
        )
        cfg = fake_config(server.base_url, provider_type="anthropic")
        async with turn_agent(cfg, paths) as (ed, _):
            sid = await ed.start_session(paths.cwd)
            assert await prompt(ed, sid, "What is readme.md?") == "end_turn"
            assert await prompt(ed, sid, "Thanks.") == "end_turn"
            start = updates_of(ed, sid, "tool_call")[0]
            thoughts = ed.client.text(sid, "agent_thought_chunk")
    bodies = [r.json for r in server.requests]
    assert len(bodies) == 3

    for request, body in zip(server.requests, bodies, strict=True):
        assert request.headers["x-api-key"] == API_KEY
        assert body["system"][-1]["cache_control"] == BREAKPOINT
        turns = body["messages"]
        # The turn context is the last user turn, after the history's breakpoint, uncached.
        assert turns[-1]["role"] == "user" and is_turn_context(turns[-1])
        check_turn_context(turn_context_text(request))
        assert _breakpoints(body) == [
            ("system", -1, 0),
            ("messages", len(turns) - 2, len(turns[-2]["content"]) - 1),
        ]
        assert turns[-2]["content"][-1]["cache_control"] == BREAKPOINT
    # The history's end is the user's question, then the tool result, then the new question.
    ends = [b["messages"][-2]["content"][-1] for b in bodies]
    assert ends[0]["text"] == "What is readme.md?"
    assert ends[1]["type"] == "tool_result" and ends[1]["tool_use_id"] == "toolu_1"
    assert ends[1]["content"] == "# Project\n"
    assert ends[2]["text"] == "Thanks."
    # Prefix stability, breakpoints aside: the system blocks, then the turns, only grow.
    assert len({json.dumps(b["system"]) for b in bodies}) == 1
    for prev, cur in pairwise(bodies):
        before = _without_breakpoints(prev["messages"])[:-1]
        assert _without_breakpoints(cur["messages"])[: len(before)] == before
    assert bodies[1]["messages"][1]["content"] == [
        {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "readme.md"}}
    ]
    assert (start.kind, start.title) == ("read", "Read readme.md")
    assert start.raw_input == {"path": "readme.md"}
    assert thoughts == "Short file."
    assert stored_messages(paths, sid)[-1]["content"] == "You are welcome."
