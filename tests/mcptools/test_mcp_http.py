"""MCP servers reached over HTTP on loopback: streamable HTTP and SSE, the editor's headers
sent with every request; and the capabilities that say the agent can."""

from __future__ import annotations

import anyio
import pytest
from engine.turnkit import fake_config, prompt, turn_agent
from fakes.mcp_servers import mcp_http_server
from fakes.openai_server import FakeOpenAI
from fakes.script import call, error, text, tool_calls
from mcptools.mcpkit import http_server, offered, sse_server, tool_results

from acp_memory.mcpclient.connection import ServerConnection
from acp_memory.mcpclient.specs import ServerSpec

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("transport", ["http", "sse"])
async def test_a_loopback_http_server_is_reached_with_the_editors_headers(paths, transport):
    async with FakeOpenAI() as server, mcp_http_server(transport) as web:
        server.script(tool_calls(call("mcp__web__echo", {"text": "over http"})), text("ok"))
        cfg = fake_config(server.base_url)
        cfg.tools.permission_mode = "bypass"
        entry = (http_server if transport == "http" else sse_server)(
            web.url, "web", Authorization="Bearer mcp-token"
        )
        async with turn_agent(cfg, paths) as (ed, _):
            answer = await ed.conn.initialize(protocol_version=1)
            new = await ed.conn.new_session(cwd=str(paths.cwd), mcp_servers=[entry])
            assert await prompt(ed, new.session_id, "echo") == "end_turn"
    assert answer.agent_capabilities.mcp_capabilities.http is True
    assert answer.agent_capabilities.mcp_capabilities.sse is True
    assert "mcp__web__lookup" in offered(server.requests[0])
    assert tool_results(server.requests[1]) == ["echo: over http"]
    assert web.headers and all(h.get("authorization") == "Bearer mcp-token" for h in web.headers)


async def test_an_mcp_server_entry_that_cannot_start_anything_is_refused_with_its_name(paths):
    from acp import RequestError

    from acp_memory.acp.server import build_agent  # noqa: F401  (the agent is built by turn_agent)

    async with FakeOpenAI() as server:
        async with turn_agent(fake_config(server.base_url), paths) as (ed, _):
            await ed.conn.initialize(protocol_version=1)
            bad = http_server("", "nowhere")
            with pytest.raises(RequestError) as err:
                await ed.conn.new_session(cwd=str(paths.cwd), mcp_servers=[bad])
    assert err.value.code == -32602
    assert "mcpServers: MCP server nowhere: type http needs a url" in str(err.value)


async def test_an_http_servers_failure_is_one_line(tmp_path):
    # httpx's status error and the SDK's parse errors run over several lines; the user sees one.
    async with FakeOpenAI() as web:
        web.script(error(404, "no such endpoint"))
        spec = ServerSpec("gone", "sse", url=f"{web.base_url}/sse")
        connection = ServerConnection(spec, tmp_path, startup_timeout=10)
        async with anyio.create_task_group() as tg:
            connection.start(tg)
            await connection.settled.wait()
            connection.stop()
    assert connection.failure is not None and "\n" not in connection.failure
    assert connection.failure.startswith("cannot connect: Client error '404 Not Found'")


async def test_an_http_servers_failure_names_its_url_without_the_token(tmp_path):
    # httpx's status error quotes the URL, whose query carries the server's key.
    async with FakeOpenAI() as web:
        web.script(error(404, "no such endpoint"))
        spec = ServerSpec("gone", "sse", url=f"{web.base_url}/sse?api_key=url-secret")
        connection = ServerConnection(spec, tmp_path, startup_timeout=10)
        async with anyio.create_task_group() as tg:
            connection.start(tg)
            await connection.settled.wait()
            connection.stop()
    assert connection.failure is not None and "url-secret" not in connection.failure
    assert f"{web.base_url}/sse?api_key=***" in connection.failure
