"""Running the agent on the process's own stdin and stdout."""

from __future__ import annotations

import os
import sys

import anyio

from acp_memory.acp.server import serve
from acp_memory.config import Config, Paths
from acp_memory.jsonrpc.fdstream import FdReceiveStream, FdSendStream


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


def serve_stdio(cfg: Config, paths: Paths) -> int:
    """Serve ACP on stdio until stdin closes; returns the exit code."""
    wire_in, wire_out = claim_stdio()

    async def main() -> None:
        receive, send = FdReceiveStream(wire_in), FdSendStream(wire_out)
        try:
            await serve(receive, send, cfg, paths)
        finally:
            await receive.aclose()
            await send.aclose()

    anyio.run(main)
    return 0
