"""`acp-memory proxy` end to end: a real proxy process in front of a real agent on the official
SDK (tests/fakes/sdk_inner_agent.py), the official SDK client as the editor. Every line the
proxy sends the editor is checked against the ACP schema (harness.subprocess_agent)."""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp import RequestError
from engine.turnkit import prompt
from fakes.sdk_inner_agent import NAME, OWN_MEMORY_COMMAND
from harness import RecordingClient
from proxykit import (
    BOUND_S,
    INNER_COMMAND,
    MEMORY_CLOSE,
    MEMORY_ON,
    MEMORY_OPEN,
    REVIEW_ASK,
    bundle_of,
    capabilities,
    memory_runs,
    open_session,
    proxy,
    write_config,
)
from runtime.test_memory_review import SlowToAnswer
from tasks.terminal_client import TerminalClient

import acp_memory

pytestmark = [pytest.mark.anyio, pytest.mark.subprocess]


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    return folder


def kettle_note(home: Path) -> str:
    """Memory on and one global note, the office kettle's colour; the question it answers."""
    write_config(home, MEMORY_ON)
    (home / "memory").mkdir(parents=True)
    (home / "memory" / "kettle.md").write_text("The office kettle is painted teal.\n")
    return "Which colour is the office kettle painted?"


def memory_block(blocks: list[str]) -> str:
    """The prompt's last block, which must be the proxy's memory block."""
    last = blocks[-1]
    assert last.startswith(MEMORY_OPEN + "\n") and last.endswith("\n" + MEMORY_CLOSE), blocks
    return last


# -- transparent ------------------------------------------------------------------------------


async def test_a_prompt_is_answered_by_the_inner_agent_through_the_proxy(home, project, tmp_path):
    write_config(home, MEMORY_ON)
    async with proxy(home, project, tmp_path / "inner.jsonl") as (ed, inner):
        with anyio.fail_after(BOUND_S):
            init = await ed.conn.initialize(protocol_version=1)
            sid = (await ed.conn.new_session(cwd=str(project), mcp_servers=[])).session_id
        assert await prompt(ed, sid, "hello through the proxy") == "end_turn"
        assert ed.client.text(sid) == "hello through the proxy"
    assert init.agent_info is not None
    assert init.agent_info.name == f"acp-memory proxy ({NAME})"
    assert init.agent_capabilities is not None and init.agent_capabilities.load_session
    assert init.field_meta == {"acpMemory": {"version": acp_memory.__version__, "memory": True}}
    # The inner agent's own session id, unchanged; nothing to recall, so nothing added.
    assert inner.prompts() == [["hello through the proxy"]]
    assert [p["sessionId"] for p in inner.received("session/prompt")] == [sid]
    # The proxy's bundle of that session, under a hash of its id (which holds a slash).
    record = json.loads((bundle_of(home, sid) / "session.json").read_text())
    assert record["proxy"]["innerSessionId"] == sid
    assert record["proxy"]["command"] == list(INNER_COMMAND)
    messages = json.loads((bundle_of(home, sid) / "messages.json").read_text())["messages"]
    said = [(m["role"], m["content"]) for m in messages if m["role"] in ("user", "assistant")]
    assert said == [("user", "hello through the proxy"), ("assistant", "hello through the proxy")]


async def test_acp_memorys_own_agent_with_memory_off_gets_the_recall_through_the_proxy(
    home, project, tmp_path
):
    question = kettle_note(home)
    # Its own home: no config, so no memory of its own; the offline model echoes the prompt.
    inner = (sys.executable, "-m", "acp_memory", "acp", "--home", str(tmp_path / "inner"))
    async with proxy(home, project, tmp_path / "unused.jsonl", inner=inner) as (ed, _):
        with anyio.fail_after(BOUND_S):
            init = await ed.conn.initialize(protocol_version=1)
            sid = (await ed.conn.new_session(cwd=str(project), mcp_servers=[])).session_id
        assert await prompt(ed, sid, question) == "end_turn"
        reply = ed.client.text(sid)
    assert init.agent_info is not None and init.agent_info.name == "acp-memory proxy (acp-memory)"
    # Only the proxy knows the note: the agent echoes it from the block on the prompt.
    assert question in reply and "teal" in reply


