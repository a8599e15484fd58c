"""HTTP sessions with config.yaml's `mcp.servers`: a real stdio MCP server (fakes.mcp_servers)
reached from /coddy/sessions and /v1, its tools called by a scripted model (allowlisted: the
HTTP surface has no editor to ask), the result in the next request; the server's process ends
with the surface."""

from __future__ import annotations

import os
from typing import Any

import pytest
from engine.turnkit import fake_config
from fakes.httpserver import Recorded
from fakes.mcp_servers import stdio_entry
from fakes.openai_server import FakeOpenAI
from fakes.script import call, text, tool_calls
from httpkit import events_of, served

from acp_memory.config import Config
from acp_memory.config.models import McpConfig

pytestmark = pytest.mark.anyio

ECHO, PID = "mcp__local__echo", "mcp__local__pid"


def mcp_config(base_url: str, servers: dict[str, Any] | None = None) -> Config:
    cfg = fake_config(base_url)
    cfg.mcp = McpConfig.model_validate({"servers": servers or {"local": stdio_entry()}})
    cfg.tools.mcp_allowlist = [ECHO, PID]
    return cfg


def tool_results(request: Recorded) -> list[str]:
    return [m["content"] for m in request.messages if m.get("role") == "tool"]


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


async def test_an_http_session_calls_a_configured_server_and_it_stops_with_the_surface(paths):
    async with FakeOpenAI() as model:
        model.script(tool_calls(call(ECHO, {"text": "over http"}), call(PID, {})), text("Echoed."))
        async with served(mcp_config(model.base_url), paths) as api:
            sid = await api.new_session()
            async with events_of(api, sid) as events:
                resp = await api.prompt(sid, "echo it")
                await events.wait_for(lambda: "Echoed." in events.said())
    assert resp.status_code == 200 and resp.json()["stopReason"] == "end_turn"
    echoed, pid = tool_results(model.requests[1])
    assert echoed == "echo: over http"
    calls = [data for name, data in events.events if name == "tool_call"]
    assert [c["title"] for c in calls] == ["local: echo", "local: pid"]
    assert pid.isdigit() and int(pid) != os.getpid()
    # The surface stopped: the runner's group ended each connection, and with it (waited
    # for and reaped) its process.
    assert gone(int(pid))


async def test_a_v1_completion_gets_the_configured_server_s_tools(paths):
    async with FakeOpenAI() as model:
        model.script(tool_calls(call(ECHO, {"text": "from v1"})), text("Done via v1."))
        async with served(mcp_config(model.base_url), paths) as api:
            body = {"model": "agent", "messages": [{"role": "user", "content": "echo"}]}
            resp = await api.client.post("/v1/chat/completions", json=body)
    assert resp.status_code == 200, resp.text
    assert resp.json()["choices"][0]["message"]["content"] == "Done via v1."
    assert tool_results(model.requests[1]) == ["echo: from v1"]
    offered = [t["function"]["name"] for t in model.requests[0].json["tools"]]
    assert ECHO in offered


async def test_an_http_session_whose_server_exits_at_start_is_told_once_and_answers(paths):
    async with FakeOpenAI() as model:
        model.script(text("Still here."))
        cfg = mcp_config(model.base_url, {"broken": stdio_entry("exit")})
        async with served(cfg, paths) as api:
            sid = await api.new_session()
            async with events_of(api, sid) as events:
                resp = await api.prompt(sid, "hello")
                await events.wait_for(lambda: "Still here." in events.said())
    assert resp.json()["stopReason"] == "end_turn"
    assert events.said().count("MCP server broken: ") == 1
