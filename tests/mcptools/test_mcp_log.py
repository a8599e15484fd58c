"""What MCP servers leave in a real agent process's log (its stderr, the editor's log): a stdio
server's stderr under its name, and no line per HTTP request at the default level."""

from __future__ import annotations

import pytest
from acp import text_block
from fakes.mcp_servers import EXIT_MESSAGE, mcp_http_server
from harness import subprocess_agent
from mcptools.mcpkit import http_server, stdio_server

pytestmark = [pytest.mark.anyio, pytest.mark.subprocess]


async def test_the_agents_log_has_a_servers_stderr_under_its_name_and_no_request_lines(tmp_path):
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    (home / "config.yaml").write_text("memory: {enable: false}\n")
    async with mcp_http_server() as web, subprocess_agent(home) as ed:
        await ed.conn.initialize(protocol_version=1)
        servers = [http_server(web.url), stdio_server("broken", "exit")]
        new = await ed.conn.new_session(cwd=str(project), mcp_servers=servers)
        prompt = [text_block("hello")]  # the turn waits for both servers to start or fail
        assert (await ed.conn.prompt(session_id=new.session_id, prompt=prompt)).stop_reason
        assert len(web.headers) > 1  # initialize, tools/list, …: requests were made
    log = ed.stderr.decode().splitlines()
    said = [line for line in log if EXIT_MESSAGE in line and "server_stderr" in line]
    assert len(said) == 1, log
    assert said[0].endswith(f"INFO acp_memory.mcpclient.server_stderr: mcp broken: {EXIT_MESSAGE}")
    assert not [line for line in log if "HTTP Request" in line], log
