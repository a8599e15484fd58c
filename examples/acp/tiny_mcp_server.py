"""A tiny MCP server for mcp_servers.py, written with the official `mcp` SDK: one tool, `greet`.

    .venv/bin/python examples/acp/tiny_mcp_server.py stdio
    .venv/bin/python examples/acp/tiny_mcp_server.py http

stdio: the MCP messages on stdin and stdout, as an editor's `command` server runs.
http: streamable HTTP on a free loopback port; the first line on stdout is its URL, then it
serves until it is stopped.
"""

from __future__ import annotations

import socket
import sys

import anyio
import uvicorn
from mcp.server.mcpserver import MCPServer


def build(transport: str) -> MCPServer:
    server = MCPServer(f"tiny-{transport}", log_level="WARNING")

    @server.tool(description="Greet someone by name.")
    def greet(name: str) -> str:
        return f"hello {name}, from the {transport} server"

    return server


async def serve_http() -> None:
    server = build("http")
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    print(f"http://127.0.0.1:{sock.getsockname()[1]}/mcp", flush=True)
    config = uvicorn.Config(server.streamable_http_app(), log_level="warning", lifespan="off")
    async with server.session_manager.run():  # lifespan is off: its task group is ours to run
        await uvicorn.Server(config).serve([sock])


def main(argv: list[str]) -> int:
    transport = argv[0] if argv else "stdio"
    if transport == "stdio":
        build("stdio").run("stdio")
    elif transport == "http":
        anyio.run(serve_http)
    else:
        print(f"unknown transport {transport!r}: stdio or http", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
