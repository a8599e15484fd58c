"""run_command as the model sees it: output and exit code, the foreground timeout handing a
command to the pool (or killing it), cancel, bad input, bounds, client terminals."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp import text_block
from acp.schema import ClientCapabilities
from engine.turnkit import HoldTool, fake_config, prompt, turn_context_text
from fakes.openai_server import FakeOpenAI
from fakes.script import call, text, tool_calls
from harness import Editor
from tasks.procs import Fifo, alive, assert_gone
from tasks.terminal_client import LocalTerminals, TerminalClient, pool_agent

from acp_memory.acp.agent import AcpAgent
from acp_memory.config import Config, Paths
from acp_memory.tasks.pool import TaskPool
from acp_memory.tools.base import PermissionRequest, ToolContext, ToolError
from acp_memory.tools.command import RunCommand
from acp_memory.tools.registry import ToolRegistry

pytestmark = pytest.mark.anyio


def pool_config(base_url: str, **background: Any) -> Config:
    cfg = fake_config(base_url)
    cfg.tools.permission_mode = "bypass"
    for key, value in background.items():
        setattr(cfg.tools.background, key, value)
    return cfg


def run(command: str, id: str | None = None, **args: Any) -> Any:
    return call("run_command", {"command": command, **args}, id=id)


def tool_results(server: FakeOpenAI) -> dict[str, str]:
    """Each tool result the model read, by call id."""
    seen: dict[str, str] = {}
    for request in server.requests:
        for m in request.messages:
            if m.get("role") == "tool":
                seen.setdefault(m["tool_call_id"], m["content"])
    return seen


async def start(ed: Editor, paths: Paths, *, terminal: bool = False) -> str:
    caps = ClientCapabilities(terminal=terminal)
    await ed.conn.initialize(protocol_version=1, client_capabilities=caps)
    return (await ed.conn.new_session(cwd=str(paths.cwd), mcp_servers=[])).session_id


async def pool_of(agent: AcpAgent, sid: str) -> TaskPool:
    return agent.runner.pool_for(await agent.session(sid))


async def test_a_command_returns_its_output_and_exit_code(paths: Paths):
    async with FakeOpenAI(default=text("Done.")) as server:
        server.script(
            tool_calls(run("echo hello; echo oops >&2; exit 3", "c1", cwd=".", timeout_seconds=20)),
        )
        async with pool_agent(pool_config(server.base_url), paths) as (ed, _):
            sid = await start(ed, paths)
            assert await prompt(ed, sid, "go") == "end_turn"
    result = tool_results(server)["c1"]
    assert "hello" in result and "oops" in result and result.endswith("[exit code 3]")
    ends = [u for s, u in ed.client.updates if u.session_update == "tool_call_update"]
    assert ends[-1].status == "failed"  # a non-zero exit is an error the editor shows


async def test_a_foreground_command_past_its_timeout_goes_on_in_the_pool_and_is_announced(
    paths: Paths,
):
    go = Fifo(paths.cwd / "go")
    hold = HoldTool()
    command = f"echo started; read x < {go.path}; echo OUTPUT-MARK"
    async with FakeOpenAI(default=text("Done.")) as server:
        server.script(
            tool_calls(run(command, "c1", timeout_seconds=0.3)),
            tool_calls(call("hold", {"label": "meanwhile"}, id="h1")),
        )
        async with pool_agent(pool_config(server.base_url), paths, hold) as (ed, agent):
            sid = await start(ed, paths)
            async with anyio.create_task_group() as tg:
                tg.start_soon(prompt, ed, sid, "go")
                with anyio.fail_after(10):
                    await hold.started.wait()
                pool = await pool_of(agent, sid)
                task = pool.get("bg_1")
                assert task is not None and task.record.status == "running"
                go.send()
                record = await pool.wait(task, 10)
                hold.release.set()
            assert await prompt(ed, sid, "and now?") == "end_turn"
    assert record.status == "succeeded" and record.timeout_seconds == 3600
    result = tool_results(server)["c1"]
    assert "goes on in the background as bg_1 (hard limit 60m00s)" in result
    assert "started" in result
    during, after = turn_context_text(server.requests[1]), turn_context_text(server.requests[2])
    assert "- bg_1 running for " in during
    assert "- bg_1 succeeded (exit 0) after " in after
    assert "OUTPUT-MARK" not in after  # announced, never pasted
    assert "bg_1" not in turn_context_text(server.requests[3])  # once only
    log = paths.sessions_dir / sid / "background" / "bg_1" / "output.log"
    assert log.read_text() == "started\nOUTPUT-MARK\n"


async def test_a_foreground_command_the_pool_refuses_is_killed_with_its_group(paths: Paths):
    ready = Fifo(paths.cwd / "ready")
    command = f'sleep 600 & echo "$$ $!" > {ready.path}; wait'
    async with FakeOpenAI(default=text("Done.")) as server:
        server.script(tool_calls(run(command, "c1", timeout_seconds=0.3)))
        cfg = pool_config(server.base_url, enabled=False)
        async with pool_agent(cfg, paths) as (ed, _):
            sid = await start(ed, paths)
            assert await prompt(ed, sid, "go") == "end_turn"
    leader, child = map(int, (await ready.read_line()).split())
    result = tool_results(server)["c1"]
    assert result.startswith("Error: the command was still running after 0.3s and was killed")
    assert "turned off" in result
    await assert_gone(leader, child)


async def test_cancelling_the_turn_kills_the_foreground_command_and_its_group(paths: Paths):
    ready = Fifo(paths.cwd / "ready")
    command = f'sleep 600 & echo "$$ $!" > {ready.path}; wait'
    async with FakeOpenAI(default=text("Done.")) as server:
        server.script(tool_calls(run(command, "c1")))
        async with pool_agent(pool_config(server.base_url), paths) as (ed, _):
            sid = await start(ed, paths)
            answer: dict[str, str] = {}

            async def turn() -> None:
                resp = await ed.conn.prompt(session_id=sid, prompt=[text_block("go")])
                answer["stop"] = resp.stop_reason

            async with anyio.create_task_group() as tg:
                tg.start_soon(turn)
                leader, child = map(int, (await ready.read_line()).split())
                assert alive(child)
                await ed.conn.cancel(session_id=sid)
            assert answer["stop"] == "cancelled"
            # Gone by the time the turn answered, not at some later cleanup.
            await assert_gone(leader, child)
            assert await prompt(ed, sid, "again") == "end_turn"


async def test_bad_commands_folders_and_task_ids_are_tool_errors_and_the_turn_goes_on(
    paths: Paths,
):
    async with FakeOpenAI(default=text("Done.")) as server:
        server.script(
            tool_calls(
                run("no-such-command-xyz", id="c1"),
                run("true", cwd="missing", id="c2"),
                run("true", cwd="../..", id="c3"),
                call("background_output", {"task_id": "bg_9"}, id="c4"),
                call("background_wait", {"task_id": "bg_1", "timeout_seconds": 301}, id="c5"),
            ),
        )
        async with pool_agent(pool_config(server.base_url), paths) as (ed, _):
            sid = await start(ed, paths)
            assert await prompt(ed, sid, "go") == "end_turn"
    results = tool_results(server)
    assert "no-such-command-xyz" in results["c1"]
    assert results["c1"].endswith("[exit code 127: command not found]")
    assert results["c2"] == "Error: cwd 'missing' is not a folder under " + str(paths.cwd)
    assert "outside the working directory" in results["c3"]
    assert results["c4"].startswith("Error: there is no background task 'bg_9'")
    assert "Error: invalid arguments for background_wait" in results["c5"]


async def test_output_past_the_limit_keeps_head_and_tail_with_a_marker(paths: Paths):
    async with FakeOpenAI(default=text("Done.")) as server:
        server.script(tool_calls(run("seq 1 5000", id="c1")))
        cfg = pool_config(server.base_url)
        cfg.tools.output_limits.tool_output_chars = 1000
        async with pool_agent(cfg, paths) as (ed, _):
            sid = await start(ed, paths)
            assert await prompt(ed, sid, "go") == "end_turn"
    result = tool_results(server)["c1"]
    assert len(result) < 1100
    assert result.startswith("1\n2\n") and result.endswith("4999\n5000\n[exit code 0]")
    assert "[output truncated: " in result


async def test_a_client_terminal_runs_the_command_when_advertised(paths: Paths):
    client = TerminalClient()
    async with FakeOpenAI(default=text("Done.")) as server:
        server.script(tool_calls(run("echo via-terminal; exit 4", id="c1")))
        async with pool_agent(pool_config(server.base_url), paths, client=client) as (ed, _):
            sid = await start(ed, paths, terminal=True)
            assert await prompt(ed, sid, "go") == "end_turn"
    assert client.terminals.commands == [["sh", "-c", "echo via-terminal; exit 4"]]
    assert client.terminals.methods("term-1") == ["create", "wait", "output", "release"]
    result = tool_results(server)["c1"]
    assert result == "via-terminal\n[exit code 4]"
    updates = [u for s, u in client.updates if u.session_update == "tool_call_update"]
    shown = [c.terminal_id for u in updates for c in u.content or [] if c.type == "terminal"]
    assert shown and set(shown) == {"term-1"}  # live while it ran, and in the final update


async def test_a_client_terminal_is_killed_and_released_when_the_turn_is_cancelled(
    paths: Paths,
):
    client = TerminalClient()
    ready = Fifo(paths.cwd / "ready")
    command = f'sleep 600 & echo "$$ $!" > {ready.path}; wait'
    async with FakeOpenAI(default=text("Done.")) as server:
        server.script(tool_calls(run(command, "c1")))
        async with pool_agent(pool_config(server.base_url), paths, client=client) as (ed, _):
            sid = await start(ed, paths, terminal=True)
            async with anyio.create_task_group() as tg:
                tg.start_soon(prompt, ed, sid, "go")
                leader, child = map(int, (await ready.read_line()).split())
                await ed.conn.cancel(session_id=sid)
    methods = client.terminals.methods("term-1")
    assert methods[0] == "create" and "kill" in methods and methods[-1] == "release"
    await assert_gone(leader, child)


async def test_a_client_terminal_command_past_its_timeout_goes_on_in_the_pool(paths: Paths):
    client = TerminalClient()
    go = Fifo(paths.cwd / "go")
    hold = HoldTool()
    async with FakeOpenAI(default=text("Done.")) as server:
        server.script(
            tool_calls(
                run(f"echo early; read x < {go.path}; echo late", "c1", timeout_seconds=0.3)
            ),
            tool_calls(call("hold", {"label": "x"})),
        )
        cfg = pool_config(server.base_url)
        async with pool_agent(cfg, paths, hold, client=client) as (ed, agent):
            sid = await start(ed, paths, terminal=True)
            async with anyio.create_task_group() as tg:
                tg.start_soon(prompt, ed, sid, "go")
                with anyio.fail_after(10):
                    await hold.started.wait()
                pool = await pool_of(agent, sid)
                go.send()
                record = await pool.wait("bg_1", 10)
                hold.release.set()
    assert record.status == "succeeded" and record.pid is None
    assert "as bg_1" in tool_results(server)["c1"]
    assert client.terminals.methods("term-1")[-1] == "release"
    log = paths.sessions_dir / sid / "background" / "bg_1" / "output.log"
    assert log.read_text() == "early\nlate\n"


# -- without the agent: the tool on a bare ToolContext -------------------------------------


class Refusing:
    def __init__(self) -> None:
        self.asked: list[PermissionRequest] = []

    async def ensure(self, ctx: ToolContext, request: PermissionRequest) -> None:
        self.asked.append(request)
        raise ToolError("the user said no")


async def execute(args: Mapping[str, Any], ctx: ToolContext) -> Any:
    tools = ToolRegistry([RunCommand()]).for_mode("agent")
    return await tools.execute("run_command", json.dumps(args), ctx)


async def test_a_refused_permission_runs_nothing(tmp_path: Path):
    gate = Refusing()
    ctx = ToolContext("s", tmp_path, "agent", permissions=gate)
    result = await execute({"command": "touch made"}, ctx)
    assert result.is_error and result.text == "Error: the user said no"
    assert gate.asked == [PermissionRequest("command", "touch made", "Run touch made")]
    assert not (tmp_path / "made").exists()


async def test_without_a_pool_a_command_runs_locally_and_is_killed_at_its_timeout(
    tmp_path: Path,
):
    ctx = ToolContext("s", tmp_path, "agent")
    done = await execute({"command": "echo local"}, ctx)
    assert (done.text, done.is_error) == ("local\n[exit code 0]", False)
    ready = Fifo(tmp_path / "ready")
    with anyio.fail_after(10):
        late = await execute(
            {"command": f'sleep 600 & echo "$$ $!" > {ready.path}; wait', "timeout_seconds": 0.3},
            ctx,
        )
    assert late.is_error and "killed (no background pool here)" in late.text
    leader, child = map(int, (await ready.read_line()).split())
    await assert_gone(leader, child)
    background = await execute({"command": "true", "background": True}, ctx)
    assert background.is_error and "no pool" in background.text


async def test_an_editor_terminal_is_shown_while_the_command_runs(tmp_path: Path):
    editor = LocalTerminals()
    shown: list[Any] = []

    async def progress(content: Any) -> None:
        shown.extend(content)

    ctx = ToolContext("s", tmp_path, "agent", editor=editor, progress=progress)
    try:
        result = await execute({"command": "printf 'a\\rb\\n'"}, ctx)
    finally:
        editor.close()
    assert result.text == "b\n[exit code 0]"
    assert [c.terminal_id for c in shown] == [c.terminal_id for c in result.content] == ["term-1"]
    assert editor.methods("term-1") == ["create", "wait", "output", "release"]
