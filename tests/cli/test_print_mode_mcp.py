"""`acp-memory -p` with config.yaml's `mcp.servers`: a real stdio MCP server (fakes.mcp_servers)
started for the print-mode session, its tool called by a scripted model, the result in the
next model request; the gate without an editor; a server that cannot start is one line."""

from __future__ import annotations

import base64
import json
import sys
from typing import Any

import pytest
from cli.test_print_mode import configure, fake_model, home, print_mode, project
from fakes.httpserver import Recorded
from fakes.mcp_servers import CHATTER, EXIT_MESSAGE, PICTURE, stdio_entry
from fakes.openai_server import FakeOpenAI
from fakes.script import call, text, tool_calls
from mcptools.mcpkit import killed_at_the_end, read_pids
from tasks.procs import assert_gone
from wire_schema import WireChecker

pytestmark = [pytest.mark.anyio, pytest.mark.subprocess]

ECHO = "mcp__local__echo"
__all__ = ["home", "project"]  # the fixtures of the print-mode tests


def mcp_config(server: FakeOpenAI, **sections: Any) -> str:
    """The fake model, and the stdio fake as `local` in mcp.servers (JSON is YAML)."""
    mcp = {"servers": {"local": stdio_entry()}, **sections.pop("mcp", {})}
    extra = "".join(
        f"{key}: {json.dumps(value)}\n" for key, value in {"mcp": mcp, **sections}.items()
    )
    return fake_model(server, extra)


def tool_messages(request: Recorded) -> list[dict[str, Any]]:
    return [m for m in request.messages if m.get("role") == "tool"]


def offered(request: Recorded) -> dict[str, Any]:
    return {t["function"]["name"]: t["function"] for t in (request.json or {}).get("tools", [])}


async def test_a_configured_stdio_server_is_called_in_print_mode_with_yes(home, project):
    async with FakeOpenAI() as model:
        model.script(tool_calls(call(ECHO, {"text": "from print mode"})), text("Echoed."))
        configure(home, mcp_config(model))
        done = await print_mode("-p", "echo it", "--yes", home=home, cwd=project)
    assert done.code == 0, done.stderr
    assert done.stdout.strip() == "Echoed."
    first, second = model.requests
    echo = offered(first)[ECHO]
    assert echo["description"] == "Echo the text back."
    assert echo["parameters"]["properties"]["text"]["type"] == "string"
    assert [m["content"] for m in tool_messages(second)] == ["echo: from print mode"]
    assert "tool: local: echo (completed)" in done.lines


async def test_an_allowlisted_mcp_tool_runs_without_yes_and_another_is_denied(home, project):
    async with FakeOpenAI() as model:
        model.script(
            tool_calls(call(ECHO, {"text": "allowed"}), call("mcp__local__pid", {})),
            text("Done."),
        )
        configure(home, mcp_config(model, tools={"mcp_allowlist": [ECHO]}))
        done = await print_mode("-p", "go", home=home, cwd=project)
    assert done.code == 0, done.stderr
    echoed, pid = tool_messages(model.requests[1])
    assert echoed["content"] == "echo: allowed"
    assert "not run: print mode asks nobody" in pid["content"] and not pid["content"].isdigit()
    assert any(line.startswith("acp-memory: denied: ") for line in done.lines), done.lines


@pytest.mark.parametrize("levels", [(), ("--log-level", "error")])
async def test_a_server_that_exits_at_start_is_one_line_and_the_turn_goes_on(home, project, levels):
    async with FakeOpenAI() as model:
        model.script(text("Still here."))
        configure(home, mcp_config(model, mcp={"servers": {"broken": stdio_entry("exit")}}))
        done = await print_mode(*levels, "-p", "hello", home=home, cwd=project)
    assert done.code == 0, done.stderr
    assert done.stdout.strip() == "Still here."  # the notice is not the model's reply
    said = [line for line in done.lines if "MCP server broken" in line]
    # Its stderr is the log's; its last line, why it died, is quoted in the one line.
    assert said == [f"acp-memory: MCP server broken: the server exited before it answered: "
                    f"{EXIT_MESSAGE}"], done.lines
    assert "Traceback" not in done.stderr and done.stderr.count(EXIT_MESSAGE) == 1
    assert not [name for name in offered(model.requests[0]) if name.startswith("mcp__")]


