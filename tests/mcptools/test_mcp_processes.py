"""No process an MCP stdio server started outlives its session: a server that exits at end of
input leaves three `sleep`s behind (one in its process group, one in a group of its own, one
orphaned in a session of its own), and session/close, session/delete, its death (before a
restart) and the agent's exit end them all; the agent, a child subreaper, adopts the orphan
and reaps it."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from acp import text_block
from engine.turnkit import fake_config, prompt, turn_agent
from fakes.openai_server import FakeOpenAI
from fakes.script import call, text, tool_calls
from harness import subprocess_agent
from mcptools.mcpkit import family_server, killed_at_the_end, read_pids
from mcptools.test_mcp_tools import bypass
from tasks.procs import alive, assert_gone

pytestmark = pytest.mark.anyio

BOUND_S = 30  # generous: a loaded machine still gets there


def _listed(pid: int) -> bool:
    """Whether /proc shows the pid at all (a zombie too)."""
    return Path(f"/proc/{pid}").exists()


def _ppid(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[1])


@pytest.mark.parametrize("how", ["close", "delete", "exit"])
async def test_no_process_a_stdio_server_started_outlives_its_session(paths, tmp_path, how):
    pids = tmp_path / "pids"
    with killed_at_the_end(pids):
        async with FakeOpenAI() as server:
            server.script(text("ok"))
            async with turn_agent(fake_config(server.base_url), paths) as (ed, _):
                await ed.conn.initialize(protocol_version=1)
                servers = [family_server(pids)]
                new = await ed.conn.new_session(cwd=str(paths.cwd), mcp_servers=servers)
                sid = new.session_id
                assert await prompt(ed, sid, "hi") == "end_turn"  # the server is up
                left = read_pids(pids)
                assert len(left) == 3 and all(alive(pid) for pid in left)
                if how == "close":
                    await ed.conn.close_session(session_id=sid)
                elif how == "delete":
                    # The SDK's client has no method for it (as test_session_lifecycle).
                    await ed.conn._conn.send_request("session/delete", {"sessionId": sid})
                if how != "exit":
                    await assert_gone(*left, timeout=BOUND_S)
            await assert_gone(*left, timeout=BOUND_S)


@pytest.mark.subprocess
async def test_the_agent_adopts_what_its_server_orphaned_and_reaps_it(tmp_path):
    home, project, pids = tmp_path / "home", tmp_path / "project", tmp_path / "pids"
    project.mkdir()
    with killed_at_the_end(pids):
        async with subprocess_agent(home) as ed:
            assert ed.process is not None
            await ed.conn.initialize(protocol_version=1)
            new = await ed.conn.new_session(cwd=str(project), mcp_servers=[family_server(pids)])
            with anyio.fail_after(BOUND_S):  # the turn waits for the server
                await ed.conn.prompt(session_id=new.session_id, prompt=[text_block("hi")])
            *_, orphan = left = read_pids(pids)
            # Its parent (a process the server ran) exited: the agent, not init, adopted it.
            assert _ppid(orphan) == ed.process.pid
            await ed.conn.close_session(session_id=new.session_id)
            # Ended and waited for: not even a zombie is left.
            assert [pid for pid in left if _listed(pid)] == []


async def test_a_server_that_dies_takes_what_it_started_with_it(paths, tmp_path):
    # Its connection ends with it (and its next turn starts it again): so does its family.
    pids = tmp_path / "pids"
    with killed_at_the_end(pids):
        async with FakeOpenAI() as server:
            server.script(tool_calls(call("mcp__family__crash", {})), text("It crashed."))
            async with turn_agent(bypass(fake_config(server.base_url)), paths) as (ed, _):
                await ed.conn.initialize(protocol_version=1)
                servers = [family_server(pids)]
                new = await ed.conn.new_session(cwd=str(paths.cwd), mcp_servers=servers)
                assert await prompt(ed, new.session_id, "crash it") == "end_turn"
                left = read_pids(pids)
                assert len(left) == 3
                await assert_gone(*left, timeout=BOUND_S)
