"""A stdio MCP server's stderr, line by line into the log as `mcp <name>: <line>`.

A server writes there what it pleases (banners, progress, its own log); left on our stderr it
lands unprefixed among a print-mode run's or doctor's lines. In the log it is INFO under
`SERVER_STDERR`, which a person's terminal shows only at debug (logs.setup_logging).
"""

from __future__ import annotations

import codecs
import contextlib
import logging
import os
from collections.abc import AsyncIterator
from typing import TextIO

import anyio

from acp_memory.jsonrpc.fdstream import FdReceiveStream

SERVER_STDERR = "acp_memory.mcpclient.server_stderr"
log = logging.getLogger(SERVER_STDERR)
# A line past this is logged in pieces: a server that never writes a newline cannot grow
# our memory.
MAX_LINE_CHARS = 4096
# How long the last lines may take to arrive once the server is stopped: a child of the
# server may still hold the pipe open, and nobody waits on that.
DRAIN_SECONDS = 1.0


class LastWords:
    """The last line a server wrote on its stderr: why it died, as often as not, which its
    failure quotes where the log alone would hide it below debug."""

    def __init__(self) -> None:
        self.line = ""


@contextlib.asynccontextmanager
async def stderr_to_log(name: str, last: LastWords | None = None) -> AsyncIterator[TextIO]:
    """A file to hand the server as its stderr; what it writes is logged (and its last line
    kept in `last`) until the block ends (then the lines already written, within
    DRAIN_SECONDS)."""
    read_fd, write_fd = os.pipe()
    sink = os.fdopen(write_fd, "w")
    source = FdReceiveStream(read_fd)
    drained = anyio.Event()
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(_log_lines, source, name, last or LastWords(), drained)
            try:
                yield sink
            finally:
                # Ours closed, the pipe ends once the server's copies are gone too.
                sink.close()
                with anyio.move_on_after(DRAIN_SECONDS, shield=True):
                    await drained.wait()
                tg.cancel_scope.cancel()
    finally:
        sink.close()
        await source.aclose()
        os.close(read_fd)


async def _log_lines(
    source: FdReceiveStream, name: str, last: LastWords, drained: anyio.Event
) -> None:
    held = ""
    # A character cut between two reads is decoded whole; bytes that are not UTF-8 show as �.
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    try:
        while True:
            try:
                chunk = await source.receive()
            except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                break
            *lines, held = (held + decoder.decode(chunk)).split("\n")
            for line in lines:
                _say(name, line, last)
            while len(held) > MAX_LINE_CHARS:
                _say(name, held[:MAX_LINE_CHARS], last)
                held = held[MAX_LINE_CHARS:]
        _say(name, held + decoder.decode(b"", final=True), last)
    finally:
        drained.set()


def _say(name: str, line: str, last: LastWords) -> None:
    if line := line.rstrip():
        log.info("mcp %s: %s", name, line)
        last.line = line