async def test_permission_requests_and_fs_and_terminal_calls_of_the_inner_agent_pass_through(
    home, project, tmp_path
):
    readme = str(project / "README.md")
    client = TerminalClient(permission_answers=["allow"], buffers={readme: "read me first"})
    try:
        async with proxy(home, project, tmp_path / "inner.jsonl", client=client) as (ed, _):
            sid = (await open_session(ed, project)).session_id
            assert await prompt(ed, sid, "ASK") == "end_turn"
            assert await prompt(ed, sid, f"READ {readme}") == "end_turn"
            assert await prompt(ed, sid, "TERM echo through-the-proxy") == "end_turn"
    finally:
        client.terminals.close()
    said = client.text(sid)
    assert "permission: selected allow" in said
    ((asked_in, tool_call, options),) = client.permission_requests
    assert asked_in == sid and tool_call.tool_call_id == "inner_call_1"
    assert [o.option_id for o in options] == ["allow", "reject"]
    assert "read: read me first" in said
    assert client.fs_calls == [("fs/read_text_file", readme)]
    assert "terminal: through-the-proxy\nexit 0" in said
    assert client.terminals.commands == [["sh", "-c", "echo through-the-proxy"]]
    assert [m for m, _ in client.terminals.calls] == ["create", "wait", "output", "release"]


async def test_a_streamed_reply_reaches_the_editor_whole_and_before_its_answer(
    home, project, tmp_path
):
    async with proxy(home, project, tmp_path / "inner.jsonl") as (ed, _):
        sid = (await open_session(ed, project)).session_id
        assert await prompt(ed, sid, "STREAM 300") == "end_turn"
        said = ed.client.text(sid)
    assert said == "STREAM 300" + "".join(f"chunk {i}\n" for i in range(300))
    # On the wire: every chunk before the prompt's answer.
    kinds = [
        "answer" if "result" in m else m["params"]["update"]["sessionUpdate"]
        for m in ed.checker.sent
        if m.get("method") == "session/update" or "stopReason" in (m.get("result") or {})
    ]
    assert kinds[-1] == "answer" and kinds.count("agent_message_chunk") == 301


# -- memory on every prompt ---------------------------------------------------------------------


async def test_a_recalled_note_is_the_last_block_of_the_prompt_the_inner_agent_receives(
    home, project, tmp_path
):
    question = kettle_note(home)
    async with proxy(home, project, tmp_path / "inner.jsonl") as (ed, inner):
        sid = (await open_session(ed, project)).session_id
        assert await prompt(ed, sid, question) == "end_turn"
        assert memory_runs(ed, sid) == ["started", "finished"]
        ((user, *added),) = inner.prompts()
        assert user == question and "teal" in memory_block([user, *added]), ed.stderr.decode()
        # The agent replays the prompt as it received it; the editor sees the user's words.
        ed.client.updates.clear()
        with anyio.fail_after(BOUND_S):
            await ed.conn.load_session(session_id=sid, cwd=str(project), mcp_servers=[])
        assert ed.client.text(sid, "user_message_chunk") == question


async def test_a_note_one_proxy_process_persists_is_recalled_by_a_second(home, project, tmp_path):
    write_config(home, MEMORY_ON)
    async with proxy(home, project, tmp_path / "first.jsonl") as (ed, first):
        sid = (await open_session(ed, project)).session_id
        assert await prompt(ed, sid, "Remember that the staging kettle is called quokka.") == (
            "end_turn"
        )
        assert memory_runs(ed, sid) == ["started", "finished"]
    ((said, *_),) = first.prompts()
    assert said == "Remember that the staging kettle is called quokka."
    saved = [n for n in (home / "memory").rglob("*.md") if "quokka" in n.read_text()]
    assert len(saved) == 1
    async with proxy(home, project, tmp_path / "second.jsonl") as (ed, second):
        sid = (await open_session(ed, project)).session_id
        assert await prompt(ed, sid, "What is the staging kettle called?") == "end_turn"
    ((user, *added),) = second.prompts()
    assert user == "What is the staging kettle called?"
    assert "quokka" in memory_block([user, *added]), ed.stderr.decode()


