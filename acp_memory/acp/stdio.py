"""Running the agent on the process's own stdin and stdout."""

from __future__ import annotations

import os
import sys
from collections.abc import Awaitable, Callable

import anyio

from acp_memory.acp.server import serve, serve_unconfigured
from acp_memory.config import Config, Paths
from acp_memory.jsonrpc.fdstream import FdReceiveStream, FdSendStream
from acp_memory.signals import exit_code, until_signalled
from acp_memory.tasks.reaper import become_subreaper


def claim_stdio() -> tuple[int, int]:
    """Take fds 0 and 1 for the wire; stray prints and child processes get stderr and /dev/null.

    Without this, any print() in a handler or a library would corrupt the JSON-RPC stream.
    """
    wire_in, wire_out = os.dup(0), os.dup(1)
    os.dup2(2, 1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    sys.stdout = sys.stderr
    return wire_in, wire_out


def serve_stdio(cfg: Config, paths: Paths, session_id: str | None = None) -> int:
    """Serve ACP on stdio until stdin closes or SIGTERM/SIGINT; returns the exit code.
    `session_id`: the session the first session/new opens or creates."""
    become_subreaper()  # what its MCP servers leave behind is its own to end and reap
    return _on_stdio(
        lambda receive, send, stop: serve(
            receive, send, cfg, paths, stop=stop, session_id=session_id
        )
    )


def serve_stdio_unconfigured(problem: str) -> int:
    """Serve ACP on stdio with a config that failed to load: the editor is told why, in the
    answer to its first session request, instead of seeing the server exit."""
    return _on_stdio(lambda receive, send, stop: serve_unconfigured(receive, send, problem, stop))


def _on_stdio(
    serving: Callable[[FdReceiveStream, FdSendStream, anyio.Event], Awaitable[None]],
) -> int:
    wire_in, wire_out = claim_stdio()

    async def main() -> int:
        receive, send = FdReceiveStream(wire_in), FdSendStream(wire_out)
        try:
            return exit_code(await until_signalled(lambda stop: serving(receive, send, stop)))
        finally:
            await receive.aclose()
            await send.aclose()

    return anyio.run(main)
