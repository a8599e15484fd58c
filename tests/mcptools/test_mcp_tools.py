"""The editor's MCP servers, reached from session/new: their tools offered to the main agent as
mcp__<server>__<tool>, each call through the permission gate, each result in the next request."""

from __future__ import annotations

import base64
import json
import logging
import os

import anyio
import pytest
from engine.turnkit import fake_config, prompt, turn_agent
from fakes.mcp_servers import (
    DOCUMENT_TEXT,
    EXIT_MESSAGE,
    EXPLODE_MESSAGE,
    PICTURE,
    TOOL_NAMES,
    stdio_entry,
)
from fakes.openai_server import FakeOpenAI
from fakes.script import call, text, tool_calls
from mcptools.mcpkit import offered, offered_tool, stdio_server, tool_results
from runtime.test_memory_run import MemoryRoutedOpenAI, memory_config

from acp_memory.config import Config
from acp_memory.config.models import McpServerConfig
from acp_memory.mcpclient.names import is_mcp_tool
from acp_memory.tools.permissions import GRANTS_FILE

pytestmark = pytest.mark.anyio


async def test_a_stdio_servers_tool_is_offered_asked_for_and_its_result_reaches_the_model(paths):
    async with FakeOpenAI() as server:
        server.script(tool_calls(call("mcp__fake__echo", {"text": "hi"})), text("Done."))
        async with turn_agent(fake_config(server.base_url), paths) as (ed, _):
            ed.client.permission_answers = ["allow_once"]
            await ed.conn.initialize(protocol_version=1)
            new = await ed.conn.new_session(cwd=str(paths.cwd), mcp_servers=[stdio_server()])
            assert await prompt(ed, new.session_id, "echo hi") == "end_turn"
    first, second = server.requests
    echo = offered_tool(first, "mcp__fake__echo")
    assert echo["description"] == "Echo the text back."
    assert echo["parameters"]["properties"]["text"]["type"] == "string"
    assert {"mcp__fake__lookup", "mcp__fake__explode", "read_file"} <= set(offered(first))
    (asked,) = ed.client.permission_requests
    assert asked[1].raw_input == {"text": "hi"} and "mcp__fake__echo" in asked[1].title
    assert tool_results(second) == ["echo: hi"]
    (finished,) = [u for _, u in ed.client.updates if u.session_update == "tool_call_update"]
    assert finished.status == "completed" and finished.content[0].content.text == "echo: hi"


def bypass(cfg: Config) -> Config:
    """No permission questions: the tests that are not about the gate."""
    cfg.tools.permission_mode = "bypass"
    return cfg


async def test_ask_and_plan_mode_are_offered_the_read_only_tools_alone(paths):
    async with FakeOpenAI() as server:
        server.script(text("asked."), text("planned."), text("agent."))
        async with turn_agent(bypass(fake_config(server.base_url)), paths) as (ed, _):
            await ed.conn.initialize(protocol_version=1)
            sid = (await ed.conn.new_session(cwd=str(paths.cwd), mcp_servers=[stdio_server()]))
            sid = sid.session_id
            for mode in ("ask", "plan", "agent"):
                await ed.conn.set_session_mode(session_id=sid, mode_id=mode)
                assert await prompt(ed, sid, f"in {mode} mode") == "end_turn"
    ask, plan, agent = ([n for n in offered(r) if is_mcp_tool(n)] for r in server.requests)
    assert ask == plan == ["mcp__fake__lookup"]
    assert sorted(agent) == sorted(f"mcp__fake__{name}" for name in TOOL_NAMES)


async def test_an_allowlisted_tool_never_asks_and_always_allow_is_remembered_per_tool(paths):
    cfg_calls = [
        tool_calls(call("mcp__fake__lookup", {"key": "a"})),
        tool_calls(call("mcp__fake__echo", {"text": "one"})),
        tool_calls(call("mcp__fake__echo", {"text": "two"})),
        tool_calls(call("mcp__fake__lookup", {"key": "b"})),
        text("Done."),
    ]
    async with FakeOpenAI() as server:
        server.script(*cfg_calls)
        cfg = fake_config(server.base_url)
        cfg.tools.mcp_allowlist = ["mcp__fake__lookup"]
        async with turn_agent(cfg, paths) as (ed, _):
            ed.client.permission_answers = ["allow_always"]
            await ed.conn.initialize(protocol_version=1)
            new = await ed.conn.new_session(cwd=str(paths.cwd), mcp_servers=[stdio_server()])
            assert await prompt(ed, new.session_id, "go") == "end_turn"
    # One question, for the first echo; the second echo was remembered, lookup allowlisted.
    (asked,) = ed.client.permission_requests
    assert asked[1].raw_input == {"text": "one"}
    assert tool_results(server.requests[-1]) == [
        "value of a", "echo: one", "echo: two", "value of b",
    ]
    grants = json.loads((paths.sessions_dir / new.session_id / GRANTS_FILE).read_text())
    assert grants["tools"] == {"mcp__fake__echo": "allow"}