async def test_memory_review_questions_and_the_agents_own_both_reach_the_editor(
    home, project, tmp_path
):
    write_config(home, REVIEW_ASK)
    client = RecordingClient(permission_answers=["allow_once", "allow"])
    async with proxy(home, project, tmp_path / "inner.jsonl", client=client) as (ed, _):
        sid = (await open_session(ed, project)).session_id
        assert await prompt(ed, sid, "ASK. Remember that the staging kettle is called quokka.") == (
            "end_turn"
        )
    asked = [(s, call.tool_call_id) for s, call, _ in client.permission_requests]
    assert asked == [(sid, "mem_bg_1_1"), (sid, "inner_call_1")]
    assert "permission: selected allow" in client.text(sid)
    saved = [n for n in (home / "memory").rglob("*.md") if "quokka" in n.read_text()]
    assert len(saved) == 1


async def test_a_session_loaded_in_a_later_proxy_process_goes_on_in_its_bundle(
    home, project, tmp_path
):
    question = kettle_note(home)
    async with proxy(home, project, tmp_path / "first.jsonl") as (ed, _):
        sid = (await open_session(ed, project)).session_id
        assert await prompt(ed, sid, question) == "end_turn"
    async with proxy(home, project, tmp_path / "second.jsonl") as (ed, second):
        with anyio.fail_after(BOUND_S):
            await ed.conn.initialize(protocol_version=1, client_capabilities=capabilities())
            await ed.conn.load_session(session_id=sid, cwd=str(project), mcp_servers=[])
        assert ed.client.text(sid, "user_message_chunk") == question
        assert await prompt(ed, sid, "thanks") == "end_turn"
    assert [p["sessionId"] for p in second.received("session/load")] == [sid]
    messages = json.loads((bundle_of(home, sid) / "messages.json").read_text())["messages"]
    users = [m["content"] for m in messages if m["role"] == "user"]
    assert users == [question, "thanks"]


# -- commands and options --------------------------------------------------------------------


async def test_slash_memory_is_answered_by_the_proxy_and_never_reaches_the_inner_agent(
    home, project, tmp_path
):
    write_config(home, MEMORY_ON)
    async with proxy(home, project, tmp_path / "inner.jsonl") as (ed, inner):
        sid = (await open_session(ed, project)).session_id
        await ed.client.wait_for(lambda: sid in ed.client.commands, BOUND_S)
        commands = [(c.name, c.description) for c in ed.client.commands[sid]]
        assert await prompt(ed, sid, "/memory") == "end_turn"
        answer = ed.client.text(sid)
    # The proxy's own commands, merged into the agent's: its /memory shadows the agent's.
    names = sorted(name for name, _ in commands)
    assert names == ["forget", "memory", "remember", "review"]
    assert ("memory", OWN_MEMORY_COMMAND) not in commands
    assert answer.strip()
    assert inner.received("session/prompt") == []


async def test_the_long_term_memory_option_is_the_proxys_own(home, project, tmp_path):
    write_config(home, MEMORY_ON)
    async with proxy(home, project, tmp_path / "inner.jsonl") as (ed, inner):
        opened = await open_session(ed, project)
        options = {o.id: o for o in opened.config_options or ()}
        with anyio.fail_after(BOUND_S):
            switched = await ed.conn.set_config_option(
                config_id="acp_memory", session_id=opened.session_id, value=False
            )
    assert set(options) == {"style", "acp_memory"}
    memory = options["acp_memory"]
    assert (memory.type, memory.name, memory.current_value) == ("boolean", "Long-term memory", True)
    after = {o.id: o.current_value for o in switched.config_options or ()}
    assert after == {"style": "plain", "acp_memory": False}
    assert inner.received("session/set_config_option") == []


# -- cancel ------------------------------------------------------------------------------------


