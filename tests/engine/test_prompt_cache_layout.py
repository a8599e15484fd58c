"""The request layout that keeps a provider's prompt cache warm, asserted on what the fake
model server received: a stable system message, a history that only grows, and a fresh
<turn_context> tail that is never stored."""

from __future__ import annotations

import json
import os
import time
from itertools import pairwise
from pathlib import Path

import pytest
from fakes.openai_server import FakeOpenAI
from fakes.script import call, text, tool_calls
from turnkit import (
    HoldTool,
    TickingClock,
    assert_prefix_stable,
    check_turn_context,
    fake_config,
    is_turn_context,
    prompt,
    stored_messages,
    turn_agent,
    wire_messages,
)

from acp_memory.config.models import OFFLINE_MODEL_ID, Config
from acp_memory.engine import history as model_history
from acp_memory.engine.prompt import Templates, TurnContext
from acp_memory.engine.turn import TurnEngine
from acp_memory.llm.registry import ProviderHub
from acp_memory.llm.types import Message
from acp_memory.sessions.model import TranscriptMessage
from acp_memory.sessions.store import SessionStore
from acp_memory.tools.registry import ToolRegistry

pytestmark = pytest.mark.anyio

TEMPLATES = Path(__file__).resolve().parents[2] / "prompts"


def _workspace(cwd: Path) -> None:
    (cwd / "notes.txt").write_text("hello from notes\n")
    (cwd / "src").mkdir()
    (cwd / "src" / "main.py").write_text("print('hi')\n")


async def test_a_three_turn_session_with_tools_only_ever_appends_to_its_prompt(paths):
    _workspace(paths.cwd)
    async with FakeOpenAI() as server:
        server.script(
            # turn 1: one tool call with its arguments split over chunks, then the answer
            tool_calls(call("list_directory", {"path": "."}, id="c1", chunks=3), text="Looking."),
            text("There is notes.txt and src/.", chunks=3),
            # turn 2: two calls in one message
            tool_calls(
                call("read_file", {"path": "notes.txt"}, id="c2"),
                call("list_directory", {"path": "src"}, id="c3"),
            ),
            text("notes.txt says hello; src has main.py.", reasoning="Both read."),
            # turn 3: a plain answer
            text("Goodbye.", chunks=2),
        )
        cfg = fake_config(server.base_url)
        async with turn_agent(cfg, paths) as (ed, _):
            sid = await ed.start_session(paths.cwd)
            for question in ("What is here?", "What do they say?", "Thanks!"):
                assert await prompt(ed, sid, question) == "end_turn"
        requests = server.requests

    assert len(requests) == 5 and server.unused == 0
    assert_prefix_stable(requests)
    # The system message and the tool definitions, the head of every cached prefix, never move.
    assert len({wire_messages(r)[0] for r in requests}) == 1
    assert requests[0].messages[0]["role"] == "system"
    assert len({json.dumps(r.json["tools"]) for r in requests}) == 1
    # Each turn's user message sits right where the previous request had its turn context.
    users = [m["content"] for m in requests[4].messages if m["role"] == "user"][:-1]
    assert users == ["What is here?", "What do they say?", "Thanks!"]
    # The tool results of turn 2 travel in order, matched to their calls.
    tool_results = [m for m in requests[3].messages if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_results] == ["c1", "c2", "c3"]
    assert tool_results[1]["content"] == "hello from notes\n"