async def test_a_rejected_call_is_a_tool_error_and_the_server_is_never_called(paths):
    async with FakeOpenAI() as server:
        server.script(tool_calls(call("mcp__fake__echo", {"text": "no"})), text("Fine."))
        async with turn_agent(fake_config(server.base_url), paths) as (ed, _):
            ed.client.permission_answers = ["reject_once"]
            await ed.conn.initialize(protocol_version=1)
            new = await ed.conn.new_session(cwd=str(paths.cwd), mcp_servers=[stdio_server()])
            assert await prompt(ed, new.session_id, "echo") == "end_turn"
    (result,) = tool_results(server.requests[1])
    assert result.startswith("Error: permission denied") and "echo: no" not in result


async def test_a_rejected_call_never_reaches_the_server(paths):
    # Were the rejected crash sent before the question, the server would be gone for the echo.
    async with FakeOpenAI() as server:
        server.script(
            tool_calls(call("mcp__fake__crash", {})),
            tool_calls(call("mcp__fake__echo", {"text": "still up"})),
            text("Fine."),
        )
        async with turn_agent(fake_config(server.base_url), paths) as (ed, _):
            ed.client.permission_answers = ["reject_once", "allow_once"]
            await ed.conn.initialize(protocol_version=1)
            new = await ed.conn.new_session(cwd=str(paths.cwd), mcp_servers=[stdio_server()])
            assert await prompt(ed, new.session_id, "crash, then echo") == "end_turn"
    rejected, echoed = tool_results(server.requests[-1])
    assert rejected.startswith("Error: permission denied")
    assert echoed == "echo: still up"


async def test_failing_image_and_resource_results_reach_the_model_and_the_editor(paths):
    async with FakeOpenAI() as server:
        server.script(
            tool_calls(
                call("mcp__fake__explode", {}),
                call("mcp__fake__picture", {}),
                call("mcp__fake__document", {}),
            ),
            text("Seen."),
        )
        async with turn_agent(bypass(fake_config(server.base_url)), paths) as (ed, _):
            await ed.conn.initialize(protocol_version=1)
            new = await ed.conn.new_session(cwd=str(paths.cwd), mcp_servers=[stdio_server()])
            assert await prompt(ed, new.session_id, "try them") == "end_turn"
    failed, image, document = tool_results(server.requests[1])
    assert failed.startswith("Error: ") and EXPLODE_MESSAGE in failed
    assert image == f"[image: image/png, {len(PICTURE)} bytes]"
    assert DOCUMENT_TEXT in document
    ends = [u for _, u in ed.client.updates if u.session_update == "tool_call_update"]
    assert [u.status for u in ends] == ["failed", "completed", "completed"]
    shown = ends[1].content[1].content
    assert shown.type == "image" and base64.b64decode(shown.data) == PICTURE
    assert shown.mime_type == "image/png"
    assert DOCUMENT_TEXT in ends[2].content[0].content.text


async def test_a_server_that_exits_at_start_is_one_message_and_the_turn_goes_on(paths, caplog):
    caplog.set_level(logging.WARNING, logger="acp_memory.mcpclient")
    async with FakeOpenAI() as server:
        server.script(text("Hello without it."), text("Still here."))
        async with turn_agent(fake_config(server.base_url), paths) as (ed, _):
            await ed.conn.initialize(protocol_version=1)
            servers = [stdio_server("broken", "exit"), stdio_server()]
            new = await ed.conn.new_session(cwd=str(paths.cwd), mcp_servers=servers)
            sid = new.session_id
            assert await prompt(ed, sid, "hi") == "end_turn"
            assert await prompt(ed, sid, "again") == "end_turn"
    chunks = [u.content.text for s, u in ed.client.updates
              if u.session_update == "agent_message_chunk" and s == sid]
    notices = [c for c in chunks if c.startswith("MCP server")]
    # Its last stderr line says why: the log has the rest, below debug on a terminal.
    exited = "the server exited before it answered"
    assert notices == [f"MCP server broken: {exited}: {EXIT_MESSAGE}\n"]
    assert "Hello without it." in chunks and "Still here." in chunks
    # The other server's tools are there; the broken one's are not, nor tried again.
    assert "mcp__fake__echo" in offered(server.requests[0])
    assert not [n for n in offered(server.requests[1]) if n.startswith("mcp__broken")]
    warnings = [r for r in caplog.records if "broken" in r.getMessage()]
    assert len(warnings) == 1 and warnings[0].levelno == logging.WARNING


