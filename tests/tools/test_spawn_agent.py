"""spawn_agent: a child session of its own, a bounded tool set, its report back."""

from __future__ import annotations

import json

import anyio
import pytest
from engine.turnkit import fake_config, prompt, stored_messages, turn_agent, updates_of
from fakes.httpserver import Recorded
from fakes.openai_server import FakeOpenAI
from fakes.script import Reply, call, text, tool_calls

from acp_memory.config.models import SubagentsConfig
from acp_memory.runtime.subagents import REPORT_HEADER
from acp_memory.text.task_text import TASK_TEXT_BYTES, cut_task_text

pytestmark = pytest.mark.anyio


class RoutedOpenAI(FakeOpenAI):
    """Children are answered by their task text, so the parent's script keeps its order
    whatever the order in which parent and children ask."""

    def __init__(self, children: dict[str, Reply]) -> None:
        super().__init__()
        self.children = children

    def _next(self, request: Recorded) -> Reply:
        users = [m["content"] for m in request.messages if m["role"] == "user"]
        if users and users[0] in self.children:
            return self.children[users[0]]
        return super()._next(request)


def _tools_of(request) -> list[str]:
    return sorted(t["function"]["name"] for t in request.json.get("tools", []))


async def test_a_child_runs_in_its_own_bundle_and_its_report_comes_back(paths):
    async with FakeOpenAI() as server:
        server.script(
            tool_calls(call("spawn_agent", {"prompt": "Count the files.", "name": "counter"})),
            text("There are 3 files."),  # the child
            text("Done."),  # the parent again
        )
        async with turn_agent(fake_config(server.base_url), paths) as (ed, _):
            sid = await ed.start_session(paths.cwd)
            assert await prompt(ed, sid, "delegate it") == "end_turn"
        parent_first, child_req, parent_second = server.requests
    # The child starts from its task alone, on at most the parent's tools.
    child_users = [m for m in child_req.messages if m["role"] == "user"]
    assert child_users[0]["content"] == "Count the files."
    assert "delegate it" not in json.dumps(child_req.messages)
    assert set(_tools_of(child_req)) <= set(_tools_of(parent_first))
    # Its report is the tool's result; none of its text reached the parent's stream.
    result = [m for m in parent_second.messages if m["role"] == "tool"][-1]
    assert result["content"] == "There are 3 files."
    streamed = "".join(u.content.text for u in updates_of(ed, sid, "agent_message_chunk"))
    assert "3 files" not in streamed
    # Its bundle nests under the parent's, with the task that ran it.
    (child_dir,) = (paths.sessions_dir / sid / "subagents").iterdir()
    record = json.loads((child_dir / "session.json").read_text())
    assert record["subagentRun"] is True and record["parentSessionId"] == sid
    assert (record["subagentName"], record["subagentTaskId"], record["subagentDepth"]) == (
        "counter", "bg_1", 1,
    )
    meta = json.loads((paths.sessions_dir / sid / "background/bg_1/meta.json").read_text())
    assert meta["kind"] == "agent" and meta["status"] == "succeeded"
    assert meta["agent"]["name"] == "counter" and meta["agent"]["session_id"] == child_dir.name
    log = (paths.sessions_dir / sid / "background/bg_1/output.log").read_text()
    assert f"{REPORT_HEADER}\nThere are 3 files." in log
    child_messages = json.loads((child_dir / "messages.json").read_text())["messages"]
    assert [m["role"] for m in child_messages] == ["user", "assistant"]


async def test_a_child_in_the_background_is_read_with_the_background_tools(paths):
    async with RoutedOpenAI({"Look around.": text("Seen it all.")}) as server:
        server.script(
            tool_calls(call("spawn_agent", {"prompt": "Look around.", "background": True})),
            tool_calls(call("background_wait", {"task_id": "bg_1"})),
            text("Waited."),
        )
        async with turn_agent(fake_config(server.base_url), paths) as (ed, _):
            sid = await ed.start_session(paths.cwd)
            assert await prompt(ed, sid, "go") == "end_turn"
        results = [m for m in server.requests[-1].messages if m["role"] == "tool"]
    assert "bg_1" in results[0]["content"] and "background" in results[0]["content"]
    assert "succeeded" in results[1]["content"]


async def test_a_child_at_the_depth_limit_is_not_offered_spawn_agent(paths):
    async with FakeOpenAI() as server:
        server.script(
            tool_calls(call("spawn_agent", {"prompt": "Go deeper."})),
            text("Bottom."),
            text("Done."),
        )
        cfg = fake_config(server.base_url)
        cfg.subagents = SubagentsConfig(max_depth=1)
        async with turn_agent(cfg, paths) as (ed, _):
            sid = await ed.start_session(paths.cwd)
            await prompt(ed, sid, "go")
        parent_first, child_req, _ = server.requests
    assert "spawn_agent" in _tools_of(parent_first)
    assert "spawn_agent" not in _tools_of(child_req)


async def test_a_child_never_gets_a_tool_its_parent_lacks(paths):
    async with FakeOpenAI() as server:
        server.script(
            tool_calls(call("spawn_agent", {"prompt": "x", "tools": ["read_file", "rm_rf"]})),
            text("Refused, fine."),
        )
        async with turn_agent(fake_config(server.base_url), paths) as (ed, _):
            sid = await ed.start_session(paths.cwd)
            await prompt(ed, sid, "go")
        result = [m for m in server.requests[-1].messages if m["role"] == "tool"][-1]
    assert "at most its parent's tools" in result["content"] and "rm_rf" in result["content"]
    assert not (paths.sessions_dir / sid / "subagents").exists()


async def test_children_past_subagents_max_concurrent_are_refused(paths):
    # Child one holds its slot until the turn is over, however slowly the second call comes.
    release = anyio.Event()
    one = text("child one").stalled_after(0, release)
    async with RoutedOpenAI({"one": one, "two": text("child two")}) as server:
        server.script(
            tool_calls(
                call("spawn_agent", {"prompt": "one", "background": True}, id="a"),
                call("spawn_agent", {"prompt": "two", "background": True}, id="b"),
            ),
            text("Done."),
        )
        cfg = fake_config(server.base_url)
        cfg.subagents = SubagentsConfig(max_concurrent=1)
        async with turn_agent(cfg, paths) as (ed, _):
            sid = await ed.start_session(paths.cwd)
            await prompt(ed, sid, "go")
            release.set()
    stored = stored_messages(paths, sid)
    results = {m["toolCallId"]: m for m in stored if m["role"] == "tool"}
    assert "bg_1" in results["a"]["content"]
    assert results["b"].get("isError") and "not started" in results["b"]["content"]


def test_a_child_task_is_cut_at_32_kib_on_a_character_boundary():
    # The one rule memory runs use too (tests/memory/test_memory_agent.py).
    text_in = "я" * (TASK_TEXT_BYTES // 2 + 10)  # two bytes each
    cut = cut_task_text(text_in)
    kept, marker = cut.split("\n\n[acp-memory: the message was cut here", 1)
    assert kept == "я" * (TASK_TEXT_BYTES // 2)
    assert marker == ", after 32768 of its 32788 bytes of UTF-8]"  # 20 bytes left out
    assert cut_task_text("short") == "short"


def test_an_ascii_child_task_over_32_kib_is_cut_too():
    cut = cut_task_text("a" * TASK_TEXT_BYTES + "b" * 100)
    assert cut == "a" * TASK_TEXT_BYTES + (
        "\n\n[acp-memory: the message was cut here, after 32768 of its 32868 bytes of UTF-8]"
    )