async def test_the_turn_context_is_the_fresh_last_user_message_of_every_step_and_never_stored(
    paths,
):
    _workspace(paths.cwd)
    async with FakeOpenAI() as server:
        server.script(
            tool_calls(call("read_file", {"path": "notes.txt"})),
            tool_calls(call("list_directory", {})),
            text("Done."),
            text("Again."),
        )
        cfg = fake_config(server.base_url)
        async with turn_agent(cfg, paths) as (ed, _):
            sid = await ed.start_session(paths.cwd)
            assert await prompt(ed, sid, "Look around.") == "end_turn"
            assert await prompt(ed, sid, "Once more.") == "end_turn"
        requests = server.requests

    contexts = []
    for n, request in enumerate(requests, start=1):
        last = request.messages[-1]
        assert last["role"] == "user"
        check_turn_context(last["content"])
        # Rebuilt at each step: the engine's clock was asked once per request.
        assert TickingClock.stamp(n) in last["content"]
        contexts.append(last["content"])
        # Never carried into history: no earlier message of any request is a turn context.
        assert not any(is_turn_context(m) for m in request.messages[:-1])
    assert len(set(contexts)) == len(requests) == 4
    stored = stored_messages(paths, sid)
    assert not any(is_turn_context(m) for m in stored)
    assert [m["role"] for m in stored] == [
        "user", "assistant", "tool", "assistant", "tool", "assistant", "user", "assistant",
    ]
    session_json = (paths.sessions_dir / sid / "session.json").read_text()
    assert "<turn_context>" not in session_json


async def test_switching_mode_changes_the_system_prompt_and_the_offered_tools(paths):
    async with FakeOpenAI(default=text("ok")) as server:
        cfg = fake_config(server.base_url)
        async with turn_agent(cfg, paths, HoldTool()) as (ed, _):
            sid = await ed.start_session(paths.cwd)
            await prompt(ed, sid, "in agent mode")
            await prompt(ed, sid, "still agent")
            for mode in ("plan", "ask"):
                await ed.conn.set_session_mode(session_id=sid, mode_id=mode)
                await prompt(ed, sid, f"in {mode} mode")
        requests = server.requests

    systems = [r.messages[0]["content"] for r in requests]
    assert systems[0] == systems[1], "the system prompt moved without a mode switch"
    assert len(set(systems)) == 3
    assert "a coding agent" in systems[1]
    assert "in plan mode" in systems[2] and "in ask mode" in systems[3]
    tools = [sorted(t["function"]["name"] for t in r.json["tools"]) for r in requests]
    assert tools[0] == tools[1]
    assert {"hold", "read_file", "write_file", "edit_file"} <= set(tools[0])
    # Plan and ask are read-only: the workspace-changing tools are not even offered; plan
    # gets its own writer, for plan files in the bundle.
    writers = {"hold", "write_file", "edit_file"}
    assert "write_plan" in tools[2] and not writers & set(tools[2])
    assert tools[3] == ["glob", "grep", "list_directory", "read_file"]
    # The conversation after the system message is still the same, only appended to.
    histories = [wire_messages(r)[1:-1] for r in requests]
    for before, after in pairwise(histories):
        assert after[: len(before)] == before


async def test_editing_a_template_under_prompts_dir_changes_the_next_system_prompt(
    paths, tmp_path
):
    override = tmp_path / "prompts"
    override.mkdir()
    template = override / "agent.md"
    template.write_text("Custom v1 for {{cwd}}.\nTools:\n{{tools}}\nNotes: {{memory}}\n")
    async with FakeOpenAI() as server:
        server.script(
            tool_calls(call("list_directory", {})), text("one"), text("two"), text("three")
        )
        cfg = fake_config(server.base_url, prompts_dir=str(override))
        async with turn_agent(cfg, paths) as (ed, agent):
            tools = agent.runner.engine.tools.for_mode("agent")
            listing = "".join(f"- {t.name}: {t.description}\n" for t in tools)
            sid = await ed.start_session(paths.cwd)
            await prompt(ed, sid, "first")
            template.write_text(template.read_text().replace("v1", "v2"))
            await prompt(ed, sid, "second")
            await ed.conn.set_session_mode(session_id=sid, mode_id="plan")
            await prompt(ed, sid, "third")
        requests = server.requests

    systems = [r.messages[0]["content"] for r in requests]
    assert systems[0] == systems[1] == (
        f"Custom v1 for {paths.cwd}.\nTools:\n{listing}Notes: (none yet)\n"
    )
    assert "- read_file: Read a UTF-8 text file" in listing
    assert systems[2] == systems[0].replace("v1", "v2")
    # The built-in plan template is still used for modes the override folder lacks.
    builtin_plan = (TEMPLATES / "plan.md").read_text(encoding="utf-8")
    assert systems[3].startswith(builtin_plan.split("{{")[0])
    assert "Custom" not in systems[3] and "in plan mode" in systems[3]


