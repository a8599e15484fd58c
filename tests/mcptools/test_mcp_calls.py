"""One MCP tool call and one server start, bounded: a call with no answer fails to the model
after mcp.call_timeout_seconds (a progress notification restarts its clock) and the server is
kept; a server whose output is not UTF-8 fails at once; a result is cut for the model; the
tools are listed once."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import anyio
import pytest
from anyio.abc import TaskGroup
from engine.turnkit import fake_config, prompt, turn_agent
from fakes.clock import FakeClock
from fakes.mcp_servers import TOOL_NAMES, stdio_spec
from fakes.openai_server import FakeOpenAI
from fakes.script import call, text, tool_calls
from harness import Editor
from mcptools.mcpkit import stdio_server, tool_results
from mcptools.test_mcp_tools import bypass
from tasks.procs import Fifo

from acp_memory.config import Config, Paths
from acp_memory.mcpclient.connection import ServerConnection
from acp_memory.mcpclient.specs import ServerSpec

pytestmark = pytest.mark.anyio

BOUND_S = 30  # generous: a loaded machine still gets there


@contextlib.asynccontextmanager
async def _on_a_fake_clock(
    cfg: Config, paths: Paths
) -> AsyncIterator[tuple[Editor, FakeClock, str]]:
    """A session with the fake MCP server, its runner on a clock the test moves."""
    async with turn_agent(cfg, paths) as (ed, agent):
        agent.runner.clock = clock = FakeClock()
        await ed.conn.initialize(protocol_version=1)
        new = await ed.conn.new_session(cwd=str(paths.cwd), mcp_servers=[stdio_server()])
        yield ed, clock, new.session_id


def _prompt_in(tg: TaskGroup, ed: Editor, sid: str, words: str, reasons: list[str]) -> None:
    """Send a prompt in the background; its stopReason lands in `reasons`."""

    async def run() -> None:
        reasons.append(await prompt(ed, sid, words))

    tg.start_soon(run)


async def test_a_call_with_no_answer_fails_to_the_model_after_the_timeout_and_the_server_stays(
    paths, tmp_path
):
    marker = Fifo(tmp_path / "cancelled")
    async with FakeOpenAI() as server:
        server.script(
            tool_calls(call("mcp__fake__hang", {"marker": str(marker.path)})),
            tool_calls(call("mcp__fake__echo", {"text": "still here"})),
            text("Moved on."),
        )
        cfg = bypass(fake_config(server.base_url))
        async with _on_a_fake_clock(cfg, paths) as (ed, clock, sid):
            reasons: list[str] = []
            async with anyio.create_task_group() as tg:
                _prompt_in(tg, ed, sid, "hang", reasons)
                with anyio.fail_after(BOUND_S):
                    await clock.until_deadline(120)  # mcp.call_timeout_seconds' default
                clock.advance(119.9)
                assert clock.pending() == [120]  # still waiting
                clock.advance(0.1)
            # The server was told: its cancelled handler writes to the pipe.
            assert await marker.read_line(BOUND_S) == "cancelled"
            marker.close()
    assert reasons == ["end_turn"]
    hung, echoed = tool_results(server.requests[-1])
    assert hung == "Error: MCP server fake: hang gave no answer within 120 s"
    assert echoed == "echo: still here"  # the same server, kept: no restart within a turn
    assert "Moved on." in ed.client.text(sid)


async def test_a_progress_notification_restarts_a_calls_clock(paths, tmp_path):
    step, done = tmp_path / "step", tmp_path / "done"
    async with FakeOpenAI() as server:
        server.script(
            tool_calls(call("mcp__fake__progress", {"step": str(step), "done": str(done)})),
            text("Finished."),
        )
        cfg = bypass(fake_config(server.base_url))
        cfg.mcp.call_timeout_seconds = 60
        async with _on_a_fake_clock(cfg, paths) as (ed, clock, sid):
            reasons: list[str] = []
            async with anyio.create_task_group() as tg:
                _prompt_in(tg, ed, sid, "report", reasons)
                with anyio.fail_after(BOUND_S):
                    await clock.until_deadline(60)
                clock.advance(50)
                step.write_text("go")  # the server reports progress now: 60 s from t=50
                with anyio.fail_after(BOUND_S):
                    await clock.until_deadline(110)
                clock.advance(50)  # past the first deadline, within the second
                done.write_text("go")
    assert reasons == ["end_turn"]
    assert tool_results(server.requests[-1]) == ["progressed"]


async def test_a_server_whose_output_is_not_utf8_fails_at_once_in_one_line(paths):
    async with FakeOpenAI() as server:
        server.script(text("Without it."))
        async with turn_agent(fake_config(server.base_url), paths) as (ed, _):
            await ed.conn.initialize(protocol_version=1)
            servers = [stdio_server("garbled", "latin1")]
            new = await ed.conn.new_session(cwd=str(paths.cwd), mcp_servers=servers)
            # The start timeout is 30 s; the prompt's own bound is a third of that.
            assert await prompt(ed, new.session_id, "hi") == "end_turn"
    assert ed.client.text(new.session_id).startswith(
        "MCP server garbled: its output is not UTF-8\n"
    )


async def test_a_long_result_is_cut_for_the_model(paths):
    long_text = "x" * 5000
    async with FakeOpenAI() as server:
        server.script(tool_calls(call("mcp__fake__echo", {"text": long_text})), text("Cut."))
        cfg = bypass(fake_config(server.base_url))
        cfg.tools.output_limits.tool_output_chars = 400
        async with turn_agent(cfg, paths) as (ed, _):
            await ed.conn.initialize(protocol_version=1)
            new = await ed.conn.new_session(cwd=str(paths.cwd), mcp_servers=[stdio_server()])
            assert await prompt(ed, new.session_id, "echo a lot") == "end_turn"
    (result,) = tool_results(server.requests[-1])
    assert len(result) <= 400 and "[output truncated:" in result


async def test_a_server_that_lists_its_tools_on_one_page_is_asked_once(tmp_path):
    command, args = stdio_spec()
    connection = ServerConnection(ServerSpec("fake", command=command, args=tuple(args)),
                                  tmp_path, startup_timeout=BOUND_S)
    async with anyio.create_task_group() as tg:
        connection.start(tg)
        with anyio.fail_after(BOUND_S):
            await connection.settled.wait()
        connection.stop()
    assert connection.started
    assert [tool.name for tool in connection.tools] == list(TOOL_NAMES)


async def test_session_cancel_ends_a_call_at_once_within_its_timeout(paths, tmp_path):
    marker = Fifo(tmp_path / "cancelled")
    async with FakeOpenAI() as server:
        server.script(tool_calls(call("mcp__fake__hang", {"marker": str(marker.path)})))
        cfg = bypass(fake_config(server.base_url))
        async with _on_a_fake_clock(cfg, paths) as (ed, clock, sid):
            reasons: list[str] = []
            async with anyio.create_task_group() as tg:
                _prompt_in(tg, ed, sid, "hang", reasons)
                with anyio.fail_after(BOUND_S):
                    await clock.until_deadline(120)  # the call is under way
                await ed.conn.cancel(session_id=sid)
            assert await marker.read_line(BOUND_S) == "cancelled"
            marker.close()
    assert reasons == ["cancelled"]
    assert clock.now() == 0  # the clock never moved: the cancel alone ended the call
