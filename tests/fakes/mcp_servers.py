"""Real MCP servers for the tests, written with the `mcp` SDK's server API (MCPServer).

What the MCP tests use:

    stdio:  python tests/fakes/mcp_servers.py stdio      `stdio_spec()` gives (command, args),
                                                         `stdio_entry()` an mcp.servers entry
            python tests/fakes/mcp_servers.py exit       prints EXIT_MESSAGE on stderr, exits 3
            python tests/fakes/mcp_servers.py stall      never answers initialize (timeouts)
    http:   async with mcp_http_server() as server: server.url      streamable HTTP, loopback
            async with mcp_http_server("sse") as server: server.url SSE (GET <url>, POST messages)
            server.headers: the headers of every request it received (lower-case names)

Every server offers the same tools (TOOL_NAMES):
    echo(text)      -> text "echo: <text>"
    lookup(key)     -> text "value of <key>", annotated readOnlyHint: true (the only one)
    explode()       -> isError, its text containing EXPLODE_MESSAGE
    picture()       -> one image block, PNG bytes PICTURE (mimeType image/png)
    document()      -> one embedded text resource, DOCUMENT_URI, text DOCUMENT_TEXT
    getenv(name)    -> text: the server process's value of that variable ("" when unset)
    pid()           -> text: the server process's pid (a restarted stdio server has another)
    crash()         -> the stdio process exits at once (code 9) without answering
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import anyio
import uvicorn
from mcp.server.mcpserver import Image, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import EmbeddedResource, TextResourceContents, ToolAnnotations

SCRIPT = Path(__file__).resolve()
SERVER_NAME = "fake-mcp"
TOOL_NAMES = ("echo", "lookup", "explode", "picture", "document", "getenv", "pid", "crash")
READ_ONLY_TOOLS = ("lookup",)
EXPLODE_MESSAGE = "the fake tool exploded"
EXIT_MESSAGE = "fake mcp server: refusing to start"
# The smallest valid PNG (1x1, transparent).
PICTURE = bytes.fromhex(
    "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489"
    "0000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
)
DOCUMENT_URI = "file:///fake/notes.txt"
DOCUMENT_TEXT = "the fake document's text"

Mode = Literal["stdio", "exit", "stall"]


def build_server(name: str = SERVER_NAME) -> MCPServer:
    """The server with every tool above (shared by the stdio and HTTP transports)."""
    # WARNING: MCPServer configures the root logger, and the tests read their own logs.
    server = MCPServer(
        name, instructions="A fake MCP server for acp-memory's tests.", log_level="WARNING"
    )

    @server.tool(description="Echo the text back.")
    def echo(text: str) -> str:
        return f"echo: {text}"

    @server.tool(
        description="Look a key up without changing anything.",
        annotations=ToolAnnotations(read_only_hint=True),
    )
    def lookup(key: str) -> str:
        return f"value of {key}"

    @server.tool(description="Always fails.")
    def explode() -> str:
        raise ToolError(EXPLODE_MESSAGE)

    @server.tool(description="Return a tiny PNG.")
    def picture() -> Image:
        return Image(data=PICTURE, format="png")

    @server.tool(description="Return an embedded text resource.")
    def document() -> EmbeddedResource:
        contents = TextResourceContents(
            uri=DOCUMENT_URI, mime_type="text/plain", text=DOCUMENT_TEXT
        )
        return EmbeddedResource(type="resource", resource=contents)

    @server.tool(description="The server process's value of an environment variable.")
    def getenv(name: str) -> str:
        return os.environ.get(name, "")

    @server.tool(description="The server process's pid.")
    def pid() -> str:
        return str(os.getpid())

    @server.tool(description="Kill the server process without answering.")
    def crash() -> str:
        os._exit(9)

    return server


def stdio_spec(mode: Mode = "stdio") -> tuple[str, list[str]]:
    """The command and args that start the stdio server in `mode` (this interpreter)."""
    return sys.executable, [str(SCRIPT), mode]


def stdio_entry(mode: Mode = "stdio", **extra: Any) -> dict[str, Any]:
    """The server as an `mcp.servers` entry of config.yaml (`.mcp.json`'s shape)."""
    command, args = stdio_spec(mode)
    return {"command": command, "args": args, **extra}


@dataclass
class RunningMcpServer:
    url: str
    headers: list[dict[str, str]] = field(default_factory=list)


class _Uvicorn(uvicorn.Server):
    """uvicorn leaving the test process's signal handlers alone."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


@contextlib.asynccontextmanager
async def mcp_http_server(
    transport: Literal["http", "sse"] = "http", name: str = SERVER_NAME
) -> AsyncIterator[RunningMcpServer]:
    """Serve the fake server over streamable HTTP (or SSE) on 127.0.0.1 while the block runs."""
    server = build_server(name)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    port = sock.getsockname()[1]
    base = f"http://127.0.0.1:{port}"
    if transport == "http":
        app: Any = server.streamable_http_app()
        running = RunningMcpServer(f"{base}/mcp")
    else:
        app = server.sse_app()
        running = RunningMcpServer(f"{base}/sse")

    async def recording(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            running.headers.append(
                {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
            )
        await app(scope, receive, send)

    web = _Uvicorn(
        uvicorn.Config(
            recording,
            lifespan="off",
            log_config=None,
            log_level="warning",
            access_log=False,
            http="h11",
            ws="none",
            timeout_graceful_shutdown=1,
        )
    )
    try:
        async with contextlib.AsyncExitStack() as stack:
            if transport == "http":
                # lifespan is off, so the session manager's task group is ours to run.
                await stack.enter_async_context(server.session_manager.run())
            async with anyio.create_task_group() as tg:
                tg.start_soon(web.serve, [sock])
                try:
                    yield running
                finally:
                    web.should_exit = True
                    web.force_exit = True
    finally:
        sock.close()


def main(argv: list[str]) -> int:
    mode = argv[0] if argv else "stdio"
    if mode == "exit":
        print(EXIT_MESSAGE, file=sys.stderr, flush=True)
        return 3
    if mode == "stall":
        # Reads nothing and answers nothing; the client's start timeout has to end it.
        anyio.run(anyio.sleep_forever)
        return 0
    if mode != "stdio":
        print(f"unknown mode {mode!r}: stdio, exit or stall", file=sys.stderr)
        return 2
    build_server().run("stdio")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