async def cancelled_once(
    ed: Any, sid: str, text: str, until: Callable[[], Awaitable[None]]
) -> str:
    """The prompt's stop reason when the editor cancels it once `until()` returns."""
    answers: list[str] = []
    async with anyio.create_task_group() as tg:

        async def ask() -> None:
            answers.append(await prompt(ed, sid, text))

        tg.start_soon(ask)
        await until()
        await ed.conn.cancel(session_id=sid)
    (answer,) = answers
    return answer

async def test_a_cancel_during_the_memory_wait_ends_the_prompt_without_forwarding_it(
    home, project, tmp_path
):
    # The memory run asks before it saves and the user takes their time: the prompt is in
    # the memory wait once the question has come.
    write_config(home, REVIEW_ASK)
    client = SlowToAnswer()
    async with proxy(home, project, tmp_path / "inner.jsonl", client=client) as (ed, inner):
        sid = (await open_session(ed, project)).session_id
        async def asked() -> None:
            with anyio.fail_after(BOUND_S):
                await client.asked.wait()

        answer = await cancelled_once(ed, sid, "Remember that I drink green tea.", asked)
        assert answer == "cancelled"  # the question is never answered: withdrawn
    assert inner.received("session/prompt") == []
    assert inner.received("session/cancel") == [{"sessionId": sid}]


async def test_a_cancel_during_the_agents_turn_is_the_agents_to_answer(home, project, tmp_path):
    async with proxy(home, project, tmp_path / "inner.jsonl") as (ed, inner):
        sid = (await open_session(ed, project)).session_id
        answer = await cancelled_once(ed, sid, "HANG", lambda: ed.client.wait_for(
            lambda: "hanging" in ed.client.text(sid), BOUND_S))
        assert answer == "cancelled"
        assert inner.received("session/cancel") == [{"sessionId": sid}]
        # The session goes on.
        assert await prompt(ed, sid, "still there?") == "end_turn"


# -- failures ----------------------------------------------------------------------------------


async def failed_turn(ed: Any, sid: str, text: str, *, kill: int | None = None) -> RequestError:
    """The prompt `text`, which the inner agent never answers: it exits (`EXIT n`), or hangs
    and is killed (`kill`: its pid); the error the editor got, once the proxy has exited."""
    failed: list[RequestError] = []
    async with anyio.create_task_group() as tg:

        async def ask() -> None:
            try:
                await prompt(ed, sid, text)
            except RequestError as exc:
                failed.append(exc)

        tg.start_soon(ask)
        if kill is not None:
            await ed.client.wait_for(lambda: "hanging" in ed.client.text(sid), BOUND_S)
            os.kill(kill, signal.SIGKILL)
    assert ed.process is not None
    with anyio.fail_after(BOUND_S):
        assert await ed.process.wait() == 1
    ((error,),) = [failed]
    assert error.code == -32603
    return error


async def test_the_inner_agent_exiting_mid_turn_fails_the_prompt_with_its_code_and_last_line(
    home, project, tmp_path
):
    async with proxy(home, project, tmp_path / "inner.jsonl") as (ed, _):
        sid = (await open_session(ed, project)).session_id
        error = await failed_turn(ed, sid, "EXIT 3")
        stderr = ed.stderr.decode()
    assert str(error) == (
        f"the inner agent {INNER_COMMAND[0]} exited with code 3: {NAME}: exiting with 3"
    )
    # Its stderr passed through to ours.
    assert f"{NAME}: exiting with 3" in stderr


async def test_the_inner_agent_killed_mid_turn_fails_the_prompt_naming_it_and_the_proxy_exits(
    home, project, tmp_path
):
    async with proxy(home, project, tmp_path / "inner.jsonl") as (ed, inner):
        sid = (await open_session(ed, project)).session_id
        error = await failed_turn(ed, sid, "HANG", kill=inner.pid())
    assert str(error) == (f"the inner agent {INNER_COMMAND[0]} exited with code 137 (killed by "
                          f"SIGKILL): {NAME}: hanging in {sid}")