def test_a_template_is_read_again_only_once_its_file_changed(tmp_path):
    """The engine asks `cached` before reading a template in a worker thread: an unchanged
    file costs a stat, a changed one (even to the same size) is read again, and one changed
    within the last second is never trusted to the cache."""
    template = tmp_path / "agent.md"
    template.write_text("v1 {{cwd}}")
    os.utime(template, ns=(time.time_ns() - 10**10,) * 2)
    templates = Templates(str(tmp_path))
    assert templates.cached("agent.md") is None and templates.load("agent.md") == "v1 {{cwd}}"
    assert templates.cached("agent.md") == "v1 {{cwd}}"
    template.write_text("v2 {{cwd}}")
    os.utime(template, ns=(time.time_ns() - 5 * 10**9,) * 2)
    assert templates.cached("agent.md") is None and templates.load("agent.md") == "v2 {{cwd}}"
    template.write_text("v3 {{cwd}}")  # just now: read on every step until it settles
    assert templates.cached("agent.md") is None and templates.load("agent.md") == "v3 {{cwd}}"
    assert templates.cached("agent.md") is None


async def test_session_notes_fill_the_memory_slot_of_the_system_prompt(paths):
    async with FakeOpenAI(default=text("ok")) as server:
        cfg = fake_config(server.base_url)
        async with turn_agent(cfg, paths) as (ed, agent):
            sid = await ed.start_session(paths.cwd)
            (await agent.session(sid)).record.agent_memory = "The user prefers tabs."
            await prompt(ed, sid, "hi")
    system = server.requests[0].messages[0]["content"]
    assert "The user prefers tabs." in system
    # Nothing that changes per step (the clock) is rendered into the cached head.
    assert "## Current time" not in system and TickingClock.stamp(1) not in system


async def test_the_system_message_names_the_sessions_additional_directories(paths, tmp_path):
    extra = tmp_path / "extra"
    extra.mkdir()
    async with FakeOpenAI() as server:
        server.script(text("Fine."))
        async with turn_agent(fake_config(server.base_url), paths) as (ed, _):
            sid = (await ed.conn.new_session(cwd=str(paths.cwd), mcp_servers=[],
                                             additional_directories=[str(extra)])).session_id
            assert await prompt(ed, sid, "Where may you write?") == "end_turn"
        system = server.requests[0].messages[0]
    assert f"Working directory: {paths.cwd}\nAlso in the workspace: {extra}" in system["content"]


async def test_a_step_converts_only_the_history_it_has_not_met_and_a_reloaded_one_anew(
    paths, monkeypatch
):
    session = SessionStore(paths.sessions_dir).create(
        cwd=str(paths.cwd), model_id=OFFLINE_MODEL_ID
    )
    engine = TurnEngine(Templates(), ToolRegistry(), 4)
    model = ProviderHub(Config()).model(OFFLINE_MODEL_ID)
    converted: list[str] = []
    real = model_history.to_llm_message

    def counting(m: TranscriptMessage, images: bool = True) -> Message:
        converted.append(m.content)
        return real(m, images)

    monkeypatch.setattr(model_history, "to_llm_message", counting)

    async def history() -> list[tuple[str, str]]:
        request = await engine.build_request(session, model, TurnContext())
        return [(m.role, m.content) for m in request.messages[1 : request.cache_prefix_len]]

    try:
        await session.append(TranscriptMessage(role="user", content="one"))
        assert await history() == [("user", "one")]
        await session.append(TranscriptMessage(role="assistant", content="two"))
        assert await history() == [("user", "one"), ("assistant", "two")]
        assert converted == ["one", "two"]
        # Read again from disk (another process wrote): new objects, converted again.
        session.messages = [m.model_copy(update={"content": m.content + "!"})
                            for m in session.messages]
        assert await history() == [("user", "one!"), ("assistant", "two!")]
        assert converted == ["one", "two", "one!", "two!"]
    finally:
        session.close()