@pytest.mark.parametrize("level", ["info", "debug"])
async def test_a_servers_stderr_is_on_the_terminal_under_its_name_only_at_debug(
    home, project, level
):
    async with FakeOpenAI() as model:
        model.script(text("Still here."))
        configure(home, mcp_config(model, mcp={"servers": {"chatty": stdio_entry("chatty")}}))
        done = await print_mode("--log-level", level, "-p", "hello", home=home, cwd=project)
    assert done.code == 0, done.stderr
    shown = [line for line in done.lines if CHATTER in line]
    expected = [f"acp-memory: mcp chatty: {CHATTER}"] if level == "debug" else []
    assert shown == expected, done.lines


async def test_a_server_that_prints_a_banner_on_stdout_is_no_traceback(home, project):
    # The SDK logs each stdout line that is not JSON-RPC with its traceback; one line here.
    banner = {"command": sys.executable, "args": ["-c", "print('Welcome to my server')"]}
    async with FakeOpenAI() as model:
        model.script(text("Still here."))
        configure(home, mcp_config(model, mcp={"servers": {"banner": banner}}))
        done = await print_mode("-p", "hello", home=home, cwd=project)
    assert done.code == 0, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    said = [line for line in done.lines if line.startswith("acp-memory: ")]
    assert said == [
        "acp-memory: Failed to parse JSONRPC message from server (ValidationError)",
        "acp-memory: MCP server banner: the server exited before it answered",
    ], done.lines


async def test_a_server_whose_output_is_not_utf8_is_one_line_in_print_mode(home, project):
    async with FakeOpenAI() as model:
        model.script(text("Still here."))
        configure(home, mcp_config(model, mcp={"servers": {"garbled": stdio_entry("latin1")}}))
        done = await print_mode("-p", "hello", home=home, cwd=project)
    assert done.code == 0, done.stderr
    said = [line for line in done.lines if line.startswith("acp-memory: ")]
    assert said == ["acp-memory: MCP server garbled: its output is not UTF-8"], done.lines


async def test_a_server_past_the_start_timeout_is_one_line_in_print_mode(home, project):
    # The turn's wait ends a moment before the server's own bound: the line is said all the same.
    async with FakeOpenAI() as model:
        model.script(text("On my own."))
        slow = {"servers": {"slow": stdio_entry("stall")}, "startup_timeout_seconds": 0.5}
        configure(home, mcp_config(model, mcp=slow))
        done = await print_mode("-p", "hello", home=home, cwd=project)
    assert done.code == 0, done.stderr
    said = [line for line in done.lines if "MCP server slow" in line]
    assert said == [
        "acp-memory: MCP server slow: did not start within 0.5 s (mcp.startup_timeout_seconds)"
    ], done.lines


async def test_stream_json_shows_the_mcp_call_its_image_and_the_notice_as_valid_updates(
    home, project
):
    servers = {"local": stdio_entry(), "broken": stdio_entry("exit")}
    async with FakeOpenAI() as model:
        model.script(tool_calls(call("mcp__local__picture", {})), text("A picture."))
        configure(home, mcp_config(model, mcp={"servers": servers}))
        done = await print_mode(
            "-p", "draw", "--yes", "--output-format", "stream-json", home=home, cwd=project
        )
    assert done.code == 0, done.stderr
    *updates, last = [json.loads(line) for line in done.stdout.splitlines()]
    checker = WireChecker()
    for line in updates:
        notification = {
            "jsonrpc": "2.0",
            "method": "session/update",
            "params": {"sessionId": line["sessionId"], "update": line["update"]},
        }
        checker.saw_agent_line(json.dumps(notification).encode())
    checker.assert_clean()
    shown = [u["update"] for u in updates]
    images = [
        block["content"]
        for u in shown
        if u["sessionUpdate"] == "tool_call_update"
        for block in u.get("content") or []
        if block.get("content", {}).get("type") == "image"
    ]
    assert [base64.b64decode(i["data"]) for i in images] == [PICTURE]
    said = "".join(
        u["content"]["text"] for u in shown if u["sessionUpdate"] == "agent_message_chunk"
    )
    assert said.count("MCP server broken: ") == 1  # the stream shows what an editor would
    assert last["result"] == "A picture."  # the reply alone


async def test_no_process_a_server_started_outlives_print_mode(home, project, tmp_path):
    # Left running, the sleeps would also hold print mode's stderr open past its exit.
    pids = tmp_path / "pids"
    family = stdio_entry("family", env={"FAMILY_PIDS": str(pids)})
    with killed_at_the_end(pids):
        async with FakeOpenAI() as model:
            model.script(text("Done."))
            configure(home, mcp_config(model, mcp={"servers": {"family": family}}))
            done = await print_mode("-p", "hello", home=home, cwd=project)
        assert done.code == 0, done.stderr
        left = read_pids(pids)
        assert len(left) == 3
        await assert_gone(*left, timeout=30)