async def test_a_server_past_the_start_timeout_is_told_and_left_out(paths):
    async with FakeOpenAI() as server:
        server.script(text("On my own."))
        cfg = fake_config(server.base_url)
        cfg.mcp.startup_timeout_seconds = 0.5
        async with turn_agent(cfg, paths) as (ed, _):
            await ed.conn.initialize(protocol_version=1)
            servers = [stdio_server("slow", "stall")]
            new = await ed.conn.new_session(cwd=str(paths.cwd), mcp_servers=servers)
            assert await prompt(ed, new.session_id, "hi") == "end_turn"
    assert ed.client.text(new.session_id).startswith(
        "MCP server slow: did not start within 0.5 s (mcp.startup_timeout_seconds)\n"
    )
    assert not [n for n in offered(server.requests[0]) if is_mcp_tool(n)]


async def test_a_dead_stdio_server_is_started_again_at_the_next_turn(paths):
    async with FakeOpenAI() as server:
        server.script(
            tool_calls(call("mcp__fake__pid", {})),
            tool_calls(call("mcp__fake__crash", {})),
            text("It crashed."),
            tool_calls(call("mcp__fake__pid", {})),
            text("Back."),
        )
        async with turn_agent(bypass(fake_config(server.base_url)), paths) as (ed, _):
            await ed.conn.initialize(protocol_version=1)
            new = await ed.conn.new_session(cwd=str(paths.cwd), mcp_servers=[stdio_server()])
            sid = new.session_id
            assert await prompt(ed, sid, "crash it") == "end_turn"
            assert await prompt(ed, sid, "and now?") == "end_turn"
    first_pid, crashed, second_pid = tool_results(server.requests[-1])
    assert crashed.startswith("Error: MCP server fake:")
    assert first_pid.isdigit() and second_pid.isdigit() and first_pid != second_pid
    assert "MCP server fake: the server exited; started again\n" in ed.client.text(sid)


async def test_no_stdio_server_outlives_the_agent(paths):
    async with FakeOpenAI() as server:
        server.script(tool_calls(call("mcp__fake__pid", {})), text("ok"))
        async with turn_agent(bypass(fake_config(server.base_url)), paths) as (ed, _):
            await ed.conn.initialize(protocol_version=1)
            new = await ed.conn.new_session(cwd=str(paths.cwd), mcp_servers=[stdio_server()])
            assert await prompt(ed, new.session_id, "pid?") == "end_turn"
            (pid,) = tool_results(server.requests[-1])
            os.kill(int(pid), 0)  # running while the agent is
    with pytest.raises(ProcessLookupError):
        os.kill(int(pid), 0)


async def test_neither_the_memory_child_nor_a_spawned_child_gets_mcp_tools(paths):
    async with MemoryRoutedOpenAI() as server:
        server.child = [text("(no memory hits)")]
        server.script(
            tool_calls(call("spawn_agent", {"prompt": "use echo", "tools": ["mcp__fake__echo"]})),
            tool_calls(call("spawn_agent", {"prompt": "Count the files."})),
            text("There are 3 files."),  # the spawned child
            text("Done."),
        )
        cfg = bypass(memory_config(server))
        async with turn_agent(cfg, paths) as (ed, _):
            await ed.conn.initialize(protocol_version=1)
            new = await ed.conn.new_session(cwd=str(paths.cwd), mcp_servers=[stdio_server()])
            assert await prompt(ed, new.session_id, "delegate") == "end_turn"
    parent_first, _, child, _ = server.parent_requests
    assert "mcp__fake__echo" in offered(parent_first)
    assert not [n for n in offered(child) if is_mcp_tool(n)]
    assert not [n for r in server.child_requests for n in offered(r) if is_mcp_tool(n)]
    refused = tool_results(server.parent_requests[1])[0]
    assert "not available here: mcp__fake__echo" in refused


async def test_load_and_resume_connect_the_servers_they_are_given(paths):
    async with FakeOpenAI() as server:
        server.script(text("none"), text("loaded"), text("resumed"))
        async with turn_agent(bypass(fake_config(server.base_url)), paths) as (ed, _):
            await ed.conn.initialize(protocol_version=1)
            sid = (await ed.conn.new_session(cwd=str(paths.cwd), mcp_servers=[])).session_id
            assert await prompt(ed, sid, "no servers") == "end_turn"
            await ed.conn.load_session(
                cwd=str(paths.cwd), session_id=sid, mcp_servers=[stdio_server("loaded")]
            )
            assert await prompt(ed, sid, "after load") == "end_turn"
            await ed.conn.resume_session(
                cwd=str(paths.cwd), session_id=sid, mcp_servers=[stdio_server("resumed")]
            )
            assert await prompt(ed, sid, "after resume") == "end_turn"
    first, loaded, resumed = ([n for n in offered(r) if is_mcp_tool(n)] for r in server.requests)
    assert first == []
    assert "mcp__loaded__echo" in loaded and not [n for n in loaded if "resumed" in n]
    # The servers a later request names replace those of the earlier one.
    assert "mcp__resumed__echo" in resumed and not [n for n in resumed if "loaded" in n]


