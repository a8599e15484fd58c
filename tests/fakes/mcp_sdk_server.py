"""The fake MCP server's SDK half: the `mcp` SDK's MCPServer with every tool of
`mcp_servers.py`, over stdio or HTTP. Its own module because importing the SDK's server takes
half a second, which the modes that never serve (exit, stall, latin1) do not pay."""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, Literal

import anyio
import uvicorn
from mcp.server.mcpserver import Context, Image, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import EmbeddedResource, TextResourceContents, ToolAnnotations

from fakes.mcp_servers import (
    DOCUMENT_TEXT,
    DOCUMENT_URI,
    EXPLODE_MESSAGE,
    PICTURE,
    POLL_SECONDS,
    SERVER_NAME,
    RunningMcpServer,
)


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

    @server.tool(description="Never answer; write the marker file once cancelled.")
    async def hang(marker: str) -> str:
        try:
            await anyio.sleep_forever()
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.Path(marker).write_text("cancelled\n")
        return ""

    @server.tool(description="Report progress once `step` exists; answer once `done` does.")
    async def progress(step: str, done: str, ctx: Context) -> str:
        await _until_exists(Path(step))
        await ctx.report_progress(1, 2)
        await _until_exists(Path(done))
        return "progressed"

    return server


async def _until_exists(path: Path) -> None:
    # The test writes the file from another process: nothing to wait on but the disk.
    while not await anyio.Path(path).exists():  # noqa: ASYNC110 - polled, see above
        await anyio.sleep(POLL_SECONDS)


class _Uvicorn(uvicorn.Server):
    """uvicorn leaving the test process's signal handlers alone."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


@contextlib.asynccontextmanager
async def serve_http(
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
