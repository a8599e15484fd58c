"""Shared pieces of the MCP tests: the editor's server entries for the fake MCP servers, the
tools a model request offered, the tool results it carried, the `family` server's pids."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from acp.schema import EnvVariable, HttpHeader, HttpMcpServer, McpServerStdio, SseMcpServer
from fakes.httpserver import Recorded
from fakes.mcp_servers import Mode, stdio_spec


def stdio_server(name: str = "fake", mode: Mode = "stdio", **env: str) -> McpServerStdio:
    """The fake stdio server as the editor names it in session/new."""
    command, args = stdio_spec(mode)
    variables = [EnvVariable(name=k, value=v) for k, v in env.items()]
    return McpServerStdio(name=name, command=command, args=args, env=variables)


def http_server(url: str, name: str = "web", **headers: str) -> HttpMcpServer:
    pairs = [HttpHeader(name=k, value=v) for k, v in headers.items()]
    return HttpMcpServer(name=name, url=url, headers=pairs, type="http")


def sse_server(url: str, name: str = "events", **headers: str) -> SseMcpServer:
    pairs = [HttpHeader(name=k, value=v) for k, v in headers.items()]
    return SseMcpServer(name=name, url=url, headers=pairs, type="sse")


def offered(request: Recorded) -> list[str]:
    """The tool names a model request offered."""
    return [t["function"]["name"] for t in (request.json or {}).get("tools", [])]


def offered_tool(request: Recorded, name: str) -> dict[str, Any]:
    """The function a model request offered under that name."""
    tools = [t["function"] for t in (request.json or {})["tools"]]
    (tool,) = [t for t in tools if t["name"] == name]
    return tool


def tool_results(request: Recorded) -> list[str]:
    """The contents of the tool messages a model request carried, in order."""
    return [m["content"] for m in (request.json or {})["messages"] if m["role"] == "tool"]


def family_server(pids: Path) -> McpServerStdio:
    """The fake in `family` mode, writing the pids it leaves behind to `pids`."""
    return stdio_server("family", "family", FAMILY_PIDS=str(pids))


@contextlib.contextmanager
def killed_at_the_end(pids: Path) -> Iterator[None]:
    """Whatever the test proves, no sleep it made is left behind."""
    try:
        yield
    finally:
        for pid in read_pids(pids):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def read_pids(pids: Path) -> list[int]:
    """The pids a `family` server wrote (none before it did)."""
    return [int(line) for line in pids.read_text().split()] if pids.exists() else []
