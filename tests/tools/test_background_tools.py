"""background_list, _output, _wait and _stop as the model uses them, system tasks refused,
each mode's set, and the session's tasks stopped when the agent stops."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from engine.turnkit import HoldTool, fake_config, prompt
from fakes.openai_server import FakeOpenAI
from fakes.script import call, text, tool_calls
from tasks.procs import Fifo, alive, assert_gone
from tasks.terminal_client import pool_agent

from acp_memory.build import build_engine
from acp_memory.config import Config, Paths
from acp_memory.tasks.pool import TaskPool
from acp_memory.tasks.task import Task

pytestmark = pytest.mark.anyio


def pool_config(base_url: str) -> Config:
    cfg = fake_config(base_url)
    cfg.tools.permission_mode = "bypass"
    return cfg


def tool_results(server: FakeOpenAI) -> dict[str, str]:
    seen: dict[str, str] = {}
    for request in server.requests:
        for m in request.messages:
            if m.get("role") == "tool":
                seen.setdefault(m["tool_call_id"], m["content"])
    return seen


def meta(paths: Paths, sid: str, task_id: str) -> dict[str, Any]:
    path = paths.sessions_dir / sid / "background" / task_id / "meta.json"
    return json.loads(path.read_text())


def test_plan_mode_reads_the_pool_and_only_agent_mode_runs_or_stops_commands():
    tools = build_engine(Config()).tools
    plan, ask, agent = (set(tools.for_mode(m).names()) for m in ("plan", "ask", "agent"))
    pool_tools = {"background_list", "background_output", "background_wait", "background_stop"}
    assert {"run_command", *pool_tools} <= agent
    assert plan & {"run_command", *pool_tools} == pool_tools - {"background_stop"}
    assert not ask & {"run_command", *pool_tools}


async def test_the_model_starts_lists_reads_waits_for_and_stops_background_commands(
    paths: Paths,
):
    go = Fifo(paths.cwd / "go")
    ready = Fifo(paths.cwd / "ready")
    long = f"echo first; echo ready > {ready.path}; read x < {go.path}; echo never"
    async with FakeOpenAI(default=text("Done.")) as server:
        server.script(
            tool_calls(
                call("run_command", {"command": "printf 'ok\\n'", "background": True}, id="s1"),
                call("run_command", {"command": long, "background": True,
                                     "expected_seconds": 5}, id="s2"),
            ),
            tool_calls(call("hold", {"label": "let them run"})),
            tool_calls(
                call("background_wait", {"task_id": "bg_1", "timeout_seconds": 10}, id="w1"),
                call("background_list", {}, id="l1"),
                call("background_output", {"task_id": "bg_2", "tail_lines": 5}, id="o1"),
                call("background_wait", {"task_id": "bg_2", "timeout_seconds": 0.1}, id="w2"),
                call("background_stop", {"task_id": "bg_2"}, id="x1"),
                call("background_stop", {"task_id": "bg_1"}, id="x2"),
            ),
        )
        hold = HoldTool()
        async with pool_agent(pool_config(server.base_url), paths, hold) as (ed, _):
            await ed.conn.initialize(protocol_version=1)
            sid = (await ed.conn.new_session(cwd=str(paths.cwd), mcp_servers=[])).session_id
            async with anyio.create_task_group() as tg:
                tg.start_soon(prompt, ed, sid, "go")
                with anyio.fail_after(10):
                    await hold.started.wait()
                await ready.read_line()  # bg_2 wrote its first line and waits
                hold.release.set()
    results = tool_results(server)
    assert results["s1"].startswith("Started bg_1 in the background (hard limit 15m00s)")
    assert results["s2"].startswith("Started bg_2 in the background (hard limit 60s)")
    assert results["w1"].startswith("bg_1 succeeded (exit 0) after ")
    assert results["w1"].endswith("\n\nok")
    listed = results["l1"].splitlines()
    assert [line.split()[:2] for line in listed] == [["bg_1", "succeeded"], ["bg_2", "running"]]
    assert results["o1"].startswith("bg_2 running for ") and results["o1"].endswith("\n\nfirst")
    assert results["w2"].startswith("bg_2 is still running after waiting 0.1s.")
    assert results["x1"].startswith("bg_2 stopped after ")
    assert results["x1"].endswith("stopped: stopped by background_stop")
    assert results["x2"].startswith("bg_1 had already ended.")
    assert meta(paths, sid, "bg_2")["status"] == "stopped"
    # The model learnt how both ended from its own calls: nothing left to announce.
    last_context = server.requests[-1].messages[-1]["content"]
    assert "bg_1" not in last_context and "bg_2" not in last_context


async def test_system_tasks_are_hidden_from_the_list_and_their_ids_refused(paths: Paths):
    release = anyio.Event()

    async def memory_run(task: Task) -> str:
        await task.log.write("recalling\n")
        await release.wait()
        return "report"

    async with FakeOpenAI(default=text("Done.")) as server:
        server.script(
            tool_calls(
                call("background_list", {}, id="l1"),
                call("background_output", {"task_id": "bg_1"}, id="o1"),
                call("background_wait", {"task_id": "bg_1", "timeout_seconds": 5}, id="w1"),
                call("background_stop", {"task_id": "bg_1"}, id="x1"),
            ),
        )
        async with pool_agent(pool_config(server.base_url), paths) as (ed, agent):
            await ed.conn.initialize(protocol_version=1)
            sid = (await ed.conn.new_session(cwd=str(paths.cwd), mcp_servers=[])).session_id
            pool: TaskPool = agent.runner.pool_for(await agent.session(sid))
            task = await pool.start_agent(
                label="memory: hello", agent_name="memory", child_session_id="sess_m",
                body=memory_run, system=True,
            )
            assert await prompt(ed, sid, "go") == "end_turn"
            assert not task.done.is_set()  # neither waited on nor stopped by the model
            release.set()
            assert (await pool.wait(task, 10)).status == "succeeded"
    results = tool_results(server)
    assert results["l1"] == "No background tasks in this session."
    for call_id in ("o1", "w1", "x1"):
        assert results[call_id] == (
            "Error: bg_1 is a system task (memory: hello); system tasks are not the model's "
            "to read or control"
        )
    contexts = [r.messages[-1]["content"] for r in server.requests]
    assert all("bg_1" not in c for c in contexts)  # never announced either


async def test_the_agent_stopping_stops_the_sessions_tasks_and_kills_their_groups(
    paths: Paths,
):
    ready = Fifo(paths.cwd / "ready")
    command = f'sleep 600 & echo "$$ $!" > {ready.path}; wait'
    async with FakeOpenAI(default=text("Done.")) as server:
        server.script(
            tool_calls(call("run_command", {"command": command, "background": True}, id="s1"))
        )
        async with pool_agent(pool_config(server.base_url), paths) as (ed, _):
            await ed.conn.initialize(protocol_version=1)
            sid = (await ed.conn.new_session(cwd=str(paths.cwd), mcp_servers=[])).session_id
            assert await prompt(ed, sid, "go") == "end_turn"
            leader, child = map(int, (await ready.read_line()).split())
            assert alive(child)
        # The client went away: the agent drained, closing the session and its pool.
    record = meta(paths, sid, "bg_1")
    assert (record["status"], record["error"]) == ("stopped", "stopped: the session closed")
    await assert_gone(leader, child)
