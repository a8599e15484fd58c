"""Hooks through the real agent and a fake model server: every event, and what each outcome
(allow, block, timeout, other exits, bad JSON on stdout) does to the turn."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import anyio
import pytest
from engine.turnkit import (
    PROMPT_BOUND_S,
    fake_config,
    prompt,
    stored_messages,
    turn_agent,
    turn_context_text,
    updates_of,
)
from fakes.openai_server import FakeOpenAI
from fakes.script import call, error, stall, text, tool_calls
from hookkit import HookKit, group, hooks
from runtime.test_memory_run import MemoryRoutedOpenAI, memory_config, memory_updates, task_dirs

from acp_memory.config.models import Config, ToolsConfig
from acp_memory.hooks.events import SessionHooks
from acp_memory.hooks.table import HookTable

pytestmark = pytest.mark.anyio

BLOCKS = {
    "exit 2": {"stderr": "no secrets in prompts", "exit": 2},
    "block decision": {"stdout": json.dumps({"decision": "block", "reason": "policy says no"})},
}
REASONS = {"exit 2": "no secrets in prompts", "block decision": "policy says no"}


def with_hooks(cfg: Config, **events: list[dict[str, Any]]) -> Config:
    cfg.hooks = hooks(**events)
    cfg.tools = ToolsConfig(permission_mode="bypass")  # no permission questions in the way
    return cfg


def said(ed: Any, sid: str) -> str:
    return "".join(u.content.text for u in updates_of(ed, sid, "agent_message_chunk"))


async def test_user_prompt_submit_output_rides_every_step_of_its_turn_only(paths, tmp_path):
    kit = HookKit(tmp_path / "hooks")
    (paths.cwd / "a.txt").write_text("alpha")
    async with FakeOpenAI() as server:
        server.script(
            tool_calls(call("read_file", {"path": "a.txt"})), text("It says alpha."), text("ok")
        )
        cfg = with_hooks(
            fake_config(server.base_url),
            UserPromptSubmit=[group(kit.command(stdout="HOOK saw: {prompt}"))],
        )
        async with turn_agent(cfg, paths) as (ed, _):
            sid = await ed.start_session(paths.cwd)
            assert await prompt(ed, sid, "first question") == "end_turn"
            assert await prompt(ed, sid, "second question") == "end_turn"
        step1, step2, turn2 = server.requests
    # In the turn context of both steps of its turn, never in the system message.
    for request in (step1, step2):
        assert "## From hooks\nHOOK saw: first question" in turn_context_text(request)
        assert "HOOK saw" not in request.messages[0]["content"]
    assert "first question" not in turn_context_text(turn2)
    assert "HOOK saw: second question" in turn_context_text(turn2)
    assert "HOOK saw" not in json.dumps(stored_messages(paths, sid))
    first = kit.events("UserPromptSubmit")[0]
    assert first == {
        "session_id": sid,
        "transcript_path": str(paths.sessions_dir / sid / "messages.json"),
        "cwd": str(paths.cwd),
        "hook_event_name": "UserPromptSubmit",
        "prompt": "first question",
    }


@pytest.mark.parametrize("how", sorted(BLOCKS))
async def test_a_blocked_prompt_is_refused_with_no_model_call_and_no_memory_run(
    paths, tmp_path, how
):
    kit = HookKit(tmp_path / "hooks")
    blocker = kit.command(**BLOCKS[how])
    async with MemoryRoutedOpenAI() as server:
        cfg = with_hooks(
            memory_config(server),
            UserPromptSubmit=[group(blocker)],
            Stop=[group(kit.command())],
        )
        async with turn_agent(cfg, paths) as (ed, _):
            sid = await ed.start_session(paths.cwd)
            assert await prompt(ed, sid, "my password is hunter2") == "refusal"
            reply = said(ed, sid)
            updates = memory_updates(ed)
    # The agent's message names the hook and its reason: no one mistakes it for the model.
    assert reply == f"blocked by UserPromptSubmit hook '{blocker}': {REASONS[how]}"
    assert server.requests == [] and updates == [] and task_dirs(paths, sid) == []
    assert stored_messages(paths, sid) == []  # the refused prompt is not in the transcript
    assert kit.events("Stop") == []


async def test_bad_json_on_stdout_is_plain_text_and_the_turn_goes_on(paths, tmp_path):
    kit = HookKit(tmp_path / "hooks")
    broken = '{"decision": "block", "reason": '
    async with FakeOpenAI() as server:
        server.script(text("answered"))
        cfg = with_hooks(
            fake_config(server.base_url), UserPromptSubmit=[group(kit.command(stdout=broken))]
        )
        async with turn_agent(cfg, paths) as (ed, _):
            sid = await ed.start_session(paths.cwd)
            assert await prompt(ed, sid, "hello") == "end_turn"
    assert broken.strip() in turn_context_text(server.requests[0])


async def test_timeouts_and_other_exit_codes_are_ignored_and_print_nothing_into_context(
    paths, tmp_path
):
    kit = HookKit(tmp_path / "hooks")
    async with FakeOpenAI() as server:
        server.script(text("answered"))
        cfg = with_hooks(
            fake_config(server.base_url),
            UserPromptSubmit=[
                group("echo SLEEPER-SAID; sleep 30", timeout=0.3),
                group(kit.command(stdout="EXIT-1-SAID", stderr="broken", exit=1)),
                group(kit.command(stdout="EXIT-0-SAID")),
            ],
        )
        async with turn_agent(cfg, paths) as (ed, _):
            sid = await ed.start_session(paths.cwd)
            assert await prompt(ed, sid, "hello") == "end_turn"
    context = turn_context_text(server.requests[0])
    assert "EXIT-0-SAID" in context
    assert "SLEEPER-SAID" not in context and "EXIT-1-SAID" not in context


@pytest.mark.parametrize("how", sorted(BLOCKS))
async def test_a_blocked_tool_call_fails_with_the_reason_and_the_turn_goes_on(paths, tmp_path, how):
    kit = HookKit(tmp_path / "hooks")
    blocker = kit.command(**BLOCKS[how])
    async with FakeOpenAI() as server:
        server.script(
            tool_calls(call("write_file", {"path": "out.txt", "content": "x"})), text("gave up")
        )
        cfg = with_hooks(
            fake_config(server.base_url),
            PreToolUse=[group(blocker, matcher="write_file|edit_file")],
            PostToolUse=[group(kit.command())],
        )
        async with turn_agent(cfg, paths) as (ed, _):
            sid = await ed.start_session(paths.cwd)
            assert await prompt(ed, sid, "write it") == "end_turn"
            (finished,) = [u for u in updates_of(ed, sid, "tool_call_update") if u.status]
    assert not (paths.cwd / "out.txt").exists()
    assert finished.status == "failed"
    result = [m for m in server.requests[1].messages if m["role"] == "tool"][-1]["content"]
    assert result == f"Error: blocked by PreToolUse hook '{blocker}': {REASONS[how]}"
    (pre,) = kit.events("PreToolUse")
    assert pre["tool_name"] == "write_file"
    assert pre["tool_input"] == {"path": "out.txt", "content": "x"}
    assert kit.events("PostToolUse") == []  # the call never ran


async def test_matchers_pick_the_tool_events_and_post_tool_use_sees_the_result(
    paths, tmp_path, caplog
):
    kit = HookKit(tmp_path / "hooks")
    (paths.cwd / "a.txt").write_text("alpha")
    async with FakeOpenAI() as server:
        server.script(tool_calls(call("read_file", {"path": "a.txt"})), text("done"))
        cfg = with_hooks(
            fake_config(server.base_url),
            PreToolUse=[group(kit.command(exit=2), matcher="write_.*")],  # not read_file
            PostToolUse=[group(kit.command(stderr="blocking is not for me", exit=2), matcher="*")],
        )
        async with turn_agent(cfg, paths) as (ed, _):
            sid = await ed.start_session(paths.cwd)
            assert await prompt(ed, sid, "read it") == "end_turn"
    assert kit.events("PreToolUse") == []
    (post,) = kit.events("PostToolUse")
    assert post["tool_name"] == "read_file" and post["tool_input"] == {"path": "a.txt"}
    assert "alpha" in post["tool_response"]["content"]
    assert post["tool_response"]["is_error"] is False
    # PostToolUse cannot block: its exit 2 changed nothing, and the log says so.
    result = [m for m in server.requests[1].messages if m["role"] == "tool"][-1]["content"]
    assert "alpha" in result
    assert "asked to block, which PostToolUse cannot; ignored: blocking is not" in caplog.text


async def test_session_start_output_reaches_the_first_turn_only(paths, tmp_path):
    kit = HookKit(tmp_path / "hooks")
    async with FakeOpenAI() as server:
        server.script(text("one"), text("two"), text("three"))
        cfg = with_hooks(
            fake_config(server.base_url),
            SessionStart=[group(kit.command(stdout="SESSION-START-CONTEXT"))],
            Stop=[group(kit.command())],
        )
        async with turn_agent(cfg, paths) as (ed, _):
            sid = await ed.start_session(paths.cwd)
            assert [e["source"] for e in kit.events("SessionStart")] == ["startup"]
            assert await prompt(ed, sid, "first") == "end_turn"
            assert await prompt(ed, sid, "second") == "end_turn"
        async with turn_agent(cfg, paths) as (ed, _):  # a fresh agent loads it
            await ed.conn.initialize(protocol_version=1)
            await ed.conn.load_session(session_id=sid, cwd=str(paths.cwd), mcp_servers=[])
            assert await prompt(ed, sid, "third") == "end_turn"
    first, second, third = server.requests
    assert "SESSION-START-CONTEXT" in turn_context_text(first)
    assert "SESSION-START-CONTEXT" not in turn_context_text(second)
    assert "SESSION-START-CONTEXT" in turn_context_text(third)  # its own first turn
    assert "SESSION-START-CONTEXT" not in first.messages[0]["content"]
    assert [e["source"] for e in kit.events("SessionStart")] == ["startup", "resume"]
    stops = kit.events("Stop")
    assert [e["stop_reason"] for e in stops] == ["end_turn"] * 3
    assert all(e["stop_hook_active"] is False and e["session_id"] == sid for e in stops)


async def test_subagent_events_fire_for_spawned_children_and_never_for_the_memory_run(
    paths, tmp_path
):
    kit = HookKit(tmp_path / "hooks")
    every = [group(kit.command())]
    async with MemoryRoutedOpenAI() as server:
        server.child = [text("(no memory hits)")]
        server.script(
            tool_calls(call("spawn_agent", {"prompt": "Count the files.", "name": "counter"})),
            text("3 files."),  # the spawned child
            text("Done."),
        )
        cfg = with_hooks(
            memory_config(server),
            SessionStart=[group(kit.command(stdout="SESSION-STARTED"))],
            UserPromptSubmit=every,
            Stop=every,
            SubagentStart=every,
            SubagentStop=every,
        )
        async with turn_agent(cfg, paths) as (ed, _):
            sid = await ed.start_session(paths.cwd)
            assert await prompt(ed, sid, "delegate it") == "end_turn"
    (start,) = kit.events("SubagentStart")
    (stop,) = kit.events("SubagentStop")
    child = start["subagent"]
    assert child["name"] == "counter" and child["kind"] == "agent"
    assert start["session_id"] == stop["session_id"] == sid
    assert start["prompt"] == "Count the files." and stop["subagent"] == child
    # Inside each child every ordinary event fires with its own block.
    blocks = {
        (e["hook_event_name"], e.get("subagent", {}).get("kind"))
        for e in kit.events()
        if e["hook_event_name"] not in ("SubagentStart", "SubagentStop")
    }
    assert blocks == {
        (event, kind)
        for event in ("SessionStart", "UserPromptSubmit", "Stop")
        for kind in (None, "agent", "memory")
    }
    memory = [e for e in kit.events() if e.get("subagent", {}).get("kind") == "memory"]
    assert {e["subagent"]["name"] for e in memory} == {"memory"}
    assert {e["session_id"] for e in memory} == {memory[0]["subagent"]["session_id"]}
    inside = [e for e in kit.events("UserPromptSubmit") if e.get("subagent") == child]
    assert inside[0]["session_id"] == child["session_id"]
    assert inside[0]["prompt"] == "Count the files."
    # Each child's own SessionStart output rides its turn, as the parent's rides the parent's.
    parent_first, spawned, _ = server.parent_requests
    for request in (parent_first, spawned, server.child_requests[0]):
        assert "SESSION-STARTED" in turn_context_text(request)


async def test_subagent_stop_fires_when_the_child_fails_too(paths, tmp_path):
    kit = HookKit(tmp_path / "hooks")
    every = [group(kit.command())]
    async with FakeOpenAI() as server:
        server.script(
            tool_calls(call("spawn_agent", {"prompt": "Count the files.", "name": "counter"})),
            error(402, "subscription expired"),  # the spawned child's model call
            text("It failed."),
        )
        cfg = with_hooks(fake_config(server.base_url), SubagentStart=every, SubagentStop=every)
        async with turn_agent(cfg, paths) as (ed, _):
            sid = await ed.start_session(paths.cwd)
            assert await prompt(ed, sid, "delegate it") == "end_turn"
    (start,) = kit.events("SubagentStart")
    (stop,) = kit.events("SubagentStop")
    assert stop["subagent"] == start["subagent"] and stop["session_id"] == sid


async def test_subagent_stop_fires_when_the_child_is_stopped(paths, tmp_path):
    kit = HookKit(tmp_path / "hooks")
    every = [group(kit.command())]
    async with FakeOpenAI() as server:
        server.script(
            tool_calls(call("spawn_agent", {"prompt": "Count the files.", "name": "counter"})),
            stall(),  # the spawned child's model call, until the stop closes it
        )
        cfg = with_hooks(fake_config(server.base_url), SubagentStart=every, SubagentStop=every)
        async with turn_agent(cfg, paths) as (ed, _):
            sid = await ed.start_session(paths.cwd)
            answer: list[str] = []

            async def run() -> None:
                answer.append(await prompt(ed, sid, "delegate it"))

            async with anyio.create_task_group() as tg:
                tg.start_soon(run)
                with anyio.fail_after(PROMPT_BOUND_S):
                    await server.wait_for_requests(2)
                # The turn that waited for the child ends, and the child is stopped with it.
                await ed.conn.cancel(session_id=sid)
    assert answer == ["cancelled"]
    (start,) = kit.events("SubagentStart")
    (stop,) = kit.events("SubagentStop")
    assert stop["subagent"] == start["subagent"] and stop["session_id"] == sid


async def test_project_hooks_run_only_when_the_config_allows_them(paths, tmp_path):
    kit = HookKit(tmp_path / "hooks")
    folder = paths.cwd / ".acp-memory"
    folder.mkdir()
    project = {"hooks": hooks(UserPromptSubmit=[group(kit.command(stdout="FROM-PROJECT"))])}
    (folder / "hooks.yaml").write_text(json.dumps(project, default=lambda m: m.model_dump()))
    for allowed in (False, True):
        async with FakeOpenAI() as server:
            server.script(text("ok"))
            cfg = fake_config(server.base_url)
            cfg.hooks_allow_project = allowed
            async with turn_agent(cfg, paths) as (ed, _):
                sid = await ed.start_session(paths.cwd)
                assert await prompt(ed, sid, "hello") == "end_turn"
        assert ("FROM-PROJECT" in turn_context_text(server.requests[0])) is allowed
        assert len(kit.events("UserPromptSubmit")) == int(allowed)


async def test_an_events_hooks_run_at_once_and_are_read_in_config_order(tmp_path):
    # Each hook waits for the other's mark: run one after the other, the first would time out.
    # The second finishes first, yet the first one's output comes first.
    first = "touch a; until [ -e b ]; do sleep 0.01; done; sleep 0.2; echo FIRST"
    second = "touch b; until [ -e a ]; do sleep 0.01; done; echo SECOND"
    table = HookTable((hooks(Stop=[group(first, timeout=5), group(second, timeout=5)]),))
    session = SimpleNamespace(
        id="sess_x",
        record=SimpleNamespace(cwd=str(tmp_path)),
        transcript=SimpleNamespace(path=tmp_path / "messages.json"),
    )
    with anyio.fail_after(4):
        outcome = await SessionHooks(table, session).fire("Stop", {})  # type: ignore[arg-type]
    assert outcome.output == ["FIRST", "SECOND"] and outcome.blocked is None