async def test_a_closed_session_stops_its_servers(paths):
    async with FakeOpenAI() as server:
        server.script(tool_calls(call("mcp__fake__pid", {})), text("ok"))
        async with turn_agent(bypass(fake_config(server.base_url)), paths) as (ed, _):
            await ed.conn.initialize(protocol_version=1)
            new = await ed.conn.new_session(cwd=str(paths.cwd), mcp_servers=[stdio_server()])
            assert await prompt(ed, new.session_id, "pid?") == "end_turn"
            (pid,) = tool_results(server.requests[-1])
            os.kill(int(pid), 0)
            await ed.conn.close_session(session_id=new.session_id)
            with pytest.raises(ProcessLookupError):
                os.kill(int(pid), 0)


async def test_a_session_let_go_stops_its_servers_and_its_next_turn_starts_them_again(paths):
    async with FakeOpenAI() as server:
        server.script(
            tool_calls(call("mcp__fake__pid", {})), text("one"),
            tool_calls(call("mcp__fake__pid", {})), text("two"),
        )
        cfg = bypass(fake_config(server.base_url))
        cfg.sessions.max_open = 1
        async with turn_agent(cfg, paths) as (ed, _):
            await ed.conn.initialize(protocol_version=1)
            new = await ed.conn.new_session(cwd=str(paths.cwd), mcp_servers=[stdio_server()])
            sid = new.session_id
            assert await prompt(ed, sid, "pid?") == "end_turn"
            # A second session past sessions.max_open lets the idle first one go.
            await ed.conn.new_session(cwd=str(paths.cwd), mcp_servers=[])
            assert await prompt(ed, sid, "pid again?") == "end_turn"
    (before,) = tool_results(server.requests[1])
    after = tool_results(server.requests[3])[-1]
    assert before.isdigit() and after.isdigit() and before != after


async def test_an_editors_server_wins_over_a_configured_one_of_the_same_name(paths):
    async with FakeOpenAI() as server:
        server.script(
            tool_calls(call("mcp__fake__getenv", {"name": "WHO"}),
                       call("mcp__extra__getenv", {"name": "WHO"})),
            text("ok"),
        )
        cfg = bypass(fake_config(server.base_url))
        cfg.mcp.servers = {
            "fake": McpServerConfig(**stdio_entry(env={"WHO": "config"})),
            "extra": McpServerConfig(**stdio_entry(env={"WHO": "extra"})),
        }
        async with turn_agent(cfg, paths) as (ed, _):
            await ed.conn.initialize(protocol_version=1)
            servers = [stdio_server("fake", WHO="editor")]
            new = await ed.conn.new_session(cwd=str(paths.cwd), mcp_servers=servers)
            assert await prompt(ed, new.session_id, "who?") == "end_turn"
    assert tool_results(server.requests[1]) == ["editor", "extra"]


async def test_session_new_answers_while_a_server_is_still_starting(paths):
    async with FakeOpenAI() as server:
        async with turn_agent(fake_config(server.base_url), paths) as (ed, _):
            await ed.conn.initialize(protocol_version=1)
            with anyio.fail_after(5):  # the start timeout is 30 s: nothing waited for it
                await ed.conn.new_session(
                    cwd=str(paths.cwd), mcp_servers=[stdio_server("slow", "stall")]
                )


async def test_a_replayed_call_shows_the_image_it_returned(paths):
    async with FakeOpenAI() as server:
        server.script(tool_calls(call("mcp__fake__picture", {})), text("A picture."))
        async with turn_agent(bypass(fake_config(server.base_url)), paths) as (ed, _):
            await ed.conn.initialize(protocol_version=1)
            new = await ed.conn.new_session(cwd=str(paths.cwd), mcp_servers=[stdio_server()])
            sid = new.session_id
            assert await prompt(ed, sid, "draw") == "end_turn"
            live = [u for _, u in ed.client.updates if u.session_update == "tool_call_update"]
            ed.client.updates.clear()
            await ed.conn.load_session(cwd=str(paths.cwd), session_id=sid, mcp_servers=[])
            replayed = [u for _, u in ed.client.updates if u.session_update == "tool_call_update"]
    assert [u.content for u in replayed] == [u.content for u in live]
    assert replayed[0].content[1].content.type == "image"
