"""Real MCP servers for the tests, written with the `mcp` SDK's server API (MCPServer).

What the MCP tests use:

    stdio:  python tests/fakes/mcp_servers.py stdio      `stdio_spec()` gives (command, args),
                                                         `stdio_entry()` an mcp.servers entry
            python tests/fakes/mcp_servers.py exit       prints EXIT_MESSAGE on stderr, exits 3
            python tests/fakes/mcp_servers.py stall      never answers initialize (timeouts)
            python tests/fakes/mcp_servers.py latin1     its first stdout line is not UTF-8, then
                                                         it waits for its input to end
            python tests/fakes/mcp_servers.py family     first starts three `sleep`s it leaves
                                                         behind when it exits at end of input: one
                                                         in its process group, one in a group of
                                                         its own, one orphaned in a session of its
                                                         own (setsid); writes their pids, one a
                                                         line, to $FAMILY_PIDS (once complete)
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
    hang(marker)    -> never answers; once the call is cancelled, writes the line "cancelled"
                       to the file (or pipe) `marker`
    progress(step, done) -> once the file `step` exists, a progress notification; once
                       `done` exists, text "progressed"
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import anyio

SCRIPT = Path(__file__).resolve()
SERVER_NAME = "fake-mcp"
TOOL_NAMES = (
    "echo", "lookup", "explode", "picture", "document", "getenv", "pid", "crash", "hang",
    "progress",
)
READ_ONLY_TOOLS = ("lookup",)
EXPLODE_MESSAGE = "the fake tool exploded"
EXIT_MESSAGE = "fake mcp server: refusing to start"
CHATTER = "fake mcp server: warming up the caches"  # the `chatty` mode's stderr line
# The smallest valid PNG (1x1, transparent).
PICTURE = bytes.fromhex(
    "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489"
    "0000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
)
DOCUMENT_URI = "file:///fake/notes.txt"
DOCUMENT_TEXT = "the fake document's text"

Mode = Literal["stdio", "exit", "stall", "latin1", "family"]
# How often the fake's waiting tools look for the file they wait for (the test writes it).
POLL_SECONDS = 0.02


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


def mcp_http_server(
    transport: Literal["http", "sse"] = "http", name: str = SERVER_NAME
) -> contextlib.AbstractAsyncContextManager[RunningMcpServer]:
    """Serve the fake server over streamable HTTP (or SSE) on 127.0.0.1 while the block runs."""
    from fakes.mcp_sdk_server import serve_http

    return serve_http(transport, name)


def main(argv: list[str]) -> int:
    mode = argv[0] if argv else "stdio"
    if mode == "exit":
        print(EXIT_MESSAGE, file=sys.stderr, flush=True)
        return 3
    if mode == "stall":
        # Reads nothing and answers nothing; the client's start timeout has to end it.
        anyio.run(anyio.sleep_forever)
        return 0
    if mode == "latin1":
        sys.stdout.buffer.write("café, démarré\n".encode("latin-1"))
        sys.stdout.flush()
        sys.stdin.buffer.read()  # until the client closes it
        return 0
    if mode == "family":
        _leave_a_family(Path(os.environ["FAMILY_PIDS"]))
    elif mode == "chatty":
        print(CHATTER, file=sys.stderr, flush=True)
    elif mode != "stdio":
        print(f"unknown mode {mode!r}: stdio, exit, stall, latin1, family or chatty",
              file=sys.stderr)
        return 2
    sys.path.insert(0, str(SCRIPT.parents[1]))  # run as a script: the tests folder
    from fakes.mcp_sdk_server import build_server

    build_server().run("stdio")
    return 0


def _leave_a_family(pids: Path) -> None:
    """Start the three processes of the `family` mode and write their pids."""
    sleep = ["sleep", "3600"]
    in_group = subprocess.Popen(sleep)
    own_group = subprocess.Popen(sleep, process_group=0)
    # An intermediate that starts a setsid sleep and exits: the sleep is orphaned.
    starter = (
        "import subprocess; print(subprocess.Popen(['sleep', '3600'], start_new_session=True,"
        " stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).pid)"
    )
    out = subprocess.run([sys.executable, "-c", starter], capture_output=True, check=True)
    orphan = int(out.stdout)
    partial = pids.with_suffix(".partial")
    partial.write_text(f"{in_group.pid}\n{own_group.pid}\n{orphan}\n")
    partial.rename(pids)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
